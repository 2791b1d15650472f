"""Supervised training on (prompt, completion) pairs: one loop for base pre-training, the teacher,
the SFT policy, distill and InT's patch (S4 eq. 1: next-token loss on completion tokens only).

The machinery (accelerate, seeded shuffle, AdamW, schedule, stop rule, log) is runtime.py's.
Deterministic on CPU for a fixed seed and process count: seeded init/dropout and a seeded
shuffle are the only randomness.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import torch

from ..core.train_config import SFT
from ..model.policy import n_parameters, render_prompts, save_policy_dir
from . import runtime
from .losses import completion_nll


# --------------------------------------------------------------------------- data
def encode(tokenizer, prompt: str, completion: str, end: bool = True) -> tuple[list[int], int]:
    """(input ids, number of prompt tokens) for prompt + completion + EOS.

    Prompt and completion are tokenized separately, exactly as the model sees them at
    sampling time (prompt tokenized alone, completion generated after it), so BPE merges
    never straddle the boundary. An empty prompt (pre-training) becomes one EOS token, the
    document separator, so that the first real token is predicted too. end=False: a partial
    completion the model must go on from (no EOS target), e.g. InT's prefix + intervention.
    """
    eos = tokenizer.eos_token_id
    prompt_ids = tokenizer(render_prompts(tokenizer, [prompt])[0]).input_ids if prompt else [eos]
    tail = [eos] if end else []
    return prompt_ids + tokenizer(completion, add_special_tokens=False).input_ids + tail, \
        len(prompt_ids)


def example_row(tokenizer, prompt: str, completion: str, max_len: int | None = None,
                end: bool = True) -> tuple[list[int], list[int]]:
    """(input ids, completion mask) of one example, cut at max_len (None: uncut)."""
    ids, n_prompt = encode(tokenizer, prompt, completion, end)
    return ids[:max_len], ([0] * n_prompt + [1] * (len(ids) - n_prompt))[:max_len]


def collate(rows: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad (ids, completion mask) rows to the longest one; padding is masked out."""
    T = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), T), dtype=torch.long)
    completion_mask = torch.zeros((len(rows), T), dtype=torch.long)
    for i, (ids, mask) in enumerate(rows):
        input_ids[i, :len(ids)] = torch.tensor(ids)
        attention_mask[i, :len(ids)] = 1
        completion_mask[i, :len(ids)] = torch.tensor(mask)
    return {"input_ids": input_ids, "attention_mask": attention_mask,
            "completion_mask": completion_mask}


# --------------------------------------------------------------------------- training
CURVES = ("loss", "token_acc", "lr", "grad_norm")  # dvclive train/<name>, every step


def sft_rows(tokenizer, examples: list[tuple], cfg: SFT) -> tuple[list, int]:
    """(rows of (ids, completion mask), examples cut at max_len): packed into max_len blocks
    with cfg.pack; rows without a token to predict are dropped. An optional third element
    False of an example is a partial completion (no EOS)."""
    L = cfg.max_len
    rows = [example_row(tokenizer, ex[0], ex[1], end=ex[2] if len(ex) > 2 else True)
            for ex in examples]
    n_cut = 0 if cfg.pack else sum(len(ids) > L for ids, _ in rows)
    if cfg.pack:  # one token stream cut into full blocks: no compute spent on padding
        ids = list(itertools.chain.from_iterable(r[0] for r in rows))
        mask = list(itertools.chain.from_iterable(r[1] for r in rows))
        rows = [(ids[i:i + L], mask[i:i + L]) for i in range(0, len(ids) - L + 1, L)]
    rows = [(ids[:L], m[:L]) for ids, m in rows]
    rows = [r for r in rows if any(r[1][1:])]  # keep rows with a token to predict
    if not rows:
        raise ValueError(f"no completion token fits in max_len={L} "
                         "(prompts too long, or too little text to pack one block)")
    return rows, n_cut


