"""Significance tests for comparing policies on the same problems.

Outcomes are paired by problem: McNemar on per-problem solved/unsolved (one sample each),
a paired sign-flip permutation test on per-problem rates estimated from every sample, and a
percentile bootstrap over problems for confidence intervals (e.g. on pass@k, or on the
per-problem difference between two policies, whose mean is the difference of their means).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest, chi2, permutation_test

from .metrics import pass_at_k


@dataclass(frozen=True)
class McNemarResult:
    statistic: float
    pvalue: float
    b: int  # a solved, b not
    c: int  # a not, b solved


def _paired_bool(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of paired outcomes")
    if arr.dtype != bool:
        if arr.size and not np.isin(arr.astype(float), (0.0, 1.0)).all():
            raise ValueError(f"{name} must be boolean (or 0/1), got values {np.unique(arr)[:5]}")
        arr = arr.astype(bool)
    return arr


def mcnemar(a: Sequence[bool], b: Sequence[bool], exact: bool = True,
            correction: bool = True) -> McNemarResult:
    """McNemar's test for paired binary outcomes a[i], b[i] of two policies on problem i.

    Only discordant pairs carry information: b = #(a true, b false), c = #(a false, b true).
    exact=True: two-sided binomial test of b ~ Bin(b + c, 1/2), statistic = min(b, c).
    exact=False: chi-square with 1 dof, statistic = (|b - c| - 1)^2 / (b + c) with the
    continuity correction (not clipped at 0, as in statsmodels), (b - c)^2 / (b + c) without.
    No discordant pairs: no evidence either way, statistic 0.0 and p-value 1.0.
    Two pandas Series must share their index (pair them with `a.align(b, join="inner")`).
    """
    if isinstance(a, pd.Series) and isinstance(b, pd.Series) and not a.index.equals(b.index):
        raise ValueError("a and b are Series with different indexes; align them by problem "
                         "first, e.g. a, b = a.align(b, join='inner')")
    a, b = _paired_bool(a, "a"), _paired_bool(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have equal length, got {a.size} and {b.size}")
    n10, n01 = int(np.sum(a & ~b)), int(np.sum(~a & b))
    n = n10 + n01
    if n == 0:
        return McNemarResult(0.0, 1.0, n10, n01)
    if exact:
        stat = min(n10, n01)
        pvalue = binomtest(stat, n, 0.5).pvalue
    else:
        stat = (abs(n10 - n01) - (1 if correction else 0)) ** 2 / n
        pvalue = chi2.sf(stat, df=1)
    return McNemarResult(float(stat), float(min(pvalue, 1.0)), n10, n01)


PERM_RESAMPLES = 9999  # Monte Carlo sign flips; the smallest two-sided p is 2 / 10,000


def paired_permutation_test(a: Sequence[float], b: Sequence[float],
                            n_resamples: int = PERM_RESAMPLES, seed: int = 0) -> float:
    """Two-sided p of a paired sign-flip permutation test on mean(a - b).

    a[i], b[i]: one number per problem for each policy, e.g. its pass rate (or unbiased
    pass@k) over all n samples of problem i. Under H0 the two policies are exchangeable on
    each problem, so each difference is equally likely to have either sign
    (scipy.stats.permutation_test, permutation_type="samples"). Problems with a zero
    difference cannot change the statistic and are left out, so with at most
    log2(n_resamples) non-zero differences the test is exact (every sign pattern); beyond
    that it is Monte Carlo with `seed` (scipy counts the observed pattern, so p > 0). No non-zero
    difference (or one): p = 1.0. Unlike McNemar on one sample per problem, it uses every sample.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"a and b must be non-empty 1-D and of equal length, got shapes "
                         f"{a.shape} and {b.shape}")
    keep = ~np.isclose(a, b, rtol=0.0, atol=1e-12)
    if keep.sum() < 2:  # both signs of a single difference are equally extreme
        return 1.0
    res = permutation_test((a[keep], b[keep]), _mean_diff, permutation_type="samples",
                           vectorized=True, n_resamples=n_resamples, alternative="two-sided",
                           random_state=np.random.default_rng(seed))
    return float(min(res.pvalue, 1.0))


def _mean_diff(x, y, axis=-1):
    return np.mean(x - y, axis=axis)


def bootstrap_ci(values_per_problem: Sequence[float], stat: Callable = np.mean,
                 n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap (1 - alpha) interval of stat(values), resampling problems.

    Deterministic for a given seed. Pass one value per problem (e.g. per-problem pass@k, or
    the per-problem difference between two policies for a paired interval).
    """
    values = np.asarray(values_per_problem, dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError("values_per_problem must be a non-empty 1-D sequence")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    rng = np.random.default_rng(seed)
    m = values.size
    boots = np.array([stat(values[rng.integers(0, m, size=m)]) for _ in range(n_boot)],
                     dtype=float)
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def pass_at_k_ci(n_per_problem: Sequence[int], c_per_problem: Sequence[int], k: int,
                 n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> tuple[float, float]:
    """Bootstrap interval of mean pass@k over problems, from n samples / c correct per problem.

    With several sampling seeds, pool them per problem (sum n and c): the seeds are just
    more samples of the same problem, and the bootstrap unit must stay the problem.
    """
    n_arr, c_arr = np.asarray(n_per_problem), np.asarray(c_per_problem)
    if n_arr.shape != c_arr.shape:
        raise ValueError("n_per_problem and c_per_problem must have equal length")
    per_problem = [pass_at_k(int(n), int(c), k) for n, c in zip(n_arr, c_arr)]
    return bootstrap_ci(per_problem, n_boot=n_boot, alpha=alpha, seed=seed)
