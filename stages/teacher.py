"""Stage `teacher`: the model whose samples become teacher traces and OPD targets.

`teacher.base: tiny` trains all parameters of a tiny model on the solver traces. A share
`teacher.hint_frac` of the prompts carry the trace's strategy hint, so the teacher can be
steered by the rotated strategy prompts of `teacher_traces` (S1 §3.1.1); the rest are the
plain prompt, so the teacher is also evaluated (`evaluate@teacher`) with the prompt and
sampler every policy gets. Where the traces' model comes from, `teacher.init`:
- `base` (the default): the student's pre-trained base (data/models/base), a peer of the
  student;
- `pretrain`: the larger `teacher.tiny_preset` built from `teacher.init_seed` and pre-trained
  as the base stage pre-trains the student (the `base:` section's corpus and loop,
  train.pretrain), for a teacher with a margin over the student (with the student's recipe it
  learned more slowly than the student: docs/defaults.md#teacher);
- `scratch`: `teacher.tiny_preset` from random weights, no pre-training.
Any other `teacher.base` (a hub id such as Qwen/Qwen2.5-1.5B-Instruct, or a local model dir)
is passed through.
"""

import os
import random
from pathlib import Path

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import io
from countdown_rlvr.core.config import from_section
from countdown_rlvr.core.pretrain_config import Base, Teacher
from countdown_rlvr.data.traces import strategy_prompt
from countdown_rlvr.model.policy import load_model, load_stage, new_tiny
from countdown_rlvr.train.pretrain import pretrain, pretrain_summary
from countdown_rlvr.train.runtime import pass_through
from countdown_rlvr.train.sft import fit_sft

SRC, BASE, OUT = "data/traces/solver.jsonl", "data/models/base", Path("data/models/teacher")


def trace_examples(cfg: Teacher) -> list[tuple[str, str]]:
    """The solver traces as (prompt, completion), a seeded share with the strategy hint."""
    rng = random.Random(cfg.seed)
    return [(strategy_prompt(r["prompt"], r["strategy"]) if rng.random() < cfg.hint_frac
             else r["prompt"], r["completion"]) for r in io.read_jsonl(SRC)]


def main() -> None:
    params, cfg = load_stage("teacher", Teacher)  # fails before any work
    pre_cfg = from_section(Base, "teacher", params, "base")  # init: pretrain's recipe
    if cfg.base != "tiny":
        pass_through("teacher", cfg.base, OUT)
        return
    io.require_inputs("teacher", SRC, *([BASE] if cfg.init == "base" else []))
    examples = trace_examples(cfg)
    details = {"base": "tiny", "trained": True, "init": cfg.init,
               "tiny_preset": None if cfg.init == "base" else cfg.tiny_preset}
    phases = None
    if cfg.init == "base":
        model, tok = load_model(BASE)
    else:
        model, tok = new_tiny(cfg.tiny_preset, cfg.init_seed)
    if cfg.init == "pretrain":
        print(f"[teacher] init: pretrain: pre-training the {cfg.tiny_preset} preset as the "
              "`base:` section says, then the traces", flush=True)
        stats: dict = {}
        model = pretrain(model, tok, pre_cfg, stats=stats)
        details["pretrain"], phases = pretrain_summary(stats), {"pretrain": stats["seconds"]}
    fit_sft("teacher", model, tok, examples, cfg, OUT, details, phases=phases)


if __name__ == "__main__":
    main()
