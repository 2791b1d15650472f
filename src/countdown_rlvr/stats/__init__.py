"""Significance tests for comparing policies on the same problems, within one training draw
and across draws.

Within one replicate (one trained policy per name), outcomes are paired by problem: McNemar
on per-problem solved/unsolved (one sample each), a paired sign-flip permutation test on
per-problem rates estimated from every sample, and a percentile bootstrap over problems for
confidence intervals. These leave out the training draw. Across replicates, the unit is the
replicate: a t-test and t interval on per-replicate effects (`replicate_t_test`), an
one-sided equivalence test for claims that something does not rise (`below_margin_test`), a
rate against another study's estimate with both sampling errors (`rate_vs_reference`), and
Holm's correction for a family of claims (`holm`). The seed claims use `floored_t_test`: the
same t-test with its SD floored at the replicates' own sampling error (`binary_paired_var`,
`interval_var`), and plan more replicates with `t_power` / `replicates_needed`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest, chi2, norm, permutation_test, ttest_1samp
from scipy.stats import t as t_dist

from ..eval.metrics import pass_at_k
from .power import ALTERNATIVES, t_test_power


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


# --------------------------------------------------------------------------- replicates
# A run's intervals above resample problems of ONE trained policy; a second training draw
# (another seed, or the same seed on another CPU) moves a policy by more than those intervals
# allow. The tests below take the replicate (one training draw) as their unit.

@dataclass(frozen=True)
class ReplicateTest:
    """A test across replicates of per-replicate effects (e.g. paired pass@k differences)."""
    n: int  # replicates
    mean: float  # mean effect over replicates
    sd: float | None  # across-replicate standard deviation (None with one replicate)
    ci_low: float | None  # t interval of the mean (None with one replicate)
    ci_high: float | None
    pvalue: float | None  # two-sided one-sample t-test of mean = 0 (None: not testable)

    def as_dict(self) -> dict[str, float | int | None]:
        return dataclasses.asdict(self)


def replicate_t_test(effects: Sequence[float], alpha: float = 0.05) -> ReplicateTest:
    """One-sample t-test and t interval of the mean of per-replicate effects (df = R - 1).

    Each replicate contributes one number (its effect estimated from all its samples, paired
    over problems), so the test's noise is the between-replicate spread itself: training-draw
    variance and problem/sample variance together, whatever their mix. Under the usual
    normality of a mean effect it holds its size for any between-replicate variance
    (tests/test_stats.py simulates it), unlike a test within one replicate. With R = 1 there is
    no spread to estimate: the mean is reported, the test is None. All effects equal (up to
    float rounding, which would otherwise give a t of ~1e16): p 1.0 when they are 0; else there
    is no spread to scale them by either (typically a floor: a policy at 0 in every replicate
    against a shared one), so no test, as with one replicate.
    """
    x = np.asarray(effects, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.isfinite(x).all():
        raise ValueError(f"effects must be a non-empty 1-D list of finite numbers, got {effects}")
    mean = float(x.mean())
    if x.size == 1:
        return ReplicateTest(1, mean, None, None, None, None)
    sd = float(x.std(ddof=1))
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return ReplicateTest(int(x.size), mean, 0.0, mean, mean,
                             1.0 if abs(mean) <= 1e-12 else None)
    res = ttest_1samp(x, 0.0)
    lo, hi = res.confidence_interval(1 - alpha)
    return ReplicateTest(int(x.size), mean, sd, float(lo), float(hi), float(res.pvalue))


def below_margin_test(effects: Sequence[float], margin: float) -> float | None:
    """One-sided t-test p that the mean per-replicate effect is below +margin (df = R - 1):
    the upper half of an equivalence test (TOST). A claim that something does NOT rise is
    supported only when this is small: "not significantly higher" is not evidence of "not
    higher" (it is what any underpowered test gives). None with one replicate.
    """
    if margin <= 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    x = np.asarray(effects, dtype=float)
    if x.size < 2:
        return None
    if x.std(ddof=1) == 0:
        return 0.0 if x.mean() < margin else 1.0
    return float(ttest_1samp(x, margin, alternative="less").pvalue)


def rate_vs_reference(rates: Sequence[float], n_per_replicate: int, ref_rate: float,
                      ref_n: int) -> dict[str, float | None]:
    """Two-sided test of this run's rate (mean over replicates) against a rate another study
    measured on `ref_n` units, counting the reference's own sampling error.

    The reference is an estimate, not a constant: its variance ref_rate (1 - ref_rate) / ref_n
    adds to ours. Ours is the across-replicate variance of the mean when there are >= 2
    replicates (it holds the training draw's share too), else the binomial variance of one
    replicate's `n_per_replicate` units. A Welch-style z statistic; returns the difference,
    its standard error and p.
    """
    x = np.asarray(rates, dtype=float)
    if x.size == 0 or not 0 <= ref_rate <= 1 or ref_n < 1 or n_per_replicate < 1:
        raise ValueError("need >= 1 rate, a reference rate in [0, 1] and positive counts")
    mean = float(x.mean())
    ours = (float(x.var(ddof=1)) / x.size if x.size >= 2
            else mean * (1 - mean) / n_per_replicate)
    se = math.sqrt(ours + ref_rate * (1 - ref_rate) / ref_n)
    if se == 0:
        return {"diff": mean - ref_rate, "se": 0.0, "pvalue": 1.0 if mean == ref_rate else 0.0}
    z = (mean - ref_rate) / se
    return {"diff": mean - ref_rate, "se": se, "pvalue": float(2 * norm.sf(abs(z)))}


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values of a family of tests (statsmodels), None entries kept as None
    and left out of the family."""
    from statsmodels.stats.multitest import multipletests

    idx = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if idx:
        adjusted = multipletests([pvalues[i] for i in idx], method="holm")[1]
        for i, p in zip(idx, adjusted, strict=True):
            out[i] = float(p)
    return out


# --------------------------------------------------------------------------- the floor
# With three replicates, the t-test's SD is estimated from three numbers: when they happen to
# agree (e.g. +0.059, +0.058, +0.059, each 3 discordant problems of ~51) it can be far smaller
# than the sampling error each number carries, and the test far more confident than its data
# (p 4e-05 there). Each replicate's effect is measured with a known within-replicate sampling
# error, and the spread between replicates cannot truly be smaller than it, so the SD the test
# uses is floored at it.

def binary_paired_var(b: int, c: int, n: int) -> float:
    """Sampling variance of the mean paired difference of binary outcomes over n units, b of
    them (1, 0) and c (0, 1): the per-unit difference is +1, -1 or 0, so its variance is
    (b + c) / n - ((b - c) / n)^2 and the mean's is that over n."""
    if n < 1 or b < 0 or c < 0 or b + c > n:
        raise ValueError(f"need 0 <= b, c and b + c <= n, n >= 1; got b={b}, c={c}, n={n}")
    return (b + c) / n**2 - (b - c) ** 2 / n**3


def interval_var(ci_low: float, ci_high: float, alpha: float = 0.05) -> float:
    """Sampling variance of an estimate from its (1 - alpha) interval, read as a normal one:
    se = width / (2 z_{1 - alpha/2}). For a bootstrap interval over a few hundred problems
    (a mean of per-problem differences) the normal reading is the one its CLT gives."""
    if ci_high < ci_low or not 0 < alpha < 1:
        raise ValueError(f"need ci_low <= ci_high and alpha in (0, 1), got {ci_low}, {ci_high}, {alpha}")
    return ((ci_high - ci_low) / (2 * norm.ppf(1 - alpha / 2))) ** 2


@dataclass(frozen=True)
class FlooredTest:
    """A t-test across replicates whose SD is max(observed SD, within-replicate SD)."""
    n: int  # replicates
    mean: float  # mean effect over replicates
    sd_observed: float | None  # SD across replicates (None with one replicate)
    sd_within: float | None  # sqrt(mean within-replicate variance) (None when not given)
    sd: float | None  # the SD the test uses: the larger of the two
    ci_low: float | None  # t interval of the mean with that SD
    ci_high: float | None
    pvalue: float | None  # against `null`, `alternative` (None: not testable)
    null: float = 0.0
    alternative: str = "two-sided"

    @property
    def floored(self) -> bool:
        """The floor, not the observed spread, set the SD."""
        return (self.sd_within is not None and self.sd_observed is not None
                and self.sd_within > self.sd_observed)


def floored_t_test(effects: Sequence[float], within_vars: Sequence[float] | None = None,
                   null: float = 0.0, alternative: str = "two-sided",
                   alpha: float = 0.05, shared: float = 0.0) -> FlooredTest:
    """One-sample t-test (df = R - 1) of the mean per-replicate effect against `null`, its SD
    max(observed SD across replicates, sqrt(mean of `within_vars`)), the replicates' own
    sampling variances (`binary_paired_var`, `interval_var`). The floor only ever widens the
    test, so it keeps the plain t-test's size wherever that holds and caps its confidence
    where three near-identical numbers would otherwise make the spread look ~0
    (tests/test_stats.py simulates both). `alternative`: "greater" / "less" test mean > null /
    mean < null. One replicate: no test (the unit is the replicate). No spread and no floor:
    p 1.0 when the mean is the null, else no test (as `replicate_t_test`).
    `shared`: the mean covariance of two replicates' effects from what they share (the same
    problems: `stats.design.shared_covariance`), which their spread cannot show and the mean
    does not average: the mean's variance is then spread / n + shared, so the SD is
    max(sqrt(spread + n shared), sqrt(within + (n - 1) shared)); 0 (independent) as before."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    x = np.asarray(effects, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.isfinite(x).all():
        raise ValueError(f"effects must be a non-empty 1-D list of finite numbers, got {effects}")
    w = None if within_vars is None else np.asarray(within_vars, dtype=float)
    if w is not None and (w.shape != x.shape or (w < 0).any() or not np.isfinite(w).all()):
        raise ValueError(f"within_vars must be one finite variance >= 0 per effect, got {within_vars}")
    if not (math.isfinite(shared) and shared >= 0):
        raise ValueError(f"shared must be a finite covariance >= 0, got {shared}")
    n, mean = int(x.size), float(x.mean())
    sd_w = None if w is None else float(math.sqrt(w.mean() + (n - 1) * shared))
    if n == 1:
        return FlooredTest(1, mean, None, sd_w, None, None, None, None, null, alternative)
    sd_o = float(x.std(ddof=1))
    if sd_o <= 1e-12 * max(1.0, abs(mean)):
        sd_o = 0.0  # float rounding of equal effects, not a spread
    sd = max(math.sqrt(sd_o ** 2 + n * shared), sd_w or 0.0)
    if sd == 0.0:
        p = 1.0 if abs(mean - null) <= 1e-12 else None
        return FlooredTest(n, mean, sd_o, sd_w, 0.0, mean, mean, p, null, alternative)
    se = sd / math.sqrt(n)
    t = (mean - null) / se
    df = n - 1
    p = {"two-sided": 2 * t_dist.sf(abs(t), df), "greater": t_dist.sf(t, df),
         "less": t_dist.cdf(t, df)}[alternative]
    half = t_dist.ppf(1 - alpha / 2, df) * se
    return FlooredTest(n, mean, sd_o, sd_w, sd, float(mean - half), float(mean + half),
                       float(min(p, 1.0)), null, alternative)


# --------------------------------------------------------------------------- planning
# An inconclusive claim's question is "how many replicates would decide it?": the t-test's
# power at a given effect and SD is a noncentral t probability, so the answer is closed-form
# enough to compute exactly, not guess.

def t_power(effect: float, sd: float, n: int, alpha: float = 0.05,
            alternative: str = "two-sided") -> float:
    """Power of the one-sample t-test (df = n - 1) at level alpha when the true mean effect
    (distance from the null) is `effect` and the per-replicate SD is `sd`: the noncentral t
    with noncentrality effect sqrt(n) / sd beyond the critical value: both tails when
    two-sided (the lower one as the upper tail of -T), the upper tail for "greater", the
    lower one for "less" (there a negative effect is one in the test's direction)."""
    if n < 2 or sd <= 0:
        raise ValueError(f"need n >= 2 and sd > 0, got n={n}, sd={sd}")
    return t_test_power(effect * math.sqrt(n) / sd, n - 1, alpha, alternative)


MAX_REPLICATES = 100  # beyond this, "more than" (no pipeline budget buys it)


def replicates_needed(effect: float, sd: float, alpha: float = 0.05, power: float = 0.8,
                      alternative: str = "two-sided",
                      max_n: int = MAX_REPLICATES) -> int | None:
    """The smallest number of replicates n >= 2 at which the t-test across replicates has
    `power` at `effect` (the true distance from the null, signed as the alternative reads it)
    with per-replicate SD `sd`; None when even max_n does not (or the effect is 0 / points
    the other way of a one-sided test)."""
    if sd <= 0:
        raise ValueError(f"sd must be > 0, got {sd}")
    if effect == 0 or (alternative == "greater" and effect < 0) or \
            (alternative == "less" and effect > 0):
        return None
    for n in range(2, max_n + 1):
        if t_power(effect, sd, n, alpha, alternative) >= power:
            return n
    return None
