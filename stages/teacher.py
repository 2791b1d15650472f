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
With `teacher.rl` (a complete set of RLOO keys of its own: it inherits none of `rloo:`, so
an RLOO variant never re-trains the teacher), RLOO then trains the teacher further on the train problems, a stronger teacher for the same model size
(docs/defaults.md#teacher); its curves follow the trace training's in dvclive/teacher (steps
counted on, named `rl/<name>`) and its summary is `rl` in reports/details/teacher.json.
Any other `teacher.base` (a hub id such as Qwen/Qwen2.5-1.5B-Instruct, or a local model dir)
is passed through.
"""

import copy
import os
import random
import time
from pathlib import Path

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import inputs, io
from countdown_rlvr.core.config import from_section, prompt_style
from countdown_rlvr.core.pretrain_config import Base
from countdown_rlvr.core.rl_config import RLRun
from countdown_rlvr.core.teacher_config import Teacher
from countdown_rlvr.data.traces import strategy_prompt
from countdown_rlvr.model.policy import load_model, load_stage, new_tiny
from countdown_rlvr.train import runtime
from countdown_rlvr.train.pretrain import pretrain, pretrain_summary
from countdown_rlvr.train.rloo import first_problems, train_rloo
from countdown_rlvr.train.runtime import pass_through
from countdown_rlvr.train.sft import fit_sft, sft_metrics, train_sft

SRC, BASE, OUT = "data/traces/solver.jsonl", "data/models/base", Path("data/models/teacher")
TRAIN = "data/problems/train.jsonl"  # the RL phase's prompts (teacher.rl)
# the RL phase's summary in the details: what its run did and where its rollouts ended
RL_DETAILS = ("steps", "rollouts", "pass_rate_first", "pass_rate_final", "entropy_first",
              "entropy_final", "zero_std_frac_first", "zero_std_frac_final")


class RLCurves:
    """The dvclive logger of the RL phase: its `train/<name>` curves as `rl/<name>`, so its
    loss does not continue the trace training's `train/loss` (the steps count on)."""

    def __init__(self, live):
        self.live = live

    def log_metric(self, name: str, value: float) -> None:
        self.live.log_metric("rl/" + name.removeprefix("train/"), value)

    def next_step(self) -> None:
        self.live.next_step()


def trace_examples(cfg: Teacher, params: dict) -> list[tuple[str, str]]:
    """The solver traces as (prompt, completion), a seeded share with the strategy hint."""
    rng = random.Random(cfg.seed)
    return [(strategy_prompt(r["prompt"], r["strategy"]) if rng.random() < cfg.hint_frac
             else r["prompt"], r["completion"]) for r in inputs.read_rows("teacher", SRC, params)]


def main() -> None:
    params, cfg = load_stage("teacher", Teacher)  # fails before any work
    pre_cfg = from_section(Base, "teacher", params, "base")  # init: pretrain's recipe
    rl_cfg = None if cfg.rl is None else \
        from_section(RLRun, "teacher", params, "teacher.rl")
    if cfg.base != "tiny":
        if rl_cfg is not None:
            print(f"[teacher] teacher.rl is not run: teacher.base {cfg.base!r} is used as it "
                  "is (the RL phase trains a tiny teacher)", flush=True)
        pass_through("teacher", cfg.base, OUT)
        return
    io.require_inputs("teacher", SRC, *([BASE] if cfg.init == "base" else []),
                      *([TRAIN] if rl_cfg else []))
    examples = trace_examples(cfg, params)
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
    if rl_cfg is None:
        fit_sft("teacher", model, tok, examples, cfg, OUT, details, phases=phases,
                section="teacher")
        return
    problems = first_problems("teacher", TRAIN, rl_cfg.n_problems, params)
    style, phases = prompt_style("teacher", params), phases or {}

    def train(live, stats):
        """The trace training, then RLOO from its policy (KL to that policy), one curve."""
        trained = train_sft(model, tok, examples, cfg, live, stats, section="teacher")
        print(f"[teacher] teacher.rl: {rl_cfg.steps} RLOO steps, reward {rl_cfg.reward}",
              flush=True)
        ref = copy.deepcopy(trained) if rl_cfg.kl_coef > 0 else None
        t, rl_stats = time.time(), {}
        trained = train_rloo(trained, tok, problems, rl_cfg, ref_model=ref, prompt_style=style,
                             live=live and RLCurves(live), stats=rl_stats, section="teacher.rl")
        phases["rl"] = round(time.time() - t, 2)  # after the run: the timing's part of it
        details["rl"] = {"reward": rl_cfg.reward, **{
            k: round(v, 6) if isinstance(v, float) else v
            for k, v in rl_stats.items() if k in RL_DETAILS}}
        return trained

    runtime.fit_and_save("teacher", tok, OUT, train, sft_metrics(details), config=cfg,
                         phases=phases)


if __name__ == "__main__":
    main()
