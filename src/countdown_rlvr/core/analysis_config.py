"""`compare` and `report`: the paired tests and the report (the rules: core.config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from .config import RATE, Flag, Ks, Pos, Seed, Splits, name, name_pairs, number, optional, per_chain


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
