"""Planned power per claim, from a pilot's measurements: the numbers plan.yaml records before
a run (`replicates`, `planned_power`).

    python scripts/plan_power.py                         # reports/details of this checkout
    python scripts/plan_power.py --details DIR --n 4 5 6 --problems 400
    python scripts/plan_power.py --proxy shaped_early=shaped:0.29   # no pilot for a claim
    python scripts/plan_power.py --level shaped=0.424 --level opd_beats_rloo=0.424,0.628

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

A claim the pilot could not test (an arm it did not train) can borrow the variances of a
measured claim with `--proxy CLAIM=SOURCE:SCALE`: SOURCE's routes, their variance components
(or SD squared) times SCALE, at CLAIM's own plan (its scaled seed effect, delta or margin).
For pass@1 at another level, SCALE = p(1 - p) at CLAIM's level over p(1 - p) at SOURCE's
(Bernoulli variance); the plan says which claims were planned so.

A plan for the run after the pilot re-levels its claims at the pilot's numbers (the pilot's
test split becomes the next run's development split): `--level CLAIM=LEVEL[,LEVEL_K]` sets a
claim's development level (and its second quantity's) and re-derives its delta by the plan's
rule, before the claims are evaluated, so every route's effect and bound are the new plan's.

The pilot's replicates are not the run's: run this on a run whose replicate seeds the next
run does not use, on problems the next run's decisions are not made on (docs/statistics.md,
"Planning the next run").
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace

from countdown_rlvr.analysis import claims as claims_mod
from countdown_rlvr.analysis.plan import PLAN_FILE, ClaimPlan, Plan, load_plan, rule_delta
from countdown_rlvr.analysis.report import IPO_SOURCES
from countdown_rlvr.analysis.results import load_inputs
from countdown_rlvr.core import io
from countdown_rlvr.core.config import Replicates, from_section
from countdown_rlvr.core.evaluate_config import Evaluate
from countdown_rlvr.stats import t_power
from countdown_rlvr.stats.crossed import crossed_power
from countdown_rlvr.task.prompts import REPAIR_LABELS


@dataclass(frozen=True)
class Route:
    """One decision route as planned: its effect (distance from its null at the plan's truth),
    sidedness and variance (crossed components with their problem count, or an SD)."""
    label: str
    effect: float | None
    one_sided: bool
    components: tuple[float, float, float] | None = None
    n_problems: int = 0
    sd: float | None = None


def routes(c: claims_mod.Claim) -> list[Route]:
    out = []
    for p in c.plans:
        comps = p.crossed.components() if p.crossed is not None else None
        out.append(Route(p.label, p.seed, p.one_sided if p.seed_one_sided is None
                         else p.seed_one_sided, comps,
                         p.crossed.n_problems if p.crossed is not None else 0, p.sd))
    return out


def proxied(source: claims_mod.Claim, target: ClaimPlan, scale: float) -> list[Route]:
    """`source`'s routes with their variances times `scale`, at `target`'s plan: the effect
    route at its scaled seed effect, a smaller-than or no-change route at its delta."""
    out = []
    for r in routes(source):
        bound = r.label.startswith("smaller") or target.kind == "no_change"
        effect = target.delta if bound else target.scaled
        comps = None if r.components is None else tuple(v * scale for v in r.components)
        sd = None if r.sd is None else r.sd * scale ** 0.5
        out.append(Route(f"{r.label} (from {source.name}, x{scale:g})", effect, r.one_sided,
                         comps, r.n_problems, sd))
    return out


def route_power(r: Route, n: int, alpha: float, n_problems: int | None) -> float | None:
    """One route's power at the plan's effect with n replicates (None: no effect or spread)."""
    if r.effect is None:
        return None
    effect = r.effect if r.one_sided else abs(r.effect)
    if effect <= 0:
        return 0.0
    alt = "greater" if r.one_sided else "two-sided"
    if r.components is not None:
        return crossed_power(effect, r.components, n_problems or r.n_problems, n, alpha, alt)
    return None if not r.sd else t_power(effect, r.sd, n, alpha, alt)


def claim_power(rs: list[Route], n: int, alpha: float, n_problems: int | None
                ) -> float | None:
    """The claim's power with n replicates: the smallest over its routes."""
    powers = [route_power(r, n, alpha, n_problems) for r in rs]
    return None if not powers or any(x is None for x in powers) else min(powers)


def claim_alpha(alpha: float, family: int, claim, proxy_routes: list[Route] | None) -> float:
    """The Holm strictest step a claim is planned at: alpha / the claims of its family / its
    tests. A proxied claim is tested by its source's routes (it has no tests of its own at
    the pilot), so it counts those; counting none planned it at alpha / family, too lenient."""
    n_tests = len(proxy_routes) if proxy_routes is not None else \
        (len(claim.tests()) or len(claim.plans))
    return alpha / max(1, family) / max(1, n_tests)


def variance_words(rs: list[Route]) -> str:
    return "; ".join(f"{r.label}: " + (
        "components (problems, replicates, residual) "
        + ", ".join(f"{v:.2g}" for v in r.components) if r.components is not None
        else f"SD {r.sd:.3g}" if r.sd else "no spread") for r in rs)


def parse_proxy(text: str) -> tuple[str, str, float]:
    try:
        target, rest = text.split("=", 1)
        source, scale = rest.rsplit(":", 1)
        return target, source, float(scale)
    except ValueError:
        raise SystemExit(f"--proxy {text!r}: write CLAIM=SOURCE:SCALE, e.g. "
                         "shaped_early=shaped:0.29") from None


def parse_level(text: str) -> tuple[str, float, float | None]:
    try:
        name, rest = text.split("=", 1)
        values = [float(v) for v in rest.split(",")]
        if len(values) not in (1, 2):
            raise ValueError
    except ValueError:
        raise SystemExit(f"--level {text!r}: write CLAIM=LEVEL or CLAIM=LEVEL,LEVEL_K, e.g. "
                         "opd_beats_rloo=0.424,0.628") from None
    return name, values[0], values[1] if len(values) == 2 else None


def relevel(plan: Plan, name: str, level: float, level_k: float | None = None) -> Plan:
    """`plan` with claim `name` at development level `level` (and `level_k`), its delta and
    delta_k re-derived by the plan's rule (a no-change claim keeps its margin)."""
    if name not in plan.claims:
        raise SystemExit(f"--level: {name!r} is not a claim of {plan.path} "
                         f"({', '.join(plan.claims)})")
    cp = plan.claims[name]
    if cp.relative is None:
        raise SystemExit(f"--level: claim {name!r} has no seed `from`/`to` to scale by a level")
    if (level_k is None) != (cp.seed_k is None):
        raise SystemExit(f"--level: claim {name!r} takes "
                         + ("two levels, LEVEL,LEVEL_K" if cp.seed_k else "one level"))
    fields: dict = {"level": level, "level_source": "--level (the pilot's)"}
    if cp.kind == "effect":
        fields["delta"] = rule_delta(plan.delta_fraction, cp.seed_from, cp.seed_to, level)
    if level_k is not None:
        fields["level_k"] = level_k
        if cp.kind == "effect":
            fields["delta_k"] = rule_delta(plan.delta_fraction, *cp.seed_k, level_k)
    return replace(plan, claims={**plan.claims, name: replace(cp, **fields)})


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
    ap.add_argument("--proxy", action="append", default=[], metavar="CLAIM=SOURCE:SCALE",
                    help="plan CLAIM with SOURCE's variances times SCALE (no pilot for it)")
    ap.add_argument("--level", action="append", default=[], metavar="CLAIM=LEVEL[,LEVEL_K]",
                    help="re-level CLAIM (its delta by the plan's rule): the next run's plan")
    args = ap.parse_args(argv)
    plan = load_plan(args.plan)
    levels = [parse_level(text) for text in args.level]
    for name, level, level_k in levels:
        plan = relevel(plan, name, level, level_k)
    params = io.load_params()
    chains = from_section(Replicates, "plan", params, "replicates").chains()
    inp = load_inputs(args.details, args.dvclive,
                      from_section(Evaluate, "plan", params, "evaluate").all(),
                      IPO_SOURCES, tuple(REPAIR_LABELS), replicates=chains)
    evaluated = claims_mod.evaluate(inp, plan)
    by = {c.name: c for c in evaluated}
    planned = {c.name: routes(c) for c in evaluated}
    proxies: dict[str, list[Route]] = {}
    for target, source, scale in map(parse_proxy, args.proxy):
        if target not in plan.claims or source not in by:
            raise SystemExit(f"--proxy: {target!r} must be a claim of {args.plan} and "
                             f"{source!r} one the pilot evaluated ({', '.join(by)})")
        planned[target] = proxies[target] = proxied(by[source], plan.claims[target], scale)
    n_seed = sum(1 for cp in plan.claims.values() if cp.family == "seed")
    n_ext = len(plan.claims) - n_seed
    print(f"plan: {args.plan}; pilot: {args.details}; alpha {plan.alpha} / {n_seed} seed "
          f"claims ({n_ext} extensions) / the claim's tests\n")
    for name, *_ in levels:
        cp = plan.claims[name]
        k = "" if cp.level_k is None else f", level_k {cp.level_k:g}" + (
            "" if cp.delta_k is None else f" (delta_k {cp.delta_k:.4f})")
        print(f"re-levelled: {name} at {cp.level:g} (delta {cp.delta:.4f}, seed's scaled "
              f"{cp.scaled:+.4f}){k}")
    if levels:
        print()
    print("| claim | family | routes | " + " | ".join(f"power at {n}" for n in args.n) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in args.n) + " |")
    for c in evaluated:
        fam = n_seed if c.family == "seed" else n_ext
        alpha = claim_alpha(plan.alpha, fam, c, proxies.get(c.name))
        rs = planned[c.name]
        cells = []
        for n in args.n:
            pw = claim_power(rs, n, alpha, args.problems)
            cells.append("–" if pw is None else f"{pw:.2f}")
        why = (c.why_not or c.seed_unusable or
               ("" if rs else "no route: the pilot did not test it"))
        label = why if why and all(x == "–" for x in cells) else ", ".join(r.label for r in rs)
        print(f"| {c.name} | {c.family} | {label} | " + " | ".join(cells) + " |")
    print("\nvariances (the pilot's):")
    for c in evaluated:
        if planned[c.name]:
            print(f"- {c.name}: {variance_words(planned[c.name])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