def _check_step(section: str, step: int, cfg: SFT, row: dict[str, float],
                checkpoints: dict[int, str | Path] | None, accelerator) -> None:
    """`runtime.check_finite` of one step's loss and grad norm (NaN by design when clipping is
    off: not measured). A run that diverges saves no model: the checkpoints it saved before
    (finite, but of a run that failed) are removed too."""
    try:
        runtime.check_finite(section, step, cfg, loss=row["loss"],
                             grad_norm=row["grad_norm"] if cfg.grad_clip else None)
    except runtime.NonFinite:
        if accelerator.is_main_process:
            for s, path in (checkpoints or {}).items():
                if s < step:
                    shutil.rmtree(path, ignore_errors=True)
        raise


def train_sft(model, tokenizer, examples: list[tuple[str, str]], cfg: SFT, live=None,
              stats: dict[str, Any] | None = None, group_by_length: bool = True,
              checkpoints: dict[int, str | Path] | None = None, section: str = "sft"):
    """Train `model` on (prompt, completion) pairs; returns the (unwrapped) trained model.

    live: a dvclive.Live (main process only) for per-step curves. stats: an optional dict,
    filled with a summary (steps, tokens, losses, throughput). group_by_length: batches of
    similar lengths (less padding), in random order (not with cfg.pack). checkpoints: {step:
    directory}: the policy as it is after that optimizer step, saved there (main process) as
    the final one is, so a stage can hand an earlier point of its own run to later stages.
    section: the params section `cfg` was built from (`sft`, `base`, `int.sft`, ...), named
    when a nan / inf loss or grad norm stops the run (`runtime.check_finite`).
    """
    if not examples:
        raise ValueError("no training examples")
    accelerator = runtime.setup_run(cfg.batch_size, cfg.seed)
    n_proc = accelerator.num_processes
    rows, n_cut = sft_rows(tokenizer, examples, cfg)
    lengths = None if cfg.pack or not group_by_length else [len(r[0]) for r in rows]
    pad_id = runtime.pad_token_id(tokenizer)
    model, loop = runtime.prepare_loop(accelerator, model, rows, cfg,
                                       lambda b: collate(b, pad_id), lengths)
    if bad := sorted(s for s in checkpoints or {} if not 1 <= s <= loop.total):
        raise ValueError(f"checkpoint steps {bad} are outside the run's steps 1..{loop.total}; "
                         "ask for steps within max_steps")
    if accelerator.is_main_process:
        print(f"[train] {len(examples)} examples -> {len(rows)} rows "
              f"({n_cut} cut at max_len={cfg.max_len}), "
              f"{loop.total} steps of {cfg.batch_size} on {n_proc} process(es)", flush=True)

    model.train()
    log = runtime.StepLog(accelerator, live, loop.total, "train", cfg.log_every)
    tokens = seen = 0  # completion tokens trained on / all non-pad tokens processed
    for step, batch in enumerate(runtime.epochs(loop), 1):
        out = completion_nll(
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                  use_cache=False).logits,
            batch["input_ids"], batch["completion_mask"])
        grad_norm = runtime.optimizer_step(accelerator, model, loop, out.loss, cfg.grad_clip)
        # numbers for the log, summed over processes
        counts = runtime.reduce_sum(accelerator, torch.stack([
            out.loss.detach() * out.n_tokens, out.n_tokens.float(), out.n_correct.float(),
            batch["attention_mask"].sum().float()]))
        tokens, seen = tokens + int(counts[1]), seen + int(counts[3])
        row = {"loss": (counts[0] / counts[1].clamp_min(1)).item(),
               "token_acc": (counts[2] / counts[1].clamp_min(1)).item(),
               "lr": loop.scheduler.get_last_lr()[0], "grad_norm": float(grad_norm)}
        _check_step(section, step, cfg, row, checkpoints, accelerator)
        log.step(row, CURVES, lambda r: {"loss": f"{r['loss']:.3f}", "acc": f"{r['token_acc']:.3f}"})
        if step in (checkpoints or {}) and accelerator.is_main_process:
            save_policy_dir(accelerator.unwrap_model(model), tokenizer, checkpoints[step])
        if stop := runtime.stop_reason(accelerator, cfg, step, loop.total, log.t0):
            break
    if missing := sorted(s for s in checkpoints or {} if s > step):
        raise ValueError(f"checkpoint steps {missing}: the run stopped at step {step} ({stop})")
    model, seconds = log.close(accelerator, model)
    summary = {**runtime.supervised_summary(log, loop, stop, seen, seconds, n_proc),
               "examples": len(examples), "rows": len(rows), "examples_cut": n_cut,
               "completion_tokens": tokens, **runtime.first_final(log.curve, ("loss", "token_acc"))}
    log.publish(summary, stats,
                f"[train] {step} steps in {seconds:.1f}s ({summary['tokens_per_s']:.0f} tok/s), "
                f"loss {summary['loss_first']:.3f} -> {summary['loss_final']:.3f}, "
                f"token acc {summary['token_acc_final']:.3f} (stopped by {stop})")
    return model


