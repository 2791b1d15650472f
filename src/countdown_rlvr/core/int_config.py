"""`int`: interventional training with the solver as the oracle (the rules: core.config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from .config import Block, Count, Flag, Pos, Seed, Weight, choice, number
from .rl_config import RL
from .train_config import SFT


@dataclass(frozen=True)
class Interventions:
    """`int`: interventional training with the solver as the oracle."""
    n_problems: Pos  # unseen problems sampled to find unsolved ones
    pool: Annotated[str, choice("shared", "own")]  # the first N for all | replicate j's j-th N
    select_k: Pos  # samples per problem that must all fail for it to count as unsolved
    k: Pos  # pass@K of every arm on the unsolved problems
    claim_samples: Count  # samples per held-out problem of the claim's two arms; 0 = off
    seed: Seed  # sampling seed of the K samples and the continuations
    eval_seed: Seed  # pass@K seed on the unsolved set
    heldout_frac: Annotated[float, number(0, hi=0.9)]  # share of the unsolved never trained on
    traces_per_problem: Pos  # failed traces per unsolved problem intervened on
    n_continuations: Pos  # continuations sampled per intervention
    filter: Flag  # keep only interventions with a verified continuation
    replay: Weight  # SFT examples mixed into the patch and the solver baseline, per example
    rl_problems: Annotated[str, choice("unsolved", "all")]  # unsolved | all
    batch_size: Pos  # sequences per generate call
    sft: SFT  # the patch and the solver-solution baseline
    # overrides of `rloo` for the RL arms (built with inherit="rloo"), checked as RL keys
    rloo: Annotated[dict[str, Any], Block(RL)]

    def __post_init__(self):
        if self.eval_seed == self.seed:
            raise ValueError(f"int.eval_seed must differ from int.seed (both {self.seed}): on "
                             "the selection seed the SFT policy fails every unsolved problem by "
                             "construction")
        if self.claim_samples and self.claim_samples < 2 * self.k:
            raise ValueError(f"int.claim_samples must be 0 (off) or at least 2 x int.k = "
                             f"{2 * self.k} (got {self.claim_samples}): the unbiased pass@K and "
                             "its variance need 2K samples")
