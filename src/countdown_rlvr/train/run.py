"""The stage side of supervised training, shared by `base`, `teacher` and `sft`:
validate the config, train with dvclive curves, save atomically, write metrics.

Training metrics (losses, accuracies, steps) are reproducible and go to
reports/details/<stage>.json, their headline to reports/metrics/<stage>.json; wall time and
throughput vary run to run and go to reports/timings/<stage>.json, outside DVC.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import headline
from ..io import StageError, write_metrics, write_timing
from ..model import load_model, n_parameters, policy_ref, save_policy_dir
from .sft import (
    ADAPTERS,
    SFT_DEFAULTS,
    apply_adapter,
    check_config,
    is_main_process,
    sft_config,
    train_sft,
)

TIMING_KEYS = ("seconds", "tokens_per_s", "tokens_processed", "processes")


def training_config(stage: str, sec: dict[str, Any], extra_keys: tuple[str, ...] = ()) -> dict:
    """The train_sft config of a params section; fails before any work on a bad key."""
    unknown = sorted(set(sec) - set(SFT_DEFAULTS) - set(extra_keys))
    if unknown:
        raise StageError(stage, f"params.yaml `{stage}` has unknown keys {unknown}; valid: "
                                f"{', '.join([*extra_keys, *SFT_DEFAULTS])}")
    try:
        return check_config(sft_config(sec))
    except ValueError as exc:
        raise StageError(stage, f"{exc} (fix the `{stage}:` section of params.yaml)") from exc


# Every training stage's `<stage>.adapter` section keys and their defaults.
ADAPTER_DEFAULTS: dict[str, Any] = {
    "adapter": "full",  # lora | dora | full (full fine-tuning: best at tiny sizes, SPEC §3)
    "lora_r": 64,  # LoRA rank (lora / dora only)
    "lora_alpha": 128,  # LoRA scale numerator: the update is scaled by alpha / r
    "lora_dropout": 0.0,
    "target_modules": "all-linear",  # peft target: every Linear except the output head
}


def init_policy(stage: str, init_dir: str | Path, sec: dict[str, Any]):
    """(model, tokenizer) to train, starting from the policy in `init_dir` (SPEC §3).

    `sec` is the stage's params section; its ADAPTER_DEFAULTS keys choose how to train:
    a LoRA (DoRA) adapter in `init_dir` is trained further when the stage asks for lora
    (dora) too (one adapter on the base, so `policy_ref` keeps working); otherwise the
    init policy is merged into plain weights and `apply_adapter` wraps it.
    """
    cfg = {**ADAPTER_DEFAULTS, **{k: sec[k] for k in ADAPTER_DEFAULTS if k in sec}}
    if cfg["adapter"] not in ADAPTERS:
        raise StageError(stage, f"`{stage}.adapter` {cfg['adapter']!r} is unknown; valid: "
                                f"{', '.join(ADAPTERS)}")
    try:
        ref = policy_ref(init_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise StageError(stage, f"{exc}; run `dvc repro` for the stage that writes {init_dir}") from exc
    adapter_cfg = Path(ref.adapter or "") / "adapter_config.json"
    if ref.adapter and cfg["adapter"] != "full" and adapter_cfg.exists() and \
            json.loads(adapter_cfg.read_text()).get("use_dora", False) == (cfg["adapter"] == "dora"):
        return load_model(ref.base, ref.adapter, is_trainable=True)  # same kind: train it on
    model, tok = load_model(ref.base, ref.adapter)
    if hasattr(model, "merge_and_unload"):  # a peft adapter under full / a new adapter
        model = model.merge_and_unload()
    model = apply_adapter(model, cfg["adapter"], r=cfg["lora_r"], alpha=cfg["lora_alpha"],
                          dropout=cfg["lora_dropout"], target_modules=cfg["target_modules"])
    return model, tok


def frozen_copy(init_dir: str | Path):
    """The init policy again, frozen in eval mode: the reference of IPO / RLOO / KL terms."""
    ref = policy_ref(init_dir)
    model, _ = load_model(ref.base, ref.adapter)
    model.eval().requires_grad_(False)
    return model


def open_live(name: str):
    """dvclive logger for dvclive/<name> on the main process (None elsewhere)."""
    if not is_main_process():
        return None
    from dvclive import Live

    # dvcyaml=None: dvc.yaml declares the plots itself; dvclive must not rewrite it
    return Live(f"dvclive/{name}", save_dvc_exp=False, dvcyaml=None)


def save_policy(model, tok, out_dir: str | Path) -> None:
    """save_pretrained of the model (or peft adapter) and tokenizer, atomically, loadable
    with plain transformers / peft from any directory (`model.save_policy_dir`)."""
    save_policy_dir(model, tok, out_dir)


def fit_and_save(stage: str, model, tok, examples: list[tuple[str, str]], cfg: dict,
                 out_dir: str | Path, extra_metrics: dict[str, Any] | None = None):
    """Train, save to `out_dir` (model or adapter, via save_pretrained), write metrics."""
    live = open_live(stage)
    stats: dict = {}
    model = train_sft(model, tok, examples, cfg, live=live, stats=stats)
    if live is None:  # not the main process
        return model
    save_policy(model, tok, out_dir)
    live.end()
    metrics = {
        **(extra_metrics or {}),
        "n_params": n_parameters(model), "examples": len(examples),
        "steps": stats["steps"], "planned_steps": stats["planned_steps"],
        "stopped_by": stats["stopped_by"], "epochs": stats["epochs"],
        "tokens_seen": stats["completion_tokens"],
        "loss_first": round(stats["loss_first"], 4), "loss_final": round(stats["loss_final"], 4),
        "token_acc_first": round(stats["token_acc_first"], 4),
        "token_acc_final": round(stats["token_acc_final"], 4),
    }
    write_metrics(stage, metrics, headline.training)
    write_timing(stage, {k: stats[k] for k in TIMING_KEYS})
    print(f"[{stage}] wrote {out_dir}, reports/metrics/{stage}.json (details in reports/details/), "
          f"reports/timings/{stage}.json, dvclive/{stage} (loss {metrics['loss_first']} -> "
          f"{metrics['loss_final']}, {stats['seconds']:.0f} s)")
    return model
