"""Stage `sft`: the student policy, fine-tuned from the base on the deduplicated verified
traces (completion-only loss, S4 eq. 1). `sft.adapter: lora | dora` saves a peft adapter
whose recorded base is the base model (hub id or absolute dir); `full` (the tiny default:
LoRA learns far less per CPU-second at ~1M parameters) a whole model.
The student sees the plain prompt (no strategy hint: that is the teacher's interface).

Also runs under `accelerate launch --multi_gpu --num_processes N stages/sft.py`.
"""

import json
from pathlib import Path

from countdown_rlvr import headline, io
from countdown_rlvr.config import SFT
from countdown_rlvr.model import load_stage
from countdown_rlvr.train.runtime import init_policy, is_main_process
from countdown_rlvr.train.sft import completion_metrics, fit_sft

TRAIN, VAL, BASE, OUT = "data/sft/train.jsonl", "data/sft/val.jsonl", "data/models/base", "data/models/sft"
DETAIL = Path(f"{io.DETAILS}/sft.json")  # fit_and_save wrote it; the validation numbers join it


def main() -> None:
    _, cfg = load_stage("sft", SFT)  # fails before any work
    io.require_inputs("sft", TRAIN, VAL, BASE)
    train = [(r["prompt"], r["completion"]) for r in io.read_jsonl(TRAIN)]
    val = [(r["prompt"], r["completion"]) for r in io.read_jsonl(VAL)]
    model, tok = init_policy("sft", BASE, cfg)
    model = fit_sft("sft", model, tok, train, cfg, OUT, {"adapter": cfg.adapter})
    if not is_main_process():
        return
    # held-out completion NLL after training: what train loss alone cannot show (overfitting)
    v = completion_metrics(model, tok, val, cfg.max_len, cfg.batch_size)
    metrics = {**json.loads(DETAIL.read_text()), "val_examples": len(val),  # dedup.val_frac 0: None
               "val_loss": round(v["loss"], 4) if val else None,
               "val_token_acc": round(v["token_acc"], 4) if val else None}
    io.write_metrics("sft", metrics, headline.training)
    print(f"[sft] validation: loss {metrics['val_loss']}, token acc {metrics['val_token_acc']} "
          f"({len(val)} examples) -> reports/metrics/sft.json")


if __name__ == "__main__":
    main()
