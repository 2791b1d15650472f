"""Stage `evaluate_<stage>@...` (and `evaluate_shared@<policy>`): sample every held-out prompt
with the fixed sampler, verify, and write per-sample records plus the policy's details. Each
training stage has its evaluation over the same matrix (`ipo@easyneg-19` ->
`evaluate_ipo@easyneg-19`), so a policy is sampled on the seeds of the chain that trains it.

    python stages/evaluate.py <policy> <chain> <seed>   # a replicated policy, one seed of its
                                                        # chain (`replicates.<chain>`)
    python stages/evaluate.py <policy>                  # a shared policy (`evaluate.shared`)

The splits are `evaluate.splits`, and the development split `dev` for a policy of
`evaluate.dev_policies` (its details then have a "dev" block beside "test"; compare and the
report read `compare.splits` only).

A replicated policy's model is data/models/<policy>/r<seed>, its records
data/eval/<policy>/r<seed>.parquet and its details reports/details/eval/<policy>/r<seed>.json;
a shared one's: data/models/<policy>, data/eval/<policy>/shared.parquet,
reports/details/eval/<policy>/shared.json. The evaluation sampler's seeds are the same for
every replicate. `compare` pools the replicates into each policy's headline metrics.
"""

import os
import sys
import time
from pathlib import Path

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import inputs, io
from countdown_rlvr.core.config import CHAINS, NAME, eval_sampler, prompt_style
from countdown_rlvr.core.evaluate_config import Evaluate
from countdown_rlvr.core.replicates import model_dir, parse_replicate, tag
from countdown_rlvr.eval.metrics import records_frame, summarize, write_records
from countdown_rlvr.eval.scoring import evaluate_policy, extra_metrics, not_trained
from countdown_rlvr.model.policy import load_stage, policy_ref

USAGE = ("usage: python stages/evaluate.py <policy> [<chain> <seed>]: the chain that trains a "
         f"replicated policy ({', '.join(CHAINS)}) and one of its seeds; neither for a policy "
         "of `evaluate.shared`")


def policy_run(cfg: Evaluate, params: dict, argv: list[str]) -> tuple[str, str, str]:
    """(policy, model dir, file tag: r<seed> | shared) of this stage's command line. A
    replicated policy's seed is checked against its chain's seeds, given by dvc.yaml (this
    script does not read the arm registry: adding an arm must not re-run every evaluation)."""
    name = argv[0] if argv else None
    if name in cfg.shared and len(argv) == 1:
        return name, f"data/models/{name}", "shared"
    # a replicated policy's name becomes a path: letters, digits, `_` and `-` only
    if len(argv) == 3 and argv[1] in CHAINS and NAME.fullmatch(name) and name not in cfg.shared:
        r = parse_replicate("evaluate", argv[2], params, chain=argv[1])
        return name, model_dir(name, r), tag(r)
    if len(argv) == 1:
        got = f"policy {name!r} is not in `evaluate.shared` {cfg.shared}"
    elif len(argv) == 3 and argv[1] not in CHAINS:
        got = f"unknown chain {argv[1]!r}"
    else:
        got = f"arguments {argv}"
    raise io.StageError("evaluate", f"{got}; {USAGE}")


def main(argv: list[str]) -> None:
    params, cfg = load_stage("evaluate", Evaluate)  # fails before any work
    name, path, run = policy_run(cfg, params, argv)
    if not Path(path).exists():
        stage = io.producing_stage(path)
        hint = f"`dvc repro {stage}`" if stage else "the stage that writes it"
        raise io.StageError("evaluate", f"model dir {path} of policy {name!r} not found; run "
                            f"{hint} (or `dvc repro` the evaluate stage, which runs it first)")
    out, dpath = f"data/eval/{name}/{run}.parquet", f"{io.DETAILS}/eval/{name}/{run}.json"
    if reason := not_trained(path):
        # no samples: the declared outs exist (empty records, details that say why),
        # compare skips the policy and the report marks it "not trained"
        write_records(records_frame([]), out)
        io.write_json(dpath, {"trained": False, "not_evaluated": reason})
        print(f"[evaluate] {name} {run}: {reason}; not sampled, wrote empty {out} and {dpath}")
        return
    sampler = eval_sampler("evaluate", params)
    style = prompt_style("evaluate", params)
    try:
        ref = policy_ref(path)
    except (FileNotFoundError, ValueError) as exc:
        raise io.StageError("evaluate", f"policy {name!r}: {exc}") from exc
    files = [f"data/problems/{split}.jsonl" for split in cfg.splits_of(name)]
    io.require_inputs("evaluate", *files)
    problems = [row for f in files for row in inputs.read_rows("evaluate", f, params)]

    print(f"[evaluate] {name} {run}: {ref.adapter or ref.base}"
          f"{f' on {ref.base}' if ref.adapter else ''}, {len(problems)} problems, "
          f"n={cfg.n_of(name)}, seeds={cfg.seeds}, backend={sampler['backend']}", flush=True)
    t0 = time.time()
    try:
        records = evaluate_policy(ref, problems, cfg.n_of(name), sampler, cfg.seeds, style,
                                  reward=cfg.reward, backend=sampler["backend"],
                                  batch_size=cfg.batch_size)
        metrics = summarize(records, cfg.ks, cfg.budgets)
    except (ValueError, ImportError) as exc:
        raise io.StageError("evaluate", f"{exc} (check the `evaluate:` / `sampler:` / `model:` "
                            "sections of params.yaml)") from exc
    metrics["samples"] = extra_metrics(records)

    write_records(records, out)
    io.write_json(dpath, metrics)
    test = metrics["test"]
    print(f"[evaluate] {name} {run}: test pass@1 {test['pass@1']:.3f}"
          + "".join(f", {split} pass@1 {metrics[split]['pass@1']:.3f}"
                    for split in ("ood", "dev") if split in metrics)
          + f" ({time.time() - t0:.0f} s)")
    print(f"[evaluate] wrote {out} ({len(records)} samples) and {dpath}")


if __name__ == "__main__":
    main(sys.argv[1:])
