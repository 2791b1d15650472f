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

Where the noise is (`--design`): the OPD rows (DESIGN_CLAIMS) planned again under designs
R x D @ n: R RLOO inits, D OPD draws from each (the test averages an init's draws first:
stats.design.nested_crossed), n samples per test problem for the claim's arms
(evaluate.n_by_policy). Each route's residual swaps its sampling part at the pilot's n for
the binomial one at n (stats.design.sampling_var, from the pilot's per-problem rates), and
draws shrink the draw parts (stats.design.nested_components; `--draw-share`: the share of the
between-replicate variance that is the draws', default 0, conservative). Both with the
pilot's variance and conservatively (plan.yaml `two_stage`: a between-replicate mean square
on fewer than min_df degrees of freedom at its upper bound): power and the minimum
detectable effect (MDE) at the plan's power.

    python scripts/plan_power.py --design 4x1@16 4x2@64 8x1@64

S3's row the same way (`--int-pilot`, `--int-design R@n`): a replicate's held-out pass@K
difference has a draws', a problems' and a samples' variance (stats.design.nested_samples),
read from per-problem correct counts of the two arms at many samples
(scripts/pilots/int_samples.py; where the pilot's replicates shared problems, int.pool
shared, their covariance is added back to the draws'). Planned for a run whose replicates
each sample their own problems (int.pool own): R replicates at n samples per held-out problem
(int.claim_samples; n = K: one "any correct" per problem, as phase 6).
`--family CLAIM=FAMILY` plans a claim in another Holm family (the next plan's).

    python scripts/plan_power.py --int-pilot int_samples.json --int-design 4@8 4@64 8@64 \
        --family interventions=seed

The pilot's replicates are not the run's: run this on a run whose replicate seeds the next
run does not use, on problems the next run's decisions are not made on (docs/statistics.md,
"Planning the next run").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from countdown_rlvr.analysis import claims as claims_mod
from countdown_rlvr.analysis.claims.engine import Plan as EnginePlan
from countdown_rlvr.analysis.claims.engine import detectable
from countdown_rlvr.analysis.plan import PLAN_FILE, ClaimPlan, Plan, load_plan, rule_delta
from countdown_rlvr.analysis.report import IPO_SOURCES
from countdown_rlvr.analysis.results import get, load_inputs
from countdown_rlvr.core import io
from countdown_rlvr.core.config import Replicates, from_section
from countdown_rlvr.core.evaluate_config import Evaluate
from countdown_rlvr.stats import t_power
from countdown_rlvr.stats.crossed import crossed_power
from countdown_rlvr.stats.design import (
    at_samples,
    conservative_components,
    crossed_mde,
    nested_components,
    nested_samples,
    sampling_var,
)
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
    replicates: int = 0  # the pilot's, behind the components (its MS_replicate: R - 1 df)


def routes(c: claims_mod.Claim) -> list[Route]:
    out = []
    for p in c.plans:
        comps = p.crossed.components() if p.crossed is not None else None
        out.append(Route(p.label, p.seed, p.one_sided if p.seed_one_sided is None
                         else p.seed_one_sided, comps,
                         p.crossed.n_problems if p.crossed is not None else 0, p.sd,
                         p.crossed.n if p.crossed is not None else 0))
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
                         comps, r.n_problems, sd, r.replicates))
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
    """The claim's power with n replicates: the smallest over its routes (none at one
    replicate: no test has a spread to scale by)."""
    if n < 2:
        return None
    powers = [route_power(r, n, alpha, n_problems) for r in rs]
    return None if not powers or any(x is None for x in powers) else min(powers)


def family_sizes(plan: Plan) -> dict[str, int]:
    """{family: its claims}: Holm runs within each family (seed, exploratory, extension), so a
    claim is planned at alpha / its own family's size."""
    return dict(Counter(cp.family for cp in plan.claims.values()))


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


# --------------------------------------------------------------------------- --design
# the claims whose arms the designs change: OPD's chain (inits x draws) and its pass@k arms
DESIGN_CLAIMS = ("opd_beats_rloo", "opd_anti_collapse", "rloo_sharpens")
# the two policies a design claim compares, where its arm checks name fewer
DESIGN_PAIRS = {"rloo_sharpens": ("rloo", "sft")}
EVAL_S = 13.0  # one evaluation of 400 problems x 16 samples (the committed run), seconds
OPD_ARMS = ("opd", "opd_ac")  # trained D times per init; rloo once per init


