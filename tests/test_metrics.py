"""Tests for countdown_rlvr.eval.metrics: estimators pinned to exact rationals, Monte Carlo checks of
their meaning, and summarize() on a hand-built set of records with hand-computed values."""

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr.eval.metrics import (
    best_of_n,
    diagnostics_at_k,
    expected_samples,
    failure_counts,
    pass_at_k,
    solved_within,
    summarize,
    zero_signal,
)
from countdown_rlvr.task.verify import FAILURES


def exact_pass_at_k(n, c, k):
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def exact_expected_samples(n, c, k):
    return sum(Fraction(math.comb(n - c, j), math.comb(n, j)) for j in range(k))


@st.composite
def nck(draw, max_n=300):
    n = draw(st.integers(1, max_n))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


# --------------------------------------------------------------------------- estimators

@settings(max_examples=300, deadline=None)
@given(nck())
def test_pass_at_k_matches_exact_binomials(args):
    n, c, k = args
    assert pass_at_k(n, c, k) == pytest.approx(float(exact_pass_at_k(n, c, k)), abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(nck())
def test_expected_samples_matches_exact_binomials(args):
    n, c, k = args
    exact = float(exact_expected_samples(n, c, k))
    assert expected_samples(n, c, k) == pytest.approx(exact, rel=1e-12, abs=1e-12)


def test_large_n_is_stable():
    # C(10000, 5000) has ~3000 digits: a float-binomial implementation overflows here.
    n, c, k = 10_000, 3, 5_000
    assert pass_at_k(n, c, k) == pytest.approx(float(exact_pass_at_k(n, c, k)), abs=1e-12)
    n, c, k = 2_000, 5, 1_000
    assert expected_samples(n, c, k) == pytest.approx(
        float(exact_expected_samples(n, c, k)), rel=1e-12)


@pytest.mark.parametrize("n,k", [(1, 1), (8, 1), (16, 4), (16, 16)])
def test_pass_at_k_edges(n, k):
    assert pass_at_k(n, 0, k) == 0.0
    assert pass_at_k(n, n, k) == 1.0
    assert pass_at_k(n, 1, n) == 1.0  # k = n sees every sample
    assert pass_at_k(n, 1, 1) == pytest.approx(1 / n)  # pass@1 is the per-sample accuracy
    assert expected_samples(n, 0, k) == k  # never verifies: spends the whole budget
    assert expected_samples(n, n, k) == 1.0  # first draw verifies
    assert expected_samples(n, 0, 1) == 1.0


def test_hand_values():
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)  # 1 - C(2,2)/C(4,2)
    assert expected_samples(4, 2, 4) == pytest.approx(1 + 2 / 4 + 1 / 6)
    assert expected_samples(16, 1, 16) == pytest.approx(8.5)  # uniform position of the one hit


@pytest.mark.parametrize("args,error", [
    ((0, 0, 1), ValueError), ((4, 5, 1), ValueError), ((4, -1, 1), ValueError),
    ((4, 2, 0), ValueError), ((4, 2, 5), ValueError), ((4.0, 2, 1), TypeError),
    ((4, True, 1), TypeError),
])
def test_estimators_reject_bad_args(args, error):
    with pytest.raises(error):
        pass_at_k(*args)
    with pytest.raises(error):
        expected_samples(*args)


@pytest.mark.parametrize("n,c,k", [(16, 2, 8), (16, 1, 12), (8, 3, 4), (10, 5, 3)])
def test_estimators_match_random_orderings(n, c, k):
    """Early-stopping best-of-k over random orders of the recorded samples, simulated."""
    draws = 20_000
    rng = np.random.default_rng(0)
    orders = rng.permuted(np.tile(np.arange(n) < c, (draws, 1)), axis=1)
    first = np.where(orders.any(axis=1), orders.argmax(axis=1) + 1, n + 1)  # 1-based T
    used = np.minimum(first, k)
    # 5 standard errors: a correct estimator fails this with probability < 1e-6.
    tol = 5 * used.std() / math.sqrt(draws)
    assert abs(used.mean() - expected_samples(n, c, k)) < tol
    # ... and the tolerance is tight enough to catch an off-by-one (sum over j <= k).
    assert 1 - pass_at_k(n, c, k) > tol
    solved = first <= k
    p = pass_at_k(n, c, k)
    assert abs(solved.mean() - p) < 5 * math.sqrt(p * (1 - p) / draws) + 1e-12


