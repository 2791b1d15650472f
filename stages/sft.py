"""Stage `sft`: the student policy, fine-tuned from the base on the deduplicated verified
traces (completion-only loss, S4 eq. 1). `sft.adapter: lora | dora` saves a peft adapter
whose recorded base is the base model (hub id or absolute dir); `full` (the tiny default:
LoRA learns far less per CPU-second at ~1M parameters) a whole model.
The student sees the plain prompt (no strategy hint: that is the teacher's interface).

    python stages/sft.py <replicate seed>    # one of replicates.seeds -> data/models/sft/r<seed>
                                             # (and data/models/sft_early/r<seed>)

`sft.early_step` (null = none): the policy after that optimizer step of this same run is also
saved, as `sft_early`: S0's operating point (pass@1 ~0.09), where the RL arms that start from
it (`init: sft_early`) ask the shaped-reward claim again.

Also runs under `accelerate launch --multi_gpu --num_processes N stages/sft.py <seed>`.
"""

import json
import os
import sys
from pathlib import Path

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import io
from countdown_rlvr.core.replicates import model_dir, run_name
from countdown_rlvr.core.train_config import SFTStage
from countdown_rlvr.model.policy import load_replicate_stage
from countdown_rlvr.train.runtime import init_policy, is_main_process
from countdown_rlvr.train.sft import completion_metrics, fit_sft

TRAIN, VAL, BASE = "data/sft/train.jsonl", "data/sft/val.jsonl", "data/models/base"
EARLY = "sft_early"  # the policy name of the early checkpoint (data/models/sft_early/r<seed>)


def main(argv: list[str]) -> None:
    _, cfg, r = load_replicate_stage("sft", SFTStage, argv[0] if argv else None)  # fails
    # before work
    name, out = run_name("sft", r), model_dir("sft", r)
    early = {} if cfg.early_step is None else {cfg.early_step: model_dir(EARLY, r)}
    detail = Path(f"{io.DETAILS}/{name}.json")  # fit_and_save writes it; validation joins it
    io.require_inputs("sft", TRAIN, VAL, BASE)
    train = [(r["prompt"], r["completion"]) for r in io.read_jsonl(TRAIN)]
    val = [(r["prompt"], r["completion"]) for r in io.read_jsonl(VAL)]
    model, tok = init_policy("sft", BASE, cfg)
    model = fit_sft(name, model, tok, train, cfg, out, {"adapter": cfg.adapter, "replicate": r,
                                                       "early_step": cfg.early_step},
                    checkpoints=early)
    if not is_main_process():
        return
    # held-out completion NLL after training: what train loss alone cannot show (overfitting)
    v = completion_metrics(model, tok, val, cfg.max_len, cfg.batch_size)
    metrics = {**json.loads(detail.read_text()), "val_examples": len(val),  # dedup.val_frac 0: None
               "val_loss": round(v["loss"], 4) if val else None,
               "val_token_acc": round(v["token_acc"], 4) if val else None}
    io.write_details(name, metrics)
    print(f"[{name}] validation: loss {metrics['val_loss']}, token acc {metrics['val_token_acc']} "
          f"({len(val)} examples) -> {io.DETAILS}/{name}.json")


if __name__ == "__main__":
    main(sys.argv[1:])
