"""IPO on preference pairs (S1 §3.1.3): the squared-residual objective on length-normalised
log-probs, with the optional RPO/NLL anchor on the chosen response.

The policy and a frozen reference (the SFT policy) score the same (prompt, chosen) and
(prompt, rejected) sequences; the reference's scores never change, so they are computed
once, without grad, before training. Everything else (accelerate, seeded shuffle, AdamW,
warm-up + schedule, clipping, the stop rule, the log) is runtime.py's: the loop runs the
same under `python` and `accelerate launch --num_processes N` (batch_size = pairs per
global step).
"""

from __future__ import annotations

import random
from typing import Any

import torch

from ..core.ipo_config import IPO
from ..model.logprobs import sequence_logprobs
from . import runtime
from .losses import ipo_loss
from .sft import collate, example_row

# per-step curves, in the order of the `counts` the loop sums over processes
CURVES = ("loss", "ipo", "margin", "pref_acc", "chosen_reward", "rejected_reward", "chosen_nll")


def pair_rows(tokenizer, pairs: list[dict], max_len: int) -> list[tuple[tuple, tuple]]:
    """((chosen ids, mask), (rejected ids, mask)) per pair, cut at max_len; a pair whose
    chosen or rejected completion does not fit at all is dropped (nothing to compare)."""
    rows = [(example_row(tokenizer, p["prompt"], p["chosen"], max_len),
             example_row(tokenizer, p["prompt"], p["rejected"], max_len)) for p in pairs]
    return [r for r in rows if any(r[0][1][1:]) and any(r[1][1][1:])]


def collate_pairs(items: list[tuple], pad_id: int) -> dict[str, torch.Tensor]:
    """One padded batch of 2B rows, chosen and rejected interleaved (c0, r0, c1, r1, ...), and
    `ref` [B, 2]. Interleaved, so that any split of the batch along dim 0 (accelerate's
    dispatch mode) hands each process whole pairs, matching its slice of `ref`."""
    batch = collate([row for it in items for row in it[:2]], pad_id)
    batch["ref"] = torch.tensor([it[2] for it in items], dtype=torch.float32)
    return batch


