"""The plan's teacher premise of S4's OPD rows, which does decide: a run whose teacher misses
it has not set up S4's question, so those rows are not tested (`teacher_premise`). What a
premise's decision says in the row that rests on it (a shaped row its premise's, the
anti-collapse row its precondition's) is words, rendered at the edge (report.py,
`premise_words` and `note_words`) from the rows' decisions and numbers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..plan import TeacherPremise
from ..results import get
from .engine import Claim


def _pass_at(compare: Mapping | None, policy: str, k: int) -> float | None:
    """compare.json's pooled test-split pass@k of `policy` (mean over its replicates)."""
    return get(compare, "policies", policy, "test", f"pass@{k}", "mean")


def teacher_standing(compare: Mapping | None, premise: TeacherPremise) -> str | None:
    """None when the teacher meets the premise on the test split: its pass@K at least
    `pass_at_k_over_init` above OPD's start's (K: the largest both have) and its pass@1 at
    least `pass_at_1_over_sft` times SFT's; else how it falls short (or what is missing)."""
    ks = [int(key.split("@")[1]) for key in get(compare, "policies", "teacher", "test", default={})
          if key.startswith("pass@")]  # beside pass@k: coverage
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