# --------------------------------------------------------------------------- diagnostics

def test_zero_signal_hand_computed():
    correct = np.array([[0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]], dtype=bool)
    reward = np.where(correct, 1.0, 0.1)
    d = zero_signal(correct, reward)
    assert d["all_fail"] == 0.25
    assert d["all_correct"] == 0.25
    assert d["zero_informative"] == 0.5
    assert d["reward_contrast"] == pytest.approx(7 / 24)  # 0 + 0 + 3 + 4 of 4 x 6 pairs
    assert d["avg_score"] == pytest.approx((7 * 1.0 + 9 * 0.1) / 16)
    assert zero_signal(correct)["avg_score"] == pytest.approx(7 / 16)


def test_zero_signal_ragged_groups_pool_pairs():
    # 1 of 1 pairs differ, 4 of 6 pairs differ: pooled 5/7 (not the group average 5/6).
    d = zero_signal([[True, False], [False, False, True, True]])
    assert d["reward_contrast"] == pytest.approx(5 / 7)
    assert zero_signal([[True], [False]])["reward_contrast"] == 0.0  # no pairs at all


def test_zero_signal_rejects_graded_rewards_as_correct():
    with pytest.raises(ValueError, match="binary"):
        zero_signal([[0.1, 1.0]])
    with pytest.raises(ValueError):
        zero_signal([])
    with pytest.raises(ValueError, match="group sizes"):
        zero_signal([[1, 0]], reward=[[1.0]])


def test_failure_counts():
    counts = failure_counts(["WRONG_TARGET", None, float("nan"), "PARSE_FAIL", "WRONG_TARGET"])
    assert counts == dict.fromkeys(FAILURES, 0) | {"WRONG_TARGET": 2, "PARSE_FAIL": 1,
                                                   "correct": 2}
    assert list(counts) == [*FAILURES, "correct"]
    with pytest.raises(ValueError, match="unknown failure code"):
        failure_counts(["ARITHMETIC_ERROR"])


