"""The repair chain's and the diagnosis' sections: `diagnose`, `repair` and `distill` (the
rules: core.config).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import MaybeNames, MaybePos, Names, Pos, Seed
from .train_config import SFT


@dataclass(frozen=True)
class Diagnose:
    """`diagnose`: zero-signal diagnosis of the SFT policy, from its evaluation samples."""
    k: Pos  # the group size K: each prompt's evaluation samples cut into groups of K

    def __post_init__(self):
        if self.k < 2:
            raise ValueError(f"diagnose.k must be >= 2 (a group needs two samples for any "
                             f"contrast), got {self.k}")


@dataclass(frozen=True)
class Repair:
    """`repair`: feedback-conditioned repair of failed attempts."""
    n_problems: MaybePos  # attempt pool: the last N train problems (null = all)
    select_k: Pos  # attempt pool: samples per pool problem; the failed ones are the attempts
    n_attempts: Pos  # failed attempts repaired
    k: Pos  # repair samples per attempt and condition
    seed: Seed  # attempt choice, Fshuf derangement, sampling seed (the pool: a stream of it)
    conditions: Names  # F0 .. F4, Fshuf, R
    batch_size: Pos  # sequences per generate call


@dataclass(frozen=True)
class Distill(SFT):
    """`distill`: no-feedback SFT on each repair condition's successes."""
    conditions: Names  # one `distill@<cond>-<seed>` stage per replicate seed each
    first_replicate_conditions: MaybeNames  # one `distill_first@<cond>-<seed>`, first seed only
    skill_problems: Pos  # at most this many problems of the distilled repairs for the skill check
    skill_samples: Pos  # no-feedback samples per skill problem, SFT and distilled policy each

    def all_conditions(self) -> list[str]:
        return [*self.conditions, *self.first_replicate_conditions]