def _mean_logprobs(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return sequence_logprobs(model, batch["input_ids"], batch["attention_mask"],
                             batch["completion_mask"]).mean


@torch.no_grad()
def pair_logprobs(model, rows: list[tuple[tuple, tuple]], pad_id: int,
                  batch_size: int) -> list[tuple[float, float]]:
    """(chosen, rejected) length-normalised log-probs of every pair under `model`, no grad."""
    device = next(model.parameters()).device
    out = []
    for i in range(0, len(rows), batch_size):
        batch = collate_pairs([(c, r, (0.0, 0.0)) for c, r in rows[i:i + batch_size]], pad_id)
        lp = _mean_logprobs(model, {k: v.to(device) for k, v in batch.items()})
        out += [tuple(pair) for pair in lp.view(-1, 2).tolist()]
    return out


def held_out(rows: list, frac: float, seed: int) -> tuple[list, list]:
    """(train, held-out) pairs: a seeded `frac` of them is never trained on, so that whether
    IPO moved the policy the intended way is measured on pairs it did not fit."""
    n_val = round(len(rows) * frac)
    order = random.Random(seed).sample(range(len(rows)), len(rows))
    val = set(order[:n_val])
    return [r for i, r in enumerate(rows) if i not in val], [rows[i] for i in sorted(val)]


def val_margins(model, ref_model, rows: list, pad_id: int, cfg: IPO) -> dict[str, Any]:
    """The IPO margin h = (log pi - log ref)(chosen) - (log pi - log ref)(rejected) on the
    held-out pairs, before (0: the policy starts as the reference) and after training, and
    the share of them the trained policy prefers the right way (h > 0)."""
    if not rows:
        return {"val_margin_before": None, "val_margin_after": None, "val_pref_acc_after": None}
    ref = pair_logprobs(ref_model, rows, pad_id, cfg.batch_size)
    pol = pair_logprobs(model, rows, pad_id, cfg.batch_size)
    h = [(pc - rc) - (pr - rr) for (pc, pr), (rc, rr) in zip(pol, ref)]
    return {"val_margin_before": 0.0, "val_margin_after": round(sum(h) / len(h), 6),
            "val_pref_acc_after": round(sum(x > 0 for x in h) / len(h), 4)}


def train_ipo(model, ref_model, tokenizer, pairs: list[dict], cfg: IPO, live=None,
              stats: dict[str, Any] | None = None, section: str = "ipo"):
    """IPO-train `model` against the frozen `ref_model`; returns the (unwrapped) trained model.

    pairs: rows with `prompt`, `chosen`, `rejected` (data/pairs/pairs.jsonl). live: dvclive.Live
    (main process) for per-step curves. stats: optional dict filled with a summary (steps,
    curves' first / final values, timing). section: the params section of `cfg`, named when a
    nan / inf loss or grad norm stops the run (`runtime.check_finite`).
    """
    if not pairs:
        raise ValueError("no preference pairs")
    accelerator = runtime.setup_run(cfg.batch_size, cfg.seed)
    n_proc = accelerator.num_processes
    pad_id = runtime.pad_token_id(tokenizer)
    rows = pair_rows(tokenizer, pairs, cfg.max_len)
    if not rows:
        raise ValueError(f"no pair has a chosen and a rejected token within max_len={cfg.max_len}")
    rows, val_rows = held_out(rows, cfg.val_frac, cfg.seed)
    # every process scores all pairs: cheap next to training, and no gather needed
    ref = pair_logprobs(ref_model.to(accelerator.device), rows, pad_id, cfg.batch_size)
    items = [(c, r, lp) for (c, r), lp in zip(rows, ref)]

    model, loop = runtime.prepare_loop(accelerator, model, items, cfg,
                                       lambda b: collate_pairs(b, pad_id))
    if accelerator.is_main_process:
        print(f"[ipo] {len(pairs)} pairs -> {len(rows)} within max_len={cfg.max_len}, "
              f"{loop.total} steps of {cfg.batch_size} pairs on {n_proc} process(es), "
              f"beta={cfg.beta} (target margin {1 / (2 * cfg.beta):g}), "
              f"rpo_alpha={cfg.rpo_alpha}", flush=True)

    model.train()
    log, seen = runtime.StepLog(accelerator, live, loop.total, "ipo", cfg.log_every), 0
    for step, batch in enumerate(runtime.epochs(loop), 1):
        lp = _mean_logprobs(model, batch).view(-1, 2)  # B x [chosen, rejected]
        out = ipo_loss(lp[:, 0], lp[:, 1], batch["ref"][:, 0], batch["ref"][:, 1],
                       beta=float(cfg.beta), rpo_alpha=float(cfg.rpo_alpha))
        grad_norm = runtime.optimizer_step(accelerator, model, loop, out.loss.mean(), cfg.grad_clip)
        # sums over this process's pairs, then over processes; / n = means per pair
        with torch.no_grad():
            counts = runtime.reduce_sum(accelerator, torch.stack([
                out.loss.sum(), out.ipo.sum(), out.margin.sum(), (out.margin > 0).sum(),
                out.chosen_reward.sum(), out.rejected_reward.sum(), -lp[:, 0].sum(),
                torch.tensor(len(lp), device=lp.device), batch["attention_mask"].sum()]).float())
        seen += int(counts[-1])
        row = dict(zip(CURVES, (counts[:-2] / counts[-2]).tolist()))
        row.update(lr=loop.scheduler.get_last_lr()[0], grad_norm=float(grad_norm))
        runtime.check_finite(section, step, cfg, loss=row["loss"],
                             grad_norm=row["grad_norm"] if cfg.grad_clip else None)
        log.step(row,
                 (*CURVES, "lr", "grad_norm"), lambda r: {
                     "loss": f"{r['loss']:.3f}", "margin": f"{r['margin']:.3f}",
                     "acc": f"{r['pref_acc']:.2f}"})
        if stop := runtime.stop_reason(accelerator, cfg, step, loop.total, log.t0):
            break
    model, seconds = log.close(accelerator, model)
    summary = {**runtime.supervised_summary(log, loop, stop, seen, seconds, n_proc),
               "pairs": len(pairs), "pairs_used": len(rows), "val_pairs": len(val_rows),
               **runtime.first_final(log.curve, CURVES),
               **val_margins(model, ref_model, val_rows, pad_id, cfg)}
    log.publish(summary, stats,
                f"[ipo] {step} steps in {seconds:.1f}s ({summary['tokens_per_s']:.0f} tok/s), "
                f"loss {summary['loss_first']:.3f} -> {summary['loss_final']:.3f}, margin "
                f"{summary['margin_first']:.3f} -> {summary['margin_final']:.3f}, pref acc "
                f"{summary['pref_acc_final']:.2f} (stopped by {stop})")
    return model
