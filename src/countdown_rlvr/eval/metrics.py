"""Evaluation metrics for a Countdown policy (S4 §3.4 / Table 2; S0 §3.2).

Everything here is a pure function of per-sample verifier records, so any stage can
re-score or re-summarise stored samples. One record per sample, with columns
`problem_id, split, n_numbers, seed, sample, correct, failure, reward, n_tokens`.
A *group* is the n samples drawn for one (problem_id, seed); group-level metrics are
averaged over groups.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.io import atomic_path
from ..task.verify import FAILURES

RECORD_COLUMNS = ("problem_id", "split", "n_numbers", "seed", "sample",
                  "correct", "failure", "reward", "n_tokens")
SPLITS = ("test", "ood", "dev")  # dev: only the policies of evaluate.dev_policies
GROUP = ["problem_id", "seed"]

# One fixed schema: column types never depend on the content (e.g. a policy that solves
# nothing would otherwise get an all-null `expression` column of type null), so records of
# different policies and runs concatenate and compare cleanly.
RECORDS_SCHEMA = pa.schema([
    ("problem_id", pa.string()),
    ("split", pa.string()),
    ("n_numbers", pa.int64()),
    ("seed", pa.int64()),
    ("sample", pa.int64()),
    ("correct", pa.bool_()),
    ("failure", pa.string()),  # verifier failure code, null iff correct
    ("reward", pa.float64()),  # evaluate.reward applied to the verdict
    ("n_tokens", pa.int64()),  # completion tokens, the final EOS included
    ("numbers", pa.list_(pa.int64())),
    ("target", pa.int64()),
    ("completion", pa.string()),
    ("finish_reason", pa.string()),  # "stop" (EOS) or "length" (hit max_new_tokens)
    ("expression", pa.string()),  # text of the last <answer>, null when there is none
    ("value", pa.string()),  # exact value of the answer as "p" or "p/q", null if none
    ("arithmetic_errors", pa.int64()),  # wrong "a op b = c" claims in the reasoning
])
assert tuple(RECORDS_SCHEMA.names[:len(RECORD_COLUMNS)]) == RECORD_COLUMNS


def is_missing(value: Any) -> bool:
    """Whether a value read out of a DataFrame (a cell, an `itertuples` field) is missing.

    pandas marks a missing string with None, NaN (pandas 3's default string dtype), or pd.NA
    (the nullable "string" dtype) depending on version and dtype. NaN is truthy and neither
    is None nor compares with a string, so such values are never tested by truthiness or
    `is None`: through here (or pd.isna / dropna on a whole column)."""
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def none_if_missing(value: Any) -> Any:
    """A DataFrame value as a plain Python row holds it: None when missing."""
    return None if is_missing(value) else value


def records_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows -> DataFrame with exactly the RECORDS_SCHEMA columns, in order."""
    return pa.Table.from_pylist(rows, schema=RECORDS_SCHEMA).to_pandas()


def write_records(df: pd.DataFrame, dest: str | Path) -> None:
    """Parquet with the fixed schema, written atomically (no half-written file on a crash)."""
    table = pa.Table.from_pandas(df[RECORDS_SCHEMA.names], schema=RECORDS_SCHEMA,
                                 preserve_index=False)
    with atomic_path(dest) as tmp:
        pq.write_table(table, tmp)


def read_records(path: str | Path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas()


# --------------------------------------------------------------------------- pass@k

def _check_nck(n: int, c: int, k: int) -> None:
    for name, v in (("n", n), ("c", c), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if n < 1:
        raise ValueError(f"need n >= 1 samples, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from c correct among n samples: 1 - C(n-c, k) / C(n, k).

    Uses the product form of Chen et al. (2021), C(n-c,k)/C(n,k) = prod_{i=n-c+1}^{n} (1 - k/i),
    so no large binomials are formed and every factor lies in [0, 1]. Raises ValueError unless
    0 <= c <= n and 1 <= k <= n (TypeError for non-integers).
    """
    _check_nck(n, c, k)
    if n - c < k:  # every k-subset contains a correct sample
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def expected_samples(n: int, c: int, k: int) -> float:
    """Expected draws with early stopping: E[min(T, k)] = sum_{j<k} C(n-c, j) / C(n, j).

    T is the 1-based index of the first correct sample when the n recorded samples are drawn
    in random order without replacement. P(T > j) = C(n-c,j)/C(n,j) is the chance that the
    first j draws all fail, a running product of (n-c-i)/(n-i), so again no big binomials.
    """
    _check_nck(n, c, k)
    j = np.arange(k - 1)  # factors of P(T > 1), ..., P(T > k-1); P(T > 0) = 1
    survival = np.cumprod(np.maximum(n - c - j, 0) / (n - j))
    return float(1.0 + survival.sum())


def _pass_at_ks(n: int, hits: np.ndarray, ks: Iterable[int]) -> dict[str, float]:
    """Mean pass@k over groups of n samples, for every k in ks that is <= n."""
    return {f"pass@{k}": float(np.mean([pass_at_k(n, int(c), k) for c in hits]))
            for k in ks if k <= n}


# --------------------------------------------------------------------------- group metrics

def _binary(values, what: str = "correct") -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype != bool:
        arr = arr.astype(float)
        if not np.isin(arr, (0.0, 1.0)).all():
            raise ValueError(f"{what} must be binary (bool or 0/1); use `correct`, not a "
                             "graded reward")
        arr = arr.astype(bool)
    return arr


def zero_signal(correct: Sequence[Sequence], reward: Sequence[Sequence] | None = None
                ) -> dict[str, float]:
    """Zero-signal diagnostics of S0 §3.2 over groups of samples.

    correct: one binary sequence per group (a 2-D problems x samples array or a ragged list).
    reward: matching per-sample rewards for `avg_score` (defaults to `correct`).

    Returns rates over groups: `all_fail`, `all_correct`, `zero_informative` (zero-variance
    binary reward, i.e. all_fail + all_correct: a group-relative advantage is 0 for all of
    them); `reward_contrast`, the fraction of within-group unordered sample pairs whose binary
    rewards differ, pooled over all pairs as in S0 ("contrast appears in 15.0% of sampled
    pairs"): sum_g c_g (n_g - c_g) / sum_g C(n_g, 2). With equal group sizes this equals the
    per-group fraction averaged over groups; it is 0.0 when no group has two samples.
    `avg_score` is the mean reward over all samples.
    """
    groups = [_binary(g) for g in correct]
    if not groups:
        raise ValueError("zero_signal needs at least one group")
    sizes = np.array([g.size for g in groups])
    if (sizes == 0).any():
        raise ValueError("every group needs at least one sample")
    hits = np.array([int(g.sum()) for g in groups])
    all_fail, all_correct = hits == 0, hits == sizes
    pairs = int((sizes * (sizes - 1) // 2).sum())
    mixed = int((hits * (sizes - hits)).sum())
    if reward is None:
        score = hits.sum() / sizes.sum()
    else:
        rewards = [np.asarray(r, dtype=float).ravel() for r in reward]
        if [r.size for r in rewards] != sizes.tolist():
            raise ValueError("reward must have the same group sizes as correct")
        score = np.concatenate(rewards).mean()
    return {
        "all_fail": float(all_fail.mean()),
        "all_correct": float(all_correct.mean()),
        "zero_informative": float((all_fail | all_correct).mean()),
        "reward_contrast": mixed / pairs if pairs else 0.0,
        "avg_score": float(score),
    }


def diagnostics_at_k(correct, reward, k: int) -> dict[str, float]:
    """S0's table row for groups of exactly k samples, every number from the same samples.

    correct / reward: 2-D groups x n arrays (columns in sample order). Each group's n samples
    are cut into n // k consecutive groups of k (the n % k left over are not used), so all
    of them count and every column describes the same k-sample groups: pass@k of a group of
    exactly k samples is "any correct", hence `all_fail == 1 - pass@k` by construction, and
    `avg_score` is the mean reward of the same samples (a table that mixed pass@8 with
    all-fail rates of 16-sample groups could not add up). Keys: k, n_groups, pass@1, pass@k
    and the zero_signal() rates.
    """
    correct, reward = _binary(correct), np.asarray(reward, dtype=float)
    if correct.ndim != 2 or correct.shape != reward.shape:
        raise ValueError("diagnostics_at_k needs matching 2-D groups x samples arrays")
    n = correct.shape[1]
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be in 1..{n} (samples per group)")
    used = n // k * k
    groups = correct[:, :used].reshape(-1, k)
    out = zero_signal(groups, reward[:, :used].reshape(-1, k))
    return {"k": k, "n_groups": int(groups.shape[0]), "pass@1": float(groups.mean()),
            "pass@k": float(groups.any(axis=1).mean()), **out}


def failure_counts(failures: Iterable) -> dict[str, int]:
    """Count samples per verifier failure code; a missing code (a correct sample: None, NaN or
    pd.NA) counts as `correct`.

    Every code in task.FAILURES is always present (0 if unseen) so the metric keys are stable.
    """
    counts = dict.fromkeys(FAILURES, 0) | {"correct": 0}
    for f in failures:
        if is_missing(f):
            counts["correct"] += 1
        elif f in FAILURES:
            counts[f] += 1
        else:
            raise ValueError(f"unknown failure code {f!r}; expected one of {FAILURES} or None")
    return counts


def best_of_n(correct, budgets: Iterable[int] = (1, 2, 4, 8, 16)) -> dict[str, dict[str, float]]:
    """Verifier-guided best-of-N (S4 §3.4, Table 2): draw until one sample verifies, at most N.

    correct: 2-D binary array, groups x samples, columns in sample order.
    Per budget N (key `N{N}`):
      acc, avg_samples: realized on the recorded order, i.e. solved within the first N samples
          and mean min(T, N) with T the 1-based index of the first correct sample;
      expected_acc, expected_samples: the order-free estimates of S4 eq. 5 (mean pass@N and
          mean E[min(T, N)]), which is what S4 Table 2 reports; lower variance than realized.
    """
    correct = _binary(correct)
    if correct.ndim != 2 or correct.size == 0:
        raise ValueError("best_of_n needs a non-empty 2-D groups x samples array")
    n = correct.shape[1]
    hits = correct.sum(axis=1)
    first = np.where(hits > 0, correct.argmax(axis=1) + 1, n + 1)  # n+1: never verifies
    out = {}
    for N in budgets:
        if not 1 <= N <= n:
            raise ValueError(f"budget N={N} must be in 1..{n} (samples per group)")
        out[f"N{N}"] = {
            "acc": float(np.mean(first <= N)),
            "avg_samples": float(np.mean(np.minimum(first, N))),
            "expected_acc": float(np.mean([pass_at_k(n, int(c), N) for c in hits])),
            "expected_samples": float(np.mean([expected_samples(n, int(c), N) for c in hits])),
        }
    return out


# --------------------------------------------------------------------------- records

def _validated(records: pd.DataFrame, columns: Sequence[str] = RECORD_COLUMNS) -> pd.DataFrame:
    """Check the per-sample records and return a copy with a bool `correct` column."""
    missing = [c for c in columns if c not in records.columns]
    if missing:
        raise ValueError(f"records are missing columns {missing}; expected {list(columns)}")
    if records.empty:
        raise ValueError("records are empty; nothing to evaluate")
    records = records.copy()
    if not records["correct"].isin([True, False]).all():
        raise ValueError("`correct` must be bool (no missing values)")
    records["correct"] = records["correct"].astype(bool)
    dup = records.duplicated(GROUP + ["sample"])
    if dup.any():
        row = records.loc[dup, GROUP + ["sample"]].iloc[0].to_dict()
        raise ValueError(f"duplicate (problem_id, seed, sample) records, e.g. {row}")
    if "failure" in records and (records["correct"] != records["failure"].isna()).any():
        raise ValueError("`failure` must be None exactly when `correct` is True")
    if "split" in records:
        unknown = set(records["split"]) - set(SPLITS)
        if unknown:
            raise ValueError(f"unknown split(s) {sorted(unknown)}; expected one of {SPLITS}")
    for col in ("split", "n_numbers"):
        if col in records and (records.groupby("problem_id")[col].nunique() > 1).any():
            raise ValueError(f"`{col}` must be constant per problem_id")
    return records


def _wide(records: pd.DataFrame, column: str = "correct") -> pd.DataFrame:
    """(problem_id, seed) x sample table of `column`, checking every group has samples 0..n-1."""
    wide = records.pivot(index=GROUP, columns="sample", values=column)
    n = wide.shape[1]
    if list(wide.columns) != list(range(n)) or wide.isna().any().any():
        raise ValueError("every (problem_id, seed) group must have the same samples 0..n-1; "
                         f"found sample indices {list(wide.columns)[:20]} with gaps")
    return wide


def _split_metrics(part: pd.DataFrame, ks: Iterable[int]) -> dict:
    wide = _wide(part)
    n = wide.shape[1]
    hits = wide.to_numpy(dtype=bool).sum(axis=1)
    n_numbers = part.groupby(GROUP)["n_numbers"].first().reindex(wide.index).to_numpy()
    block = {
        "n_problems": int(part["problem_id"].nunique()),
        "n_groups": len(hits),
        "samples_per_group": int(n),
        **_pass_at_ks(n, hits, ks),
        "mean_tokens": float(part["n_tokens"].mean()),
    }
    for m in sorted(set(n_numbers.tolist())):
        mask = n_numbers == m
        block[f"n{int(m)}"] = {
            "n_problems": int(wide.index[mask].get_level_values("problem_id").nunique()),
            **_pass_at_ks(n, hits[mask], ks),
        }
    return block


def summarize(records: pd.DataFrame, ks: Iterable[int] = (1, 4, 8, 16),
              budgets: Iterable[int] = (1, 2, 4, 8, 16)) -> dict:
    """The metrics dict of one policy, plain JSON types, stable keys:

        test / ood / dev:  n_problems, n_groups, samples_per_group, pass@k (k in ks, k <= n),
                     mean_tokens, and n{m}: {n_problems, pass@k} per operand count m
        diagnostics: zero_signal() on the test split over the groups of all n samples;
                     avg_score is the format-aware score (`format_score`), as S0's
        diagnostics_by_k: {"k<k>": diagnostics_at_k()} for every k in ks with 2 <= k <= n:
                     pass@1, pass@k and the zero-signal rates of the same k-sample groups
                     (what a table at one K must show)
        failures:    failure_counts() on the test split
        best_of_n:   best_of_n() on the test split, budgets <= n

    `ood` and `dev` are present only when there are such records; test records are required.
    Everything below the splits' blocks is the test split's.
    """
    ks, budgets = list(ks), list(budgets)
    records = _validated(records)
    if not (records["split"] == "test").any():
        raise ValueError("summarize needs records with split == 'test'")
    out = {split: _split_metrics(records[records["split"] == split], ks)
           for split in SPLITS if (records["split"] == split).any()}
    test = records[records["split"] == "test"]
    correct = _wide(test).to_numpy(dtype=bool)
    reward = _wide(test.assign(score=format_score(test)), "score").to_numpy(dtype=float)
    n = correct.shape[1]
    out["diagnostics"] = zero_signal(correct, reward)
    out["diagnostics_by_k"] = {f"k{k}": diagnostics_at_k(correct, reward, k)
                               for k in ks if 2 <= k <= n}
    out["failures"] = failure_counts(test["failure"])
    out["best_of_n"] = best_of_n(correct, [N for N in budgets if N <= n])
    return out


def teacher_yield(records: pd.DataFrame) -> dict[str, Any]:
    """reports/details/teacher_traces.json from the teacher's sample records (with a `strategy`
    column): samples, kept (the verified ones, each a trace), the yield overall, per operand
    count and per strategy, the share of problems with a trace, and the failure codes seen
    (missing = a correct sample, not counted)."""
    correct = records["correct"].astype(bool)
    return {
        "samples": len(records), "kept": int(correct.sum()), "yield": float(correct.mean()),
        "problems_with_a_trace": float(correct.groupby(records["problem_id"]).any().mean()),
        "yield_by_operands": {f"n{k}": float(g.mean())
                              for k, g in correct.groupby(records["n_numbers"])},
        "yield_by_strategy": {s: float(g.mean()) for s, g in correct.groupby(records["strategy"])},
        "failures": dict(sorted(Counter(records["failure"].dropna()).items())),
    }


def format_score(records: pd.DataFrame) -> np.ndarray:
    """S0's average score per sample, whatever reward the records were scored with: 1 for a
    correct answer, 0.1 for a wrong one inside answer tags, 0 with no answer (the format
    reward, from the verifier's failure code). With the binary reward the average score
    would only repeat pass@1."""
    failure = records["failure"].to_numpy(dtype=object)
    return np.where(records["correct"].to_numpy(dtype=bool), 1.0,
                    np.where(failure == "FORMAT_MISSING", 0.0, 0.1))


def solved_within(records: pd.DataFrame, k: int, seed: int = 0) -> pd.Series:
    """Per-problem outcome for paired tests (McNemar): solved by one of samples 0..k-1 of `seed`.

    Returns a bool Series indexed by problem_id (sorted), named `solved@{k}`.
    """
    records = _validated(records, ("problem_id", "seed", "sample", "correct"))
    part = records[records["seed"] == seed]
    if part.empty:
        raise ValueError(f"no records for seed {seed}; seeds present: "
                         f"{sorted(records['seed'].unique().tolist())}")
    wide = _wide(part)
    if not 1 <= k <= wide.shape[1]:
        raise ValueError(f"k={k} must be in 1..{wide.shape[1]} (samples per group)")
    solved = wide.iloc[:, :k].astype(bool).any(axis=1).droplevel("seed")
    return solved.sort_index().rename(f"solved@{k}")
