"""Repair-format SFT examples: made wrong attempts that fail, feedback rendered by
research.repair's own code, F1-F4 rotated equally, verified answers, train problems only."""

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr.data.repair_data import (
    CONDITIONS,
    FAILURE_ORDER,
    repair_counts,
    repair_examples,
    wrong_attempt,
)
from countdown_rlvr.data.traces import solver_traces
from countdown_rlvr.task.generate import generate_problems, problem_key
from countdown_rlvr.task.prompts import solve_prompt
from countdown_rlvr.task.repair_prompt import condition_feedback, repair_prompt
from countdown_rlvr.task.verify import extract_answer, verify


@pytest.fixture(scope="module")
def splits():
    """Train problems generated as stages/problems.py does: disjoint from test by key."""
    test = [p.to_dict() for p in generate_problems(40, 0, "test")]
    seen = {problem_key(p["numbers"], p["target"]) for p in test}
    train = [p.to_dict() for p in generate_problems(240, 0, "train", exclude=seen)]
    return train, test


@pytest.fixture(scope="module")
def traces(splits):
    rng = random.Random(0)
    return [r for i, q in enumerate(splits[0]) for r in solver_traces(
        q, solve_prompt(q["numbers"], q["target"], "tiny"), ("direct", "direct", "search"), 1,
        rng, offset=i, solutions="construction")]


@pytest.fixture(scope="module")
def examples(traces):
    return repair_examples(traces, 0.5, 0, "tiny")


def test_share_and_no_test_problem(examples, traces, splits):
    assert len(examples) == 120  # round(0.5 * 240); no problem failed to give an attempt
    test_keys = {problem_key(p["numbers"], p["target"]) for p in splits[1]}
    assert not {problem_key(r["numbers"], r["target"]) for r in examples} & test_keys
    assert {r["problem_id"] for r in examples} <= {r["problem_id"] for r in traces}
    assert all(r["source"] == "repair" for r in examples)


def test_conditions_rotate_equally_and_failures_within_each(examples):
    by_cond = Counter(r["condition"] for r in examples)
    assert set(by_cond) == set(CONDITIONS) and max(by_cond.values()) - min(by_cond.values()) <= 1
    # every condition sees the same failure mix (up to the fall-through of rare types)
    mixes = [Counter(r["failure"] for r in examples if r["condition"] == c) for c in CONDITIONS]
    for f in ("WRONG_TARGET", "NUMBER_REUSED", "NUMBER_UNKNOWN", "PARSE_FAIL", "FORMAT_MISSING"):
        assert all(m[f] > 0 for m in mixes), (f, mixes)
    counts = repair_counts(examples)
    assert counts["count"] == len(examples) and sum(counts["by_condition"].values()) == len(examples)


def test_every_attempt_fails_and_the_completion_verifies(examples, traces):
    plain = {r["problem_id"]: r for r in traces}
    for r in examples:
        v = verify(r["attempt"], r["numbers"], r["target"])
        assert not v.correct and v.failure == r["failure"]
        assert verify(r["completion"], r["numbers"], r["target"]).correct
        assert r["completion"] == plain[r["problem_id"]]["completion"]


def test_the_prompt_is_research_repair_rendering(examples):
    """The repair stage's own functions, called as the stage calls them, give the same text."""
    for r in examples[:40]:
        attempt = {"attempt_id": "x", "problem_id": r["problem_id"], "numbers": r["numbers"],
                   "target": r["target"], "completion": r["attempt"], "failure": r["failure"]}
        text = condition_feedback([attempt], r["condition"], 0)[0]
        assert r["prompt"] == repair_prompt(attempt, text, "tiny")
        assert r["prompt"].startswith(solve_prompt(r["numbers"], r["target"], "tiny"))
        assert r["attempt"] in r["prompt"]


def test_deterministic_and_zero_share(traces):
    assert repair_examples(traces, 0.2, 3, "tiny") == repair_examples(traces, 0.2, 3, "tiny")
    assert repair_examples(traces, 0.0, 0, "tiny") == []
    with pytest.raises(ValueError, match="repair_frac"):
        repair_examples(traces, 1.5, 0, "tiny")


def test_chat_style_uses_the_repair_wrapper(traces):
    rows = repair_examples(traces[:8], 1.0, 0, "chat")
    assert all(r["prompt"].startswith("Problem: Numbers:") for r in rows)


def test_div_by_zero_when_the_numbers_allow_it():
    text, failure = wrong_attempt("3 * (5 + 5)", [5, 5, 3], 30, "DIV_BY_ZERO", random.Random(0))
    assert failure == "DIV_BY_ZERO" and not verify(text, [5, 5, 3], 30).correct


@settings(max_examples=40, deadline=None)
@given(idx=st.integers(0, 239), failure=st.sampled_from(FAILURE_ORDER), seed=st.integers(0, 99))
def test_any_asked_type_gives_a_failing_attempt(traces, idx, failure, seed):
    r = traces[idx]
    made = wrong_attempt(extract_answer(r["completion"]), r["numbers"], r["target"], failure,
                         random.Random(seed))
    assert made is not None
    text, code = made
    v = verify(text, r["numbers"], r["target"])
    assert not v.correct and v.failure == code
    if failure != "DIV_BY_ZERO":  # the one type most problems cannot produce
        assert code == failure


def test_made_attempts_follow_the_configured_failure_mix(traces):
    """The made wrong attempts follow `traces.repair_mix` (the student's own failure mix by
    default): exact apportioned counts of the requested types, and the verifier's codes of
    the attempts follow them (a type a problem cannot make falls through, rarely)."""
    import yaml
    from conftest import ROOT

    from countdown_rlvr.data.repair_data import apportion

    mix = yaml.safe_load((ROOT / "params.yaml").read_text())["traces"]["repair_mix"]
    types = apportion(mix, 200, random.Random(0))
    counts = {f: types.count(f) for f in mix}
    assert sum(counts.values()) == 200
    assert all(abs(counts[f] - 200 * share) < 1 for f, share in mix.items())
    rows = repair_examples(traces, 1.0, 0, "tiny", mix)
    got = {f: sum(r["failure"] == f for r in rows) / len(rows) for f in mix}
    misuse = sum(got[f] for f in ("NUMBER_REUSED", "NUMBER_UNKNOWN", "NUMBER_OMITTED"))
    assert abs(misuse - 0.87) < 0.05 and got["FORMAT_MISSING"] < 0.03
    with pytest.raises(ValueError, match="sum to 1"):
        apportion({"WRONG_TARGET": 0.5}, 10, random.Random(0))
