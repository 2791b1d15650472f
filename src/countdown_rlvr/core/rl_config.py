"""`rloo` and `opd`, their arms' sections and `int.rloo`: the on-policy RL keys (the rules:
core.config). Only the RL stages (rloo, opd and their arms, int) and the params check import
this, so a change here re-runs those and no other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from .config import (
    Flag,
    MaybePos,
    Pos,
    PosShare,
    Rate,
    Reward,
    Sampler,
    Share,
    Weight,
    choice,
    integer,
    optional,
)
from .train_config import Adapter, Optim

# the policies an RL arm may start from (`init`: data/models/<init>/r<seed>, also its frozen
# KL reference) -> the chain that trains them: the arm's replicate seed must be among its seeds
INITS = {"sft": "sft", "sft_early": "sft", "rloo": "rloo"}


@dataclass(frozen=True)
class RLRun(Optim, Adapter):
    """An RLOO run's keys without a starting policy: train_rloo's keys, the prompt pool and
    the adapter. `teacher.rl` is one, complete in itself: the teacher's RL phase starts from
    its own trace-trained policy and inherits no `rloo` key, so a `-S rloo.*` variant never
    re-trains the teacher (and with it the SFT data, SFT and every arm)."""
    reward: Reward  # binary | format | shaped (task.REWARDS)
    steps: Pos  # optimizer steps (one batch of rollouts each, times ppo_epochs)
    group_size: Annotated[int, integer(2)]  # rollouts per prompt (G)
    prompts_per_step: Pos  # prompts per step, split across processes
    kl_coef: Weight  # k3 KL to the reference policy; 0 = no reference forward
    is_clip: Rate  # clip of the per-rollout importance weight pi / mu
    entropy_coef: Weight  # entropy bonus
    loss_agg: Annotated[str, choice("sum", "mean")]  # sequence log-prob (S4 eq. 3) | per token
    rl_coef: Weight  # lambda_RL: weight of the policy-gradient term
    ppo_epochs: Pos  # updates per batch of rollouts (> 1 makes the IS weight matter)
    micro_batch: MaybePos  # sequences per forward/backward; null = all
    zero_std_keep: PosShare  # share of zero-std groups in the update, weighted 1 / keep; 1 = all
    curriculum: Flag  # S1 Alg. 1: success-gated tiers of (operand count, target bin)
    curriculum_target_bins: Pos  # target-magnitude bins per operand count
    curriculum_window: Pos  # steps of rollout accuracy averaged before a tier unlocks
    curriculum_threshold: Share  # windowed pass rate that unlocks the next tier
    curriculum_deadline: MaybePos  # a tier unlocks at the latest after this many steps
    n_problems: MaybePos  # prompt pool: the first N train problems (null = all)
    gen_batch_size: Pos  # sequences per generate call (speed and memory only)
    sampler: Sampler  # the rollout sampler


@dataclass(frozen=True)
class _Init(Optim, Adapter):
    init: Annotated[str, choice(*INITS)]  # the policy the arm starts from (and its KL
    # reference): data/models/<init>/r<seed> of the arm's replicate seed


@dataclass(frozen=True)
class RL(RLRun, _Init):
    """`rloo` (and `int.rloo` over it): an RLOO run from a trained policy of the arm's seed.
    `init` comes in through _Init so that the fields keep their order (init before reward):
    the model card of every RL policy lists its config in field order."""


@dataclass(frozen=True)
class OPD(RL):
    """`opd` and its arms: RL keys plus the teacher's (on-policy distillation)."""
    distill_coef: Weight  # lambda_KL: weight of the forward KL to the teacher
    distill_temperature: Rate  # T: both distributions softened by 1/T
    teacher_strategy: Annotated[str | None, optional(choice("direct", "search"))]  # null: no hint
