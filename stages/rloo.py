"""Stage `rloo`: on-policy RL with verifiable rewards (S4 eq. 3, S1 §3.1.4) from the policy
`<arm>.init` names (`sft` by default; `sft_early`, the SFT run's early checkpoint: S0's
operating point; `rloo`, the RLOO policy of the same seed), data/models/<init>/r<seed>.

G rollouts per prompt from the current policy, reward `rloo.reward` (binary | format | shaped),
leave-one-out advantages, clipped importance weight to the sampler, Schulman k3 KL to the
frozen init policy (when rloo.kl_coef > 0), entropy bonus, optional success-gated curriculum
(S1 Alg. 1). Per-step diagnostics in dvclive/rloo/r<seed>; first / final values in
reports/details/<arm>/r<seed>.json.

    python stages/rloo.py <arm> <replicate seed>   # arm: `rloo` or an RLOO arm (countdown_rlvr.core.arms);
                                                   # seed: one of replicates.rloo

An arm other than `rloo` is the same run with its own section's keys over the `rloo:`
section, so the arms differ only there (params.yaml says what each one sets and why). Each
writes data/models/<arm>/r<seed>, dvclive/<arm>/r<seed> and reports/*/<arm>/r<seed>.json.

Also runs under `accelerate launch --multi_gpu --num_processes N stages/rloo.py <arm> <seed>`.
"""

import os
import sys

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import io
from countdown_rlvr.core.config import prompt_style
from countdown_rlvr.core.replicates import model_dir, run_name
from countdown_rlvr.core.rl_config import RL
from countdown_rlvr.model.policy import load_replicate_stage
from countdown_rlvr.train.rloo import first_problems, fit_rl_and_save, init_dir
from countdown_rlvr.train.runtime import frozen_copy, init_policy

TRAIN = "data/problems/train.jsonl"


def main(argv: list[str]) -> None:
    if not argv:
        raise io.StageError("rloo", "usage: python stages/rloo.py <arm> <seed> (<arm>: rloo or "
                                    "an RLOO arm of countdown_rlvr.core.arms, a params.yaml section)")
    stage = argv[0]  # the arm: its params section, its stage and its outputs' name
    # an arm's section lists only what differs from rloo's (arms.inherited_section: the rule
    # is applied here without reading the registry, so adding an arm re-runs no other arm)
    params, cfg, r = load_replicate_stage(stage, RL, argv[1] if len(argv) == 2 else None,
                                          inherit=None if stage == "rloo" else "rloo",
                                          chain="rloo")
    style = prompt_style(stage, params)
    init = init_dir(stage, cfg.init, r, params)
    io.require_inputs(stage, init)
    problems = first_problems(stage, TRAIN, cfg.n_problems, params)
    model, tok = init_policy(stage, init, cfg)
    ref = frozen_copy(init) if cfg.kl_coef > 0 else None
    fit_rl_and_save(run_name(stage, r), model, tok, problems, cfg, model_dir(stage, r),
                    ref_model=ref, prompt_style=style, section=stage,
                    extra_metrics={"init": init, "adapter": cfg.adapter,
                                   "curriculum": cfg.curriculum, "kl_coef": cfg.kl_coef,
                                   "replicate": r})


if __name__ == "__main__":
    main(sys.argv[1:])
