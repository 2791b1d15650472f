"""Stage `opd` and its arms: on-policy distillation from the frozen teacher (S4 §3.3, Alg. 1).

    python stages/opd.py <variant> <seed>   # variant: `opd` or an OPD arm (countdown_rlvr.core.arms)
                                            # seed: one of replicates.opd
                                            # -> data/models/<variant>/r<seed>

Every variant starts from the policy `opd.init` names, the RLOO policy of the same seed by
default (data/models/rloo/r<seed>), with the same steps and rollouts (a variant's section
lists only the keys that differ from opd's, e.g. the anti-collapse knobs), so the comparison
with `opd` isolates those keys. Why RLOO's policy: S4 Table 5 gives OPD's initialization as
"RLOO-style init", which we read as the RLOO policy, where RL's collapse already is (S4's
pass@16: SFT 0.800 -> RLOO 0.740 -> OPD 0.780), so `opd` vs `rloo` asks S4's baseline question,
does the teacher add anything beyond RL. The anti-collapse variant starts from that same policy
with opd's budget, only S4's two knobs differ: it tests S4's attribution ("the diversity
knobs, not more steps") more cleanly than S4's own run, warm-started from the best OPD
checkpoint for 150 more steps.

The student samples G rollouts per prompt; the loss on its response tokens is
lambda_KL * KL(teacher^(1/T) || student^(1/T)) (forward KL over the shared vocabulary)
+ lambda_RL * RLOO term - lambda_H * entropy (params `<variant>.distill_coef / rl_coef /
entropy_coef / distill_temperature`). Teacher and student must share a tokenizer.

Also runs under `accelerate launch --multi_gpu --num_processes N stages/opd.py <variant> <seed>`.
"""

import os
import sys

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import io
from countdown_rlvr.core.config import prompt_style
from countdown_rlvr.core.replicates import model_dir, run_name
from countdown_rlvr.core.rl_config import OPD
from countdown_rlvr.model.policy import load_model, load_replicate_stage, policy_ref
from countdown_rlvr.train.rloo import first_problems, fit_rl_and_save, init_dir
from countdown_rlvr.train.runtime import frozen_copy, init_policy

TEACHER, TRAIN = "data/models/teacher", "data/problems/train.jsonl"


def load_teacher(stage: str, student_tok):
    """The frozen teacher; its tokenizer must be the student's (token-level KL, S4 §3.3)."""
    ref = policy_ref(TEACHER)
    teacher, t_tok = load_model(ref.base, ref.adapter)
    if t_tok.get_vocab() != student_tok.get_vocab():
        raise io.StageError(stage, f"the teacher ({ref.base}) and the student use different "
                                   "tokenizers; on-policy distillation compares token distributions, "
                                   "so pick a teacher of the student's tokenizer family (teacher.base)")
    return teacher.eval().requires_grad_(False)


def main(argv: list[str]) -> None:
    if not argv:
        raise io.StageError("opd", "usage: python stages/opd.py <variant> <seed> (<variant>: opd "
                                   "or an OPD arm of countdown_rlvr.core.arms, a params.yaml section)")
    stage = argv[0]  # a variant's section lists only what differs from opd's (the arms' rule)
    params, cfg, r = load_replicate_stage(stage, OPD, argv[1] if len(argv) == 2 else None,
                                          inherit=None if stage == "opd" else "opd",
                                          chain="opd")  # fails
    # before any model loads
    init, out = init_dir(stage, cfg.init, r, params), model_dir(stage, r)
    style = prompt_style(stage, params)
    io.require_inputs(stage, init, TEACHER)
    problems = first_problems(stage, TRAIN, cfg.n_problems, params)
    model, tok = init_policy(stage, init, cfg)
    teacher = load_teacher(stage, tok)
    ref = frozen_copy(init) if cfg.kl_coef > 0 else None
    fit_rl_and_save(run_name(stage, r), model, tok, problems, cfg, out, ref_model=ref, section=stage,
                    teacher=teacher, prompt_style=style, extra_metrics={
                        "init": init, "teacher": TEACHER, "replicate": r, "adapter": cfg.adapter,
                        "distill_coef": cfg.distill_coef, "rl_coef": cfg.rl_coef,
                        "entropy_coef": cfg.entropy_coef,
                        "distill_temperature": cfg.distill_temperature})


if __name__ == "__main__":
    main(sys.argv[1:])
