"""What a premise's decision says, written into the row it is the premise of (never a test):
a shaped row states its premise's outcome, the anti-collapse row its precondition's. And the
plan's teacher premise of S4's OPD rows, which does decide: a run whose teacher misses it
has not set up S4's question, so those rows are not tested (`teacher_premise`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..plan import TeacherPremise
from ..results import get
from .engine import Claim
from .s1 import PREMISES


def _pass_at(compare: Mapping | None, policy: str, k: int) -> float | None:
    """compare.json's pooled test-split pass@k of `policy` (mean over its replicates)."""
    return get(compare, "policies", policy, "test", f"pass@{k}", "mean")


def teacher_standing(compare: Mapping | None, premise: TeacherPremise) -> str | None:
    """None when the teacher meets the premise on the test split: its pass@K at least
    `pass_at_k_over_init` above OPD's start's (K: the largest both have) and its pass@1 at
    least `pass_at_1_over_sft` times SFT's; else how it falls short (or what is missing)."""
    ks = [int(key.split("@")[1]) for key in get(compare, "policies", "teacher", "test", default={})]
    ks = [k for k in ks if _pass_at(compare, premise.init, k) is not None]
    t1, s1 = _pass_at(compare, "teacher", 1), _pass_at(compare, "sft", 1)
    if not ks or t1 is None or s1 is None:
        return ("the teacher's, SFT's or OPD's start's test pass@k is not in compare.json: "
                "the teacher premise was not measured")
    k = max(ks)
    tk, ik = _pass_at(compare, "teacher", k), _pass_at(compare, premise.init, k)
    short = []
    if tk - ik < premise.pass_at_k_over_init - 1e-12:
        short.append(f"pass@{k} {tk:.3f} is {tk - ik:+.3f} over {premise.init}'s {ik:.3f}, "
                     f"below the plan's +{premise.pass_at_k_over_init:g}")
    if t1 < premise.pass_at_1_over_sft * s1 - 1e-12:
        short.append(f"pass@1 {t1:.3f} is {t1 / s1 if s1 else float('inf'):.2f}x SFT's "
                     f"{s1:.3f}, below the plan's {premise.pass_at_1_over_sft:g}x")
    return "; ".join(f"the teacher's {x}" for x in short) or None


def teacher_premise(claims: Sequence[Claim], compare: Mapping | None,
                    premise: TeacherPremise | None) -> None:
    """Mark the rows resting on the plan's teacher premise when it fails (before Holm: a row
    not tested leaves its family)."""
    if premise is None:
        return
    why = teacher_standing(compare, premise)
    for c in claims:
        if why and c.name in premise.claims:
            c.premise_failed = why


def relate(by: Mapping[str, Claim], alpha: float) -> None:
    """Each row that rests on another's outcome states it (decided rows; no test changes):
    a shaped row its premise's (does binary RLOO learn there?), the anti-collapse row its
    precondition's (did plain OPD collapse?), which it is tested without."""
    for name, (premise_name, point) in PREMISES.items():
        premise, main = by.get(premise_name), by.get(name)
        if premise is None or main is None or not premise.parts:
            continue
        learns = (premise.parts[0].test.pvalue or 1) < alpha and premise.effect > 0
        main.context = (f"premise (its own row): {premise.decision.value}, binary RLOO − "
                        f"{point.sft_label} pass@1 {premise.effect:+.3f}, so this row asks whether shaped adds "
                        "to a binary arm that " + ("learns" if learns else "is not shown to learn"))
    ac, col = by.get("opd_anti_collapse"), by.get("opd_collapses")
    if ac is not None and col is not None:
        found = (f"not testable: {col.why_not}" if col.why_not else col.decision.value
                 + ("" if col.effect is None else f", {col.unit} OPD − SFT {col.effect:+.3f}"))
        said = (f"precondition (plain OPD collapsed on the dev split, its own extension "
                f"row): {found}; this row is tested whatever it found")
        ac.note = "; ".join(x for x in (said, ac.note) if x)
