"""The verdict test for an effect measured on one shared set of problems in every replicate.

Every replicate evaluates its policies on the same test problems. A problem on which policy A
happens to beat B (a per-problem effect) does so in every replicate, so the spread between
replicates cannot see it: a t-test across replicates answers "would these 400 problems show
the effect again under another training draw?", not "does the effect hold on problems of
this kind?", and rejects too often for the second question when per-problem effects are large
(tests/test_stats.py simulates it). The per-problem, per-replicate differences d[i, r]
(problem i, replicate r) follow a crossed random-effects model

    d[i, r] = mu + a[i] + b[r] + e[i, r]     problems a ~ (0, s_a²), draws b ~ (0, s_b²),
                                             their interaction and sampling noise e ~ (0, s_e²)

whose grand mean has variance s_a²/I + s_b²/R + s_e²/(IR). The two-way ANOVA's mean squares
estimate it without bias: (MS_problem + MS_replicate − MS_residual) / (IR), as E[MS_problem] =
s_e² + R s_a², E[MS_replicate] = s_e² + I s_b², E[MS_residual] = s_e². The test is a t-test
on that standard error with Satterthwaite's degrees of freedom, and its power comes from the
same model: more replicates shrink s_b²/R and s_e²/(IR) but never s_a²/I, which only more
problems shrink.

The floor (as `floored_t_test`'s): with three replicates MS_replicate rests on two degrees of
freedom and can come out far below what sampling noise alone gives; its expectation is at
least MS_residual's, so it is floored there.

What the model still conditions on: the upstream draws every replicate shares (problems'
generator seed aside: the base model, the teacher, its traces and the pairs). One draw of
each cannot show their variance; the claims are about training given those inputs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as t_dist

from .power import ALTERNATIVES, t_test_power


@dataclass(frozen=True)
class CrossedTest:
    """The crossed-model test of the grand mean of d[i, r] against `null`."""
    n_problems: int  # I
    n: int  # R, replicates
    mean: float  # grand mean
    ms_problem: float | None  # MS of problems, replicates pooled (None: one replicate)
    ms_replicate: float | None  # MS of replicates, as observed (before the floor)
    ms_residual: float | None  # MS of the problem x replicate residual
    se: float | None  # standard error of the mean (None: one replicate, or no variation)
    df: float | None  # Satterthwaite degrees of freedom
    ci_low: float | None
    ci_high: float | None
    pvalue: float | None  # None: not testable
    null: float = 0.0
    alternative: str = "two-sided"

    @property
    def floored(self) -> bool:
        """MS_replicate came out below MS_residual, and the floor set it."""
        return (self.ms_replicate is not None and self.ms_residual is not None
                and self.ms_replicate < self.ms_residual)

    def components(self) -> tuple[float, float, float] | None:
        """Estimated (s_a², s_b², s_e²), each >= 0, for planning; None with one replicate."""
        if self.ms_problem is None or self.ms_replicate is None or self.ms_residual is None:
            return None
        ms_r = max(self.ms_replicate, self.ms_residual)
        return (max(0.0, (self.ms_problem - self.ms_residual) / self.n),
                max(0.0, (ms_r - self.ms_residual) / self.n_problems), self.ms_residual)

    @property
    def sd(self) -> float | None:
        """The per-replicate SD this standard error amounts to (se x sqrt(R)), the number a
        t-test across replicates would have used: shown beside the observed spread."""
        return None if self.se is None else self.se * math.sqrt(self.n)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def mean_squares(d: np.ndarray) -> tuple[float, float, float, float]:
    """(grand mean, MS_problem, MS_replicate, MS_residual) of an I x R matrix (I, R >= 2)."""
    n_i, n_r = d.shape
    grand = float(d.mean())
    rows, cols = d.mean(axis=1), d.mean(axis=0)
    ms_p = n_r * float(((rows - grand) ** 2).sum()) / (n_i - 1)
    ms_r = n_i * float(((cols - grand) ** 2).sum()) / (n_r - 1)
    resid = d - rows[:, None] - cols[None, :] + grand
    ms_e = float((resid ** 2).sum()) / ((n_i - 1) * (n_r - 1))
    return grand, ms_p, ms_r, ms_e


def se_df(ms_p: float, ms_r: float, ms_e: float, n_problems: int, n_replicates: int
          ) -> tuple[float, float | None]:
    """Standard error of the grand mean (MS_replicate floored at MS_residual) and its
    Satterthwaite degrees of freedom (None when the variance is 0)."""
    n_i, n_r = n_problems, n_replicates
    ms_r = max(ms_r, ms_e)
    var = (ms_p + ms_r - ms_e) / (n_i * n_r)
    if var <= 0:
        return 0.0, None
    den = (ms_p ** 2 / (n_i - 1) + ms_r ** 2 / (n_r - 1) + ms_e ** 2 / ((n_i - 1) * (n_r - 1)))
    return math.sqrt(var), (ms_p + ms_r - ms_e) ** 2 / den


def crossed_test(d, null: float = 0.0, alternative: str = "two-sided",
                 alpha: float = 0.05) -> CrossedTest:
    """The test of an I x R matrix of per-problem, per-replicate effects (rows: the same
    problems in every replicate). One replicate: no test (the unit of the training draw is
    the replicate). No variation at all: p 1.0 when the mean is the null, else no test."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    x = np.asarray(d, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1 or not np.isfinite(x).all():
        raise ValueError("d must be a finite problems x replicates matrix with at least two "
                         f"problems, got shape {x.shape}")
    n_i, n_r = x.shape
    if n_r == 1:
        return CrossedTest(n_i, 1, float(x.mean()), None, None, None, None, None, None, None,
                           None, null, alternative)
    mean, ms_p, ms_r, ms_e = mean_squares(x)
    return from_mean_squares(mean, ms_p, ms_r, ms_e, n_i, n_r, null, alternative, alpha)


