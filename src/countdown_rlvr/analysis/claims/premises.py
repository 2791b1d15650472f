"""What a premise's decision says, written into the row it is the premise of (never a test):
a shaped row states its premise's outcome, the anti-collapse row its precondition's."""

from __future__ import annotations

from collections.abc import Mapping

from .engine import Claim
from .s1 import PREMISES


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
