"""Planned power per claim, from a pilot's measurements: the numbers plan.yaml records before
a run (`replicates`, `planned_power`).

    python scripts/plan_power.py                         # reports/details of this checkout
    python scripts/plan_power.py --details DIR --n 4 5 6 --problems 400

Reads a finished run's details (reports/details, dvclive) as the pilot: each claim is
evaluated under plan.yaml exactly as the report evaluates it, which gives every decision route
of the claim (the effect test at the seed's scaled effect, the smaller-than test at a true
effect of 0, a no-change claim's equivalence test at a true change of 0) with the variance it
would be tested with: the crossed model's components (problems, replicates, residual) where
the pilot has them, else the SD across replicates. Then, for each replicate count, the power
of each route at the plan's effect, and the claim's power: the smallest over its routes (a
claim is decided by whichever route its data take). The level is the plan's Holm strictest
step: alpha / (seed claims in plan.yaml) / (the claim's tests). Not observed power: no route
is evaluated at the pilot's observed effect.

The pilot's replicates are not the run's: run this on a run whose replicate seeds the next
run does not use, on problems the next run's decisions are not made on (docs/statistics.md,
"Planning the next run").
"""

from __future__ import annotations

import argparse
import sys

from countdown_rlvr.analysis import claims as claims_mod
from countdown_rlvr.analysis.plan import PLAN_FILE, load_plan
from countdown_rlvr.analysis.report import IPO_SOURCES
from countdown_rlvr.analysis.results import load_inputs
from countdown_rlvr.core import io
from countdown_rlvr.core.config import Replicates, from_section
from countdown_rlvr.core.evaluate_config import Evaluate
from countdown_rlvr.stats import t_power
from countdown_rlvr.stats.crossed import crossed_power
from countdown_rlvr.task.prompts import REPAIR_LABELS


def route_power(p: claims_mod.Plan, n: int, alpha: float, n_problems: int | None
                ) -> float | None:
    """One route's power at the plan's effect with n replicates (None: no effect or spread)."""
    one_sided = p.one_sided if p.seed_one_sided is None else p.seed_one_sided
    if p.seed is None:
        return None
    effect = p.seed if one_sided else abs(p.seed)
    if effect <= 0:
        return 0.0
    alt = "greater" if one_sided else "two-sided"
    if p.crossed is not None and (comps := p.crossed.components()) is not None:
        return crossed_power(effect, comps, n_problems or p.crossed.n_problems, n, alpha, alt)
    return None if not p.sd else t_power(effect, p.sd, n, alpha, alt)


def claim_power(c: claims_mod.Claim, n: int, alpha: float, n_problems: int | None
                ) -> float | None:
    """The claim's power with n replicates: the smallest over its routes."""
    powers = [route_power(p, n, alpha, n_problems) for p in c.plans]
    return None if not powers or any(x is None for x in powers) else min(powers)


def variance_words(c: claims_mod.Claim) -> str:
    out = []
    for p in c.plans:
        comps = p.crossed.components() if p.crossed is not None else None
        out.append(f"{p.label}: " + (
            "components (problems, replicates, residual) "
            + ", ".join(f"{v:.2g}" for v in comps) if comps is not None
            else f"SD {p.sd:.3g} over {p.n} replicates" if p.sd else "no spread"))
    return "; ".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--details", default=io.DETAILS, help="the pilot's reports/details")
    ap.add_argument("--dvclive", default="dvclive", help="the pilot's dvclive curves")
    ap.add_argument("--plan", default=PLAN_FILE)
    ap.add_argument("--n", type=int, nargs="+", default=[2, 3, 4, 5, 6, 8],
                    help="replicate counts to plan for")
    ap.add_argument("--problems", type=int, default=None,
                    help="test problems of the planned run (default: the pilot's)")
    args = ap.parse_args(argv)
    plan = load_plan(args.plan)
    params = io.load_params()
    chains = from_section(Replicates, "plan", params, "replicates").chains()
    inp = load_inputs(args.details, args.dvclive,
                      from_section(Evaluate, "plan", params, "evaluate").all(),
                      IPO_SOURCES, tuple(REPAIR_LABELS), replicates=chains)
    evaluated = claims_mod.evaluate(inp, plan)
    n_seed = sum(1 for cp in plan.claims.values() if cp.family == "seed")
    n_ext = len(plan.claims) - n_seed
    print(f"plan: {args.plan}; pilot: {args.details}; alpha {plan.alpha} / {n_seed} seed "
          f"claims ({n_ext} extensions) / the claim's tests\n")
    print("| claim | family | routes | " + " | ".join(f"power at {n}" for n in args.n) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in args.n) + " |")
    for c in evaluated:
        fam = n_seed if c.family == "seed" else n_ext
        alpha = plan.alpha / max(1, fam) / max(1, len(c.tests()) or len(c.plans))
        cells = []
        for n in args.n:
            pw = claim_power(c, n, alpha, args.problems)
            cells.append("–" if pw is None else f"{pw:.2f}")
        why = (c.why_not or c.seed_unusable or
               ("" if c.plans else "no route: the pilot did not test it"))
        routes = why if why and all(x == "–" for x in cells) else \
            ", ".join(p.label for p in c.plans)
        print(f"| {c.name} | {c.family} | {routes} | " + " | ".join(cells) + " |")
    print("\nvariances (the pilot's):")
    for c in evaluated:
        if c.plans:
            print(f"- {c.name}: {variance_words(c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
