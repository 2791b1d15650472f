"""Stage `base`: the base model every later stage starts from.

`model.base: tiny` builds the embedded Qwen2-architecture model and pre-trains all of its
parameters on a synthetic arithmetic corpus (not Countdown solutions), so it plays the role
of a pretrained base. Any other value (a hub id such as Qwen/Qwen2.5-0.5B, or a local model
dir) is passed through: data/models/base/REF.json names it and `model.resolve_base` follows it.

Also runs under `accelerate launch --multi_gpu --num_processes N stages/base.py`.
"""

import os
from pathlib import Path

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core.config import Model, from_section
from countdown_rlvr.core.pretrain_config import Base
from countdown_rlvr.model.policy import load_stage, new_tiny
from countdown_rlvr.train.pretrain import fit_pretrain
from countdown_rlvr.train.runtime import pass_through

OUT = Path("data/models/base")


def pretrain_tiny(model_cfg: Model, cfg: Base) -> None:
    model, tok = new_tiny(model_cfg.tiny_preset, model_cfg.seed)
    fit_pretrain("base", model, tok, cfg, OUT,
                 {"base": "tiny", "trained": True, "tiny_preset": model_cfg.tiny_preset,
                  "corpus_docs": cfg.corpus_size})


def main() -> None:
    params, model_cfg = load_stage("base", Model, "model")  # fails before any work
    if model_cfg.base != "tiny":
        pass_through("base", model_cfg.base, OUT)
        return
    pretrain_tiny(model_cfg, from_section(Base, "base", params, "base"))


if __name__ == "__main__":
    main()
