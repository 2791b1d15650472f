import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr.data.pairs import (
    base_pairs,
    cap_sources,
    scripted_pairs,
    style_counts,
    teacher_pairs,
    trace_style,
)
from countdown_rlvr.data.traces import solver_traces
from countdown_rlvr.task.generate import generate_problems
from countdown_rlvr.task.prompts import solve_prompt
from countdown_rlvr.task.solve import operator_flips
from countdown_rlvr.task.verify import verify


def _traces(n=20):
    rng = random.Random(0)
    probs = [p.to_dict() for p in generate_problems(n, 1, "train")]
    return [r for i, q in enumerate(probs) for r in solver_traces(
        q, solve_prompt(q["numbers"], q["target"], "tiny"), ("direct", "search"), 1, rng, offset=i)]


def _sample(trace, completion):
    v = verify(completion, trace["numbers"], trace["target"])
    return {**{k: trace[k] for k in ("problem_id", "numbers", "target", "n_numbers", "prompt")},
            "completion": completion, "correct": v.correct, "failure": v.failure,
            "value": None if v.value is None else str(v.value)}


def test_scripted_pairs_flip_one_operator():
    pairs = scripted_pairs(_traces(), random.Random(0))
    assert len(pairs) == 20
    styles = style_counts(pairs)
    assert styles["search/search"] > 0 and styles["direct/direct"] > 0  # both styles, never mixed
    assert set(styles) <= {"search/search", "direct/direct"}
    for p in pairs:
        # the rejected is the chosen with only its final attempt changed: same dead ends
        cut = p["chosen"].rfind("try ") if trace_style(p["chosen"]) == "search" else 0
        assert p["rejected"][:cut] == p["chosen"][:cut]
        assert p["chosen_failure"] is None and p["rejected_failure"] == "WRONG_TARGET"
        chosen_ans = p["chosen"].split("<answer>")[1]
        rejected_ans = p["rejected"].split("<answer>")[1]
        # same characters except exactly one operator
        diffs = [(a, b) for a, b in zip(chosen_ans, rejected_ans) if a != b]
        assert len(chosen_ans) == len(rejected_ans) and len(diffs) == 1
        assert all(c in "+-*/" for c in diffs[0])


def test_teacher_pairs_hardneg_is_the_nearest_miss():
    t = _traces(1)[0]
    nums, target = t["numbers"], t["target"]
    far = _sample(t, f"<answer>{nums[0]} * {nums[1]} * {' * '.join(map(str, nums[2:]))}</answer>")
    near_expr = verify(t["completion"], nums, target).expression
    near = min((_sample(t, f"<answer>{f}</answer>") for f in operator_flips(near_expr, target)),
               key=lambda s: abs(Fraction(s["value"]) - target))
    junk = _sample(t, "no answer")
    samples = [_sample(t, t["completion"]), far, near, junk]
    pairs = teacher_pairs(samples, random.Random(0))
    by_source = {p["source"]: p for p in pairs}
    assert set(by_source) == {"easyneg", "hardneg"}
    assert by_source["hardneg"]["rejected"] == near["completion"]
    assert by_source["easyneg"]["rejected_failure"] in {"WRONG_TARGET", "FORMAT_MISSING"}


def test_no_pairs_without_contrast():
    t = _traces(1)[0]
    assert teacher_pairs([_sample(t, t["completion"])] * 3, random.Random(0)) == []
    assert teacher_pairs([_sample(t, "x")] * 3, random.Random(0)) == []


def test_base_pairs_reject_base_failures():
    traces = _traces(5)
    base = [_sample(t, "Evaluate: 3 + 4 <answer>1000</answer>") for t in traces]
    pairs = base_pairs(traces, base, random.Random(0))
    # the base sample does not backtrack: only the problems with a direct trace get a pair
    assert len(pairs) == sum(trace_style(t["completion"]) == "direct" for t in traces) == 3
    assert all(p["source"] == "base" and p["rejected_failure"] == "NUMBER_UNKNOWN" for p in pairs)


def test_teacher_and_base_pairs_keep_one_style():
    t = next(t for t in _traces(4) if trace_style(t["completion"]) == "search")
    nums, target = t["numbers"], t["target"]
    expr = verify(t["completion"], nums, target).expression
    wrong = operator_flips(expr, target)[0]
    direct_bad = _sample(t, f"<think>x</think>\n<answer>{wrong}</answer>")
    search_bad = _sample(t, f"<think>try 1 + 1 = 2 (not {target}), backtrack. try x</think>\n"
                            f"<answer>{wrong}</answer>")
    # a search-style correct sample only ever meets the search-style failure
    for seed in range(10):
        pairs = teacher_pairs([_sample(t, t["completion"]), direct_bad, search_bad],
                              random.Random(seed))
        assert pairs and all(p["rejected"] == search_bad["completion"] for p in pairs)
    # no failure in the chosen's style: no pair
    assert teacher_pairs([_sample(t, t["completion"]), direct_bad], random.Random(0)) == []
    # base: a direct-style failure is paired with a direct-style correct trace only
    direct = {**t, "completion": f"<think>{expr}</think>\n<answer>{expr}</answer>"}
    pairs = base_pairs([t, direct], [direct_bad], random.Random(0))
    assert [p["chosen"] for p in pairs] == [direct["completion"]]
    assert base_pairs([t], [direct_bad], random.Random(0)) == []


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 30), min_size=1, max_size=4), seed=st.integers(0, 100),
       cap=st.one_of(st.none(), st.just("min"), st.integers(1, 40)))
def test_cap_sources_is_a_seeded_subset_of_each_source(sizes, seed, cap):
    pairs = [{"source": f"s{k}", "i": i} for k, n in enumerate(sizes) for i in range(n)]
    random.Random(seed).shuffle(pairs)
    kept = cap_sources(pairs, cap, random.Random(seed))
    assert kept == cap_sources(pairs, cap, random.Random(seed))  # seeded
    assert kept == [p for p in pairs if p in kept]  # a subset, in file order
    nonempty = [n for n in sizes if n]
    limit = {None: max(nonempty, default=0), "min": min(nonempty, default=0)}.get(cap, cap)
    for k, n in enumerate(sizes):
        assert sum(p["source"] == f"s{k}" for p in kept) == min(n, limit)


def test_cap_sources_rejects_a_bad_cap():
    with pytest.raises(ValueError, match="positive integer, min or null"):
        cap_sources([{"source": "a"}], 0, random.Random(0))
