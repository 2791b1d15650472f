"""The training keys every trainer shares (Optim, Supervised, Adapter: the base classes of
every training section) and the `sft` section (SFT, also `int.sft` and the base of `distill`).
The rules of params.yaml's sections: see core.config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from .config import (
    Flag,
    MaybePos,
    MaybeRate,
    Pos,
    Rate,
    Seed,
    Share,
    Weight,
    choice,
    list_of,
    number,
    text,
)

# a learning rate above 1 can only be a typo (1e9 for 1e-9): AdamW moves every weight by about
# lr a step, so the run turns to nan within steps, and the params check passed it
LearningRate = Annotated[float, number(0, strict=True, hi=1)]


def modules(v: Any) -> str | None:
    return None if text(v) is None or list_of(text)(v) is None else \
        "a module name pattern such as all-linear, or a list of module names"


@dataclass(frozen=True)
class Adapter:
    """How a stage trains its init policy (`model.apply_adapter`)."""
    adapter: Annotated[str, choice("full", "lora", "dora")]  # lora | dora | full
    lora_r: Pos  # LoRA rank (lora / dora only)
    lora_alpha: Rate  # LoRA scale numerator: the update is scaled by alpha / r
    lora_dropout: Annotated[float, number(0, hi=0.99)]  # dropout on the LoRA input
    target_modules: Annotated[str | list[str], modules]  # peft targets; all-linear: all but head


@dataclass(frozen=True)
class Optim:
    """The optimizer keys every training loop reads."""
    seed: Seed  # init of new weights, dropout, data order / sampling seeds
    lr: LearningRate  # peak AdamW learning rate (> 0 and <= 1)
    weight_decay: Weight  # AdamW decay, on matrices only (not norms / biases)
    grad_clip: MaybeRate  # global gradient-norm clip (null = off)
    log_every: Pos  # steps between console lines (dvclive gets every step)


@dataclass(frozen=True)
class Supervised(Optim):
    """The keys of a supervised loop over a fixed data set (train_sft, train_ipo)."""
    batch_size: Pos  # global sequences (pairs) per optimizer step, split across processes
    max_len: Pos  # tokens per sequence; longer ones are cut
    epochs: MaybeRate  # passes over the data; max_steps caps it when both are given
    max_steps: MaybePos  # optimizer steps
    warmup_frac: Share  # share of the steps with linear LR warm-up
    schedule: Annotated[str, choice("cosine", "linear", "constant")]  # LR after warm-up
    time_budget_s: MaybeRate  # wall-clock cap: stop after the step that crosses it

    def __post_init__(self):
        if self.epochs is None and self.max_steps is None:
            raise ValueError("set `epochs` or `max_steps`: both are null (with both set, "
                             "max_steps caps the epochs)")


@dataclass(frozen=True)
class SFT(Supervised, Adapter):
    """An SFT section (`sft`, `int.sft`): train_sft keys and the adapter."""
    pack: Flag  # concatenate examples into max_len blocks (no padding; pre-training)


@dataclass(frozen=True)
class SFTStage(SFT):
    """The `sft` section: an SFT section plus the early checkpoint the sft stage saves."""
    early_step: MaybePos  # the step whose policy is saved as sft_early (null = none)

    def __post_init__(self):
        super().__post_init__()
        if self.early_step is not None and self.max_steps is not None \
                and self.early_step > self.max_steps:
            raise ValueError(f"sft.early_step ({self.early_step}) is past sft.max_steps "
                             f"({self.max_steps}): the run never reaches it; lower it, or set "
                             "it to null (no early checkpoint)")
