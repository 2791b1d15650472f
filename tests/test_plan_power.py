"""scripts/plan_power.py: a claim's planned power is the smallest over its decision routes,
each the crossed model's (or the t-test's) power at the plan's effect; a claim with no pilot
borrows a measured claim's variances, scaled, at its own plan."""

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
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
    # one replicate: no spread between replicates to test with, so no power (not a crash)
    assert plan_power.claim_power([strong], 1, 0.01, None) is None


def test_each_family_is_planned_at_its_own_holm_size():
    """The seed rows at alpha / 4 (plan.yaml's seed family), the exploratory rows within their
    own family, the extensions within theirs."""
    from countdown_rlvr.analysis.plan import load_plan
    sizes = plan_power.family_sizes(load_plan(ROOT / "plan.yaml"))
    assert sizes == {"seed": 4, "exploratory": 9, "extension": 3}


def test_a_proxy_scales_the_variances_and_takes_the_targets_effects():
    def route(label, seed):  # the fields of claims.Plan that routes() reads
        crossed = SimpleNamespace(components=lambda: COMPS, n_problems=400, n=4)
        return SimpleNamespace(label=label, seed=seed, one_sided=True, seed_one_sided=None,
                               sd=None, crossed=crossed)

    Source = SimpleNamespace(name="shaped", plans=[route("rloo_shaped − rloo", 0.14),
                                                   route("smaller than δ", 0.07)])
    target = ClaimPlan("shaped_early", "effect", "seed", 0.013, 4, None, 0.088, 0.120, 0.074)
    rs = plan_power.proxied(Source, target, 0.29)
    assert [r.effect for r in rs] == [pytest.approx(target.scaled), 0.013]
    assert all(r.components == pytest.approx(tuple(v * 0.29 for v in COMPS)) for r in rs)
    assert all("from shaped, x0.29" in r.label and r.replicates == 4 for r in rs)
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
                     (("every_f_beats_f0", 0.1), "no seed `from`/`to`"),
                     (("nobody", 0.1), "not a claim")]:
        with pytest.raises(SystemExit, match=why):
            plan_power.relevel(plan, *bad)
    with pytest.raises(SystemExit, match="CLAIM=LEVEL or CLAIM=LEVEL,LEVEL_K"):
        plan_power.parse_level("shaped:0.4")


def test_a_design_swaps_the_sampling_part_and_shrinks_the_draws_parts():
    """--design: at n samples the residual is the pilot's less its sampling part at the
    pilot's n, plus the binomial one at n; draws divide that sampling part (and, with a draw
    share, s_b²'s) by D; the two-stage rule raises a 3-df MS_replicate to its upper bound."""
    from countdown_rlvr.analysis.plan import TwoStage
    from countdown_rlvr.stats.design import planning_variance, sampling_var

    p_a, p_b = np.array([0.05, 0.3, 0.6]), np.array([0.1, 0.2, 0.7])
    rates = ((p_a, 16), (p_b, 16))
    s16, s64 = sampling_var(p_a, p_b, 16, 16), sampling_var(p_a, p_b, 64, 16)
    r = Route("opd_ac − opd", 0.05, True, (0.001, 0.0002, s16 + 0.01), 400, replicates=4)
    same = plan_power.design_route(r, plan_power.parse_design("4x1@16"), rates, k=16)
    assert same.components == pytest.approx(r.components)
    more = plan_power.design_route(r, plan_power.parse_design("4x2@64"), rates, k=16,
                                   draw_share=0.5)
    assert more.components == pytest.approx((0.001, 0.0002 * 0.75, 0.01 + s64 / 2))
    safe = plan_power.design_route(r, plan_power.parse_design("4x1@16"), rates, TwoStage(), k=16)
    ms_r = planning_variance(r.components[2] + 400 * 0.0002, 3, 0.8)
    assert safe.components[1] == pytest.approx((ms_r - r.components[2]) / 400)
    # a label's own k wins over the claim's; a route without components is left alone
    assert plan_power.route_k(Route("pass@1 OPD − RLOO", 0.1, True), 16) == 1
    assert plan_power.design_route(Route("x", 0.1, True, sd=0.1),
                                   plan_power.parse_design("8x1@64"), rates, k=16).sd == 0.1
    # power rises, MDE falls with the design; conservative plans lower
    rows = {d: plan_power.design_row([r], plan_power.parse_design(d), 0.002, 0.8, None, rates,
                                     k=16) for d in ("4x1@16", "8x1@64")}
    assert rows["8x1@64"][0] > rows["4x1@16"][0] and rows["8x1@64"][1] < rows["4x1@16"][1]
    cons = plan_power.design_row([r], plan_power.parse_design("8x1@64"), 0.002, 0.8, None,
                                 rates, TwoStage(), k=16)
    assert cons[0] < rows["8x1@64"][0]
    assert plan_power.eval_minutes(("opd", "rloo"), plan_power.parse_design("4x2@64")) == \
        pytest.approx((8 + 4) * 13.0 * 4 / 60)
    for bad in ("4x1", "1x1@16", "4x0@16"):
        with pytest.raises(SystemExit, match="INITSxDRAWS@SAMPLES"):
            plan_power.parse_design(bad)


