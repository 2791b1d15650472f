"""The claims, each tested with the training draw (the replicate) as the unit.

One function per claim returns a `Claim`: numbers (this run's pooled effect, its interval,
each replicate's effect, the ps of its decision tests) and, after `evaluate`, a `Decision`.
Words are rendered at the edge: the report (`report.py`) and the metrics (`headline.py`).
docs/statistics.md states the rules; plan.yaml (`plan.py`) fixes each claim's smallest
effect of interest (delta), its family and its planned power.

The package, bottom to top (a module imports only those below it):

    engine      Claim, Decision, the decision tests, Holm within a family, replicates needed
    builders    what several claims share: pair tests, the plan's numbers, repair contrasts
    s0, s1, s3, s4, extensions
                one module per seed document (S0: zero-signal share, feedback, self-distill;
                S1: shaped reward at two operating points, IPO sources; S3: interventions;
                S4: RLOO sharpens, OPD, anti-collapse) and the project's extensions
    premises    the plan's teacher premise of S4's OPD rows
    (here)      the list of claims, their arm checks and `evaluate`
"""

from __future__ import annotations

from collections.abc import Callable

from ...core.arms import ARMS
from .. import checks
from ..chains import chain_of
from ..plan import Plan as AnalysisPlan
from ..plan import load_plan
from ..results import Inputs
from .builders import (
    FEEDBACK,
    pair_chain,
    pass_at_k_per_problem,
    per_problem,
    zero_share_per_problem,
)
from .engine import (
    ABOVE,
    ADD_REPLICATES,
    ALPHA,
    AWAY,
    CODES,
    EFFECT,
    EXPLORATORY,
    EXTENSION,
    FAMILIES,
    MARGIN,
    NO_CHANGE,
    NO_CROSSED,
    NO_RECORDS,
    OBSERVED,
    PLANNED,
    POWER,
    PROBLEMS,
    SEED,
    SHARE,
    Claim,
    Decision,
    Needed,
    Part,
    Plan,
    added_cost,
    decide_families,
    family,
    grown,
    holm_family,
)
from .extensions import every_f_beats_f0, opd_collapses, resample_beats_f0
from .premises import teacher_premise
from .s0 import feedback, self_distill, zero_informative, zero_informative_early
from .s1 import (
    PREMISES,
    ipo_sources,
    shaped,
    shaped_early,
    shaped_premise,
    shaped_premise_early,
)
from .s3 import interventions
from .s4 import opd_anti_collapse, opd_beats_rloo, rloo_sharpens

# the names other modules and the tests read, besides each claim's function
__all__ = ["ABOVE", "ADD_REPLICATES", "ALPHA", "AWAY", "CLAIMS", "CODES", "EFFECT", "EXPLORATORY",
           "EXTENSION", "FAMILIES", "FEEDBACK", "MARGIN", "NO_CHANGE", "NO_CROSSED", "NO_RECORDS",
           "OBSERVED", "PLANNED", "POWER", "PREMISES", "PROBLEMS", "SEED", "SHARE", "SHORT",
           "Claim", "Decision", "Needed", "Part", "Plan", "added_cost", "check_arms",
           "decide_families", "evaluate", "family", "grown", "holm_family", "pair_chain",
           "pass_at_k_per_problem", "per_problem", "zero_share_per_problem"]

# each claim in a few words: the report's list and table, the forest plot
SHORT = {"zero_informative": "S0: zero-signal share > 50%",
         "zero_informative_early": "S0: zero-signal share > 50%, early SFT (S0's)",
         "feedback": "S0: resample R beats every feedback F",
         "self_distill": "S0: SD-R > SFT, pass@1",
         "shaped_premise": "S1 premise, this run's SFT: binary flat, pass@1",
         "shaped": "S1, this run's SFT: shaped > binary, pass@1",
         "shaped_premise_early": "S1 premise, early SFT (S0's): binary flat, pass@1",
         "shaped_early": "S1, early SFT (S0's): shaped > binary, pass@1",
         "ipo_sources": "S1: IPO easyneg > scripted, avg pass@k",
         "rloo_sharpens": "S4: RLOO raises pass@1, not pass@k",
         "opd_beats_rloo": "S4: OPD > RLOO, pass@1 and pass@k",
         "opd_anti_collapse": "S4: anti-collapse OPD > OPD, pass@k",
         "interventions": "S3: InT + RL > RL, held-out pass@K",
         "every_f_beats_f0": "ext: every F beats F0",
         "resample_beats_f0": "ext: R beats F0",
         "opd_collapses": "ext: OPD collapsed on dev (pass@k < SFT's, pass@1 not)"}
CLAIMS: tuple[Callable[[Inputs, AnalysisPlan], Claim], ...] = (
    zero_informative, zero_informative_early, feedback, self_distill, shaped_premise, shaped, shaped_premise_early,
    shaped_early, ipo_sources, rloo_sharpens, opd_beats_rloo, opd_anti_collapse, interventions,
    every_f_beats_f0, resample_beats_f0, opd_collapses)


ARM_NAMES = {a.name for a in ARMS}  # a run trains those its evaluate lists name


def check_arms(c: Claim, inp: Inputs) -> None:
    """Each arm checked in every replicate of its own chain (its seeds, not the union's); an
    arm of the first replicate only (core/arms.py) in its chain's first seed, the one it ran."""
    first_only = {a.name for a in ARMS if a.replicates == "first"}

    def tags(arm: str) -> list[str]:
        runs = inp.runs.get(checks.CHECKS[arm].file, {})
        seeds = inp.tags_of(chain_of(arm) or "sft") or sorted(runs)
        return seeds[:1] if arm in first_only else seeds

    c.arm_checks = [checks.check(arm, inp.runs.get(checks.CHECKS[arm].file, {}), tags(arm))
                    for arm in c.arms]
    c.check_status, c.check_why = checks.summarize(c.arm_checks)


def evaluate(inp: Inputs, plan: AnalysisPlan | None = None) -> list[Claim]:
    """Every claim with the plan's numbers (plan.yaml when None), its arms checked, its ps
    Holm-adjusted within its family (claims not tested left out) and its decision."""
    plan = plan or load_plan()
    claims = []
    for fn in CLAIMS:
        c = fn(inp, plan)
        c.name = fn.__name__
        if absent := [a for a in c.arms if a in ARM_NAMES and a not in inp.policies]:
            c.why_not = (f"not run: {', '.join(absent)} not in this run's params (the "
                         "evaluate lists leave it out, so no stage trains it)")
        c.planned = plan.claims.get(c.name)
        if c.planned is not None and c.planned.family == EXPLORATORY:
            c.family = EXPLORATORY  # declared before the run: its own family, deciding nothing
        check_arms(c, inp)
        claims.append(c)
    teacher_premise(claims, inp.compare, plan.teacher)
    decide_families(claims, plan.alpha)
    return claims
