"""scripts/plan_power.py: a claim's planned power is the smallest over its decision routes,
each the crossed model's (or the t-test's) power at the plan's effect; a claim with no pilot
borrows a measured claim's variances, scaled, at its own plan."""

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from countdown_rlvr.analysis.plan import ClaimPlan
from countdown_rlvr.stats import t_power
from countdown_rlvr.stats.crossed import crossed_power

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("plan_power", ROOT / "scripts/plan_power.py")
plan_power = importlib.util.module_from_spec(spec)
sys.modules["plan_power"] = plan_power  # dataclasses look their module up there
spec.loader.exec_module(plan_power)
Route = plan_power.Route

COMPS = (0.004, 0.0004, 0.03)


def test_a_route_is_the_crossed_or_t_power_at_its_effect():
    crossed = Route("a − b", 0.05, True, COMPS, 400)
    assert plan_power.route_power(crossed, 4, 0.01, None) == pytest.approx(
        crossed_power(0.05, COMPS, 400, 4, 0.01, "greater"))
    # the planned run's problem count overrides the pilot's
    assert plan_power.route_power(crossed, 4, 0.01, 100) == pytest.approx(
        crossed_power(0.05, COMPS, 100, 4, 0.01, "greater"))
    t = Route("share", 0.09, True, sd=0.03)
    assert plan_power.route_power(t, 5, 0.01, None) == pytest.approx(
        t_power(0.09, 0.03, 5, 0.01, "greater"))
    # an effect pointing away from a one-sided test has no power; no effect, no number
    assert plan_power.route_power(Route("x", -0.02, True, COMPS, 400), 4, 0.01, None) == 0.0
    assert plan_power.route_power(Route("x", None, True, COMPS, 400), 4, 0.01, None) is None


def test_a_claims_power_is_its_weakest_route_and_needs_every_route():
    strong = Route("effect", 0.2, True, COMPS, 400)
    weak = Route("smaller than δ", 0.01, True, COMPS, 400)
    both = plan_power.claim_power([strong, weak], 4, 0.01, None)
    assert both == pytest.approx(plan_power.route_power(weak, 4, 0.01, None))
    assert both < plan_power.claim_power([strong], 4, 0.01, None)
    assert plan_power.claim_power([strong, Route("x", None, True)], 4, 0.01, None) is None
    assert plan_power.claim_power([], 4, 0.01, None) is None
    # more replicates never lower it
    assert plan_power.claim_power([strong, weak], 8, 0.01, None) >= both


def test_a_proxy_scales_the_variances_and_takes_the_targets_effects():
    def route(label, seed):  # the fields of claims.Plan that routes() reads
        crossed = SimpleNamespace(components=lambda: COMPS, n_problems=400)
        return SimpleNamespace(label=label, seed=seed, one_sided=True, seed_one_sided=None,
                               sd=None, crossed=crossed)

    Source = SimpleNamespace(name="shaped", plans=[route("rloo_shaped − rloo", 0.14),
                                                   route("smaller than δ", 0.07)])
    target = ClaimPlan("shaped_early", "effect", "seed", 0.013, 4, None, 0.088, 0.120, 0.074)
    rs = plan_power.proxied(Source, target, 0.29)
    assert [r.effect for r in rs] == [pytest.approx(target.scaled), 0.013]
    assert all(r.components == pytest.approx(tuple(v * 0.29 for v in COMPS)) for r in rs)
    assert all("from shaped, x0.29" in r.label for r in rs)
    no_change = ClaimPlan("shaped_premise_early", "no_change", "seed", 0.05, 4, None)
    assert [r.effect for r in plan_power.proxied(Source, no_change, 0.37)] == [0.05, 0.05]
    with pytest.raises(SystemExit, match="CLAIM=SOURCE:SCALE"):
        plan_power.parse_proxy("shaped_early:shaped")


def test_a_proxied_claim_is_planned_at_its_sources_tests_not_at_none():
    """Its own evaluation at the pilot has no tests (the arm was not trained); the proxy's
    routes are the tests it will face, so alpha is split over them as for any claim."""
    untested = SimpleNamespace(tests=list, plans=[object()])
    two = [Route("effect", 0.1, True), Route("smaller than δ", 0.05, True)]
    assert plan_power.claim_alpha(0.05, 12, untested, two) == pytest.approx(0.05 / 12 / 2)
    assert plan_power.claim_alpha(0.05, 12, untested, None) == pytest.approx(0.05 / 12)
    tested = SimpleNamespace(tests=lambda: ["a", "b", "c"], plans=[object()])
    assert plan_power.claim_alpha(0.05, 12, tested, None) == pytest.approx(0.05 / 12 / 3)


def test_a_relevelled_claim_takes_the_plans_rule_at_its_new_level():
    from countdown_rlvr.analysis.plan import load_plan, rule_delta
    plan = load_plan(ROOT / "plan.yaml")
    new = plan_power.relevel(plan, "shaped", 0.424)
    cp = new.claims["shaped"]
    assert cp.level == 0.424
    assert cp.delta == pytest.approx(rule_delta(plan.delta_fraction, 0.088, 0.120, 0.424))
    assert cp.scaled == pytest.approx((0.120 - 0.088) / 0.088 * 0.424)
    assert {n: c for n, c in new.claims.items() if n != "shaped"} == {
        n: c for n, c in plan.claims.items() if n != "shaped"}  # the others as they were
    # two quantities: both deltas by the rule; a no-change claim keeps its margin
    opd = plan_power.relevel(plan, *plan_power.parse_level("opd_beats_rloo=0.424,0.628"))
    assert opd.claims["opd_beats_rloo"].delta_k == pytest.approx(
        rule_delta(plan.delta_fraction, 0.740, 0.780, 0.628))
    sharp = plan_power.relevel(plan, "rloo_sharpens", 0.263, 0.698).claims["rloo_sharpens"]
    assert (sharp.delta, sharp.level_k) == (plan.no_change_margin, 0.698)
    for bad, why in [(("shaped", 0.4, 0.6), "takes one level"),
                     (("opd_beats_rloo", 0.4), "takes two levels"),
                     (("interventions", 0.1), "no seed `from`/`to`"),
                     (("nobody", 0.1), "not a claim")]:
        with pytest.raises(SystemExit, match=why):
            plan_power.relevel(plan, *bad)
    with pytest.raises(SystemExit, match="CLAIM=LEVEL or CLAIM=LEVEL,LEVEL_K"):
        plan_power.parse_level("shaped:0.4")
