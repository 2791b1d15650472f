"""Stage `repair` (S0 §3.3, Table 2): a fixed, seeded set of failed SFT attempts, each
repaired under every condition of repair.conditions (F0 = no feedback, F1, F2, F3, F4,
F-shuffled, R-resample) with the same sampling budget and seed; success, new-error rate and
feedback length per condition, McNemar of each condition against R-resample and against F0 on
the matched attempts, and successes per failure type of the original attempt.

Prompt layout: see countdown_rlvr.research.repair. Writes data/repair/repairs.parquet (every
repair sample: the input of `distill`), reports/metrics/repair.json, reports/timings/repair.json.
"""

import time

from countdown_rlvr import headline, io
from countdown_rlvr.config import Repair, eval_sampler, prompt_style
from countdown_rlvr.model import load_model, load_stage, policy_ref
from countdown_rlvr.research.repair import (
    by_failure,
    check_conditions,
    repair_metrics,
    run_repairs,
    select_attempts,
    write_repairs,
)

POLICY, FAILED, OUT = "data/models/sft", "data/diagnose/failed.jsonl", "data/repair/repairs.parquet"


def main() -> None:
    params, cfg = load_stage("repair", Repair)  # fails before any work
    sampler = eval_sampler("repair", params)
    style = prompt_style("repair", params)
    try:
        conditions = check_conditions(cfg.conditions)
    except ValueError as exc:
        raise io.StageError("repair", f"repair.conditions: {exc}") from exc
    io.require_inputs("repair", POLICY, FAILED)
    failed = io.read_jsonl(FAILED)
    attempts = select_attempts(failed, cfg.n_attempts, cfg.seed)
    if len(attempts) < 2:
        raise io.StageError("repair", f"only {len(attempts)} failed attempt(s) in {FAILED}; repair "
                                      "needs at least 2 (raise diagnose.k or problems.n_test)")
    if len(attempts) < cfg.n_attempts:
        print(f"[repair] warning: {len(failed)} failed attempts exist; using all "
              f"{len(attempts)} instead of repair.n_attempts={cfg.n_attempts}")

    t0 = time.time()
    ref = policy_ref(POLICY)
    policy = load_model(ref.base, ref.adapter)
    print(f"[repair] {len(attempts)} attempts ({len({a['problem_id'] for a in attempts})} problems)"
          f" x {len(conditions)} conditions x {cfg.k} samples", flush=True)
    repairs = run_repairs(policy, attempts, conditions, cfg.k, sampler, cfg.seed, style,
                          cfg.batch_size, backend=sampler["backend"])
    per_cond = repair_metrics(repairs)
    write_repairs(repairs, OUT)
    io.write_metrics("repair", {
        "n_attempts": len(attempts), "n_problems": len({a["problem_id"] for a in attempts}),
        "k": cfg.k, "conditions": per_cond, "by_failure": by_failure(repairs)}, headline.repair)
    io.write_timing("repair", {"seconds": round(time.time() - t0, 2), "samples": len(repairs)})
    for cond, m in per_cond.items():
        mc, m0 = m["mcnemar_vs_resample"], m.get("mcnemar_vs_F0")
        print(f"[repair] {cond:6s} success {m['success_rate']:.4f} ({m['successes']}/{m['n']}), "
              f"new error {m['new_error_rate']:.4f}, feedback {m['feedback_tokens']:.1f} tokens, "
              f"vs R: b={mc['b']} c={mc['c']} p={mc['pvalue']:.3g}"
              + ("" if m0 is None else f", vs F0: b={m0['b']} c={m0['c']} p={m0['pvalue']:.3g}"))
    print(f"[repair] wrote {OUT} ({len(repairs)} samples), reports/metrics/repair.json")


if __name__ == "__main__":
    main()
