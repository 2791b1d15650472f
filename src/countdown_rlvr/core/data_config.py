"""The fixed inputs' sections: `problems`, `traces`, `teacher_traces`, `dedup` and `pairs`
(the rules: core.config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from .config import (
    Count,
    Flag,
    HeldOut,
    MaybePos,
    Operands,
    Pos,
    PosShare,
    Sampler,
    Seed,
    Share,
    Styles,
    choice,
    failure_mix,
    int_range,
    list_of,
    per_source_cap,
)


@dataclass(frozen=True)
class Problems:
    """`problems`: the train / test / OOD problem files."""
    seed: Seed  # generation seed
    n_train: Pos  # train pool size
    count_train_solutions: Count  # first N train problems get their solutions counted
    n_test: Pos  # held-out evaluation problems
    n_ood: Count  # out-of-distribution problems
    n_unseen: Count  # problems no stage trains on (the interventions' pool)
    n_numbers: Operands  # operand counts, cycled
    number_range: Annotated[list[int], int_range(1)]  # [low, high] of each number
    target_range: Annotated[list[int], int_range(0)]  # [low, high] of in-distribution targets
    ood_n_numbers: Operands  # operand counts of the OOD split
    ood_target_range: Annotated[list[int], int_range(0)]  # [low, high] of OOD targets


@dataclass(frozen=True)
class Traces:
    """`traces`: solver step traces and repair-format examples of the train problems."""
    seed: Seed  # style rotation and solution choice
    n_problems: MaybePos  # first N train problems (null = all)
    per_problem: Pos  # traces per problem
    solutions: Annotated[str, choice("construction", "solver")]  # construction | solver
    styles: Styles  # trace styles, cycled across problems
    repair_frac: Share  # share of problems that also get a repair-format example
    repair_mix: Annotated[dict[str, float], failure_mix]  # failure type -> share of made attempts


@dataclass(frozen=True)
class TeacherTraces:
    """`teacher_traces`: verification-gated teacher samples under rotated strategy hints."""
    n_problems: MaybePos  # first N train problems
    k: Pos  # samples per problem, split evenly across the strategies
    strategies: Styles  # strategy hints, rotated
    seed: Seed  # sampling seed (+ strategy index)
    batch_size: Pos  # sequences per generate call
    sampler: Sampler  # the teacher's sampler

    def __post_init__(self):
        if self.k % len(self.strategies):
            raise ValueError(f"teacher_traces.k ({self.k}) must be a multiple of the number of "
                             f"strategies ({len(self.strategies)})")


@dataclass(frozen=True)
class Dedup:
    """`dedup`: MiniLM + FAISS near-duplicate removal, then the train / validation split."""
    # data/traces/<source>.jsonl files pooled
    sources: Annotated[list[str], list_of(choice("solver", "teacher", "repair"), unique=True)]
    threshold: PosShare  # cosine at or above which a trace is a duplicate
    per_problem: Flag  # compare only traces of the same (problem, prompt)
    val_frac: HeldOut  # validation share
    seed: Seed  # split seed


@dataclass(frozen=True)
class Pairs:
    """`pairs`: preference pairs per source."""
    seed: Seed  # pair choice and the base model's sampling seed
    n_problems: MaybePos  # first N train problems
    per_problem: Pos  # pairs per problem and source
    max_per_source: Annotated[int | str | None, per_source_cap]  # cap per source (null = none)
    base_k: Pos  # base-model samples per problem (the `base` source)
    base_sampler: Sampler  # the base model's sampler
    batch_size: Pos  # sequences per generate call of the base model's sampling