def test_best_of_n_realized_vs_expected():
    correct = np.array([[0, 1, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=bool)
    out = best_of_n(correct, [1, 2, 4])
    assert out["N1"] == pytest.approx(
        {"acc": 1 / 3, "avg_samples": 1.0, "expected_acc": 0.5, "expected_samples": 1.0})
    assert out["N2"] == pytest.approx(
        {"acc": 2 / 3, "avg_samples": 5 / 3, "expected_acc": 11 / 18, "expected_samples": 1.5})
    assert out["N4"] == pytest.approx(
        {"acc": 2 / 3, "avg_samples": 7 / 3, "expected_acc": 2 / 3,
         "expected_samples": 20 / 9})
    with pytest.raises(ValueError):
        best_of_n(correct, [8])


# --------------------------------------------------------------------------- records

def flat(d, prefix=""):
    """{"a": {"b": 1}} -> {"a.b": 1}, as `dvc metrics` shows it (pytest.approx is not nested)."""
    out = {}
    for key, v in d.items():
        out.update(flat(v, f"{prefix}{key}.") if isinstance(v, dict) else {prefix + key: v})
    return out


def make_records():
    """3 problems, 4 samples per group; p1 has two seeds. Hand-computed values below."""
    rows = []

    def group(pid, split, m, seed, failures, tokens):
        for i, (f, t) in enumerate(zip(failures, tokens)):
            reward = 1.0 if f is None else (0.0 if f == "FORMAT_MISSING" else 0.1)
            rows.append({"problem_id": pid, "split": split, "n_numbers": m, "seed": seed,
                         "sample": i, "correct": f is None, "failure": f, "reward": reward,
                         "n_tokens": t})

    group("p1", "test", 3, 0, ["WRONG_TARGET", None, "FORMAT_MISSING", None], [10, 20, 30, 40])
    group("p1", "test", 3, 1, [None, None, None, None], [10, 10, 10, 10])
    group("p2", "test", 4, 0, ["PARSE_FAIL", "NUMBER_REUSED", "WRONG_TARGET", "DIV_BY_ZERO"],
          [50, 50, 50, 50])
    group("p3", "ood", 5, 0, ["WRONG_TARGET", "NUMBER_OMITTED", None, "WRONG_TARGET"],
          [100, 100, 100, 100])
    # Shuffle rows: sample order must come from `sample`, not from row order.
    return pd.DataFrame(rows).sample(frac=1, random_state=0).reset_index(drop=True)


def test_summarize_hand_computed():
    out = summarize(make_records())
    assert list(out) == ["test", "ood", "diagnostics", "diagnostics_by_k", "failures",
                         "best_of_n"]
    # test groups: (p1,0) c=2, (p1,1) c=4, (p2,0) c=0, n=4; pass@8/16 dropped (k > n)
    assert flat(out["test"]) == pytest.approx(flat({
        "n_problems": 2, "n_groups": 3, "samples_per_group": 4,
        "pass@1": 0.5, "pass@4": 2 / 3, "mean_tokens": 340 / 12,
        "n3": {"n_problems": 1, "pass@1": 0.75, "pass@4": 1.0},
        "n4": {"n_problems": 1, "pass@1": 0.0, "pass@4": 0.0},
    }))
    assert flat(out["ood"]) == pytest.approx(flat({
        "n_problems": 1, "n_groups": 1, "samples_per_group": 4,
        "pass@1": 0.25, "pass@4": 1.0, "mean_tokens": 100.0,
        "n5": {"n_problems": 1, "pass@1": 0.25, "pass@4": 1.0},
    }))
    assert out["diagnostics"] == pytest.approx({
        "all_fail": 1 / 3, "all_correct": 1 / 3, "zero_informative": 2 / 3,
        "reward_contrast": 4 / 18, "avg_score": 6.5 / 12})
    assert out["failures"] == dict.fromkeys(FAILURES, 0) | {
        "WRONG_TARGET": 2, "FORMAT_MISSING": 1, "PARSE_FAIL": 1, "NUMBER_REUSED": 1,
        "DIV_BY_ZERO": 1, "correct": 6}  # test split only: p3's failures are not counted
    assert list(out["best_of_n"]) == ["N1", "N2", "N4"]
    assert out["best_of_n"]["N2"] == pytest.approx(
        {"acc": 2 / 3, "avg_samples": 5 / 3, "expected_acc": 11 / 18, "expected_samples": 1.5})
    assert out["best_of_n"]["N4"]["avg_samples"] == pytest.approx(7 / 3)


def test_summarize_diagnostics_by_k_hand_computed():
    # k=2: each 4-sample test group is cut into two groups of 2, in sample order:
    # (p1,0) [F,T] [F,T]; (p1,1) [T,T] [T,T]; (p2,0) [F,F] [F,F]
    out = summarize(make_records(), ks=(1, 2, 4))["diagnostics_by_k"]
    assert list(out) == ["k2", "k4"]
    assert out["k2"] == pytest.approx({
        "k": 2, "n_groups": 6, "pass@1": 0.5, "pass@k": 4 / 6, "all_fail": 2 / 6,
        "all_correct": 2 / 6, "zero_informative": 4 / 6, "reward_contrast": 2 / 6,
        "avg_score": 6.5 / 12})
    # k = n: the same groups as `diagnostics`
    assert out["k4"]["all_fail"] == pytest.approx(1 / 3)
    assert out["k4"]["pass@k"] == pytest.approx(2 / 3)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(1, 12), st.data())
def test_diagnostics_at_k_all_fail_is_one_minus_pass_at_k(groups, k, n_extra, data):
    """#17.1: every column from the same k-sample groups, so all-fail = 1 - pass@k exactly
    and pass@1 / avg score are means over exactly the samples those groups hold."""
    n = k + n_extra
    correct = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n),
                                          min_size=groups, max_size=groups)))
    reward = np.where(correct, 1.0, 0.1)
    out = diagnostics_at_k(correct, reward, k)
    used = correct[:, :n // k * k]
    assert out["n_groups"] == groups * (n // k)
    assert out["all_fail"] == pytest.approx(1 - out["pass@k"])
    assert out["zero_informative"] == pytest.approx(out["all_fail"] + out["all_correct"])
    assert out["pass@1"] == pytest.approx(used.mean())
    assert out["avg_score"] == pytest.approx(np.where(used, 1.0, 0.1).mean())
    assert diagnostics_at_k(correct, reward, 1)["pass@k"] == pytest.approx(correct.mean())


def test_diagnostics_at_k_rejects_bad_k():
    with pytest.raises(ValueError, match="k=5"):
        diagnostics_at_k(np.ones((2, 4), bool), np.ones((2, 4)), 5)


def test_summarize_is_plain_json():
    out = summarize(make_records(), ks=(1, 2))
    assert json.loads(json.dumps(out, allow_nan=False)) == out

    assert all(type(v) in (int, float) for v in flat(out).values())
    assert out["test"]["pass@2"] == pytest.approx((5 / 6 + 1 + 0) / 3)


def test_summarize_without_ood_and_without_test():
    records = make_records()
    assert "ood" not in summarize(records[records.split == "test"])
    with pytest.raises(ValueError, match="test"):
        summarize(records[records.split == "ood"])


@pytest.mark.parametrize("breakage,match", [
    (lambda r: r.drop(columns="reward"), "missing columns"),
    (lambda r: pd.concat([r, r.iloc[:1]]), "duplicate"),
    (lambda r: r.drop(index=r.index[(r.problem_id == "p2") & (r["sample"] == 2)]), "0..n-1"),
    (lambda r: r.assign(failure=None), "failure"),
    (lambda r: r.assign(split="train"), "unknown split"),
    (lambda r: r.assign(n_numbers=range(len(r))), "constant per problem_id"),
    (lambda r: r.assign(correct=r.correct.astype(float).where(r["sample"] > 0)), "bool"),
    (lambda r: r.iloc[:0], "empty"),
])
def test_summarize_rejects_bad_records(breakage, match):
    with pytest.raises(ValueError, match=match):
        summarize(breakage(make_records()))


def test_solved_within():
    records = make_records()
    s = solved_within(records, 1)
    assert s.name == "solved@1"
    assert s.to_dict() == {"p1": False, "p2": False, "p3": False}
    assert list(s.index) == ["p1", "p2", "p3"]
    assert solved_within(records, 2).to_dict() == {"p1": True, "p2": False, "p3": False}
    assert solved_within(records, 3).to_dict() == {"p1": True, "p2": False, "p3": True}
    assert solved_within(records, 1, seed=1).to_dict() == {"p1": True}
    with pytest.raises(ValueError, match="seed"):
        solved_within(records, 1, seed=7)
    with pytest.raises(ValueError):
        solved_within(records, 5)


def test_the_public_eval_names_are_the_metrics_functions():
    from countdown_rlvr import eval as public

    assert public.pass_at_k is pass_at_k and public.expected_samples is expected_samples
    assert public.pass_at_k(16, 4, 1) == 0.25