@dataclass(frozen=True)
class Design:
    """R RLOO inits, D OPD draws from each, n samples per test problem of the claim's arms."""
    inits: int
    draws: int
    samples: int

    def __str__(self) -> str:
        return f"{self.inits}x{self.draws}@{self.samples}"


def parse_design(text: str) -> Design:
    m = re.fullmatch(r"(\d+)x(\d+)@(\d+)", text)
    if not m or int(m[1]) < 2 or int(m[2]) < 1 or int(m[3]) < 1:
        raise SystemExit(f"--design {text!r}: write INITSxDRAWS@SAMPLES with inits >= 2, e.g. "
                         "8x1@64")
    return Design(*map(int, m.groups()))


def pooled_rates(per_problem: dict | None):
    """(each problem's pooled correct share over the pilot's replicates, samples per problem
    per replicate) of a policy's per-problem records; None without them."""
    if not per_problem:
        return None
    n = sum(v[0] for v in per_problem.values())
    c = sum(v[1] for v in per_problem.values())
    return c / n, int(next(iter(per_problem.values()))[0].max())


def route_k(r: Route, k: int | None = None) -> int | None:
    """The k of a route's pass@k: the one its label names, else `k` (the claim's)."""
    m = re.search(r"pass@(\d+)", r.label)
    return int(m[1]) if m else k


def design_route(r: Route, d: Design, rates: tuple, two_stage=None, draw_share: float = 0.0,
                 k: int | None = None) -> Route:
    """`r` under design `d`: the residual's sampling part at the pilot's n swapped for the one
    at d.samples, the draws' parts shrunk by d.draws; with `two_stage` (plan.TwoStage) the
    pilot's MS_replicate first at its upper bound when it rests on too few df."""
    k = route_k(r, k)
    if r.components is None or k is None:
        return r
    (p_a, n_a), (p_b, n_b) = rates
    comps = r.components
    if two_stage is not None:
        comps = conservative_components(comps, r.n_problems, r.replicates,
                                        two_stage.confidence, two_stage.min_df)
    new = sampling_var(p_a, p_b, d.samples, k)
    comps = at_samples(comps, sampling_var(p_a, p_b, min(n_a, n_b), k), new)
    comps = nested_components(comps, d.draws, draw_share, new)
    return replace(r, components=comps)


def design_row(rs: list[Route], d: Design, alpha: float, power: float, n_problems: int | None,
               rates: tuple, two_stage=None, draw_share: float = 0.0, k: int | None = None
               ) -> tuple[float | None, float | None]:
    """(the claim's power under `d`, its MDE: the largest over its effect routes of the
    smallest effect each detects at `power`; k: the claim's, for a label that names none)."""
    planned = [design_route(r, d, rates, two_stage, draw_share, k) for r in rs]
    pw = claim_power(planned, d.inits, alpha, n_problems)
    mdes = [crossed_mde(r.components, n_problems or r.n_problems, d.inits, alpha, power,
                        "greater" if r.one_sided else "two-sided")
            for r in planned if r.components is not None and "smaller" not in r.label]
    return pw, max(mdes) if mdes else None


def pair_top_k(compare: dict | None, a: str, b: str) -> int | None:
    """The largest k compare.json has for the pair of a and b, in either order (test split)."""
    ks = [int(x[1:]) for key in (f"{a}_vs_{b}", f"{b}_vs_{a}")
          for x in get(compare, "pairs", key, "test", default={})]
    return max(ks, default=None)


def eval_minutes(arms: tuple[str, ...], d: Design) -> float:
    """The claim's arms' evaluations under `d`, minutes: an OPD arm's per draw, others' per
    init, each EVAL_S x samples / 16."""
    runs = sum(d.inits * (d.draws if a in OPD_ARMS else 1) for a in arms)
    return runs * EVAL_S * d.samples / 16 / 60


