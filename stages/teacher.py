"""Stage `teacher`: the model whose samples become teacher traces and OPD targets.

`teacher.base: tiny` trains all parameters of a tiny model on the solver traces. A share
`teacher.hint_frac` of the prompts carry the trace's strategy hint, so the teacher can be
steered by the rotated strategy prompts of `teacher_traces` (S1 §3.1.1); the rest are the
plain prompt, so the teacher is also evaluated (`evaluate@teacher`) with the prompt and
sampler every policy gets. `teacher.init: base` starts from the
pre-trained base (which already copies operands from its prompt) and trains longer than the
student's SFT; `teacher.init: scratch` builds the larger `teacher.tiny_preset` from random
weights. Any other `teacher.base` (a hub id such as Qwen/Qwen2.5-1.5B-Instruct, or a local
model dir) is passed through.
"""

import os
import random
from pathlib import Path

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import io
from countdown_rlvr.core.pretrain_config import Teacher
from countdown_rlvr.data.traces import strategy_prompt
from countdown_rlvr.model.policy import load_model, load_stage, new_tiny
from countdown_rlvr.train.runtime import pass_through
from countdown_rlvr.train.sft import fit_sft

SRC, BASE, OUT = "data/traces/solver.jsonl", "data/models/base", Path("data/models/teacher")


def main() -> None:
    _, cfg = load_stage("teacher", Teacher)  # fails before any work
    if cfg.base != "tiny":
        pass_through("teacher", cfg.base, OUT)
        return
    io.require_inputs("teacher", SRC, BASE)
    traces = io.read_jsonl(SRC)
    rng = random.Random(cfg.seed)
    examples = [(strategy_prompt(r["prompt"], r["strategy"]) if rng.random() < cfg.hint_frac
                 else r["prompt"], r["completion"]) for r in traces]
    if cfg.init == "base":
        model, tok = load_model(BASE)
    else:
        model, tok = new_tiny(cfg.tiny_preset, cfg.init_seed)
    fit_sft("teacher", model, tok, examples, cfg, OUT,
            {"base": "tiny", "trained": True, "init": cfg.init,
             "tiny_preset": cfg.tiny_preset if cfg.init == "scratch" else None})


if __name__ == "__main__":
    main()
