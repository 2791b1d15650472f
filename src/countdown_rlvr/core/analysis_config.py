"""`compare` and `report`: the paired tests and the report (the rules: core.config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from .config import CHAINS, RATE, Flag, Ks, Pos, Rule, Seed, Splits, name, number, optional


def name_pairs(v: Any) -> str | None:
    ok = isinstance(v, list) and all(
        isinstance(p, list) and len(p) == 2 and not any(name(x) for x in p) for p in v)
    # [a, b] twice (or as [b, a]) is the same test twice: one of them is a typo for another pair
    ok = ok and len({frozenset(p) for p in v}) == len(v)
    return None if ok else \
        "a list of [a, b] pairs of policy names, no pair twice (in either order)"


def per_chain(rule: Rule) -> Rule:
    """A mapping with one value per chain (CHAINS), each passing `rule`."""
    def check(v: Any) -> str | None:
        ok = isinstance(v, dict) and set(v) == set(CHAINS) and not any(rule(x) for x in v.values())
        return None if ok else f"a mapping of every chain ({', '.join(CHAINS)}) to " \
            f"{rule(object())}"
    return check


@dataclass(frozen=True)
class Compare:
    """`compare`: paired tests between policies on the same problems."""
    pairs: Annotated[list[list[str]] | None, name_pairs]  # [a, b] policy pairs
    ks: Ks  # paired outcome: solved within the first k samples
    seed: Seed  # the sampling seed whose samples are paired
    splits: Splits  # splits compared
    exact: Flag  # McNemar: exact binomial | continuity-corrected chi-square
    n_boot: Pos  # bootstrap resamples
    alpha: Annotated[float, number(0, True, 0.5)]  # 1 - interval coverage
    boot_seed: Seed  # bootstrap seed


@dataclass(frozen=True)
class Report:
    """`report`: reports/report.md and the figures."""
    require_all: Flag  # fail on missing metrics files (false: "not run" rows)
    reference: Annotated[str, name]  # policy every table row is tested against
    best_of_n_policy: Annotated[str | None, optional(name)]  # S4 Table 2's; null = best pass@1
    dpi: Pos  # figure resolution
    # CPU minutes one more replicate of each chain costs (its stages and its evaluations)
    chain_minutes: Annotated[dict[str, float], per_chain(RATE)]
