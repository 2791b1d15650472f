"""Stage `evaluate@<policy>`: sample every held-out prompt with the fixed sampler, verify,
and write per-sample records plus the policy's metrics.

    python stages/evaluate.py <policy>     # <policy> is a key of `evaluate.policies`
"""

import sys
import time
from pathlib import Path

from countdown_rlvr import headline, io
from countdown_rlvr.config import Evaluate, eval_sampler, prompt_style
from countdown_rlvr.evaluate import evaluate_policy, extra_metrics, not_trained
from countdown_rlvr.metrics import records_frame, summarize, write_records
from countdown_rlvr.model import load_stage, policy_ref


def main(argv: list[str]) -> None:
    params, cfg = load_stage("evaluate", Evaluate)  # fails before any work
    policies = cfg.policies
    if len(argv) != 1 or argv[0] not in policies:
        got = f"unknown policy {argv[0]!r}" if len(argv) == 1 else "no policy given"
        raise io.StageError("evaluate", f"{got}; usage: python stages/evaluate.py <policy> with "
                            f"<policy> one of {sorted(policies)} (`evaluate.policies`)")
    name, path = argv[0], str(policies[argv[0]])
    if not Path(path).exists():
        stage = io.producing_stage(path)
        hint = f"`dvc repro {stage}`" if stage else "the stage that writes it"
        raise io.StageError("evaluate", f"model dir {path} of policy {name!r} not found; run "
                            f"{hint} (or `dvc repro evaluate@{name}`, which runs it first)")
    out, mpath = f"data/eval/{name}/records.parquet", f"reports/metrics/eval/{name}.json"
    if reason := not_trained(path):
        # no samples: the declared outs exist (empty records, a metrics file that says why),
        # compare skips the policy and the report marks it "not trained"
        write_records(records_frame([]), out)
        io.write_metrics(f"eval/{name}", {"trained": False, "not_evaluated": reason},
                         headline.evaluation)
        print(f"[evaluate] {name}: {reason}; not sampled, wrote empty {out} and {mpath}")
        return
    sampler = eval_sampler("evaluate", params)
    style = prompt_style("evaluate", params)
    try:
        ref = policy_ref(path)
    except (FileNotFoundError, ValueError) as exc:
        raise io.StageError("evaluate", f"policy {name!r}: {exc}") from exc
    files = [f"data/problems/{split}.jsonl" for split in cfg.splits]
    io.require_inputs("evaluate", *files)
    problems = [row for f in files for row in io.read_jsonl(f)]

    print(f"[evaluate] {name}: {ref.adapter or ref.base}"
          f"{f' on {ref.base}' if ref.adapter else ''}, {len(problems)} problems, "
          f"n={cfg.n}, seeds={cfg.seeds}, backend={sampler['backend']}", flush=True)
    t0 = time.time()
    try:
        records = evaluate_policy(ref, problems, cfg.n, sampler, cfg.seeds, style,
                                  reward=cfg.reward, backend=sampler["backend"],
                                  batch_size=cfg.batch_size)
        metrics = summarize(records, cfg.ks, cfg.budgets)
    except (ValueError, ImportError) as exc:
        raise io.StageError("evaluate", f"{exc} (check the `evaluate:` / `sampler:` / `model:` "
                            "sections of params.yaml)") from exc
    metrics["samples"] = extra_metrics(records)

    write_records(records, out)
    io.write_metrics(f"eval/{name}", metrics, headline.evaluation)
    test = metrics["test"]
    print(f"[evaluate] {name}: test pass@1 {test['pass@1']:.3f}"
          + (f", ood pass@1 {metrics['ood']['pass@1']:.3f}" if "ood" in metrics else "")
          + f" ({time.time() - t0:.0f} s)")
    print(f"[evaluate] wrote {out} ({len(records)} samples), {mpath} (details in reports/details/)")


if __name__ == "__main__":
    main(sys.argv[1:])
