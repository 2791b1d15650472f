"""The training runtime every loop shares (train_sft, train_ipo, train_rloo): accelerate set-up,
AdamW and its schedule, the seeded data order, one optimizer step, the stop rule, the per-step
log (dvclive, progress bar, first / final means), and the stage side: the init policy, train,
save atomically, write metrics.

Runs the same under `python` and `accelerate launch --num_processes N`: the Accelerator wraps
model / optimizer / dataloader, batches are split across processes (`batch_size` is the global
batch, so the number of steps does not depend on N), and only the main process logs.
Training metrics (losses, accuracies, steps) are reproducible and go to
reports/details/<stage>.json (git-tracked, not DVC metrics); wall time and
throughput vary run to run and go to reports/timings/<stage>.json, outside DVC.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, set_seed
from torch.utils.data import DataLoader, Sampler
from tqdm.auto import tqdm
from transformers import get_scheduler

from ..core.io import StageError, atomic_path, empty_curves, write_details, write_json, write_timing
from ..core.train_config import Adapter, Optim, Supervised
from ..model.card import write_policy_card
from ..model.policy import REF_FILE, load_model, mixed_precision, policy_ref, save_policy_dir

SCHEDULES = {"cosine": "cosine", "linear": "linear", "constant": "constant_with_warmup"}
# reports/timings keys of the supervised loops (train_sft, train_ipo)
TIMING_KEYS = ("seconds", "tokens_per_s", "tokens_processed", "processes")
ADAPTERS = ("lora", "dora", "full")


# --------------------------------------------------------------------------- set-up
def _cpu_only() -> bool:
    """No GPU: ask accelerate for CPU explicitly. Only then do processes started by
    `accelerate launch --multi_gpu --num_processes N` (torchrun) join one gloo group;
    otherwise each would silently train alone."""
    return not torch.accelerator.is_available()


def is_main_process() -> bool:
    """True in a plain run and on rank 0 of a multi-process launch (only it saves and logs)."""
    from accelerate import PartialState

    return PartialState(cpu=_cpu_only()).is_main_process


def setup_run(batch_size: int, seed: int) -> Accelerator:
    """The Accelerator of a training loop (a gloo group of CPU processes when there is no GPU),
    with the cores shared between processes and every RNG seeded. `batch_size`: what the
    processes split (sequences, pairs or prompts per step)."""
    accelerator = Accelerator(cpu=_cpu_only(), mixed_precision=mixed_precision(),
                              dataloader_config=DataLoaderConfiguration(split_batches=True))
    n_proc = accelerator.num_processes
    if batch_size % n_proc:
        raise ValueError(f"batch_size {batch_size} must be divisible by the {n_proc} processes")
    cpu_count = os.cpu_count() or 1
    if accelerator.device.type == "cpu" and torch.get_num_threads() * n_proc > cpu_count:
        torch.set_num_threads(max(1, cpu_count // n_proc))  # N processes share the cores
    set_seed(seed)
    return accelerator


def adamw(model, cfg: Optim) -> torch.optim.Optimizer:
    """AdamW; nanoGPT: decay the matrices (and embeddings), not the norm gains or biases."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": float(cfg.weight_decay)},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=float(cfg.lr), betas=(0.9, 0.95))


def reduce_sum(accelerator: Accelerator, t: torch.Tensor) -> torch.Tensor:
    """`t` summed over processes (itself in a single-process run)."""
    return accelerator.reduce(t, reduction="sum") if accelerator.num_processes > 1 else t


def pad_token_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


# --------------------------------------------------------------------------- supervised data
class _Examples(torch.utils.data.Dataset):
    def __init__(self, rows: list):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
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


def planned_steps(cfg: Supervised, steps_per_epoch: int) -> int:
    """Optimizer steps of a run: max_steps, epochs * steps_per_epoch, or the smaller of both."""
    limits = [cfg.max_steps, cfg.epochs and cfg.epochs * steps_per_epoch]
    return min(s for s in limits if s)


class Loop(NamedTuple):
    """What a supervised loop steps through (see `prepare_loop`)."""
    optimizer: torch.optim.Optimizer
    scheduler: Any
    loader: DataLoader
    sampler: SeededShuffle
    total: int  # planned optimizer steps


