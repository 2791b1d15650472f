"""Stage `repair` (S0 §3.3, Table 2): a fixed, seeded set of failed SFT attempts, each
repaired under every condition of repair.conditions (F0 = no feedback, F1, F2, F3, F4,
F-shuffled, R-resample) with the same sampling budget and seed; success, new-error rate and
feedback length per condition, McNemar of each condition against R-resample and against F0 on
the matched attempts, and successes per failure type of the original attempt.

The attempts come from TRAIN problems no evaluation uses: the stage samples the SFT policy
itself (the fixed evaluation `sampler:`, `repair.select_k` samples on each of the last
`repair.n_problems` problems of data/problems/train.jsonl) and keeps the failed samples as the
attempt pool. `distill@<cond>-<seed>` trains on the successful repairs and is scored on test
and OOD, so repairing test failures (the SFT policy's evaluation samples) would leak test
problems into its training data.

    python stages/repair.py <seed>   # a seed of replicates.repair: repairs of data/models/sft/r<seed>'s failures

Prompt layout: see countdown_rlvr.research.repair. Writes data/repair/r<seed>/repairs.parquet
(every repair sample: the input of `distill@<cond>-<seed>`), data/repair/r<seed>/pool.parquet
(every attempt-pool sample, per-sample records as `evaluate` writes them) and
reports/{details,timings}/repair/r<seed>.json.
"""

import os
import sys
import time

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import inputs, io
from countdown_rlvr.core.config import eval_sampler, prompt_style
from countdown_rlvr.core.replicates import run_name, sft_dir, tag
from countdown_rlvr.core.research_config import Repair
from countdown_rlvr.eval.metrics import write_records
from countdown_rlvr.eval.scoring import evaluate_policy
from countdown_rlvr.model.policy import load_model, load_replicate_stage, policy_ref
from countdown_rlvr.model.sampling import derive_seed
from countdown_rlvr.research.repair import (
    by_failure,
    check_conditions,
    failed_attempts,
    pool_problems,
    repair_metrics,
    run_repairs,
    select_attempts,
    write_repairs,
)

TRAIN = "data/problems/train.jsonl"


def main(argv: list[str]) -> None:
    params, cfg, r = load_replicate_stage("repair", Repair, argv[0] if argv else None,
                                          chain="repair")
    policy, name = sft_dir("repair", params, r), run_name("repair", r)
    out, pool_file = f"data/repair/{tag(r)}/repairs.parquet", f"data/repair/{tag(r)}/pool.parquet"
    sampler = eval_sampler("repair", params)
    style = prompt_style("repair", params)
    try:
        conditions = check_conditions(cfg.conditions)
    except ValueError as exc:
        raise io.StageError("repair", f"repair.conditions: {exc}") from exc
    io.require_inputs("repair", policy, TRAIN)
    try:
        problems = pool_problems(inputs.read_rows("repair", TRAIN, params), cfg.n_problems)
    except ValueError as exc:
        raise io.StageError("repair", f"repair.n_problems: {exc}; lower it or raise "
                                      "problems.n_train") from exc

    t0 = time.time()
    ref = policy_ref(policy)
    policy = load_model(ref.base, ref.adapter)
    # the pool's own sampling stream: with repair.seed itself, R-resample's samples (the same
    # plain prompt) could reuse a pool sample's draws and replay its failed attempt verbatim
    pool_seed = derive_seed(cfg.seed, 1)
    print(f"[repair] attempt pool: {len(problems)} train problems ({problems[0]['id']} .. "
          f"{problems[-1]['id']}) x {cfg.select_k} samples", flush=True)
    records = evaluate_policy(policy, problems, cfg.select_k, sampler, [pool_seed], style,
                              backend=sampler["backend"], batch_size=cfg.batch_size)
    write_records(records, pool_file)
    failed = failed_attempts(records)
    attempts = select_attempts(failed, cfg.n_attempts, cfg.seed)
    if len(attempts) < 2:
        raise io.StageError("repair", f"only {len(attempts)} failed attempt(s) in the pool; repair "
                                      "needs at least 2 (raise repair.n_problems or "
                                      "repair.select_k)")
    if len(attempts) < cfg.n_attempts:
        print(f"[repair] warning: {len(failed)} failed attempts exist; using all "
              f"{len(attempts)} instead of repair.n_attempts={cfg.n_attempts}")
    print(f"[repair] {len(attempts)} attempts ({len({a['problem_id'] for a in attempts})} problems)"
          f" x {len(conditions)} conditions x {cfg.k} samples", flush=True)
    repairs = run_repairs(policy, attempts, conditions, cfg.k, sampler, cfg.seed, style,
                          cfg.batch_size, backend=sampler["backend"])
    per_cond = repair_metrics(repairs)
    write_repairs(repairs, out)
    io.write_details(name, {
        "replicate": r, "n_attempts": len(attempts), "n_problems": len({a["problem_id"] for a in attempts}),
        "k": cfg.k, "conditions": per_cond, "by_failure": by_failure(repairs),
        "attempt_pool": {"split": "train", "n_problems": len(problems),
                         "first_problem": problems[0]["id"], "last_problem": problems[-1]["id"],
                         "select_k": cfg.select_k, "samples": len(records),
                         "pass@1": float(records["correct"].mean()), "failed": len(failed)}})
    io.write_timing(name, {"seconds": round(time.time() - t0, 2), "samples": len(repairs),
                           "pool_samples": len(records)})
    for cond, m in per_cond.items():
        mc, m0 = m["mcnemar_vs_resample"], m.get("mcnemar_vs_F0")
        print(f"[repair] {cond:6s} success {m['success_rate']:.4f} ({m['successes']}/{m['n']}), "
              f"new error {m['new_error_rate']:.4f}, feedback {m['feedback_tokens']:.1f} tokens, "
              f"vs R: b={mc['b']} c={mc['c']} p={mc['pvalue']:.3g}"
              + ("" if m0 is None else f", vs F0: b={m0['b']} c={m0['c']} p={m0['pvalue']:.3g}"))
    print(f"[repair] wrote {out} ({len(repairs)} samples), {pool_file} ({len(records)} samples), "
          f"{io.DETAILS}/{name}.json")


if __name__ == "__main__":
    main(sys.argv[1:])
