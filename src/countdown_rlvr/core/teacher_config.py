"""`teacher`: the model behind teacher traces and OPD (the rules: core.config). Its own module
because its RL phase (`teacher.rl`) is checked as RL keys: the base stage, which shares the
pre-training recipe, does not import the RL rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from .config import Block, Flag, Preset, Seed, Share, choice, text
from .rl_config import RLRun
from .train_config import Supervised


@dataclass(frozen=True)
class Teacher(Supervised):
    """`teacher`: the model behind teacher traces and OPD."""
    base: Annotated[str, text]  # tiny = train a tiny model | hub id | model dir (passed through)
    # where the tiny teacher starts before its trace training: pretrain = tiny_preset from
    # init_seed, pre-trained by the `base:` section's recipe (its own base, so it can beat the
    # student) | base = the student's pre-trained base (a peer) | scratch = random weights
    init: Annotated[str, choice("pretrain", "base", "scratch")]
    tiny_preset: Preset  # model.TINY_PRESETS entry for init: pretrain / scratch
    init_seed: Seed  # weight initialisation (pretrain / scratch)
    hint_frac: Share  # share of prompts with a `Strategy:` hint
    pack: Flag  # as SFT.pack
    # RLOO on the tiny teacher after its trace training, every key its own (no `rloo` key is
    # inherited, so no `-S rloo.*` variant re-trains the teacher); null = no RL phase. A
    # passed-through teacher (base: a hub id or dir) is used as it is, without one
    rl: Annotated[dict[str, Any] | None, Block(RLRun)]