def prepare_loop(accelerator: Accelerator, model, items: list, cfg: Supervised, collate_fn,
                 lengths: list[int] | None = None):
    """(model, Loop) for a supervised loop over `items` (SFT rows, IPO pairs): the seeded
    (optionally length-grouped) shuffle, its DataLoader, AdamW, linear warm-up over
    `warmup_frac` of the planned steps then `schedule`, all passed through `accelerator.prepare`.
    Every item is seen once per epoch: the last, partial batch is kept (a few dozen examples,
    as self-distillation has, would otherwise lose up to a third of them every epoch). Under
    N processes a last batch that does not split evenly is padded by accelerate (repeats of
    its items), the one place where N processes do not follow one exactly."""
    sampler = SeededShuffle(len(items), cfg.seed, lengths, cfg.batch_size)
    loader = DataLoader(_Examples(items), batch_size=cfg.batch_size, sampler=sampler,
                        drop_last=False, collate_fn=collate_fn)
    total = planned_steps(cfg, len(loader))
    optimizer = adamw(model, cfg)
    scheduler = get_scheduler(SCHEDULES[cfg.schedule], optimizer,
                              num_warmup_steps=round(cfg.warmup_frac * total), num_training_steps=total)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    return model, Loop(optimizer, scheduler, loader, sampler, total)


def epochs(loop: Loop) -> Iterator:
    """The loop's batches, epoch after epoch (a fresh seeded order each), without end."""
    epoch = 0
    while True:
        loop.sampler.set_epoch(epoch)
        yield from loop.loader
        epoch += 1


# --------------------------------------------------------------------------- one step
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


class NonFinite(StageError):
    """Training diverged: a loss, gradient norm or the policy is nan / inf (`check_finite`)."""


def diverged(section: str, step: int, cfg: Optim, what: str) -> NonFinite:
    """The one-line stop of a run that diverged at `step` (`what` went nan / inf), naming
    the `section` keys to look at."""
    clip = (f"set {section}.grad_clip (null: no clipping)" if cfg.grad_clip is None else
            f"check {section}.grad_clip ({cfg.grad_clip:g})")
    return NonFinite(section, f"step {step}: training diverged ({what}); lower {section}.lr "
                              f"({cfg.lr:g}) or {clip}; no model was saved")


def check_finite(section: str, step: int, cfg: Optim, **values: float | None) -> None:
    """Stop the run at `step` when one of `values` (loss, grad_norm: numbers the loop has
    already read off the device for its log; None = not measured, e.g. the grad norm with
    clipping off) is nan or inf: one line naming the `section` keys to look at.

    Called every step, before anything is saved: the policy after a nan step is nan, and
    saved it passed for a trained model (its details held `"loss_final": NaN`, not JSON) until
    the evaluation's sampler failed on it with an index error naming neither. Only reads
    host floats: no device sync, no change to the numbers of a finite run. Every process
    reads the same reduced values, so all stop at the same step."""
    bad = [f"{k} is {v}" for k, v in values.items() if v is not None and not math.isfinite(v)]
    if bad:
        raise diverged(section, step, cfg, ", ".join(bad))


@torch.no_grad()
def nonfinite_policy(model, input_ids: torch.Tensor) -> str | None:
    """What of `model` is nan / inf: a weight, or its logits on `input_ids` [1, T] (weights
    grown huge but finite); None when neither. For a failure path only (it reads every
    weight and runs a forward): an RL step's loss and grad norm are measured before its
    update, and the next rollouts come first, where the sampler fails on a broken policy
    with an index error naming neither."""
    for name, p in model.named_parameters():
        if not bool(torch.isfinite(p).all()):
            return f"weight {name} is nan or inf"
    logits = model(input_ids=input_ids.to(next(model.parameters()).device), use_cache=False).logits
    return None if bool(torch.isfinite(logits).all()) else "the policy's logits are nan or inf"


def stop_reason(accelerator, cfg: Supervised, step: int, total: int, t0: float) -> str | None:
    """Why training stops after `step` (None: go on). Agreed by all processes."""
    if step >= total:
        return "max_steps" if cfg.max_steps == total else "epochs"
    if cfg.time_budget_s is None:
        return None
    over = torch.tensor(float(time.time() - t0 > cfg.time_budget_s), device=accelerator.device)
    # every process must stop at the same step, or DDP hangs
    return "time_budget" if reduce_sum(accelerator, over).item() > 0 else None


