"""The research stages' logic (S0, S3): one small module per experiment.

    diagnose       zero-signal diagnosis of the SFT policy (S0 §3.2, §5.1)
    repair         feedback-conditioned repair under the six S0 conditions (S0 §3.3, Table 2)
                   and the self-distillation data built from it (S0 §3.4)
    interventions  single-step interventions with the solver as the oracle (S3 §4, Alg. 1)
"""

from __future__ import annotations

# The policies stage `int` compares by pass@k (int.json's rows), in its order -> the policy
# whose replicate dir holds it (data/models/<dir>/r<seed>). Here, torch-free, so that the
# report can import them.
INT_POLICY_DIRS = {"sft": "sft", "int_sft": "int_sft", "int": "int", "plain_rl": "int_plain_rl",
                   "int_solver_sft": "int_solver_sft", "rloo": "rloo"}
INT_POLICIES = tuple(INT_POLICY_DIRS)
