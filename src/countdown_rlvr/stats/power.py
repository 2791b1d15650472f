"""The power of a t-test: the noncentral t beyond the critical value, with no NaN path."""

from __future__ import annotations

import math

from scipy.stats import nct
from scipy.stats import t as t_dist

ALTERNATIVES = ("two-sided", "greater", "less")


def upper_tail(x: float, df: float, nc: float) -> float:
    """P(T > x) for T noncentral t(df, nc). Some scipy versions return NaN where the tail is
    negligible (e.g. nct.cdf far below the noncentrality); there the mass lies all on one side
    of x, so the tail is 0 or 1 to double precision, and the answer does not depend on the
    scipy version (tests/test_stats.py replays that behaviour)."""
    p = float(nct.sf(x, df, nc))
    if not math.isfinite(p):
        return 1.0 if nc > x else 0.0
    return min(max(p, 0.0), 1.0)


def t_test_power(nc: float, df: float, alpha: float = 0.05,
                 alternative: str = "two-sided") -> float:
    """Power of a t-test with `df` degrees of freedom whose statistic has noncentrality `nc`
    (true effect / standard error): both tails when two-sided (the lower one as the upper
    tail of -T), the upper tail for "greater", the lower one for "less"."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    if alternative == "two-sided":
        crit = float(t_dist.ppf(1 - alpha / 2, df))
        return min(upper_tail(crit, df, nc) + upper_tail(crit, df, -nc), 1.0)
    nc = nc if alternative == "greater" else -nc
    return upper_tail(float(t_dist.ppf(1 - alpha, df)), df, nc)
