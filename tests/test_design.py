"""stats.design: pass@k's sampling variance at n samples (closed forms and simulation), the
nested test of OPD draws within RLOO inits (the t-test on init means; its size where a test
that counts draws as replicates fails), the conservative planning variance, and S3's problems
nested in replicates (the unbiased sampling-variance estimate, the three parts recovered)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom, chi2, ttest_1samp

from countdown_rlvr.eval.metrics import pass_at_k
from countdown_rlvr.stats.crossed import crossed_power, crossed_test
from countdown_rlvr.stats.design import (
    at_samples,
    conservative_components,
    crossed_mde,
    nested_components,
    nested_crossed,
    nested_effect,
    nested_samples,
    pass_at_k_var,
    planning_variance,
    sampling_var,
    sampling_var_estimate,
)

P = np.array([0.0, 0.03, 0.2, 0.5, 0.9, 1.0])


def test_pass_at_k_variance_closed_forms():
    # k = 1: the mean of n Bernoulli draws
    assert pass_at_k_var(P, 16, 1) == pytest.approx(P * (1 - P) / 16)
    # n = k: one "any correct" indicator
    pi = 1 - (1 - P) ** 16
    assert pass_at_k_var(P, 16, 16) == pytest.approx(pi * (1 - pi))
    # more samples never add variance, and a sure problem has none
    v = [pass_at_k_var(P, n, 16) for n in (16, 32, 64, 128)]
    assert all((a >= b - 1e-15).all() for a, b in itertools.pairwise(v))
    assert v[0][[0, -1]].tolist() == [0.0, 0.0]


def test_pass_at_k_variance_is_the_unbiased_estimators_by_simulation():
    rng = np.random.default_rng(0)
    for p, n, k in ((0.1, 64, 16), (0.3, 20, 4)):
        c = rng.binomial(n, p, size=40_000)
        est = np.array([pass_at_k(n, int(x), k) for x in c])
        assert est.mean() == pytest.approx(1 - (1 - p) ** k, abs=0.005)
        assert est.var() == pytest.approx(float(pass_at_k_var(p, n, k)), rel=0.05)


def test_sampling_part_is_swapped_and_the_interaction_kept():
    p_a, p_b = np.array([0.1, 0.4]), np.array([0.2, 0.05])
    s16, s64 = sampling_var(p_a, p_b, 16, 16), sampling_var(p_a, p_b, 64, 16)
    assert s16 == pytest.approx(np.mean(pass_at_k_var(p_a, 16, 16) + pass_at_k_var(p_b, 16, 16)))
    assert at_samples((0.01, 0.001, s16 + 0.02), s16, s64) == pytest.approx((0.01, 0.001, s64 + 0.02))
    # a residual below its own sampling part (the pilot's estimate): no negative interaction
    assert at_samples((0.01, 0.001, s16 / 2), s16, s64)[2] == pytest.approx(s64)


def test_nested_effect_balanced_is_the_t_test_on_init_means():
    per = {"6": [0.02, 0.04], "7": [-0.01, 0.03], "8": [0.05, 0.01], "9": [0.0, 0.02]}
    means = [np.mean(v) for v in per.values()]
    res = nested_effect(per)
    ref = ttest_1samp(means, 0.0)
    assert (res.mean, res.df, res.draws) == (pytest.approx(np.mean(means)), 3, (2, 2, 2, 2))
    assert res.pvalue == pytest.approx(ref.pvalue)
    assert (res.ci_low, res.ci_high) == pytest.approx(tuple(ref.confidence_interval(0.95)))
    # one-sided against a null; each init weighs the same however many draws it has
    assert nested_effect(per, null=0.05, alternative="less").pvalue == pytest.approx(
        ttest_1samp(means, 0.05, alternative="less").pvalue)
    un = nested_effect({"6": [0.0, 0.0, 0.0], "7": [0.06]})
    assert un.mean == pytest.approx(0.03) and un.df == 1
    # one init: no test; inits that agree exactly: p 1 at the null only
    assert nested_effect({"6": [0.1, 0.2]}).pvalue is None
    assert nested_effect({"6": [0.0], "7": [0.0]}).pvalue == 1.0
    with pytest.raises(ValueError):
        nested_effect({"6": []})


def test_nested_test_keeps_its_size_where_counting_draws_as_replicates_does_not():
    """4 inits x 2 draws, no true effect, init variance 4x the draws': the nested test rejects
    at its nominal 5%, a t-test over the 8 draws as if independent far more often."""
    rng = np.random.default_rng(1)
    nested = naive = 0
    sims = 3000
    for _ in range(sims):
        init = rng.normal(0, 1.0, 4)
        draws = init[:, None] + rng.normal(0, 0.5, (4, 2))
        nested += nested_effect({str(i): d for i, d in enumerate(draws)}).pvalue < 0.05
        naive += ttest_1samp(draws.ravel(), 0.0).pvalue < 0.05
    assert abs(nested / sims - 0.05) < 0.015
    assert naive / sims > 0.12


def test_nested_crossed_averages_draws_within_an_init():
    rng = np.random.default_rng(2)
    per = {s: rng.normal(0.02, 0.3, (50, 2)) for s in ("6", "7", "8")}
    res = nested_crossed(per)
    ref = crossed_test(np.column_stack([d.mean(axis=1) for d in per.values()]))
    assert res.n == 3 and res.pvalue == pytest.approx(ref.pvalue)
    # one draw (a 1-D column) is the plain crossed test
    one = {s: d[:, 0] for s, d in per.items()}
    assert nested_crossed(one).pvalue == pytest.approx(
        crossed_test(np.column_stack(list(one.values()))).pvalue)
    with pytest.raises(ValueError):
        nested_crossed({"6": np.zeros((5, 1)), "7": np.zeros((4, 1))})


def test_nested_components_shrink_only_the_draws_parts():
    comps = (0.01, 0.002, 0.08)
    assert nested_components(comps, 1, 0.7, 0.05) == pytest.approx(comps)
    # default: draws average none of s_b² (conservative), the sampling part by D
    assert nested_components(comps, 4, sampling=0.06) == pytest.approx((0.01, 0.002, 0.035))
    assert nested_components(comps, 4, draw_share=1.0) == pytest.approx((0.01, 0.0005, 0.08))
    # more draws never lose power
    p = [crossed_power(0.02, nested_components(comps, d, 0.5, 0.06), 400, 4, 0.01)
         for d in (1, 2, 4)]
    assert p == sorted(p)


def test_planning_variance_is_the_chi_square_upper_bound():
    assert planning_variance(2.0, 3, 0.8) == pytest.approx(2.0 * 3 / chi2.ppf(0.2, 3))
    assert planning_variance(1.0, 3, 0.8) == pytest.approx(2.99, abs=0.01)
    # by simulation: the bound covers the true variance in `confidence` of pilots
    rng = np.random.default_rng(3)
    s2 = rng.normal(0, 1, (20_000, 4)).var(axis=1, ddof=1)
    assert np.mean(planning_variance(1.0, 3, 0.8) * s2 >= 1.0) == pytest.approx(0.8, abs=0.01)
    with pytest.raises(ValueError):
        planning_variance(1.0, 0)


def test_conservative_components_move_ms_replicate_only_below_min_df():
    comps = (0.0, 1e-4, 0.077)
    up = conservative_components(comps, 400, 4, 0.8, 5)
    ms_r = planning_variance(0.077 + 400 * 1e-4, 3, 0.8)
    assert up == pytest.approx((0.0, (ms_r - 0.077) / 400, 0.077))
    assert up[1] > comps[1]
    assert conservative_components(comps, 400, 6, 0.8, 5) == comps  # 5 df: unchanged


def test_mde_is_the_effect_at_the_planned_power():
    comps = (0.0, 1e-4, 0.015)
    mde = crossed_mde(comps, 400, 8, 0.002, 0.8, "greater")
    assert crossed_power(mde, comps, 400, 8, 0.002, "greater") == pytest.approx(0.8, abs=1e-3)
    assert crossed_mde(comps, 400, 16, 0.002, 0.8, "greater") < mde


@settings(max_examples=40, deadline=None)
@given(p=st.floats(0, 1, allow_subnormal=False), k=st.integers(1, 8), extra=st.integers(0, 24),
       sub=st.integers(0, 40))
def test_sampling_variance_estimate_is_unbiased_exactly(p, k, extra, sub):
    """Its expectation over c ~ Binomial(n, p) is the sampling variance at m <= n samples:
    exactly, summed over every c (no simulation)."""
    n = 2 * k + extra
    m = k + sub % (n - k + 1)
    c = np.arange(n + 1)
    expected = float((binom.pmf(c, n, p) * sampling_var_estimate(c, n, m, k)).sum())
    assert expected == pytest.approx(float(pass_at_k_var(p, m, k)), abs=1e-9)


def test_sampling_variance_estimate_refuses_what_it_cannot_estimate():
    with pytest.raises(ValueError, match="2k <= n"):
        sampling_var_estimate([1], 8, 8, 8)  # (1 - p)^(2k) needs 2k samples
    with pytest.raises(ValueError, match="m <= n"):
        sampling_var_estimate([1], 32, 64, 8)


def _nested_pilot(rng, draw_sd, problem_sd, n_rep=40, n_problems=300, n=64, k=8):
    """Counts of two arms on each replicate's own problems: a problem's per-sample rates
    from a logit that carries a problem part (shared by both arms), the arm's effect, a
    problem x arm part (problem_sd) and the replicate's draw (draw_sd)."""
    counts = {}
    for r in range(n_rep):
        base = rng.normal(-3.5, 1.0, n_problems)
        draw = rng.normal(0, draw_sd)
        la = base + 0.4 + draw + rng.normal(0, problem_sd, n_problems)
        lb = base + rng.normal(0, problem_sd, n_problems)
        pa, pb = 1 / (1 + np.exp(-la)), 1 / (1 + np.exp(-lb))
        counts[str(r)] = (rng.binomial(n, pa), rng.binomial(n, pb))
    return counts


