"""Which chain trains a policy, and which policies the evaluate stages sample.

A replicated policy is trained, and evaluated, on the seeds of its chain (`replicates.<chain>`,
config.CHAINS): `compare` reads its records on those seeds, the report checks its arm there,
and a claim about it is planned by adding seeds to that list. The chain follows from the stage
that trains the policy (cli/experiment.py names the outputs): `sft` and its early checkpoint
`sft_early` (saved by the sft stage when sft.early_step is set) -> sft; `ipo_<source>`
(stages ipo, ipo_first) -> ipo; an arm (core.arms) -> its script's chain (rloo, opd);
`distill_<condition>` (distill, distill_first, from repair's outputs) -> repair; the int
stage's policies (research.INT_POLICY_DIRS) -> int. tests/test_experiment.py checks these
rules against the chain each evaluate stage of dvc.yaml is given.

    chain_of(policy)          -> its chain, None for a shared policy or a name no stage trains
    evaluation_stage(policy)  -> the evaluate stage group that samples it
    trained_arms(params)      -> the arms (core.arms) this run trains: those an evaluate list names
    sampled(params)           -> {policy: True (every seed of its chain) | False (its first seed)}

An arm is trained only when an evaluate list names it (`policies`, `controls`,
`first_replicate_only`): a run leaves an arm out by leaving it out of those lists (and out of
`compare.pairs`), then writes dvc.yaml anew; its report rows read "not run".

Torch-free (the compare stage, the report and the params check import it); the training and
evaluate stages do not (they must not re-run when an arm is added).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.arms import ARMS
from ..research import INT_POLICY_DIRS

# the policies the int stage trains (data/models/<dir>/r<seed>); sft and rloo are its inputs
INT_POLICIES = tuple(d for d in INT_POLICY_DIRS.values() if d not in ("sft", "rloo"))
# the sft stage's policies: the final one and, when sft.early_step is set, its early checkpoint
SFT_POLICIES = ("sft", "sft_early")


def chain_of(policy: str) -> str | None:
    """The chain whose seeds `policy` is trained on (None: not a replicated policy)."""
    if policy in SFT_POLICIES:
        return "sft"
    arm = next((a for a in ARMS if a.name == policy), None)
    if arm is not None:
        return arm.script
    if policy.startswith("ipo_"):
        return "ipo"
    if policy.startswith("distill_"):
        return "repair"
    if policy in INT_POLICIES:
        return "int"
    return None


def evaluation_stage(policy: str) -> str:
    """The dvc.yaml stage group that samples `policy`, for messages: `evaluate_<the stage that
    trains it>` (cli.experiment.evaluation; a pair source or condition trained for the first
    seed only is sampled by that group's `_first` twin), `evaluate_shared` for a policy
    trained once."""
    chain = chain_of(policy)
    if chain is None:
        return "evaluate_shared"
    if policy in SFT_POLICIES:  # each has an evaluation of its own name
        return f"evaluate_{policy}"
    arm = next((a for a in ARMS if a.name == policy), None)
    stage = arm.stage if arm else {"ipo": "ipo", "repair": "distill"}.get(chain, chain)
    return f"evaluate_{stage}"


def trained_arms(params: Mapping[str, Any]) -> tuple[str, ...]:
    """The arms (core.arms, in ARMS order) that `params` trains: those named by an evaluate list
    (policies, controls, first_replicate_only). Every arm's stage has its evaluation, so an arm
    no list reads would be trained for nothing; leaving it out is how a run drops it."""
    ev = params.get("evaluate") or {}
    listed = {p for key in ("policies", "controls", "first_replicate_only")
              for p in ev.get(key) or []}
    return tuple(a.name for a in ARMS if a.name in listed)


def sampled(params: Mapping[str, Any]) -> dict[str, bool]:
    """Every replicated policy an evaluate stage samples with these params: True on every seed
    of its chain, False on its chain's first seed only (a first-replicate arm). Each training
    stage's evaluation runs over that stage's matrix; only the int stage's policies are
    sampled when `evaluate.int_policies` lists them (the S3 claim reads int's own problems)."""
    def listed(section: str, key: str) -> list[str]:
        return list((params.get(section) or {}).get(key) or [])

    out = {"sft": True}
    if (params.get("sft") or {}).get("early_step") is not None:
        out["sft_early"] = True
    out |= {f"ipo_{s}": False for s in listed("ipo", "first_replicate_sources")}
    out |= {f"ipo_{s}": True for s in listed("ipo", "sources")}
    out |= {a.name: a.replicates == "all" for a in ARMS if a.name in trained_arms(params)}
    out |= {f"distill_{c}": False for c in listed("distill", "first_replicate_conditions")}
    out |= {f"distill_{c}": True for c in listed("distill", "conditions")}
    out |= {p: True for p in listed("evaluate", "int_policies")}
    return out
