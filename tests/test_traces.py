import random
from collections import Counter

import pytest

from countdown_rlvr.data.traces import solver_traces, strategy_prompt
from countdown_rlvr.task.generate import generate_problems
from countdown_rlvr.task.prompts import solve_prompt
from countdown_rlvr.task.verify import verify


@pytest.fixture(scope="module")
def problems():
    return [p.to_dict() for p in generate_problems(60, 3, "train")]


def test_every_trace_verifies_with_correct_arithmetic(problems):
    rng = random.Random(0)
    rows = [r for i, q in enumerate(problems) for r in solver_traces(
        q, solve_prompt(q["numbers"], q["target"], "tiny"), ("direct", "search"), 2, rng, offset=2 * i)]
    assert len(rows) == 120
    for r in rows:
        v = verify(r["completion"], r["numbers"], r["target"])
        assert v.correct and v.arithmetic_errors == 0, r["completion"]
        assert r["completion"].startswith("<think>")
        assert ("backtrack" in r["completion"]) == (r["strategy"] == "search")
    assert Counter(r["strategy"] for r in rows) == {"direct": 60, "search": 60}


def test_styles_rotate_across_problems_and_are_deterministic(problems):
    def run():
        rng = random.Random(7)
        return [r for i, q in enumerate(problems) for r in solver_traces(
            q, "p", ("direct", "search"), 1, rng, offset=i)]
    a, b = run(), run()
    assert a == b
    assert Counter(r["strategy"] for r in a) == {"direct": 30, "search": 30}


def test_construction_traces_use_the_known_solution(problems):
    rng = random.Random(0)
    for i, q in enumerate(problems):
        (row,) = solver_traces(q, "p", ("direct", "search"), 1, rng, offset=i,
                               solutions="construction")
        assert verify(row["completion"], q["numbers"], q["target"]).correct
        assert row["completion"].endswith(f"<answer>{q['construction']}</answer>")
    with pytest.raises(ValueError, match="valid: solver, construction"):
        solver_traces(problems[0], "p", ("direct",), 1, rng, solutions="oracle")


def test_unknown_style_and_strategy_are_clear_errors(problems):
    with pytest.raises(ValueError, match="valid: direct, search"):
        solver_traces(problems[0], "p", ("backward",), 1, random.Random(0))
    with pytest.raises(ValueError, match="valid: direct, search"):
        strategy_prompt("p", "guess")
    assert strategy_prompt("Numbers: 1 2 Target: 3\n", "search").endswith("Strategy: search\n")
