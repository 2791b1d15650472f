"""Pre-training of a tiny model on the synthetic arithmetic corpus (model.policy.pretraining_corpus),
the one recipe the `base` stage (the student's base) and the `teacher` stage (`teacher.init:
pretrain`, the larger teacher preset's own base) share: both read it from the `base:` section.

All parameters are trained, every token of a document is a target (an empty prompt), with the
supervised loop of train_sft.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.pretrain_config import Base
from ..model.policy import pretraining_corpus
from . import runtime
from .sft import run_summary, sft_metrics, train_sft


def pretraining_examples(cfg: Base) -> list[tuple[str, str]]:
    """cfg's corpus as (prompt, completion) pairs: an empty prompt (one EOS token, the
    document separator) and the whole document as the completion."""
    docs = pretraining_corpus(cfg.corpus_size, seed=cfg.seed, facts_frac=cfg.facts_frac)
    return [("", d) for d in docs]


def pretrain(model, tok, cfg: Base, live=None, stats: dict[str, Any] | None = None):
    """`model` (all parameters) trained on cfg's corpus with cfg's loop keys (lr, max_steps,
    batch_size, max_len, pack, ...); returns the trained model. live / stats: as train_sft
    (live None: progress on the console only)."""
    return train_sft(model, tok, pretraining_examples(cfg), cfg, live, stats, section="base")


def fit_pretrain(stage: str, model, tok, cfg: Base, out_dir: str | Path,
                 extra_metrics: dict[str, Any] | None = None):
    """`pretrain` as a stage's whole run (the base stage): dvclive/<stage> curves, the model
    saved to `out_dir`, its details and timing."""
    return runtime.fit_and_save(stage, tok, out_dir,
                                lambda live, stats: pretrain(model, tok, cfg, live, stats),
                                sft_metrics(extra_metrics), config=cfg)[0]


def pretrain_summary(stats: dict[str, Any]) -> dict[str, Any]:
    """What a stage's details record of a pre-training run it does not save on its own (the
    teacher's): documents, steps and losses. Its seconds go to the stage's timing."""
    return {"corpus_docs": stats["examples"], **run_summary(stats)}
