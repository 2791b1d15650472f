"""The fixed inputs' sections: `problems`, `traces`, `teacher_traces`, `dedup` and `pairs`
(the rules: core.config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from .config import (
    POS,
    Count,
    Flag,
    HeldOut,
    MaybePos,
    Pos,
    PosShare,
    Rule,
    Sampler,
    Seed,
    Share,
    Styles,
    choice,
    integer,
    is_int,
    is_number,
    list_of,
)

# operands per problem: task.solve.MAX_NUMBERS, the exhaustive solver's limit (a copy, so
# that reading params imports no task code; tests/test_config.py checks they agree)
MAX_NUMBERS = 6


def int_range(lo: int = 0) -> Rule:
    return lambda v: None if isinstance(v, list) and len(v) == 2 and all(
        is_int(x) and x >= lo for x in v) and v[0] <= v[1] else f"[low, high] integers >= {lo}"


# a copy of repair_data.FAILURE_ORDER (tests/test_config.py checks they agree)
FAILURE_TYPES = ("WRONG_TARGET", "NUMBER_REUSED", "NUMBER_UNKNOWN", "NUMBER_OMITTED",
                 "PARSE_FAIL", "FORMAT_MISSING", "DIV_BY_ZERO")


def failure_mix(v: Any) -> str | None:
    ok = isinstance(v, dict) and v and set(v) <= set(FAILURE_TYPES) and all(
        is_number(x) and x >= 0 for x in v.values()) and abs(sum(v.values()) - 1) < 1e-6
    return None if ok else f"a mapping of failure types ({', '.join(FAILURE_TYPES)}) to " \
        "shares >= 0 that sum to 1"


def per_source_cap(v: Any) -> str | None:
    return None if v is None or v == "min" or POS(v) is None else \
        "a positive integer, min (the smallest source's count) or null"


Operands = Annotated[list[int], list_of(integer(2, MAX_NUMBERS))]  # operand counts


@dataclass(frozen=True)
class Problems:
    """`problems`: the train / dev / test / OOD / unseen problem files."""
    seed: Seed  # generation seed of every split but dev and test
    dev_seed: Seed  # the development split's: the previous confirmatory run's test split
    test_seed: Seed  # the confirmatory test split's seed, never read by any pilot
    n_train: Pos  # train pool size
    count_train_solutions: Count  # first N train problems get their solutions counted
    n_dev: Pos  # development problems (pilots, tuning): the previous run's n_test
    n_test: Pos  # held-out evaluation problems (confirmatory)
    n_ood: Count  # out-of-distribution problems
    n_unseen: Count  # problems no stage trains on (the interventions' pool)
    n_numbers: Operands  # operand counts, cycled
    number_range: Annotated[list[int], int_range(1)]  # [low, high] of each number
    target_range: Annotated[list[int], int_range(0)]  # [low, high] of in-distribution targets
    ood_n_numbers: Operands  # operand counts of the OOD split
    ood_target_range: Annotated[list[int], int_range(0)]  # [low, high] of OOD targets

    def __post_init__(self):
        # each seed's "test" stream is one split: a shared seed would draw the test split from
        # the problems the pilots read (every one of dev's, then the ones after them)
        seeds = {"seed": self.seed, "dev_seed": self.dev_seed, "test_seed": self.test_seed}
        for a, b in (("seed", "test_seed"), ("dev_seed", "test_seed"), ("seed", "dev_seed")):
            if seeds[a] == seeds[b]:
                raise ValueError(
                    f"problems.{b} must differ from problems.{a} (both {seeds[a]}): the "
                    "confirmatory test split is drawn from a seed no pilot has read, the dev "
                    "split from the previous run's; set test_seed to a value never used before")


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