def windows(curve: list) -> tuple[list, list]:
    """The first and the last 10% of a run's steps (at least one each): what `_first` /
    `_final` summarise, less noisy than one step."""
    w = max(1, len(curve) // 10)
    return curve[:w], curve[-w:]


def first_final(curve: list[dict[str, float]], names: tuple[str, ...]) -> dict[str, float | None]:
    """`<name>_first` / `<name>_final`: means over the `windows` of every curve in `names`;
    None for one not logged at every step."""
    first, last = windows(curve)
    out = {}
    for k in names:
        full = bool(curve) and all(k in r for r in curve)
        out[f"{k}_first"] = sum(r[k] for r in first) / len(first) if full else None
        out[f"{k}_final"] = sum(r[k] for r in last) / len(last) if full else None
    return out


class StepLog:
    """The per-step log of a loop: `train/<name>` dvclive curves (main process), the progress
    bar with a few numbers every `log_every` steps, and the curve for `first_final`."""

    def __init__(self, accelerator: Accelerator, live, total: int, desc: str, log_every: int):
        self.main, self.total, self.log_every = accelerator.is_main_process, total, log_every
        self.live = live if self.main else None
        self.bar = tqdm(total=total, disable=not self.main, desc=desc, mininterval=5)
        self.curve: list[dict[str, float]] = []
        self.t0 = time.time()

    def step(self, row: dict[str, float], names: tuple[str, ...], show: Callable[[dict], dict]) -> None:
        self.curve.append(row)
        if self.live is not None:
            for k in names:
                if k in row:
                    self.live.log_metric(f"train/{k}", row[k])
            self.live.next_step()
        self.bar.update(1)
        n = len(self.curve)
        if self.main and (n % self.log_every == 0 or n == self.total):
            self.bar.set_postfix(**show(row))

    def close(self, accelerator: Accelerator, model):
        """(the unwrapped model in eval mode, seconds since the start), once every process is done."""
        self.bar.close()
        accelerator.wait_for_everyone()
        seconds = time.time() - self.t0
        model = accelerator.unwrap_model(model)
        model.eval()
        return model, seconds

    def publish(self, summary: dict[str, Any], stats: dict[str, Any] | None, line: str) -> None:
        """Hand the run's summary to the caller's `stats` dict and print its one-line result
        (main process)."""
        if stats is not None:
            stats.update(summary)
        if self.main:
            print(line, flush=True)


def supervised_summary(log: StepLog, loop: Loop, stop: str | None, seen: int, seconds: float,
                       n_proc: int) -> dict[str, Any]:
    """The summary keys train_sft and train_ipo share."""
    step = len(log.curve)
    return {"steps": step, "planned_steps": loop.total, "epochs": round(step / len(loop.loader), 3),
            "stopped_by": stop, "tokens_processed": seen, "seconds": round(seconds, 2),
            "tokens_per_s": round(seen / max(seconds, 1e-9), 1), "processes": n_proc}


# --------------------------------------------------------------------------- stage side
def init_policy(stage: str, init_dir: str | Path, cfg: Adapter):
    """(model, tokenizer) to train, starting from the policy in `init_dir`.

    `cfg`'s adapter keys choose how to train: a LoRA (DoRA) adapter in `init_dir` is trained
    further when the stage asks for lora (dora) too (one adapter on the base, so `policy_ref`
    keeps working); otherwise the init policy is merged into plain weights and
    `apply_adapter` wraps it.
    """
    try:
        ref = policy_ref(init_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise StageError(stage, f"{exc}; run `dvc repro` for the stage that writes {init_dir}") from exc
    adapter_cfg = Path(ref.adapter or "") / "adapter_config.json"
    if ref.adapter and cfg.adapter != "full" and adapter_cfg.exists() and \
            json.loads(adapter_cfg.read_text()).get("use_dora", False) == (cfg.adapter == "dora"):
        return load_model(ref.base, ref.adapter, is_trainable=True)  # same kind: train it on
    model, tok = load_model(ref.base, ref.adapter)
    if hasattr(model, "merge_and_unload"):  # a peft adapter under full / a new adapter
        model = model.merge_and_unload()
    model = apply_adapter(model, cfg.adapter, r=cfg.lora_r, alpha=cfg.lora_alpha,
                          dropout=cfg.lora_dropout, target_modules=cfg.target_modules)
    return model, tok


def apply_adapter(model, adapter: str, r: int, alpha: float, dropout: float,
                  target_modules: str | list[str]):
    """Make `model` trainable the chosen way: a LoRA / DoRA peft wrapper, or all weights.
    "all-linear" targets every Linear layer except the output head (peft's convention)."""
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


def frozen_copy(init_dir: str | Path):
    """The init policy again, frozen in eval mode: the reference of IPO / RLOO / KL terms."""
    ref = policy_ref(init_dir)
    model, _ = load_model(ref.base, ref.adapter)
    model.eval().requires_grad_(False)
    return model


@contextlib.contextmanager
def live_curves(name: str) -> Iterator[Any]:
    """dvclive logger for dvclive/<name> on the main process (None elsewhere), ended and moved
    into place when the block finishes.

    dvclive/ is in git, and dvclive writes its TSVs step by step (and clears the old ones when
    it opens). So it logs into an `io.atomic_path` sibling (dvclive/<parent>/.<leaf>.<random>.tmp)
    that replaces dvclive/<name> only at the end: a stage that raises leaves the previous
    curves untouched, and one killed outright leaves only that temporary dir, which
    `io.clear_stale_tmp` removes when the next stage starts (and .dvcignore / .gitignore hide
    until then). The files inside are the same as if logged in place."""
    if not is_main_process():
        yield None
        return
    from dvclive import Live

    with atomic_path(f"dvclive/{name}") as tmp:
        # dvcyaml=None: dvc.yaml declares the plots itself; dvclive must not rewrite it
        live = Live(str(tmp), save_dvc_exp=False, dvcyaml=None)
        try:
            yield live
            live.end()
        finally:
            close_live_repo(live)


def close_live_repo(live: Any) -> None:
    """Close the DVC repo dvclive opens (and never closes) to read git. Left open, its
    dulwich pack files are closed by their finalizers; when an exception's traceback keeps
    `live` alive to interpreter shutdown, those run after imports stop working and print one
    "Exception ignored ... sys.meta_path is None" traceback per pack file."""
    repo = getattr(live, "_dvc_repo", None)  # dvclive has no public close
    if repo is not None:
        with contextlib.suppress(Exception):  # closing is cleanup: never the stage's error
            repo.close()


def fit_and_save(stage: str, tok, out_dir: str | Path, train: Callable, metrics: Callable | None = None,
                 timing_keys: tuple[str, ...] = TIMING_KEYS, config: Any = None,
                 phases: dict[str, float] | None = None):
    """(trained model, stats): `train(live, stats)` with dvclive/<stage> curves, the policy saved
    atomically to `out_dir` (model or peft adapter, loadable from any directory), and, with
    `metrics(model, stats)`, reports/details/<stage>.json and reports/timings/<stage>.json.
    phases: {name: seconds} of the stage's work before `train` (the teacher's pre-training):
    the timing's `seconds` is then the stage's total and its `phases` each part, this run's
    as `train` (its tokens_per_s stays this run's). Only the main process saves and writes."""
    stats: dict[str, Any] = {}
    with live_curves(stage) as live:
        model = train(live, stats)
        if live is None:  # not the main process
            return model, stats
        # the policy and its README.md card appear together
        save_policy_dir(model, tok, out_dir,
                        also=lambda tmp: write_policy_card(tmp, out_dir, tok, config, stats))
    if metrics is not None:
        write_details(stage, metrics(model, stats))
        timing = stage_timing({k: stats[k] for k in timing_keys}, phases)
        write_timing(stage, timing)
        print(f"[{stage}] wrote {out_dir}, reports/details/{stage}.json, "
              f"reports/timings/{stage}.json, dvclive/{stage} "
              f"({stats['steps']} steps, {timing['seconds']:.0f} s)")
    return model, stats


def stage_timing(run: dict[str, Any], phases: dict[str, float] | None) -> dict[str, Any]:
    """A training run's timing (`seconds`, ...) as its stage's: with earlier `phases`, seconds
    becomes their sum with the run's, and `phases` names each (the run's as `train`)."""
    if not phases:
        return run
    parts = {**phases, "train": run["seconds"]}
    return {**run, "seconds": round(sum(parts.values()), 2), "phases": parts}


def pass_through(stage: str, base: str, out_dir: str | Path) -> None:
    """Record an existing model (hub id or `save_pretrained` dir) as this stage's policy:
    out_dir/REF.json names it and `model.resolve_base` follows it; nothing is trained."""
    if not is_main_process():
        return
    path, out_dir = Path(base), Path(out_dir)
    if path.exists() and not (path / "config.json").exists():
        key = "model.base" if stage == "base" else f"{stage}.base"
        raise StageError(stage, f"{key} {base!r} is a local path without config.json; "
                                "point it at a `save_pretrained` model dir or a hub id.")
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        write_json(tmp / REF_FILE, {"base": base})
    empty_curves(stage, ("loss", "token_acc"))  # the declared curve dir: empty plots
    write_details(stage, {"base": base, "trained": False,
                          "note": "pass-through: downstream stages load this model"})
    write_timing(stage, {"seconds": 0.0})
    print(f"[{stage}] wrote {out_dir}/{REF_FILE} -> {base} (pass-through, nothing trained)")
