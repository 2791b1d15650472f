"""`base`: the student's pre-trained base, trained once before any policy (the rules:
core.config); `teacher` (core.teacher_config) pre-trains by its recipe too.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import Flag, Pos, Share
from .train_config import Supervised


@dataclass(frozen=True)
class Base(Supervised):
    """`base`: pre-training of the tiny base on a synthetic arithmetic corpus."""
    corpus_size: Pos  # synthetic arithmetic documents
    facts_frac: Share  # share of "a op b = c" fact lists
    pack: Flag  # as SFT.pack
