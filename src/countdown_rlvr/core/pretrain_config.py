"""`base` and `teacher`: the models trained once, before any policy (the rules: core.config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from .config import Flag, Pos, Preset, Seed, Share, choice, text
from .train_config import Supervised


@dataclass(frozen=True)
class Base(Supervised):
    """`base`: pre-training of the tiny base on a synthetic arithmetic corpus."""
    corpus_size: Pos  # synthetic arithmetic documents
    facts_frac: Share  # share of "a op b = c" fact lists
    pack: Flag  # as SFT.pack


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
