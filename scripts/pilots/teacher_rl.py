"""Pilot: an RL-trained teacher. The peer teacher (`teacher.init: base`, the default recipe)
trained further by binary RLOO, each variant from the same teacher, every policy measured on the
development split at 16 samples (docs/defaults.md, "The fifth pilot").

    dvc repro problems traces base     # its inputs
    python scripts/pilots/teacher_rl.py --variant default --variant entropy_coef=0.01,sampler.temperature=1.0

A variant is `default` (the `rloo:` section as it is) or comma-separated `key=value` overrides
of it (`sampler.<key>` for the rollout sampler). The teacher is trained once and reused from
--out when it is there (and measured once per --log).
"""

import argparse
import os
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "stages"))
from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before torch loads
from common import REPLICATE, evaluate_dev
from teacher import trace_examples

from countdown_rlvr.core import io
from countdown_rlvr.core.config import from_section, prompt_style
from countdown_rlvr.core.replicates import for_replicate
from countdown_rlvr.core.rl_config import RL
from countdown_rlvr.core.teacher_config import Teacher
from countdown_rlvr.model.policy import load_model, save_policy_dir
from countdown_rlvr.train.rloo import train_rloo
from countdown_rlvr.train.runtime import frozen_copy
from countdown_rlvr.train.sft import train_sft


def rl_config(params: dict, variant: str) -> RL:
    """The `rloo:` section with the variant's overrides (merged as an arm's section is), at
    the pilot's replicate seed."""
    overrides: dict = {}
    for item in [] if variant == "default" else variant.split(","):
        key, value = item.split("=", 1)
        *parents, leaf = key.split(".")
        block = overrides
        for part in parents:
            block = block.setdefault(part, {})
        block[leaf] = yaml.safe_load(value)
    params = {**params, "pilot": overrides}
    return for_replicate(from_section(RL, "pilot", params, "pilot", inherit="rloo"), REPLICATE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--out", default="pilot_models/teacher_rl")
    ap.add_argument("--log", default="pilot_teacher_rl.jsonl")
    ap.add_argument("--samples", type=int, default=16)
    args = ap.parse_args()
    params = io.load_params()
    teacher_dir = f"{args.out}/teacher"
    if not Path(teacher_dir, "config.json").exists():
        cfg = for_replicate(from_section(Teacher, "teacher", params, "teacher"), REPLICATE)
        model, tok = load_model("data/models/base")
        model = train_sft(model, tok, trace_examples(cfg, params), cfg)
        save_policy_dir(model, tok, teacher_dir)
    logged = Path(args.log).read_text() if Path(args.log).exists() else ""
    if '"peer teacher"' not in logged:
        evaluate_dev(*load_model(teacher_dir), "peer teacher", args.log, args.samples)
    style = prompt_style("pilot", params)
    problems = io.read_jsonl("data/problems/train.jsonl")
    for variant in args.variant:
        cfg = rl_config(params, variant)
        model, tok = load_model(teacher_dir)
        ref = frozen_copy(teacher_dir) if cfg.kl_coef > 0 else None
        model = train_rloo(model, tok, problems[:cfg.n_problems], cfg, ref_model=ref,
                           prompt_style=style)
        evaluate_dev(model, tok, f"teacher + RLOO {variant}", args.log, args.samples)


if __name__ == "__main__":
    main()