def test_nested_samples_predicts_the_spread_of_replicates_at_fewer_samples():
    """The replicate variance it plans at m = K (from 64-sample counts) matches the spread of
    replicates that really were measured with K samples, from the same truth; and at n it
    matches theirs at n. The draw part comes out near 0 where there is none."""
    n, k = 64, 8
    pilot = nested_samples(_nested_pilot(np.random.default_rng(1), 0.0, 0.5), n, k)
    assert pilot.draw_var < 0.1 * pilot.within_var(n)
    # the replicates' own spread at K samples: subsample K of the n, one estimate a problem
    rng = np.random.default_rng(2)
    effects_k = []
    for a, b in _nested_pilot(rng, 0.0, 0.5).values():
        sub = [rng.hypergeometric(c, n - c, k) for c in (a, b)]
        effects_k.append(np.mean([pass_at_k(k, x, k) - pass_at_k(k, y, k)
                                  for x, y in zip(*sub)]))
    assert np.var(effects_k, ddof=1) == pytest.approx(pilot.replicate_var(k), rel=0.35)
    assert np.var(pilot.effects, ddof=1) == pytest.approx(pilot.replicate_var(n), rel=0.35)
    assert pilot.replicate_var(k) > 2 * pilot.replicate_var(n)  # more samples, less noise


