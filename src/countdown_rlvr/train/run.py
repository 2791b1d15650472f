"""The stage side of supervised training, shared by `base`, `teacher` and `sft`:
validate the config, train with dvclive curves, save atomically, write metrics.

Training metrics (losses, accuracies, steps) are reproducible and go to
reports/metrics/<stage>.json; wall time and throughput vary run to run and go to
reports/timings/<stage>.json, outside what `dvc metrics diff` should show as changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..io import StageError, atomic_path, write_json
from ..model import n_parameters
from .sft import SFT_DEFAULTS, check_config, is_main_process, sft_config, train_sft

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


def fit_and_save(stage: str, model, tok, examples: list[tuple[str, str]], cfg: dict,
                 out_dir: str | Path, extra_metrics: dict[str, Any] | None = None):
    """Train, save to `out_dir` (model or adapter, via save_pretrained), write metrics."""
    live = None
    main = is_main_process()
    if main:
        from dvclive import Live

        # dvcyaml=None: dvc.yaml declares the plots itself; dvclive must not rewrite it
        live = Live(f"dvclive/{stage}", save_dvc_exp=False, dvcyaml=None)
    stats: dict = {}
    model = train_sft(model, tok, examples, cfg, live=live, stats=stats)
    if not main:
        return model
    with atomic_path(out_dir) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
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
    write_json(f"reports/metrics/{stage}.json", metrics)
    write_json(f"reports/timings/{stage}.json", {k: stats[k] for k in TIMING_KEYS})
    print(f"[{stage}] wrote {out_dir}, reports/metrics/{stage}.json, "
          f"reports/timings/{stage}.json, dvclive/{stage} (loss {metrics['loss_first']} -> "
          f"{metrics['loss_final']}, {stats['seconds']:.0f} s)")
    return model
