"""Stage `rloo`: on-policy RL from the SFT policy with verifiable rewards (S4 eq. 3, S1 §3.1.4).

G rollouts per prompt from the current policy, reward `rloo.reward` (binary | format | shaped),
leave-one-out advantages, clipped importance weight to the sampler, Schulman k3 KL to the
frozen SFT policy (when rloo.kl_coef > 0), entropy bonus, optional success-gated curriculum
(S1 Alg. 1). Per-step diagnostics in dvclive/rloo; first / final values in reports/metrics/rloo.json.

Also runs under `accelerate launch --multi_gpu --num_processes N stages/rloo.py`.
"""

from countdown_rlvr.config import RL, from_section
from countdown_rlvr.io import load_params, require_inputs, section
from countdown_rlvr.model import configure
from countdown_rlvr.train.rloo import first_problems, fit_rl_and_save
from countdown_rlvr.train.runtime import frozen_copy, init_policy

SFT, TRAIN, OUT = "data/models/sft", "data/problems/train.jsonl", "data/models/rloo"


def main() -> None:
    params = load_params()
    configure(params)  # model.dtype for every load, sampler for saved policies
    cfg = from_section(RL, "rloo", params, "rloo")  # fails before any model loads
    style = section(params, "model", required=("prompt_style",))["prompt_style"]
    require_inputs("rloo", SFT)
    problems = first_problems("rloo", TRAIN, cfg.n_problems)
    model, tok = init_policy("rloo", SFT, cfg)
    ref = frozen_copy(SFT) if cfg.kl_coef > 0 else None
    fit_rl_and_save("rloo", model, tok, problems, cfg, OUT, ref_model=ref, prompt_style=style,
                    extra_metrics={"adapter": cfg.adapter, "curriculum": cfg.curriculum,
                                   "kl_coef": cfg.kl_coef})


if __name__ == "__main__":
    main()