def test_nested_samples_finds_a_draw_variance_and_plans_it_conservatively():
    n, k = 64, 8
    with_draws = nested_samples(_nested_pilot(np.random.default_rng(3), 0.5, 0.3), n, k)
    without = nested_samples(_nested_pilot(np.random.default_rng(3), 0.0, 0.3), n, k)
    assert with_draws.draw_var > 5 * without.draw_var
    # the draws' part does not fall with samples: at n it is most of the replicate variance
    assert with_draws.draw_var > with_draws.within_var(n)
    few = nested_samples(dict(list(_nested_pilot(np.random.default_rng(4), 0.0, 0.3,
                                                 n_rep=4).items())), n, k)
    assert few.replicate_var(n, conservative=0.8) >= few.replicate_var(n)
    assert few.replicate_var(n, problems=4 * few.problems) < few.replicate_var(n)


def test_nested_samples_refuses_bad_counts():
    with pytest.raises(ValueError, match="2k <= n"):
        nested_samples({"1": ([1, 2], [0, 1])}, 8, 8)
    with pytest.raises(ValueError, match="replicate 1"):
        nested_samples({"1": ([1, 2], [0])}, 64, 8)
    with pytest.raises(ValueError, match="replicate 1"):
        nested_samples({"1": ([1, 65], [0, 1])}, 64, 8)
