import random
from fractions import Fraction

from countdown_rlvr.pairs import base_pairs, scripted_pairs, teacher_pairs
from countdown_rlvr.task import generate_problems, operator_flips, solve_prompt, verify
from countdown_rlvr.traces import solver_traces


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
    for p in pairs:
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
    assert len(pairs) == 5
    assert all(p["source"] == "base" and p["rejected_failure"] == "NUMBER_UNKNOWN" for p in pairs)
