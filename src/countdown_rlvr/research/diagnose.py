"""Zero-signal diagnosis (S0 §3.2, §5.1): how often does binary RLVR see no contrast?

The samples are the SFT policy's own evaluation records (stage `evaluate_sft@<seed>`, split
`test`), cut into groups of K, so the diagnosis and S0 Table 3's SFT row are one set of
numbers from the same samples and the same K (`metrics.diagnostics_at_k`); this module only
flattens them into S0's diagnostic row. The failed attempts `repair` starts from are its own
samples of train problems, never these test records (self-distillation trains on the repairs,
and test is what it is scored on).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..eval.metrics import summarize

FAILED_KEYS = ("attempt_id", "problem_id", "n_numbers", "numbers", "target", "sample",
               "completion", "failure", "expression", "value")


def diagnosis(records: pd.DataFrame, k: int) -> dict[str, Any]:
    """S0's diagnostic at group size K, from test-split records of one sampling seed with
    n >= K samples per prompt, cut into n // K groups of K (`metrics.diagnostics_at_k`: the
    same groups as S0 Table 3's row of the policy, so all_fail = 1 - pass@K in both).

    Keys: k, n_problems, n_groups, n_samples, pass@1, pass@k, avg_score (S0's format-aware
    score), all_fail, all_correct, zero_informative, reward_contrast, failures {code: count}
    (failed samples only), n_failed_attempts, and per operand count n{m}: {n_problems,
    pass@1, pass@k} (unbiased estimates from all n samples).
    """
    if records["seed"].nunique() != 1:
        raise ValueError("diagnosis wants the samples of one sampling seed per prompt")
    if k < 2:
        raise ValueError(f"k={k}: a group needs two samples for any contrast")
    summary = summarize(records, ks=sorted({1, k}), budgets=())
    test = summary["test"]
    if test["samples_per_group"] < k:
        raise ValueError(f"k={k} exceeds the {test['samples_per_group']} samples per prompt; "
                         "lower diagnose.k or raise evaluate.n")
    diag = summary["diagnostics_by_k"][f"k{k}"]
    failures = {code: n for code, n in summary["failures"].items() if code != "correct"}
    by_size = {key: {"n_problems": v["n_problems"], "pass@1": v["pass@1"], "pass@k": v[f"pass@{k}"]}
               for key, v in test.items() if key.startswith("n") and isinstance(v, dict)}
    return {
        "k": k, "n_problems": test["n_problems"], "n_groups": diag["n_groups"],
        "n_samples": len(records), "pass@1": diag["pass@1"], "pass@k": diag["pass@k"],
        "avg_score": diag["avg_score"], "all_fail": diag["all_fail"],
        "all_correct": diag["all_correct"], "zero_informative": diag["zero_informative"],
        "reward_contrast": diag["reward_contrast"],
        "failures": failures, "n_failed_attempts": int(sum(failures.values())),
        **by_size,
    }

