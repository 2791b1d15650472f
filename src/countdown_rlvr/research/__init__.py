"""The research stages' logic (S0, S3): one small module per experiment.

    diagnose       zero-signal diagnosis of the SFT policy (S0 §3.2, §5.1)
    repair         feedback-conditioned repair under the six S0 conditions (S0 §3.3, Table 2)
                   and the self-distillation data built from it (S0 §3.4)
    interventions  single-step interventions with the solver as the oracle (S3 §4, Alg. 1)
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..io import atomic_path, empty_curves, write_json

# The policies stage `int` compares by pass@k (int.json's rows), in its order -> the policy
# whose replicate dir holds it (data/models/<dir>/r<seed>). Here, torch-free, so that the
# report can import them.
INT_POLICY_DIRS = {"sft": "sft", "int_sft": "int_sft", "int": "int", "plain_rl": "int_plain_rl",
                   "int_solver_sft": "int_solver_sft", "rloo": "rloo"}
INT_POLICIES = tuple(INT_POLICY_DIRS)


# In a policy dir: the policy is its source unchanged, so evaluating it only repeats the source
NOT_TRAINED = "NOT_TRAINED.json"


def untrained(src: str | Path, dest: str | Path, curves: str, same_as_source: bool = False,
              reason: str = "") -> None:
    """What a training step writes when it has no data to train on: the policy in `src`
    saved unchanged as `dest` (atomically), so every later stage still finds its input, and
    header-only dvclive/<curves> curves, the curve dir dvc.yaml declares as an output.
    `same_as_source`: mark `dest` (NOT_TRAINED.json, with `reason`) so that `evaluate` skips
    it instead of sampling a copy of a policy it already samples."""
    with atomic_path(dest) as tmp:
        shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(NOT_TRAINED))
        if same_as_source:
            write_json(Path(tmp) / NOT_TRAINED, {"source": Path(src).as_posix(), "reason": reason})
    empty_curves(curves)
