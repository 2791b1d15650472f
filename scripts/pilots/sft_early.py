"""Pilot: where the SFT run passes S0's operating point (pass@1 ~0.09): checkpoints of the first
steps of the default SFT schedule, measured on the development split (docs/defaults.md, "The
fourth pilot"). The first N steps of a run do not depend on how long it goes on, so the run
stops after the last checkpoint.

    dvc repro problems traces base     # its inputs (data: solver and repair traces, not dedup)
    python scripts/pilots/sft_early.py --checkpoints 400 600 800 1000 1200
"""

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before torch loads
from common import REPLICATE, evaluate_dev

from countdown_rlvr.core import io
from countdown_rlvr.core.config import from_section
from countdown_rlvr.core.train_config import SFTStage
from countdown_rlvr.model.policy import load_model
from countdown_rlvr.train import runtime
from countdown_rlvr.train.sft import train_sft

TRACES = ("data/traces/solver.jsonl", "data/traces/repair.jsonl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoints", type=int, nargs="+", default=[400, 600, 800, 1000, 1200])
    ap.add_argument("--out", default="pilot_models/sft_early")
    ap.add_argument("--log", default="pilot_sft_early.jsonl")
    ap.add_argument("--samples", type=int, default=8, help="samples per dev problem (pass@n)")
    args = ap.parse_args()
    params = io.load_params()
    # replicate r moves the seed by r x 1,000,000, as the stages do
    cfg = replace(from_section(SFTStage, "sft", params, "sft"),
                  seed=params["sft"]["seed"] + REPLICATE * 1_000_000)
    model, tok = load_model("data/models/base")
    examples = [(r["prompt"], r["completion"]) for f in TRACES for r in io.read_jsonl(f)]
    last, stop = max(args.checkpoints), runtime.stop_reason
    # the schedule stays max_steps long; only the run ends at the last checkpoint
    runtime.stop_reason = lambda acc, c, step, total, t0: \
        "pilot" if step >= last else stop(acc, c, step, total, t0)
    saved = {s: f"{args.out}/s{s}" for s in args.checkpoints}
    train_sft(model, tok, examples, cfg, checkpoints=saved)
    for step, path in saved.items():
        evaluate_dev(*load_model(path), f"sft step {step}", args.log, args.samples)


if __name__ == "__main__":
    main()