def run_summary(stats: dict[str, Any]) -> dict[str, Any]:
    """What a stage's details record of one train_sft run (its `stats`): steps, stop rule,
    tokens trained on, first / final loss and token accuracy (4 decimals). Reproducible: wall
    time and throughput go to the timings instead."""
    return {**{k: stats[k] for k in ("steps", "planned_steps", "stopped_by", "epochs")},
            "tokens_seen": stats["completion_tokens"],
            **{k: round(stats[k], 4) for k in ("loss_first", "loss_final", "token_acc_first",
                                               "token_acc_final")}}


def sft_metrics(extra: dict[str, Any] | None = None):
    """`metrics(model, stats)` of a stage whose policy is one train_sft run: `extra`, the
    policy's parameter count, its examples and the run's `run_summary`."""
    def metrics(model, stats: dict[str, Any]) -> dict[str, Any]:
        return {**(extra or {}), "n_params": n_parameters(model), "examples": stats["examples"],
                **run_summary(stats)}
    return metrics


def fit_sft(stage: str, model, tok, examples: list[tuple[str, str]], cfg: SFT,
            out_dir: str | Path, extra_metrics: dict[str, Any] | None = None,
            checkpoints: dict[int, str | Path] | None = None,
            phases: dict[str, float] | None = None, section: str = "sft"):
    """train_sft with dvclive/<stage> curves; saves to `out_dir` (and `checkpoints`, as
    train_sft), writes the metrics. phases: seconds of the stage's earlier work (as
    runtime.fit_and_save), e.g. the teacher's pre-training. section: as train_sft."""
    def train(live, stats):
        return train_sft(model, tok, examples, cfg, live, stats, checkpoints=checkpoints,
                         section=section)

    return runtime.fit_and_save(stage, tok, out_dir, train, sft_metrics(extra_metrics),
                                config=cfg, phases=phases)[0]


@torch.no_grad()
def completion_metrics(model, tokenizer, examples: list[tuple[str, str]], max_len: int,
                       batch_size: int) -> dict[str, float]:
    """Completion NLL and token accuracy of `model` on held-out (prompt, completion) pairs,
    token-weighted over all completion tokens, sequences cut at max_len as in training."""
    pad_id = runtime.pad_token_id(tokenizer)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    nll = n = correct = 0.0
    for i in range(0, len(examples), batch_size):
        batch = collate([example_row(tokenizer, p, c, max_len)
                         for p, c in examples[i:i + batch_size]], pad_id)
        batch = {k: v.to(device) for k, v in batch.items()}
        out = completion_nll(model(input_ids=batch["input_ids"],
                                   attention_mask=batch["attention_mask"], use_cache=False).logits,
                             batch["input_ids"], batch["completion_mask"])
        nll += out.loss.item() * out.n_tokens.item()
        n += out.n_tokens.item()
        correct += out.n_correct.item()
    model.train(was_training)
    return {"loss": nll / max(n, 1), "token_acc": correct / max(n, 1), "tokens": int(n)}