def design_table(evaluated: list, planned: dict, inp, plan: Plan, designs: list[Design],
                 alphas: dict, n_problems: int | None, draw_share: float) -> list[str]:
    """The --design table's lines (markdown)."""
    lines = [(f"designs: inits x OPD draws per init @ samples per test problem; power at the "
              f"plan's effect and MDE at power {plan.power:g}, with the pilot's variance and "
              f"conservatively (a between-replicate mean square on < {plan.two_stage.min_df} "
              f"df at its {plan.two_stage.confidence:.0%} upper bound); draw share of the "
              f"between-replicate variance {draw_share:g}\n"),
             ("| claim | design | OPD runs | eval min | power | power (conservative) | MDE | "
              "MDE (conservative) | plan's effect |"),
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in evaluated:
        if c.name not in DESIGN_CLAIMS or not planned.get(c.name):
            continue
        arms = DESIGN_PAIRS.get(c.name, c.arms)
        rates = [pooled_rates(claims_mod.per_problem(inp, a)) for a in arms]
        if len(rates) != 2 or None in rates:
            lines.append(f"| {c.name} | – | – | – | no per-problem records of {arms} | "
                         "| | | |")
            continue
        cp = plan.claims.get(c.name)
        k = pair_top_k(inp.compare, *arms)
        for d in designs:
            plain = design_row(planned[c.name], d, alphas[c.name], plan.power, n_problems, rates,
                               None, draw_share, k)
            safe = design_row(planned[c.name], d, alphas[c.name], plan.power, n_problems,
                              rates, plan.two_stage, draw_share, k)
            cells = ["–" if x is None else f"{x:.{nd}f}"
                     for x, nd in ((plain[0], 2), (safe[0], 2), (plain[1], 3), (safe[1], 3))]
            effect = "–" if cp is None or cp.scaled is None else f"{cp.scaled:+.3f}"
            lines.append(f"| {c.name} | {d} | {d.inits * d.draws} | "
                         f"{eval_minutes(arms, d):.1f} | " + " | ".join(cells)
                         + f" | {effect} |")
    return lines


# --------------------------------------------------------------------------- --int-design
INT_CLAIM = "interventions"


def parse_int_design(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)@(\d+)", text)
    if not m or int(m[1]) < 2 or int(m[2]) < 1:
        raise SystemExit(f"--int-design {text!r}: write REPLICATES@SAMPLES with replicates "
                         ">= 2, e.g. 8@64")
    return int(m[1]), int(m[2])


def read_int_pilot(path: str):
    """stats.design.NestedSamples of the S3 claim's two arms from the pilot's counts file."""
    try:
        pilot = json.loads(Path(path).read_text())
        reps = pilot["replicates"]
        counts = {r: (v["int"], v["plain_rl"]) for r, v in reps.items()}
        ids = {r: v["problems"] for r, v in reps.items()}
        k = {v["k"] for v in reps.values()}
    except (OSError, ValueError, KeyError, AttributeError) as e:
        raise SystemExit(f"--int-pilot {path}: not a counts file of "
                         f"scripts/pilots/int_samples.py ({e})") from None
    if len(k) != 1 or len(counts) < 2:
        raise SystemExit(f"--int-pilot {path}: needs two or more replicates at one K")
    return nested_samples(counts, int(pilot["n"]), k.pop(), ids)


def int_design_table(rs: list[Route], pilot, designs: list[tuple[int, int]], alpha: float,
                     power: float, two_stage, problems: float | None) -> list[str]:
    """The --int-design table's lines: each route of S3's row at the replicate SD the design
    gives (`NestedSamples.replicate_var`), with the pilot's variances and conservatively."""
    conf = two_stage.confidence if len(pilot.effects) - 1 < two_stage.min_df else None
    lines = [(f"S3's row (held-out pass@{pilot.k}), pilot: {len(pilot.effects)} replicates, "
              f"{pilot.problems:.0f} held-out problems each, {pilot.n} samples per problem; "
              f"variances: draws {pilot.draw_var:.2g} (shared problems' covariance "
              f"{pilot.shared:.2g} added back), problems {pilot.problem_var:.2g}, "
              f"samples {pilot.sampling(pilot.k):.2g} at {pilot.k} and "
              f"{pilot.sampling(pilot.n):.2g} at {pilot.n} (per problem); level {alpha:.4g}\n"),
             ("| design | replicate SD (conservative) | power | power (conservative) | MDE | "
              "MDE (conservative) |"),
             "| --- | --- | --- | --- | --- | --- |"]
    for reps, m in designs:
        if not pilot.k <= m <= pilot.n:
            lines.append(f"| {reps}@{m} | samples must lie in {pilot.k}..{pilot.n} (the "
                         "pilot's) | | | | |")
            continue
        sds = [pilot.replicate_var(m, problems) ** 0.5,
               pilot.replicate_var(m, problems, conf) ** 0.5]
        cells = []
        for sd in sds:
            cells.append(min(t_power(r.effect if r.one_sided else abs(r.effect), sd, reps, alpha,
                                     "greater" if r.one_sided else "two-sided")
                             for r in rs if r.effect))
        mdes = [detectable(EnginePlan("", 0.0, None, sd), reps, alpha, power) for sd in sds]
        lines.append(f"| {reps}@{m} | {sds[0]:.4f} ({sds[1]:.4f}) | {cells[0]:.2f} | "
                     f"{cells[1]:.2f} | {mdes[0]:.3f} | {mdes[1]:.3f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--details", default=io.DETAILS, help="the pilot's reports/details")
    ap.add_argument("--pilot-params", default="params.yaml", metavar="PATH",
                    help="the params the pilot ran with (its replicate seeds and policies): "
                    "once params.yaml plans the next run, the pilot's own, e.g. `git show "
                    "<its commit>:params.yaml > pilot.yaml`")
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
    ap.add_argument("--design", nargs="+", default=[], metavar="RxD@N",
                    help="plan the OPD rows under R inits x D OPD draws @ N samples per problem")
    ap.add_argument("--draw-share", type=float, default=0.0,
                    help="--design: share of the between-replicate variance that is the OPD "
                    "draws' (0: all the inits', conservative)")
    ap.add_argument("--int-pilot", metavar="FILE", help="S3's row: per-problem counts of its "
                    "two arms at many samples (scripts/pilots/int_samples.py)")
    ap.add_argument("--int-design", nargs="+", default=[], metavar="R@N",
                    help="--int-pilot: plan S3's row at R replicates @ N samples per held-out "
                    "problem")
    ap.add_argument("--int-problems", type=float, default=None,
                    help="--int-pilot: held-out problems per replicate (default: the pilot's)")
    ap.add_argument("--family", action="append", default=[], metavar="CLAIM=FAMILY",
                    help="plan CLAIM in another Holm family (seed, exploratory, extension)")
    args = ap.parse_args(argv)
    designs = [parse_design(text) for text in args.design]
    int_designs = [parse_int_design(text) for text in args.int_design]
    if int_designs and not args.int_pilot:
        raise SystemExit("--int-design needs --int-pilot FILE (the per-problem counts)")
    if not 0 <= args.draw_share <= 1:
        raise SystemExit(f"--draw-share {args.draw_share}: a share in [0, 1]")
    plan = load_plan(args.plan)
    levels = [parse_level(text) for text in args.level]
    for name, level, level_k in levels:
        plan = relevel(plan, name, level, level_k)
    for text in args.family:
        name, _, fam = text.partition("=")
        if name not in plan.claims or fam not in ("seed", "exploratory", "extension"):
            raise SystemExit(f"--family {text!r}: write CLAIM=seed|exploratory|extension, "
                             f"CLAIM one of {', '.join(plan.claims)}")
        plan = replace(plan, claims={**plan.claims, name: replace(plan.claims[name],
                                                                   family=fam)})
    params = io.load_params()
    if args.pilot_params != "params.yaml":
        # the pilot's replicate seeds and policies; a key newer than its params (shared_sft,
        # n_by_policy) as it ran: each replicate its own SFT, every policy at n
        pilot = io.read_params(args.pilot_params)
        params["replicates"] = {"shared_sft": None, **pilot["replicates"]}
        params["evaluate"] = {**params["evaluate"], "n_by_policy": {}, **pilot["evaluate"]}
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
    family = family_sizes(plan)
    n_seed = family.get("seed", 0)
    n_ext = len(plan.claims) - n_seed
    print(f"plan: {args.plan}; pilot: {args.details} ({args.pilot_params}); alpha "
          f"{plan.alpha} / {n_seed} seed claims ({n_ext} others, in their own families) / the "
          "claim's tests\n")
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
    alphas = {}
    for c in evaluated:
        fam = family.get(c.family, 1)  # Holm within the claim's own family
        alpha = alphas[c.name] = claim_alpha(plan.alpha, fam, c, proxies.get(c.name))
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
    if designs:
        print()
        print("\n".join(design_table(evaluated, planned, inp, plan, designs, alphas,
                                     args.problems, args.draw_share)))
    if args.int_pilot:
        print()
        pilot = read_int_pilot(args.int_pilot)
        print("\n".join(int_design_table(planned[INT_CLAIM], pilot, int_designs or
                                          [(len(pilot.effects), pilot.n)], alphas[INT_CLAIM],
                                          plan.power, plan.two_stage, args.int_problems)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
