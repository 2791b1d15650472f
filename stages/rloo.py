"""Stage `rloo`: on-policy RL from the SFT policy with verifiable rewards (S4 eq. 3, S1 §3.1.4).

G rollouts per prompt from the current policy, reward `rloo.reward` (binary | format | shaped),
leave-one-out advantages, clipped importance weight to the sampler, Schulman k3 KL to the
frozen SFT policy (when rloo.kl_coef > 0), entropy bonus, optional success-gated curriculum
(S1 Alg. 1). Per-step diagnostics in dvclive/rloo; first / final values in reports/metrics/rloo.json.

`python stages/rloo.py rloo_shaped` is the stage `rloo_shaped`: the same run with the
`rloo_shaped:` section's keys (reward: shaped) over the `rloo:` section, so the two arms differ
only there (S1's claim: the shaped reward leaves fewer zero-std groups than the binary one);
it writes data/models/rloo_shaped, dvclive/rloo_shaped and reports/*/rloo_shaped.json.

Also runs under `accelerate launch --multi_gpu --num_processes N stages/rloo.py`.
"""

import sys

from countdown_rlvr import io
from countdown_rlvr.config import RL, prompt_style
from countdown_rlvr.model import load_stage
from countdown_rlvr.train.rloo import first_problems, fit_rl_and_save
from countdown_rlvr.train.runtime import frozen_copy, init_policy

SFT, TRAIN = "data/models/sft", "data/problems/train.jsonl"
ARMS = ("rloo", "rloo_shaped")  # stage name = its params section = its output names


def main(stage: str = "rloo") -> None:
    if stage not in ARMS:
        raise io.StageError("rloo", f"unknown RLOO arm {stage!r}; valid: {', '.join(ARMS)}")
    # an arm's section lists only what differs from `rloo` (rloo_shaped: reward: shaped)
    params, cfg = load_stage(stage, RL, inherit=None if stage == "rloo" else "rloo")
    style = prompt_style(stage, params)
    io.require_inputs(stage, SFT)
    problems = first_problems(stage, TRAIN, cfg.n_problems)
    model, tok = init_policy(stage, SFT, cfg)
    ref = frozen_copy(SFT) if cfg.kl_coef > 0 else None
    fit_rl_and_save(stage, model, tok, problems, cfg, f"data/models/{stage}", ref_model=ref,
                    prompt_style=style, extra_metrics={"adapter": cfg.adapter,
                                                       "curriculum": cfg.curriculum,
                                                       "kl_coef": cfg.kl_coef})


if __name__ == "__main__":
    main(*sys.argv[1:2])
