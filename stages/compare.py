"""Stage `compare`: every policy's pass@k and every pair of `compare.pairs`, per replicate
(paired over problems, as one draw allows) and pooled over replicates (the replicate as the
unit). Writes reports/details/compare.json and reports/compare.md; the `report` stage picks
the headline DVC metrics from them (countdown_rlvr.analysis.headline). And what every test is
computed from: per split, each policy's, replicate's and problem's correct samples out of n,
reports/details/per_problem/<split>.csv (docs/statistics.md, "Per-problem records").
"""

import os
from pathlib import Path

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.analysis.chains import chain_of
from countdown_rlvr.analysis.compare import (
    SHARED,
    compare_replicates,
    per_problem_records,
    replicates_markdown,
)
from countdown_rlvr.core import io
from countdown_rlvr.core.analysis_config import Compare
from countdown_rlvr.core.config import Replicates, from_section
from countdown_rlvr.core.evaluate_config import Evaluate
from countdown_rlvr.core.replicates import tag
from countdown_rlvr.eval.metrics import read_records

PER_PROBLEM = Path(io.DETAILS) / "per_problem"  # <split>.csv, in git with compare.json


def runs_of(ev: Evaluate, rep: Replicates) -> dict[str, dict[str, str]]:
    """policy -> {run tag: the tag of the records file its evaluate stage writes}: shared,
    every seed of the chain that trains it, or that chain's first seed (policies of different
    chains may have different replicates: compare pairs them on the replicates both have).
    With one SFT for every replicate (`replicates.shared_sft`), SFT's policies are compared as
    the base and the teacher are: their one draw stands in every replicate."""
    def seeds(p: str) -> list[int]:
        chain = chain_of(p)
        if chain is None:
            raise io.StageError("compare", f"`evaluate` lists {p!r}, which no stage trains per "
                                "seed; a policy trained once goes in `evaluate.shared`")
        return rep.of(chain)

    def runs(p: str, first: bool = False) -> dict[str, str]:
        if chain_of(p) == "sft" and rep.shared_sft is not None:
            return {SHARED: tag(rep.shared_sft)}
        return {tag(s): tag(s) for s in seeds(p)[:1 if first else None]}

    return {**{p: {SHARED: SHARED} for p in ev.shared},
            **{p: runs(p) for p in (*ev.policies, *ev.controls)},
            **{p: runs(p, first=True) for p in ev.first_replicate_only}}


def main() -> None:
    params = io.load_params()
    cfg = from_section(Compare, "compare", params, "compare")  # fails before any work
    ev = from_section(Evaluate, "compare", params, "evaluate")
    rep = from_section(Replicates, "compare", params, "replicates")
    pairs = cfg.pairs or []
    for pair in pairs:  # each an [a, b] pair of names (config.Compare.pairs)
        if unknown := [x for x in pair if x not in ev.all()]:
            raise io.StageError("compare", f"`compare.pairs` names {unknown}, not in `evaluate` "
                                f"{ev.all()}; add them there or fix the pair")
    paths = {p: {t: Path(f"data/eval/{p}/{f}.parquet") for t, f in runs.items()}
             for p, runs in runs_of(ev, rep).items()}
    if missing := sorted(str(f) for runs in paths.values() for f in runs.values()
                         if not f.exists()):
        raise io.StageError("compare", f"no records {missing[:4]}{' ...' if len(missing) > 4 else ''}"
                            "; run `dvc repro compare`, which runs the evaluate stages first")
    records = {p: {t: read_records(f) for t, f in runs.items()} for p, runs in paths.items()}
    try:
        report = compare_replicates(records, pairs, cfg.ks, seed=cfg.seed, splits=cfg.splits,
                                    exact=cfg.exact, n_boot=cfg.n_boot, alpha=float(cfg.alpha),
                                    boot_seed=cfg.boot_seed)
    except ValueError as exc:
        raise io.StageError("compare", f"{exc} (check `compare:` in params.yaml)") from exc
    io.write_details("compare", report)
    io.write_text("reports/compare.md", replicates_markdown(report))
    with io.atomic_path(PER_PROBLEM) as tmp:  # the whole folder: no split left from a past run
        tmp.mkdir()
        for split, frame in per_problem_records(records, cfg.splits).items():
            frame.to_csv(tmp / f"{split}.csv", index=False, lineterminator="\n")
    print(f"[compare] {len(records)} policies over {len(report['settings']['replicates'])} "
          f"replicate(s), {len(pairs)} pairs: wrote reports/details/compare.json, "
          f"reports/compare.md and {PER_PROBLEM}/")


if __name__ == "__main__":
    main()
