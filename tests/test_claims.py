"""The claims' decision rules on small synthetic inputs (docs/statistics.md, "Claims: how a test
becomes a decision"): a no-change claim is contradicted only beyond its margin, an exploratory
row is its own Holm family, "smaller than the seed's" needs the relative and the absolute
reading, the minimum detectable effect, and S0's share at its own operating point."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import comb
from scipy.stats import t as t_dist

from countdown_rlvr.analysis import claims
from countdown_rlvr.analysis.claims import (
    CODES,
    EFFECT,
    EXPLORATORY,
    NO_CHANGE,
    SEED,
    Claim,
    Decision,
    Plan,
)
from countdown_rlvr.analysis.claims.engine import beyond_margin, detectable, tost
from countdown_rlvr.analysis.plan import ClaimPlan, PlanError, load_plan, parse_plan
from countdown_rlvr.analysis.report import decision_words, findings_section, make_context
from countdown_rlvr.analysis.results import Inputs, load_inputs
from countdown_rlvr.stats import floored_t_test, holm, t_power
from countdown_rlvr.stats.crossed import crossed_power, from_mean_squares

MARGIN = 0.05
Z = np.array([-1.26, -0.63, 0.0, 0.63, 1.26])  # five replicates, SD ~1


def _premise(mean: float, sd: float = 0.0137) -> Claim:
    """A no-change claim (S1's premise) as `s1._premise` fills it: for = the equivalence
    test, against = the test beyond the margin."""
    res = floored_t_test(list(mean + sd * Z))
    c = Claim("binary flat", "no change", NO_CHANGE, for_decision=Decision.EQUIVALENT)
    c.pvalue, c.right_way, c.effect = tost(res, MARGIN), True, res.mean
    c.against = beyond_margin(res, MARGIN)
    claims.holm_family(claims.family([c]), 0.05)
    c.decision = c.decide(0.05)
    return c


# --------------------------------------------------------------------------- no change


def test_beyond_margin_is_the_one_sided_test_past_the_margin_on_the_estimates_side():
    up = floored_t_test(list(0.041 + 0.0137 * Z))
    se, df = up.sd / math.sqrt(5), 4
    assert beyond_margin(up, MARGIN) == pytest.approx(t_dist.sf((up.mean - MARGIN) / se, df))
    down = floored_t_test(list(-0.12 + 0.0137 * Z))
    assert beyond_margin(down, MARGIN) == pytest.approx(
        t_dist.cdf((down.mean + MARGIN) / se, df))
    # a "no rise" claim: only a rise contradicts, so a fall is never evidence against it
    assert beyond_margin(down, MARGIN, rise_only=True) > 0.999


def test_a_change_inside_the_margin_does_not_contradict_no_change():
    # S1's early premise in the committed run: +0.041 [+0.024, +0.058], margin 0.05
    c = _premise(0.041)
    res = floored_t_test(list(0.041 + 0.0137 * Z))
    assert res.ci_low == pytest.approx(0.024, abs=0.001) and res.ci_high < MARGIN + 0.01
    assert res.pvalue < 0.01  # it moved (Δ ≠ 0 shown), which no longer contradicts
    assert c.against > 0.5 and c.decision == Decision.INCONCLUSIVE


def test_a_change_beyond_the_margin_contradicts_and_one_within_is_equivalent():
    assert _premise(0.12).decision == Decision.CONTRADICTED
    assert _premise(-0.12).decision == Decision.CONTRADICTED
    assert _premise(0.0, sd=0.01).decision == Decision.EQUIVALENT


@settings(max_examples=60, deadline=None)
@given(st.floats(-0.2, 0.2), st.floats(0.002, 0.05))
def test_contradicted_only_where_the_interval_lies_past_the_margin(mean, sd):
    c = _premise(mean, sd)
    res = floored_t_test(list(mean + sd * Z))  # its 95% interval
    if c.decision == Decision.CONTRADICTED:  # alone in its family: one-sided at alpha / 2
        assert res.ci_low > MARGIN or res.ci_high < -MARGIN
    if res.ci_low > MARGIN + 0.01 or res.ci_high < -MARGIN - 0.01:
        assert c.decision == Decision.CONTRADICTED


# --------------------------------------------------------------------------- exploratory


def _claim(p: float, family: str = SEED) -> Claim:
    c = Claim("x", "y", EFFECT, family=family)
    c.pvalue, c.right_way, c.effect = p, True, 0.1
    return c


def test_an_exploratory_row_is_its_own_family_and_stays_out_of_the_seeds_holm():
    seeds = [_claim(p) for p in (0.001, 0.02, 0.03)]
    explore = _claim(0.004, EXPLORATORY)
    claims.decide_families([*seeds, explore], 0.05)
    assert [c.adjusted for c in seeds] == pytest.approx(holm([0.001, 0.02, 0.03]))
    assert explore.adjusted == pytest.approx(0.004)  # alone in its family
    assert seeds[0].plan_alpha == pytest.approx(0.05 / 3) and explore.plan_alpha == 0.05
    assert claims.family([*seeds, explore], SEED) == [(c, c.claim_p()) for c in seeds]


def _plan_with(name: str, **fields):
    raw = yaml.safe_load(Path(load_plan().path).read_text())
    raw["claims"][name].update(fields)
    return parse_plan(raw)


def test_the_plan_declares_a_row_exploratory_and_the_report_says_it_decides_nothing():
    plan = _plan_with("shaped_premise", family=EXPLORATORY)
    assert plan.of("shaped_premise").family == EXPLORATORY
    found = claims.evaluate(Inputs({}, {}, {}, []), plan)
    by = {c.name: c for c in found}
    assert by["shaped_premise"].family == EXPLORATORY and by["rloo_sharpens"].family == SEED
    text = "\n".join(findings_section(make_context(Inputs({}, {}, {}, []), {}, "figures",
                                                   "sft", None, found=found, plan=plan)))
    exploratory = text[text.index("Exploratory"):]
    assert "deciding nothing" in exploratory.splitlines()[0]
    assert claims.SHORT["shaped_premise"] in exploratory
    with pytest.raises(PlanError, match="family"):
        _plan_with("shaped_premise", family="pilot")


# --------------------------------------------------------------------------- absolute reading


def test_the_absolute_delta_is_the_fraction_of_the_seeds_own_change():
    plan = load_plan()
    sd = plan.of("self_distill")  # S0: 0.086 -> 0.168, at this model's level 0.245
    assert sd.delta_abs == pytest.approx(plan.delta_fraction * (0.168 - 0.086))
    assert sd.delta == pytest.approx(plan.delta_fraction * (0.168 - 0.086) / 0.086 * sd.level,
                                     abs=5e-4)
    opd = plan.of("opd_beats_rloo")
    assert opd.delta_abs_k == pytest.approx(plan.delta_fraction * (0.780 - 0.740))
    assert plan.of("rloo_sharpens").delta_abs is None  # no change: no smaller-than reading


def _smaller(p_for: float, p_rel: float, p_abs: float | None) -> Decision:
    c = _claim(p_for)
    c.smaller, c.smaller_abs, c.delta, c.delta_abs = p_rel, p_abs, 0.1, 0.04
    claims.holm_family(claims.family([c]), 0.05)
    return c.decide(0.05)


@pytest.mark.parametrize(("p_for", "p_rel", "p_abs", "want"), [
    (0.6, 0.001, 0.001, Decision.SMALLER),  # both readings: "smaller than the seed's"
    (0.6, 0.001, 0.4, Decision.SMALLER_RELATIVE),  # the relative one only
    (0.001, 0.001, 0.001, Decision.REPRODUCED_SMALLER),
    (0.001, 0.001, 0.4, Decision.REPRODUCED_SMALLER_RELATIVE),
    (0.6, 0.4, 1e-6, Decision.INCONCLUSIVE),  # the absolute reading never decides alone
    (0.6, 0.001, None, Decision.SMALLER),  # no absolute reading to qualify it
])
def test_smaller_than_the_seeds_needs_both_readings(p_for, p_rel, p_abs, want):
    assert _smaller(p_for, p_rel, p_abs) == want


def test_every_decision_has_its_own_code_and_words():
    assert sorted(CODES) == sorted(Decision) and len(set(CODES.values())) == len(Decision)
    c = _claim(0.6)
    c.delta, c.delta_abs = 0.1, 0.04
    c.decision = Decision.SMALLER_RELATIVE
    words = decision_words(c)
    assert "relative reading only" in words and "0.04" in words
    assert "smaller than the seed's" not in words + decision_words(c, short=True)
    c.decision = Decision.SMALLER
    assert "relative" not in decision_words(c)
    assert decision_words(c).startswith("smaller than the seed's")


# --------------------------------------------------------------------------- MDE


@pytest.mark.parametrize("one_sided", [False, True])
def test_the_mde_has_the_planned_power_at_the_plans_replicates(one_sided):
    route = Plan("a − b", 0.02, 0.03, 0.05, one_sided=one_sided, n=3)
    alt = "greater" if one_sided else "two-sided"
    mde = detectable(route, 5, 0.01)
    assert t_power(mde, 0.05, 5, 0.01, alt) == pytest.approx(0.8, abs=1e-6)
    assert detectable(route, 10, 0.01) < mde  # more replicates detect less
    c = Claim("x", "y", EFFECT, plans=[route])
    c.planned = ClaimPlan("x", "effect", "seed", None, 5, None)
    c.plan_alpha = 0.01
    assert c.mde() == pytest.approx(mde)


def test_the_mde_of_a_crossed_route_uses_its_components():
    res = from_mean_squares(0.01, 0.04 + 3 * 0.01, 0.04 + 400 * 4e-4, 0.04, 400, 3)
    route = Plan("a − b", 0.01, 0.03, res.sd, crossed=res, n=3)
    mde = detectable(route, 4, 0.05)
    assert crossed_power(mde, res.components(), 400, 4, 0.05) == pytest.approx(0.8, abs=1e-6)
    assert detectable(Plan("a − b", 0.01, 0.03, None), 4, 0.05) is None  # one replicate


# --------------------------------------------------------------------------- S0 early share


def _records(rng, tags, n_problems=60, n=16, p=0.3) -> pd.DataFrame:
    rows = [("sft_early", t, f"test-{i:05d}", int(rng.binomial(n, rng.uniform(0, 2 * p))), n)
            for t in tags for i in range(n_problems)]
    return pd.DataFrame(rows, columns=["policy", "replicate", "problem_id", "correct", "n"])


def test_the_early_share_is_the_records_zero_signal_share_at_k8():
    rng = np.random.default_rng(0)
    tags = ["r1", "r2", "r3"]
    frame = _records(rng, tags)
    inp = Inputs({}, {}, {}, [], replicates=tags, per_problem={"test": frame})
    c = claims.zero_informative_early(inp, load_plan())
    assert not c.why_not and c.rule == claims.ABOVE and c.chain == "sft"
    want = [float(np.mean([(comb(r.n - r.correct, 8) + comb(r.correct, 8)) / comb(r.n, 8)
                           for r in g.itertuples()])) for _, g in frame.groupby("replicate")]
    assert c.replicate_effects == pytest.approx([w - 0.5 for w in want])
    assert c.effect == pytest.approx(np.mean(want) - 0.5)
    assert set(c.tests()) == {"for", "against"}


def test_the_early_share_without_records_says_why():
    c = claims.zero_informative_early(Inputs({}, {}, {}, []), load_plan())
    assert "sft_early" in c.why_not and c.decide() == Decision.NOT_TESTABLE


def test_with_one_shared_sft_both_share_rows_are_one_draw():
    """replicates.shared_sft: the share is the one SFT policy's, so neither row is tested,
    whatever records there are; they say why."""
    rng = np.random.default_rng(0)
    tags = ["r1", "r2", "r3"]
    diagnose = {t: {"zero_informative": 0.4, "n_problems": 400, "k": 8} for t in tags[:1]}
    inp = Inputs({}, {}, {}, [], runs={"diagnose.json": diagnose}, replicates=tags,
                 per_problem={"test": _records(rng, tags)}, shared_sft=True)
    for row in (claims.zero_informative, claims.zero_informative_early):
        c = row(inp, load_plan())
        assert "replicates.shared_sft" in c.why_not and c.decide() == Decision.NOT_TESTABLE


# --------------------------------------------------------------------------- S3 at its own size


def test_s3s_transfer_row_takes_its_delta_from_table_2_and_gets_a_smaller_route():
    """With S3's held-out pass@8 change (Table 2: 0.159 -> 0.236) at the pilot's plain-RL level
    (plan.yaml), the interventions row has the rule's delta, S3's scaled effect to plan at and
    a smaller-than test, as every effect claim has; without it, the effect test only."""
    root = Path(load_plan().path).parent
    replicates = yaml.safe_load((root / "params.yaml").read_text())["replicates"]
    inp = load_inputs(root / "reports/details", root / "dvclive", replicates=replicates)
    plan = load_plan()
    cp = plan.of("interventions")
    assert (cp.seed_from, cp.seed_to, cp.level) == (0.159, 0.236, 0.138)
    with_seed = {c.name: c for c in claims.evaluate(inp, plan)}["interventions"]
    no_seed = _plan_with("interventions", seed=None, level=None, delta=None)
    without = {c.name: c for c in claims.evaluate(inp, no_seed)}["interventions"]
    assert with_seed.delta == pytest.approx(0.033)
    assert with_seed.seed_scaled == pytest.approx((0.236 - 0.159) / 0.159 * cp.level)
    assert with_seed.delta_abs == pytest.approx(0.5 * (0.236 - 0.159))
    assert with_seed.smaller is not None and with_seed.smaller_abs is not None
    assert with_seed.effect == pytest.approx(without.effect)
    # the smaller-than test is the one-sided t-test against delta on the same replicates
    assert with_seed.smaller > with_seed.smaller_abs  # delta_abs > delta: further above it
    assert without.delta is None and without.smaller is None and without.seed_unusable


def _int_run(k_diff: float, counts: tuple[list[int], list[int]] | None, n: int = 64,
             ids: list | None = None) -> dict:
    """int's details as the S3 claim reads them: phase 6's K = 8 block (McNemar's counts
    giving `k_diff`), and phase 7's many-sample counts (on problems `ids`) when given."""
    held = 200
    run = {"k": 8, "unsolved_heldout": held,
           "heldout_pass_at_k": {"int": {"pass@k": 0.12 + k_diff}, "plain_rl": {"pass@k": 0.12}},
           "heldout_mcnemar": {"int_vs_plain_rl": {"b": 20 + round(k_diff * held), "c": 20,
                                                   "pvalue": 0.5}}}
    if counts is not None:
        ids = list(range(len(counts[0]))) if ids is None else ids
        run["heldout_claim"] = {"n": n, "k": 8, "seed": 1, "problems": ids,
                                "correct": {"int": counts[0], "plain_rl": counts[1]}}
    return run


def test_s3_reads_the_unbiased_pass_at_k_where_every_replicate_sampled_many():
    """With int.claim_samples, a replicate's effect is the mean over its held-out problems of
    the unbiased pass@8 difference from its n samples, its floor the per-problem spread over
    the problems; a run where any replicate lacks the block reads phase 6's K samples."""
    from countdown_rlvr.analysis.claims.s3 import claim_differences
    from countdown_rlvr.eval.metrics import pass_at_k

    rng = np.random.default_rng(0)
    counts = {t: (rng.binomial(64, 0.03, 200).tolist(), rng.binomial(64, 0.02, 200).tolist())
              for t in ("r11", "r12", "r13")}
    # each replicate its own problems (int.pool own): nothing shared, the plain floored test
    runs = {t: _int_run(0.01, c, ids=[f"{t}-{i}" for i in range(200)])
            for t, c in counts.items()}
    inp = Inputs({}, {}, {}, [], runs={"int.json": runs}, replicates=list(runs))
    row = {c.name: c for c in claims.evaluate(inp, load_plan())}["interventions"]
    diffs = {t: np.array([pass_at_k(64, a, 8) - pass_at_k(64, b, 8) for a, b in zip(*c)])
             for t, c in counts.items()}
    assert all(np.allclose(claim_differences(runs[t]["heldout_claim"]), d)
               for t, d in diffs.items())
    res = floored_t_test([d.mean() for d in diffs.values()],
                         [d.var(ddof=1) / d.size for d in diffs.values()])
    assert row.effect == pytest.approx(res.mean) and row.pvalue == pytest.approx(res.pvalue)
    assert "x 64 samples" in row.run and "unbiased pass@K from 64" in row.test
    # one replicate without the block: every replicate read at K (the committed run's way)
    runs["r13"] = _int_run(0.01, None)
    mixed = {c.name: c for c in claims.evaluate(inp, load_plan())}["interventions"]
    assert mixed.effect == pytest.approx(0.01) and "McNemar" in mixed.test


def test_s3_widens_its_interval_by_the_problems_replicates_share():
    """Replicates whose held-out problems overlap (int.pool shared) share those problems'
    variance: the test adds their mean covariance (problem variance x overlap) back, so the
    same counts on shared problems give a wider interval than on disjoint ones."""
    from countdown_rlvr.analysis.claims.s3 import claim_differences, claim_sampling
    from countdown_rlvr.stats.design import problem_variance, shared_covariance

    rng = np.random.default_rng(1)
    p = rng.beta(0.5, 4, 200)  # problems differ: some near 0, a few easy
    lift = rng.choice([0.2, 1.0], 200)  # and the patch helps on some only
    counts = {t: (rng.binomial(64, p).tolist(), rng.binomial(64, p * lift).tolist())
              for t in ("r11", "r12", "r13", "r14")}
    own = {t: _int_run(0.0, c, ids=[f"{t}-{i}" for i in range(200)]) for t, c in counts.items()}
    same = {t: _int_run(0.0, c, ids=list(range(200))) for t, c in counts.items()}

    def row(runs):
        inp = Inputs({}, {}, {}, [], runs={"int.json": runs}, replicates=list(runs))
        return {c.name: c for c in claims.evaluate(inp, load_plan())}["interventions"]

    apart, shared = row(own), row(same)
    assert apart.effect == pytest.approx(shared.effect)
    assert shared.ci[1] - shared.ci[0] > 1.2 * (apart.ci[1] - apart.ci[0])
    claims_ = [r["heldout_claim"] for r in same.values()]
    cov = shared_covariance(problem_variance([claim_differences(c) for c in claims_],
                                             [claim_sampling(c) for c in claims_]),
                            [c["problems"] for c in claims_])
    diffs = [claim_differences(c) for c in claims_]
    res = floored_t_test([d.mean() for d in diffs], [d.var(ddof=1) / d.size for d in diffs],
                         shared=cov)
    assert cov > 0 and shared.pvalue == pytest.approx(res.pvalue)
