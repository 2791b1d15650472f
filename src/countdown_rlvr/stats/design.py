"""Where the noise of a pass@k claim is, and what a design does to it: samples per problem,
RLOO inits, OPD draws per init.

A pass@k difference of two policies on I shared problems has three parts (stats.crossed):
problems s_a², training draws s_b², and a residual s_e² that holds the problem x draw
interaction and the sampling noise of each problem's estimate. With n = k samples a
problem's pass@k is one "any correct" indicator, whose variance pi (1 - pi) is most of s_e²;
with n > k samples the unbiased estimator (eval.metrics.pass_at_k) averages over every
k-subset and its variance falls (`pass_at_k_var`). So a plan at n samples swaps the pilot's
sampling part for the one at n (`at_samples`) and keeps the rest.

OPD draws nested in RLOO inits: D OPD runs from each of R RLOO policies are not R x D
independent draws, as the inits' own variance is shared by an init's draws. The unit of the
interval stays the init: average the draws of an init first (`nested_effect`,
`nested_crossed`), which is exact for a balanced design (the t-test on init means) and keeps
its size for any split of the variance between inits and draws. Planning it
(`nested_components`): draws shrink the draw part of s_b² and the sampling part of s_e² by D,
never the inits' part.

A variance estimated on few degrees of freedom (a pilot of four replicates: MS_replicate on
3) is planned at its upper confidence bound (`planning_variance`), the two-stage rule of
docs/statistics.md: plan conservatively, then re-plan at the run's own interim variance.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom, chi2, hypergeom
from scipy.stats import t as t_dist

from .crossed import CrossedTest, crossed_power, crossed_test
from .power import ALTERNATIVES

# --------------------------------------------------------------------------- sampling noise

@functools.cache
def _subset_miss(n: int, k: int) -> np.ndarray:
    """C(n - c, k) / C(n, k) for c = 0..n: the chance that k of n samples with c correct are
    all wrong (1 - the unbiased pass@k), as a running product (no large binomials)."""
    out = np.zeros(n + 1)
    for c in range(n - k + 1):
        out[c] = float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1))) if c else 1.0
    return out


def pass_at_k_var(p, n: int, k: int) -> np.ndarray:
    """Sampling variance of the unbiased pass@k of one problem from n samples that are each
    correct with chance p (array-like): E[g(c)²] - (1 - p)^(2k), g = `_subset_miss`, c ~
    Binomial(n, p). k = 1: p (1 - p) / n; n = k: pi (1 - pi), pi = 1 - (1 - p)^k."""
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    g = _subset_miss(n, k)
    pmf = binom.pmf(np.arange(n + 1), n, p[..., None])
    return np.maximum((pmf * g ** 2).sum(axis=-1) - (1 - p) ** (2 * k), 0.0)


def sampling_var(p_a, p_b, n: int, k: int) -> float:
    """Mean over problems of the sampling variance of a problem's pass@k difference a - b,
    both sampled n times per problem (independent samples): the part of the crossed model's
    residual s_e² that more samples shrink."""
    return float(np.mean(pass_at_k_var(p_a, n, k) + pass_at_k_var(p_b, n, k)))


def at_samples(components: tuple[float, float, float], sampling_pilot: float,
               sampling_new: float) -> tuple[float, float, float]:
    """The crossed components at another sample count: the residual's sampling part at the
    pilot's n (`sampling_pilot`) swapped for the one at the new n; what is left of the
    residual (the problem x draw interaction) is kept, never below 0."""
    v_a, v_b, v_e = components
    return v_a, v_b, max(v_e - sampling_pilot, 0.0) + sampling_new


# --------------------------------------------------------------------------- nested draws

@dataclass(frozen=True)
class NestedTest:
    """The test of an effect measured by several draws per init, the init as its unit."""
    n_inits: int
    draws: tuple[int, ...]  # draws per init, in the inits' order
    mean: float  # the mean of the init means (each init weighs the same)
    se: float | None  # None: one init, or no spread
    df: int | None  # inits - 1
    ci_low: float | None
    ci_high: float | None
    pvalue: float | None
    null: float = 0.0
    alternative: str = "two-sided"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def nested_effect(per_draw: Mapping[str, Sequence[float]], null: float = 0.0,
                  alternative: str = "two-sided", alpha: float = 0.05) -> NestedTest:
    """The one-sample t-test (df = inits - 1) of the mean of per-init means of `per_draw`
    ({init: its draws' effects}). The draws of an init share its variance, so they are
    averaged first: counting them as independent would shrink the standard error by draws
    the inits' variance never averages (tests/test_design.py simulates it). Balanced: the
    t-test on the init means; one draw each: the plain t-test across replicates."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    groups = [np.asarray(v, dtype=float) for v in per_draw.values()]
    if not groups or any(g.ndim != 1 or g.size == 0 or not np.isfinite(g).all() for g in groups):
        raise ValueError(f"per_draw must map each init to >= 1 finite effect, got {per_draw}")
    means = np.array([g.mean() for g in groups])
    n, mean = len(means), float(means.mean())
    draws = tuple(int(g.size) for g in groups)
    sd = float(means.std(ddof=1)) if n > 1 else 0.0
    if n == 1 or sd <= 1e-12 * max(1.0, abs(mean)):
        p = None if n == 1 or abs(mean - null) > 1e-12 else 1.0
        return NestedTest(n, draws, mean, None, n - 1 or None, None, None, p, null, alternative)
    se, df = sd / math.sqrt(n), n - 1
    t = (mean - null) / se
    p = {"two-sided": 2 * t_dist.sf(abs(t), df), "greater": t_dist.sf(t, df),
         "less": t_dist.cdf(t, df)}[alternative]
    half = float(t_dist.ppf(1 - alpha / 2, df)) * se
    return NestedTest(n, draws, mean, se, df, mean - half, mean + half, float(min(p, 1.0)),
                      null, alternative)


def nested_crossed(per_init: Mapping[str, np.ndarray], null: float = 0.0,
                   alternative: str = "two-sided", alpha: float = 0.05) -> CrossedTest:
    """The crossed problems x inits test of per-problem effects measured by several draws per
    init ({init: problems x its draws}): each init's column is its draws' mean per problem,
    so R in the crossed model counts inits, not draws."""
    cols = []
    for init, d in per_init.items():
        x = np.asarray(d, dtype=float)
        x = x[:, None] if x.ndim == 1 else x
        if x.ndim != 2 or x.shape[1] == 0:
            raise ValueError(f"init {init!r}: need a problems x draws matrix, got shape {x.shape}")
        cols.append(x.mean(axis=1))
    if len({c.size for c in cols}) != 1:
        raise ValueError("every init must be measured on the same problems")
    return crossed_test(np.column_stack(cols), null, alternative, alpha)


def nested_components(components: tuple[float, float, float], draws: int,
                      draw_share: float = 0.0, sampling: float = 0.0
                      ) -> tuple[float, float, float]:
    """The crossed components of init means over `draws` draws each: `draw_share` of s_b²
    (the pilot's draws, one per init, cannot split it) is the draws' and shrinks by `draws`,
    the rest is the inits'; of s_e², the `sampling` part shrinks by `draws`, the interaction
    is kept (it may be the init's). draw_share 0 (the default) plans as if draws averaged
    none of the between-replicate variance: conservative."""
    if draws < 1 or not 0 <= draw_share <= 1:
        raise ValueError(f"need draws >= 1 and 0 <= draw_share <= 1, got {draws}, {draw_share}")
    v_a, v_b, v_e = components
    sampling = min(sampling, v_e)
    return (v_a, v_b * (1 - draw_share + draw_share / draws),
            v_e - sampling + sampling / draws)


# --------------------------------------------------------------------------- planning

def planning_variance(var: float, df: float, confidence: float = 0.8) -> float:
    """A variance estimated on `df` degrees of freedom at its one-sided upper `confidence`
    bound, var x df / chi2_{1 - confidence}(df): the variance a plan should assume when the
    estimate rests on few degrees of freedom (at 3 df and 80%, x 2.99; at 30, x 1.22)."""
    if df <= 0 or not 0 < confidence < 1 or var < 0:
        raise ValueError(f"need df > 0, confidence in (0, 1), var >= 0; got {df}, "
                         f"{confidence}, {var}")
    return var * df / float(chi2.ppf(1 - confidence, df))


def conservative_components(components: tuple[float, float, float], n_problems: int,
                            n_replicates: int, confidence: float = 0.8, min_df: int = 5
                            ) -> tuple[float, float, float]:
    """The crossed components with MS_replicate (s_e² + I s_b², on R - 1 degrees of freedom)
    at its upper bound when R - 1 < `min_df` (`planning_variance`); unchanged otherwise.
    MS_problem rests on I - 1 (hundreds), the residual on (I - 1)(R - 1): neither is moved."""
    v_a, v_b, v_e = components
    df = n_replicates - 1
    if df >= min_df:
        return components
    ms_r = planning_variance(v_e + n_problems * v_b, df, confidence)
    return v_a, (ms_r - v_e) / n_problems, v_e


def crossed_mde(components: tuple[float, float, float], n_problems: int, n_replicates: int,
                alpha: float = 0.05, power: float = 0.8, alternative: str = "two-sided",
                tol: float = 1e-5) -> float:
    """The minimum detectable effect of `crossed_test`: the smallest true effect (distance
    from the null) at which it has `power` with these components, I problems and R
    replicates (bisection: power rises with the effect)."""
    lo, hi = 0.0, 1.0
    while crossed_power(hi, components, n_problems, n_replicates, alpha, alternative) < power:
        hi *= 2
        if hi > 1e3:
            raise ValueError("no effect reaches that power")
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if crossed_power(mid, components, n_problems, n_replicates, alpha, alternative) < power:
            lo = mid
        else:
            hi = mid
    return hi


# --------------------------------------------------------------------------- problems per draw
# S3's held-out problems are the ones each replicate's SFT samples failed, in its own slice
# of the unseen pool (int.pool own: problems nest in replicates) or in the one all share
# (shared: their sets overlap). A replicate's pass@k difference carries three variances: its
# training draw's, its problems' (each problem's true difference varies) and its samples'.
# Only the last falls with more samples; only nested problems average over replicates.

def sampling_var_estimate(c, n: int, m: int, k: int) -> np.ndarray:
    """Unbiased estimates of the sampling variance of a problem's unbiased pass@k from m
    samples, given c correct (array-like) of the pilot's n >= m and n >= 2k: E[g_m(c')^2]
    with c' the correct of m samples drawn from the n without replacement (hypergeometric),
    less C(n - c, 2k) / C(n, 2k), the unbiased estimate of (1 - p)^(2k) (g: `_subset_miss`).
    A plug-in at c / n would be biased (Jensen: low at small rates)."""
    if not 1 <= k <= m <= n or 2 * k > n:
        raise ValueError(f"need 1 <= k <= m <= n and 2k <= n, got k={k}, m={m}, n={n}")
    c = np.asarray(c, dtype=int)
    g2 = _subset_miss(m, k) ** 2
    j = np.arange(m + 1)
    pmf = hypergeom.pmf(j, n, c[..., None], m)  # P(j of the m subsampled are correct)
    return (pmf * g2).sum(axis=-1) - _subset_miss(n, 2 * k)[c]


def shared_covariance(problem_var: float, problems: Sequence[Sequence]) -> float:
    """The mean, over pairs of replicates, of the covariance two replicates' mean effects get
    from the problems they share: problem_var x |S_r & S_s| / (|S_r| |S_s|), S_r the problem
    ids of replicate r. 0 when no two share a problem (held-out sets that nest)."""
    sets = [set(p) for p in problems]
    pairs = [(a, b) for i, a in enumerate(sets) for b in sets[i + 1:]]
    if not pairs or problem_var <= 0:
        return 0.0
    return problem_var * float(np.mean([len(a & b) / (len(a) * len(b)) for a, b in pairs]))


def problem_variance(differences: Sequence[np.ndarray], sampling: Sequence[np.ndarray]) -> float:
    """A problem's true difference's variance across problems: per replicate, its
    differences' variance less their mean sampling variance, averaged; at least 0."""
    parts = [float(np.var(d, ddof=1) - np.mean(s)) for d, s in zip(differences, sampling,
                                                                    strict=True)]
    return max(float(np.mean(parts)), 0.0)


def pass_at_k_differences(a, b, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per problem, from a's and b's correct counts of n samples each: a's unbiased pass@k
    minus b's, and unbiased estimates of that difference's sampling variance."""
    ca, cb = np.asarray(a, dtype=int), np.asarray(b, dtype=int)
    miss = _subset_miss(n, k)
    return (miss[cb] - miss[ca],  # (1 - miss_a) - (1 - miss_b)
            sampling_var_estimate(ca, n, n, k) + sampling_var_estimate(cb, n, n, k))


@dataclass(frozen=True)
class NestedSamples:
    """A pilot's pass@k difference a - b measured on each replicate's own problems with n
    samples per problem (`nested_samples`): its parts, and a replicate's variance at another
    sample count (`replicate_var`)."""
    n: int  # the pilot's samples per problem
    k: int
    effects: tuple[float, ...]  # per replicate: the mean over its problems of a - b
    problems: float  # problems per replicate (mean)
    problem_var: float  # a problem's true difference, across problems (sampling removed)
    draw_var: float  # a replicate's true difference, across draws (problems and samples removed)
    counts: tuple[tuple[np.ndarray, np.ndarray], ...]  # per replicate: each arm's correct
    shared: float = 0.0  # the pilot's replicates' covariance from shared problems

    def sampling(self, m: int) -> float:
        """A problem's sampling variance of a - b at m <= n samples, mean over the pilot's
        problems (`sampling_var_estimate`)."""
        return float(np.mean([np.mean(sampling_var_estimate(a, self.n, m, self.k)
                                      + sampling_var_estimate(b, self.n, m, self.k))
                              for a, b in self.counts]))

    def within_var(self, m: int, problems: float | None = None) -> float:
        """The variance of a replicate's mean over its problems, given its draw, at m samples."""
        return (self.problem_var + self.sampling(m)) / (problems or self.problems)

    def replicate_var(self, m: int, problems: float | None = None,
                      conservative: float | None = None) -> float:
        """The variance of a replicate's effect at m samples per problem: the draws' plus
        `within_var`. conservative: the confidence of the two-stage rule's upper bound on the
        pilot's between-replicate mean square (R - 1 df, `planning_variance`), less its
        within-replicate part at the pilot's n, as the draws'."""
        draw = self.draw_var
        if conservative is not None and len(self.effects) > 1:
            ms = planning_variance(float(np.var(self.effects, ddof=1)), len(self.effects) - 1,
                                   conservative)
            draw = max(ms - self.within_var(self.n) + self.shared, 0.0)
        return draw + self.within_var(m, problems)


def nested_samples(counts: Mapping[str, tuple[Sequence[int], Sequence[int]]], n: int,
                   k: int, problems: Mapping[str, Sequence] | None = None) -> NestedSamples:
    """The parts of a pass@k difference from per-problem correct counts ({replicate: (arm a's
    counts, arm b's)} of n samples each, on the replicate's own problems): a problem's
    difference is a's unbiased pass@k minus b's; its variance within a replicate less the
    mean sampling variance (`sampling_var_estimate`) is the problems'; the replicates'
    spread less their mean within-replicate variance is the draws'. Both are floored at 0
    (an estimate below 0 is noise). `problems`: each replicate's problem ids, where their
    sets overlap (int.pool shared): the covariance the shared problems give two replicates
    (`shared_covariance`) is hidden from their spread, so it is added back to the draws'."""
    if not 1 <= k or 2 * k > n:
        raise ValueError(f"need 1 <= k and 2k <= n, got k={k}, n={n}")
    effects, diffs, samp, within, kept, sizes = [], [], [], [], [], []
    for r, (a, b) in counts.items():
        ca, cb = np.asarray(a, dtype=int), np.asarray(b, dtype=int)
        both = np.concatenate([ca, cb])
        if ca.shape != cb.shape or ca.ndim != 1 or ca.size < 2 or (both < 0).any() \
                or (both > n).any():
            raise ValueError(f"replicate {r}: need two equal lists of >= 2 counts in 0..{n}")
        d, s = pass_at_k_differences(ca, cb, n, k)
        effects.append(float(d.mean()))
        diffs.append(d)
        samp.append(s)
        within.append(float(d.var(ddof=1)) / d.size)
        kept.append((ca, cb))
        sizes.append(d.size)
    if not effects:
        raise ValueError("no replicates")
    problem_var = problem_variance(diffs, samp)
    shared = shared_covariance(problem_var, [problems[r] for r in counts]) if problems else 0.0
    draw = (float(np.var(effects, ddof=1)) - float(np.mean(within)) + shared
            if len(effects) > 1 else 0.0)
    return NestedSamples(n, k, tuple(effects), float(np.mean(sizes)), problem_var,
                         max(draw, 0.0), tuple(kept), shared)