def test_the_plans_two_stage_rule_is_optional_and_checked():
    import yaml

    from countdown_rlvr.analysis.plan import PlanError, TwoStage, parse_plan
    raw = yaml.safe_load((ROOT / "plan.yaml").read_text())
    assert parse_plan(raw).two_stage == TwoStage(5, 0.8)
    absent = {k: v for k, v in raw.items() if k != "two_stage"}
    assert parse_plan(absent).two_stage == TwoStage(5, 0.8)  # the defaults
    assert parse_plan({**raw, "two_stage": {"min_df": 8}}).two_stage == TwoStage(8, 0.8)
    for bad in ({"min_df": 0}, {"confidence": 1.0}, {"df": 5}):
        with pytest.raises(PlanError, match="two_stage"):
            parse_plan({**raw, "two_stage": bad})


def test_s3s_design_table_plans_each_route_at_the_designs_replicate_sd(tmp_path):
    """--int-design R@n: every route of S3's row at the SD `NestedSamples.replicate_var`
    gives at n samples; the claim's power is the weakest route's; more samples shrink the SD;
    a sample count outside K..the pilot's n is named, not planned; a bad file is refused."""
    import json

    from countdown_rlvr.stats.design import nested_samples
    rng = np.random.default_rng(0)
    p = rng.beta(0.5, 6, (3, 150))
    reps = {str(r): {"k": 8, "problems": [f"{r}-{i}" for i in range(150)],
                     "int": rng.binomial(64, p[r]).tolist(),
                     "plain_rl": rng.binomial(64, 0.9 * p[r]).tolist()} for r in range(3)}
    path = tmp_path / "int_samples.json"
    path.write_text(json.dumps({"n": 64, "eval_seed": 2, "replicates": reps}))
    pilot = plan_power.read_int_pilot(str(path))
    assert pilot.effects == nested_samples({r: (v["int"], v["plain_rl"]) for r, v in reps.items()},
                                           64, 8).effects
    routes = [Route("int − plain RL", 0.03, False, sd=0.02),
              Route("smaller than δ", 0.033, True, sd=0.02)]
    two_stage = SimpleNamespace(confidence=0.8, min_df=5)
    lines = plan_power.int_design_table(routes, pilot, [(8, 8), (8, 64), (8, 128)], 0.005, 0.8,
                                        two_stage, None)
    rows = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| 8@")}
    sd8, sd64 = (pilot.replicate_var(m) ** 0.5 for m in (8, 64))
    assert sd64 < sd8 and f"{sd64:.4f}" in rows["8@64"]
    weakest = min(t_power(0.03, sd64, 8, 0.005), t_power(0.033, sd64, 8, 0.005, "greater"))
    assert f"| {weakest:.2f} |" in rows["8@64"]
    assert "samples must lie in 8..64" in rows["8@128"]
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(SystemExit, match="not a counts file"):
        plan_power.read_int_pilot(str(bad))
    with pytest.raises(SystemExit, match="REPLICATES@SAMPLES"):
        plan_power.parse_int_design("8x64")
