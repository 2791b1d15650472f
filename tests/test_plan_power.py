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
