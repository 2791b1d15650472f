"""Stage `report`: figures in reports/figures/, reports/report.md and the headline DVC metrics
(reports/metrics/eval/<policy>.json, reports/metrics/claims/<claim>.json), from the stages'
measurements (reports/details/), dvclive curves (dvclive/) and the analysis plan (plan.yaml)
only: all in git, so the report re-renders in a clone without the data cache."""

import os
import time
from pathlib import Path

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.analysis import claims, headline
from countdown_rlvr.analysis.chains import trained_arms
from countdown_rlvr.analysis.plan import PLAN_FILE, PlanError, load_plan
from countdown_rlvr.analysis.report import (
    IPO_SOURCES,
    MissingInputs,
    render_report,
    report_policies,
)
from countdown_rlvr.core import io
from countdown_rlvr.core.analysis_config import Report
from countdown_rlvr.core.config import Replicates, from_section
from countdown_rlvr.core.evaluate_config import Evaluate
from countdown_rlvr.task.prompts import REPAIR_LABELS


def main() -> None:
    params = io.load_params()
    cfg = from_section(Report, "report", params, "report")  # fails before any work
    ev = from_section(Evaluate, "report", params, "evaluate")
    policies = ev.all()
    rep = from_section(Replicates, "report", params, "replicates")
    chains = rep.chains()
    # what this run trains; the seeds' full sets when those stages are not configured
    ipo, dis = params.get("ipo") or {}, params.get("distill") or {}
    ipo_sources = [*ipo.get("sources", []), *ipo.get("first_replicate_sources", [])] \
        or list(IPO_SOURCES)
    distill = [*dis.get("conditions", []), *dis.get("first_replicate_conditions", [])] \
        or list(REPAIR_LABELS)
    arms = trained_arms(params)  # the arms the evaluate lists name; the others "not run"
    known = report_policies(policies, ipo_sources, distill, arms)
    for key in ("reference", "best_of_n_policy"):
        name = getattr(cfg, key)
        if (name is not None or key == "reference") and name not in known:
            raise io.StageError("report", f"`report.{key}` {name!r} is not a policy; use one of "
                                f"{known} (or add it to `evaluate.policies`)")
    try:
        plan = load_plan(PLAN_FILE)  # the analysis plan: each claim's delta and planned power
    except PlanError as exc:
        raise io.StageError("report", str(exc)) from exc
    t0 = time.time()
    try:
        inp = render_report(io.DETAILS, "dvclive", "reports/report.md", "reports/figures",
                            configured=policies, ipo_sources=ipo_sources, distill=distill,
                            require_all=cfg.require_all, reference=cfg.reference,
                            best_of_n_policy=cfg.best_of_n_policy, dpi=cfg.dpi,
                            chain_minutes=cfg.chain_minutes, replicates=chains, plan=plan,
                            shared_sft=rep.shared_sft is not None, arms=arms)
    except MissingInputs as exc:
        stages = sorted(set(exc.missing.values()))
        raise io.StageError("report", f"{exc}\nrun `dvc repro` for {', '.join(stages)} (each "
                            "training stage's evaluation samples its policies; the int stage's "
                            "when in `evaluate.int_policies`), or set "
                            "`report.require_all: false` to render them as 'not run'") from exc
    headlines = {"eval": {p: headline.policy(pooled) for p, pooled in
                          (inp.compare or {}).get("policies", {}).items()
                          if pooled and p in (*ev.shared, *ev.policies)},
                 "claims": {c.name: headline.claim(c) for c in claims.evaluate(inp, plan)}}
    for kind, files in headlines.items():
        with io.atomic_path(Path(io.METRICS) / kind) as tmp:  # whole dir: no stale file
            tmp.mkdir(parents=True)
            for name, values in files.items():
                io.write_json(tmp / f"{name}.json", values)
    io.write_timing("report", {"seconds": round(time.time() - t0, 2)})
    note = f" ({len(inp.missing)} inputs missing, marked 'not run')" if inp.missing else ""
    print(f"[report] wrote reports/report.md, reports/figures/ and {io.METRICS}/"
          f"{{eval,claims}}/ ({len(headlines['eval'])} policies, {len(headlines['claims'])} "
          f"claims){note}")


if __name__ == "__main__":
    main()