def from_mean_squares(mean: float, ms_p: float, ms_r: float, ms_e: float, n_problems: int,
                      n_replicates: int, null: float = 0.0, alternative: str = "two-sided",
                      alpha: float = 0.05) -> CrossedTest:
    """The test from a stored summary (compare.json keeps the mean squares, not the matrix)."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    se, df = se_df(ms_p, ms_r, ms_e, n_problems, n_replicates)
    args = (n_problems, n_replicates, mean, ms_p, ms_r, ms_e)
    if df is None:  # no variation anywhere
        p = 1.0 if abs(mean - null) <= 1e-12 else None
        return CrossedTest(*args, 0.0, None, mean, mean, p, null, alternative)
    t = (mean - null) / se
    p = {"two-sided": 2 * t_dist.sf(abs(t), df), "greater": t_dist.sf(t, df),
         "less": t_dist.cdf(t, df)}[alternative]
    half = float(t_dist.ppf(1 - alpha / 2, df)) * se
    return CrossedTest(*args, se, df, mean - half, mean + half, float(min(p, 1.0)), null,
                       alternative)


def crossed_power(effect: float, components: tuple[float, float, float], n_problems: int,
                  n_replicates: int, alpha: float = 0.05, alternative: str = "two-sided"
                  ) -> float:
    """Power of `crossed_test` at a true mean `effect` (distance from the null) with variance
    components (s_a², s_b², s_e²), I problems and R replicates: the t-test with the model's
    expected mean squares (the floor does not bind in expectation) and their Satterthwaite
    degrees of freedom."""
    if n_replicates < 2 or n_problems < 2:
        raise ValueError(f"need >= 2 problems and replicates, got {n_problems}, {n_replicates}")
    v_a, v_b, v_e = components
    if min(components) < 0:
        raise ValueError(f"variance components must be >= 0, got {components}")
    ms_p, ms_r = v_e + n_replicates * v_a, v_e + n_problems * v_b
    se, df = se_df(ms_p, ms_r, v_e, n_problems, n_replicates)
    if df is None:
        raise ValueError("all variance components are 0: power is 1 for any effect")
    return t_test_power(effect / se, df, alpha, alternative)


def crossed_replicates_needed(effect: float, components: tuple[float, float, float],
                              n_problems: int, alpha: float = 0.05, power: float = 0.8,
                              alternative: str = "two-sided", max_n: int = 100) -> int | None:
    """The smallest R >= 2 with `power` at `effect` on the same I problems; None when even
    max_n replicates do not reach it: s_a²/I, which replicates never shrink, may alone keep
    the effect out of reach (then more test problems, not replicates, would decide it)."""
    if effect == 0 or (alternative == "greater" and effect < 0) or \
            (alternative == "less" and effect > 0):
        return None
    for n in range(2, max_n + 1):
        if crossed_power(effect, components, n_problems, n, alpha, alternative) >= power:
            return n
    return None
