"""The headline: the only files DVC tracks as metrics (`dvc metrics show`, `dvc metrics diff`,
`dvc exp show`), written by the `report` stage.

DVC's convention is a small headline: what a user compares across experiments. Everything
else a stage measures stays in git as reports/details/<stage>.json (training summaries, per
replicate) and dvclive/ (per-step curves), where the report and `countdown-rlvr diff` read it.

    reports/metrics/eval/<policy>.json    pass@1, pass@1_sd, pass@16, pass@16_sd: test pass@k
                                          at the smallest and largest k, the mean over
                                          replicates and the SD across them (a shared policy,
                                          trained once, has no SD)
    reports/metrics/claims/<claim>.json   decision, decision_code, effect, p: each claim's
                                          decision (claims.Decision: a word and its number,
                                          claims.CODES), its pooled effect (or rate
                                          difference) and its Holm-adjusted p (claims/)

Files of one kind share their keys and the file's name is its subject, so
`dvc metrics show` prints one row per policy and per claim (~140 columns wide) and a
`dvc metrics diff` of two runs has at most 4 rows per compared policy, 2 per shared policy
and 4 per claim (decision, decision_code, effect, p). Secondary policies (evaluated for the
first replicate only) and the OOD split are in the details and the report, not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def policy(pooled: Mapping[str, Any]) -> dict:
    """eval/<policy>.json from compare's pooled block of one policy (split -> pass@k -> mean,
    sd, n): test pass@ at the smallest and largest k and their across-replicate SD."""
    test = pooled.get("test", {})
    ks = sorted((k for k in test if k.startswith("pass@")), key=lambda k: int(k[5:]))
    out = {}
    for k in dict.fromkeys(ks[:1] + ks[-1:]):
        for stat, key in (("mean", k), ("sd", f"{k}_sd")):
            if _is_number(value := test[k].get(stat)):
                out[key] = value
    return out


def claim(c) -> dict:
    """claims/<name>.json: the claim's decision (its word and its code, so `dvc metrics diff`
    shows a decision changing, not only a p), its effect and its Holm-adjusted p (a claim that
    could not be tested has its decision only)."""
    from .claims import CODES

    out = {"decision": c.decision.value, "decision_code": CODES[c.decision]}
    out.update((key, value) for key, value in (("effect", c.effect), ("p", c.adjusted))
               if _is_number(value))
    return out
