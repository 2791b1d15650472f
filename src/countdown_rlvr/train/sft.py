"""Supervised training on (prompt, completion) pairs: one loop for base pre-training, the teacher
and the SFT adapter (S4 eq. 1: next-token loss on completion tokens only).

Runs the same under `python` and `accelerate launch --num_processes N`: the Accelerator wraps
model / optimizer / dataloader, batches are split across processes (`batch_size` is the global
batch, so the number of steps does not depend on N), and only the main process logs.
Deterministic on CPU for a fixed seed and process count: seeded init/dropout and a seeded
shuffle are the only randomness.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any, NamedTuple

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, set_seed
from torch.utils.data import DataLoader, Sampler
from tqdm.auto import tqdm
from transformers import get_scheduler

from ..model import mixed_precision, render_prompts
from .losses import completion_nll

# cfg keys of train_sft and their defaults (None = required, or optional without a value).
SFT_DEFAULTS: dict[str, Any] = {
    "lr": None,  # peak learning rate (AdamW)
    "batch_size": None,  # global sequences per optimizer step (split across processes)
    "max_len": None,  # tokens per sequence (prompt + completion + EOS); longer ones are cut
    "epochs": None,  # passes over the examples; `max_steps` caps it when both are given
    "max_steps": None,  # optimizer steps; at least one of epochs / max_steps is required
    "warmup_frac": 0.0,  # fraction of the steps with linear LR warm-up
    "schedule": "cosine",  # LR after warm-up: cosine (to 0) | linear | constant
    "weight_decay": 0.0,  # AdamW decay, applied to matrices only (not norms / biases)
    "grad_clip": 1.0,  # global gradient-norm clip (0 or None = off)
    "seed": 0,  # init of new weights, dropout and the data shuffle
    "pack": False,  # concatenate examples into max_len blocks (no padding; pre-training)
    "group_by_length": True,  # batches of similar lengths (less padding), in random order
    "time_budget_s": None,  # wall-clock cap: stop cleanly after the step that crosses it
    "log_every": 10,  # steps between console lines (dvclive gets every step)
}
REQUIRED = ("lr", "batch_size", "max_len")
SCHEDULES = {"cosine": "cosine", "linear": "linear", "constant": "constant_with_warmup"}


def sft_config(section: dict[str, Any]) -> dict[str, Any]:
    """The train_sft keys of a params section (a stage section also holds its own keys)."""
    return {k: section[k] for k in SFT_DEFAULTS if k in section}


def check_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """cfg with defaults filled in; ValueError naming the fix for unknown / missing / bad keys."""
    unknown = sorted(set(cfg) - set(SFT_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown training keys {unknown}; valid: {', '.join(SFT_DEFAULTS)}")
    missing = [k for k in REQUIRED if cfg.get(k) is None]
    if missing:
        raise ValueError(f"training config is missing {missing}")
    if cfg.get("epochs") is None and cfg.get("max_steps") is None:
        raise ValueError("set `epochs` or `max_steps` (or both: max_steps caps the epochs)")
    out = {**SFT_DEFAULTS, **cfg}
    if out["schedule"] not in SCHEDULES:
        raise ValueError(f"unknown schedule {out['schedule']!r}; valid: {', '.join(SCHEDULES)}")
    for key in ("batch_size", "max_len", "log_every"):
        if not (isinstance(out[key], int) and out[key] >= 1):
            raise ValueError(f"`{key}` must be a positive integer, got {out[key]!r}")
    for key in ("epochs", "max_steps"):
        if out[key] is not None and not (isinstance(out[key], int) and out[key] >= 1):
            raise ValueError(f"`{key}` must be a positive integer or null, got {out[key]!r}")
    if not 0 <= float(out["warmup_frac"]) < 1:
        raise ValueError(f"`warmup_frac` must be in [0, 1), got {out['warmup_frac']}")
    if not float(out["lr"]) > 0:
        raise ValueError(f"`lr` must be > 0, got {out['lr']}")
    return out


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


class _Examples(torch.utils.data.Dataset):
    def __init__(self, rows: list[tuple[list[int], list[int]]]):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self.rows[i]


class SeededShuffle(Sampler[int]):
    """A fresh permutation per epoch from (seed, epoch): the only data-order randomness.

    With `lengths`, batches are grouped by length: each window of `window` batches of the
    permutation is sorted by length and cut into batches, and the batches are shuffled, so a
    batch pads to a near-common length (traces of both styles: ~30% less compute) while
    the batch order stays random. Stateless, so every process computes the same order and
    accelerate can shard it.
    """

    def __init__(self, n: int, seed: int, lengths: list[int] | None = None,
                 batch_size: int = 1, window: int = 64):
        self.n, self.seed, self.epoch = n, seed, 0
        self.lengths, self.batch_size, self.window = lengths, batch_size, window

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(self.n, generator=g).tolist()
        if self.lengths is None:
            return iter(order)
        bs, span = self.batch_size, self.batch_size * self.window
        batches = []
        for start in range(0, self.n, span):
            chunk = sorted(order[start:start + span], key=lambda i: -self.lengths[i])
            batches += [chunk[j:j + bs] for j in range(0, len(chunk), bs)]
        tail = [batches.pop()] if len(batches[-1]) < bs else []  # the short batch (shortest rows) stays last
        shuffled = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
        return iter([i for b in shuffled + tail for i in b])


def pad_token_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


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
def _cpu_only() -> bool:
    """No GPU: ask accelerate for CPU explicitly. Only then do processes started by
    `accelerate launch --multi_gpu --num_processes N` (torchrun) join one gloo group;
    otherwise each would silently train alone."""
    return not torch.accelerator.is_available()


def is_main_process() -> bool:
    """True in a plain run and on rank 0 of a multi-process launch (only it saves and logs)."""
    from accelerate import PartialState

    return PartialState(cpu=_cpu_only()).is_main_process


def _optimizer(model, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    # nanoGPT: decay the matrices (and embeddings), not the norm gains or biases
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def setup_run(cfg: dict[str, Any]) -> Accelerator:
    """The Accelerator of a training loop (a gloo group of CPU processes when there is no GPU),
    with the cores shared between processes and every RNG seeded."""
    accelerator = Accelerator(cpu=_cpu_only(), mixed_precision=mixed_precision(),
                              dataloader_config=DataLoaderConfiguration(split_batches=True))
    n_proc = accelerator.num_processes
    if cfg["batch_size"] % n_proc:
        raise ValueError(f"batch_size {cfg['batch_size']} must be divisible by the "
                         f"{n_proc} processes")
    cpu_count = os.cpu_count() or 1
    if accelerator.device.type == "cpu" and torch.get_num_threads() * n_proc > cpu_count:
        torch.set_num_threads(max(1, cpu_count // n_proc))  # N processes share the cores
    set_seed(cfg["seed"])
    return accelerator


def planned_steps(cfg: dict[str, Any], steps_per_epoch: int) -> int:
    """Optimizer steps of a run: max_steps, epochs * steps_per_epoch, or the smaller of both."""
    limits = [cfg["max_steps"], cfg["epochs"] and cfg["epochs"] * steps_per_epoch]
    return min(s for s in limits if s)


def make_scheduler(optimizer, cfg: dict[str, Any], total: int):
    """Linear warm-up over `warmup_frac` of the steps, then cfg["schedule"]."""
    return get_scheduler(SCHEDULES[cfg["schedule"]], optimizer,
                         num_warmup_steps=round(cfg["warmup_frac"] * total),
                         num_training_steps=total)


class Loop(NamedTuple):
    """What a supervised loop steps through (see `prepare_loop`)."""
    optimizer: torch.optim.Optimizer
    scheduler: Any
    loader: DataLoader
    sampler: SeededShuffle
    total: int  # planned optimizer steps


def prepare_loop(accelerator: Accelerator, model, items: list, cfg: dict[str, Any], collate_fn,
                 lengths: list[int] | None = None):
    """(model, Loop) for a supervised loop over `items` (SFT rows, IPO pairs): the seeded
    (optionally length-grouped) shuffle, its DataLoader, AdamW, the lr schedule over the
    planned steps, all passed through `accelerator.prepare`."""
    sampler = SeededShuffle(len(items), cfg["seed"], lengths, cfg["batch_size"])
    loader = DataLoader(_Examples(items), batch_size=cfg["batch_size"], sampler=sampler,
                        drop_last=len(items) >= cfg["batch_size"], collate_fn=collate_fn)
    total = planned_steps(cfg, len(loader))
    optimizer = _optimizer(model, float(cfg["lr"]), float(cfg["weight_decay"]))
    scheduler = make_scheduler(optimizer, cfg, total)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    return model, Loop(optimizer, scheduler, loader, sampler, total)


def optimizer_step(accelerator: Accelerator, model, loop: Loop, loss: torch.Tensor,
                   grad_clip: float | None) -> torch.Tensor:
    """Backward, clip (NaN norm when off), step, schedule, zero: one optimizer step."""
    accelerator.backward(loss)
    grad_norm = (accelerator.clip_grad_norm_(model.parameters(), grad_clip)
                 if grad_clip else torch.tensor(float("nan")))
    loop.optimizer.step()
    loop.scheduler.step()
    loop.optimizer.zero_grad(set_to_none=True)
    return grad_norm


def stop_reason(accelerator, cfg: dict[str, Any], step: int, total: int, t0: float) -> str | None:
    """Why training stops after `step` (None: go on). Agreed by all processes."""
    if step >= total:
        return "max_steps" if cfg["max_steps"] == total else "epochs"
    if cfg["time_budget_s"] is None:
        return None
    over = torch.tensor(float(time.time() - t0 > cfg["time_budget_s"]), device=accelerator.device)
    if accelerator.num_processes > 1:  # every process must stop at the same step, or DDP hangs
        over = accelerator.reduce(over, reduction="sum")
    return "time_budget" if over.item() > 0 else None


def window_means(curve: list[tuple[float, ...]]) -> tuple[list[float], list[float]]:
    """Column means over the first and the last 10% of the steps: less noisy than one step."""
    w = max(1, len(curve) // 10)

    def mean(rows):
        return [sum(col) / len(col) for col in zip(*rows)]

    return mean(curve[:w]), mean(curve[-w:])


def train_sft(model, tokenizer, examples: list[tuple[str, str]], cfg: dict[str, Any],
              live=None, stats: dict[str, Any] | None = None):
    """Train `model` on (prompt, completion) pairs; returns the (unwrapped) trained model.
    A (prompt, completion, False) triple is a partial completion: trained without the EOS.

    cfg: see SFT_DEFAULTS. live: a dvclive.Live (main process only) for per-step curves.
    stats: an optional dict, filled with a summary (steps, tokens, losses, throughput).
    """
    cfg = check_config(cfg)
    if not examples:
        raise ValueError("no training examples")
    accelerator = setup_run(cfg)
    n_proc, main = accelerator.num_processes, accelerator.is_main_process

    # (ids, completion mask); an optional third element False = a partial completion (no EOS)
    rows = [example_row(tokenizer, ex[0], ex[1], end=ex[2] if len(ex) > 2 else True)
            for ex in examples]
    n_cut = 0 if cfg["pack"] else sum(len(ids) > cfg["max_len"] for ids, _ in rows)
    if cfg["pack"]:  # one token stream cut into full blocks: no compute spent on padding
        ids = list(itertools.chain.from_iterable(r[0] for r in rows))
        mask = list(itertools.chain.from_iterable(r[1] for r in rows))
        L = cfg["max_len"]
        rows = [(ids[i:i + L], mask[i:i + L]) for i in range(0, len(ids) - L + 1, L)]
    rows = [(ids[:cfg["max_len"]], m[:cfg["max_len"]]) for ids, m in rows]
    rows = [r for r in rows if any(r[1][1:])]  # keep rows with a token to predict
    if not rows:
        raise ValueError(f"no completion token fits in max_len={cfg['max_len']} "
                         "(prompts too long, or too little text to pack one block)")
    lengths = None if cfg["pack"] or not cfg["group_by_length"] else [len(r[0]) for r in rows]
    pad_id = pad_token_id(tokenizer)
    model, loop = prepare_loop(accelerator, model, rows, cfg, lambda b: collate(b, pad_id), lengths)
    scheduler, loader, sampler, total = loop.scheduler, loop.loader, loop.sampler, loop.total
    steps_per_epoch = len(loader)
    if main:
        print(f"[train] {len(examples)} examples -> {len(rows)} rows "
              f"({n_cut} cut at max_len={cfg['max_len']}), "
              f"{total} steps of {cfg['batch_size']} on {n_proc} process(es)", flush=True)

    model.train()
    t0, step, epoch, stop = time.time(), 0, 0, None
    tokens = seen = 0  # completion tokens trained on / all non-pad tokens processed
    curve: list[tuple[float, float]] = []  # (loss, token accuracy) per step
    bar = tqdm(total=total, disable=not main, desc="train", mininterval=5)
    while stop is None:
        sampler.set_epoch(epoch)
        for batch in loader:
            out = completion_nll(
                model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                      use_cache=False).logits,
                batch["input_ids"], batch["completion_mask"])
            grad_norm = optimizer_step(accelerator, model, loop, out.loss, cfg["grad_clip"])
            step += 1

            # numbers for the log, summed over processes
            counts = torch.stack([out.loss.detach() * out.n_tokens, out.n_tokens.float(),
                                  out.n_correct.float(), batch["attention_mask"].sum().float()])
            if n_proc > 1:
                counts = accelerator.reduce(counts, reduction="sum")
            loss = (counts[0] / counts[1].clamp_min(1)).item()
            acc = (counts[2] / counts[1].clamp_min(1)).item()
            tokens, seen = tokens + int(counts[1]), seen + int(counts[3])
            curve.append((loss, acc))
            if live is not None and main:
                live.log_metric("train/loss", loss)
                live.log_metric("train/token_acc", acc)
                live.log_metric("train/lr", scheduler.get_last_lr()[0])
                live.log_metric("train/grad_norm", float(grad_norm))
                live.next_step()
            bar.update(1)
            if main and (step % cfg["log_every"] == 0 or step == total):
                bar.set_postfix(loss=f"{loss:.3f}", acc=f"{acc:.3f}")

            stop = stop_reason(accelerator, cfg, step, total, t0)
            if stop:
                break
        epoch += 1
    bar.close()
    accelerator.wait_for_everyone()
    seconds = time.time() - t0
    (loss_first, acc_first), (loss_final, acc_final) = window_means(curve)
    summary = {
        "steps": step, "planned_steps": total, "epochs": round(step / steps_per_epoch, 3),
        "stopped_by": stop, "examples": len(examples), "rows": len(rows), "examples_cut": n_cut,
        "completion_tokens": tokens, "tokens_processed": seen, "seconds": round(seconds, 2),
        "tokens_per_s": round(seen / max(seconds, 1e-9), 1), "processes": n_proc,
        "loss_first": loss_first, "loss_final": loss_final,
        "token_acc_first": acc_first, "token_acc_final": acc_final,
    }
    if stats is not None:
        stats.update(summary)
    if main:
        print(f"[train] {step} steps in {seconds:.1f}s ({summary['tokens_per_s']:.0f} tok/s), "
              f"loss {summary['loss_first']:.3f} -> {summary['loss_final']:.3f}, "
              f"token acc {summary['token_acc_final']:.3f} (stopped by {stop})", flush=True)
    model = accelerator.unwrap_model(model)
    model.eval()
    return model


@torch.no_grad()
def completion_metrics(model, tokenizer, examples: list[tuple[str, str]], max_len: int,
                       batch_size: int) -> dict[str, float]:
    """Completion NLL and token accuracy of `model` on held-out (prompt, completion) pairs,
    token-weighted over all completion tokens, sequences cut at max_len as in training."""
    pad_id = pad_token_id(tokenizer)
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


# --------------------------------------------------------------------------- adapters
ADAPTERS = ("lora", "dora", "full")


def apply_adapter(model, adapter: str, r: int = 16, alpha: int = 32, dropout: float = 0.0,
                  target_modules: str | list[str] = "all-linear"):
    """Make `model` trainable the chosen way: a LoRA / DoRA peft wrapper, or all weights.

    "all-linear" targets every Linear layer except the output head (peft's convention).
    """
    if adapter not in ADAPTERS:
        raise ValueError(f"unknown adapter {adapter!r}; valid: {', '.join(ADAPTERS)}")
    if adapter == "full":
        for p in model.parameters():
            p.requires_grad_(True)
        return model
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout,
                        target_modules=target_modules, use_dora=adapter == "dora",
                        task_type="CAUSAL_LM")
    return get_peft_model(model, config)
