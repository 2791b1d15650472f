"""Pilot: a larger teacher with its own pre-training (`teacher.init: pretrain`), measured on the
development split at trace-training checkpoints (docs/defaults.md, "The fourth pilot").

    dvc repro problems traces          # its inputs
    python scripts/pilots/teacher.py --steps 2400 --checkpoints 1200 --log pilot_teacher.jsonl
"""

import argparse
import os
import random
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before torch loads
from common import REPLICATE, evaluate_dev

from countdown_rlvr.core import io
from countdown_rlvr.core.config import from_section
from countdown_rlvr.core.pretrain_config import Base
from countdown_rlvr.core.teacher_config import Teacher
from countdown_rlvr.data.traces import strategy_prompt
from countdown_rlvr.model.policy import load_model, new_tiny
from countdown_rlvr.train.pretrain import pretrain
from countdown_rlvr.train.sft import train_sft


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2400, help="trace-training steps (schedule)")
    ap.add_argument("--checkpoints", type=int, nargs="*", default=[1200])
    ap.add_argument("--out", default="pilot_models/teacher")
    ap.add_argument("--log", default="pilot_teacher.jsonl")
    args = ap.parse_args()
    params = io.load_params()
    cfg = replace(from_section(Teacher, "teacher", params, "teacher"), seed=REPLICATE,
                  init_seed=REPLICATE, max_steps=args.steps)
    model, tok = new_tiny(cfg.tiny_preset, cfg.init_seed)
    model = pretrain(model, tok, from_section(Base, "teacher", params, "base"))
    rng = random.Random(cfg.seed)
    traces = io.read_jsonl("data/traces/solver.jsonl")
    examples = [(strategy_prompt(r["prompt"], r["strategy"]) if rng.random() < cfg.hint_frac
                 else r["prompt"], r["completion"]) for r in traces]
    saved = {s: f"{args.out}/s{s}" for s in args.checkpoints}
    model = train_sft(model, tok, examples, cfg, checkpoints=saved)
    for step, path in saved.items():
        evaluate_dev(*load_model(path), f"teacher step {step}", args.log)
    evaluate_dev(model, tok, f"teacher step {args.steps}", args.log)


if __name__ == "__main__":
    main()
