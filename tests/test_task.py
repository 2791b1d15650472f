"""The task core: verifier, solver, generator, rewards, prompts."""

import operator
import time
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from countdown_rlvr.task.arith import OPS, apply_op
from countdown_rlvr.task.generate import generate_problems, problem_key
from countdown_rlvr.task.prompts import feedback, solve_prompt
from countdown_rlvr.task.rewards import get_reward
from countdown_rlvr.task.solve import operator_flips, solution_steps, solve, step_trace
from countdown_rlvr.task.verify import FAILURES, count_arithmetic_errors, extract_answer, verify

NUMS, TARGET = [44, 19, 35], 98


def ans(expr: str) -> str:
    return f"<think>try</think>\n<answer>{expr}</answer>"


# --- verifier: one example per failure code ------------------------------------------

@pytest.mark.parametrize("completion, failure", [
    ("(44 + 19) + 35", None),
    ("no tags at all", "FORMAT_MISSING"),
    ("<answer>44 + 19 + 35", "FORMAT_MISSING"),  # unclosed
    ("44 + 19 + 35</answer>", "FORMAT_MISSING"),  # no opening tag
    ("44 + + 35", "PARSE_FAIL"),
    ("44 + 19 + 35 + 36", "NUMBER_UNKNOWN"),
    ("44 + 19 + 35 + 35", "NUMBER_REUSED"),
    ("44 + 19", "NUMBER_OMITTED"),
    ("44 / (35 - 35) + 19", "NUMBER_REUSED"),  # pool checked before evaluation
    ("44 * 19 * 35", "WRONG_TARGET"),
])
def test_failure_codes(completion, failure):
    text = completion if "answer>" in completion or "tags" in completion else ans(completion)
    v = verify(text, NUMS, TARGET)
    assert v.failure == failure
    assert v.correct == (failure is None)
    assert failure is None or failure in FAILURES


def test_div_by_zero():
    v = verify(ans("4 / (3 - 3)"), [4, 3, 3], 7)
    assert (v.failure, v.value) == ("DIV_BY_ZERO", None)


def test_exact_rationals_not_floats():
    # 8 / (3 - 8/3) = 24 exactly; float arithmetic gives 23.999999999999996
    assert verify(ans("8 / (3 - 8 / 3)"), [3, 3, 8, 8], 24).correct
    v = verify(ans("1 / 3 + 1 / 3 + 1"), [1, 3, 1, 3, 1], 1)
    assert v.value == Fraction(5, 3) and v.failure == "WRONG_TARGET"


@pytest.mark.parametrize("expr, hint", [
    ("44 ** 19 - 35", "**"), ("44 // 19 + 35", "//"), ("-44 + 19 + 35", "unary"),
    ("44(19) + 35", "implicit"), ("4.4 + 19 + 35", "decimal"), ("44 + 19 + 35 = 98", "="),
    ("2e1 + 19 + 35", "'e'"), ("abs(44) + 19 + 35", "'a'"), ("44 % 19 + 35", "%"),
    ("(44 + 19 + 35", "unbalanced"), ("44 + 19) + 35", "unbalanced"), ("()", ")"), ("", "empty"),
    ("__import__('os')", "'_'"),
])
def test_illegal_syntax_is_parse_fail_with_message(expr, hint):
    v = verify(ans(expr), NUMS, TARGET)
    assert v.failure == "PARSE_FAIL"
    assert hint in v.detail


def test_tinyzero_scorer_mistakes():
    # multi-line answer (TinyZero's regex has no DOTALL and misses it)
    assert verify("<answer>\n(44 + 19)\n+ 35\n</answer>", NUMS, TARGET).correct
    # a newline (or anything) after </answer>
    assert verify("<answer>44 + 19 + 35</answer>\n\n", NUMS, TARGET).correct
    # `**` passes TinyZero's character whitelist and gets eval'ed; here it is illegal
    assert verify("<answer>2 ** 2 * 24</answer>", [2, 2, 24], 96).failure == "PARSE_FAIL"


def test_last_answer_wins():
    text = "<answer>44 + 19 + 35</answer> wait, no: <answer>44 * 19 * 35</answer>"
    assert verify(text, NUMS, TARGET).failure == "WRONG_TARGET"
    assert extract_answer("<answer>a<answer>b</answer>") == "b"


def test_arithmetic_errors_counted_in_reasoning():
    text = "<think>44 + 19 = 63, 63 + 35 = 99, 3 - 5 = -2, -2 * 3 = -6, 7 / 2 = 7/2, 9 / 0 = 1</think>"
    assert count_arithmetic_errors(text) == 2  # 63 + 35 = 99 and 9 / 0 = 1
    assert verify(text + "<answer>44 + 19 + 35</answer>", NUMS, TARGET).arithmetic_errors == 2
    # fractions written without spaces are operands, not divisions
    assert count_arithmetic_errors("4 / 36 = 1/9, 5 * 1/9 = 5/9, 15 / 1/9 = 135, 15/3 = 5") == 0
    assert count_arithmetic_errors("5 * 1/9 = 5/8, 12x3=35") == 2


HOSTILE = [
    "<answer>" + "(" * 10_000 + "44 + 19 + 35" + ")" * 10_000 + "</answer>",
    "<answer>" + "9" * 100_000 + " + 19 + 35</answer>",
    "<answer>" + " + ".join(["1"] * 50_000) + "</answer>",
    "<answer>" * 200_000 + "</answer>" * 200_000,
    "x" * 1_000_000,
    "1" * 1_000_000 + " + 1 = 2",
    "<think>" + "12 + 34 = 46 " * 50_000 + "</think><answer>44 + 19 + 35</answer>",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_inputs_are_bounded_and_never_raise(text):
    start = time.perf_counter()
    v = verify(text, NUMS, TARGET)
    assert time.perf_counter() - start < 2.0  # generous: linear work on ~1 MB
    assert v.failure in FAILURES or v.correct


def test_deep_parentheses_still_evaluate():
    v = verify("<answer>" + "(" * 10_000 + "44 + 19 + 35" + ")" * 10_000 + "</answer>", NUMS, TARGET)
    assert v.correct


def token_soup(chars: str) -> st.SearchStrategy[str]:
    """Text built from expression characters and answer tags: reaches the parser often."""
    return st.lists(st.sampled_from(list(chars) + ["<answer>", "</answer>", "12", "35"])).map("".join)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(token_soup("0123456789+-*/() .=<>answer/\n"),
       st.lists(st.integers(0, 100), min_size=1, max_size=6), st.integers(-1000, 1000))
def test_verify_never_raises_and_is_consistent(text, numbers, target):
    v = verify(text, numbers, target)
    assert v.correct == (v.failure is None)
    assert v.failure is None or v.failure in FAILURES
    if v.correct:
        assert v.value == target
    if v.failure == "WRONG_TARGET":
        assert v.value is not None and v.value != target


@given(st.text())
def test_verify_never_raises_on_any_unicode(text):
    verify(text, NUMS, TARGET)
    verify(f"<answer>{text}</answer>", NUMS, TARGET)


# --- arithmetic: the one `a op b` of the solver, verifier, interventions and corpus -----

exact_values = st.one_of(st.integers(-10**6, 10**6), st.fractions(max_denominator=1000),
                         st.sampled_from([0, Fraction(0)]))  # zero divisors, often
FRACTION_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


@given(exact_values, st.sampled_from(OPS), exact_values)
@example(7, "/", 0)
@example(Fraction(7, 2), "/", Fraction(0))
@example(0, "/", 0)
@example(6, "/", -3)
@example(-7, "/", 2)
@example(Fraction(6), "/", 3)
@example(5, "-", 8)
def test_apply_op_is_exact_fraction_arithmetic(a, op, b):
    got = apply_op(a, op, b)
    if op == "/" and b == 0:
        assert got is None
        return
    want = FRACTION_OPS[op](Fraction(a), Fraction(b))  # operand order matters for - and /
    assert got == want
    # ints stay ints while the result is whole (the verifier's fast path); else a Fraction
    whole_ints = type(a) is int and type(b) is int and want.denominator == 1
    assert type(got) is (int if whole_ints else Fraction)


def test_apply_op_rejects_unknown_operators():
    with pytest.raises(ValueError, match="unknown operator"):
        apply_op(2, "^", 3)


# --- solver ----------------------------------------------------------------------------

small_numbers = st.lists(st.integers(1, 30), min_size=2, max_size=4)


@settings(max_examples=60, deadline=None)
@given(small_numbers, st.integers(1, 100))
def test_every_solution_verifies_and_is_distinct(numbers, target):
    sols = solve(numbers, target)
    assert len(sols) == len(set(sols))
    for s in sols:
        assert verify(f"<answer>{s}</answer>", numbers, target).correct, s


def test_solver_covers_fractional_and_negative_intermediates():
    assert "8 / (3 - 8 / 3)" in solve([3, 3, 8, 8], 24)  # needs 1/3
    assert solve([1, 5, 5, 5], 24) == ["5 * (5 - 1 / 5)"]  # needs 24/5 only via 1/5
    assert any(verify(f"<answer>{s}</answer>", [2, 7, 3], 3).correct for s in solve([2, 7, 3], 3))
    assert solve([1, 1, 1], 100) == []


def test_solver_counts_trees_up_to_commutativity():
    # a + b + c: (1+2)+4, (1+4)+2, 1+(2+4) — three trees; commuted forms are not new
    sums = [s for s in solve([1, 2, 4], 7) if set(s) <= set("124 +()")]
    assert sums == ["1 + 2 + 4", "1 + 4 + 2", "1 + (2 + 4)"]
    assert "2 * 4 - 1" in solve([1, 2, 4], 7)


def test_steps_and_flips():
    assert solution_steps("(44 + 19) + 35") == [("44", "+", "19", "63"), ("63", "+", "35", "98")]
    assert step_trace("8 / (3 - 8 / 3)") == "8 / 3 = 8/3, 3 - 8/3 = 1/3, 8 / 1/3 = 24"
    flips = operator_flips("(44 + 19) + 35", 98)
    assert flips and len(flips) == len(set(flips))
    for f in flips:
        v = verify(f"<answer>{f}</answer>", NUMS, TARGET)
        assert v.failure == "WRONG_TARGET"  # same operand multiset, wrong value


# --- generator -------------------------------------------------------------------------

@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_generated_problems_are_solvable_and_deterministic(seed):
    ps = generate_problems(12, seed, "train")
    assert ps == generate_problems(12, seed, "train")
    for p in ps:
        assert len(p.numbers) == p.n_numbers in (3, 4)
        assert 10 <= p.target <= 99 and all(1 <= x <= 99 for x in p.numbers)
        assert p.target not in p.numbers
        assert verify(f"<answer>{p.construction}</answer>", p.numbers, p.target).correct
        assert p.n_solutions == len(solve(p.numbers, p.target)) >= 1


def test_splits_are_disjoint():
    test = generate_problems(200, 0, "test", number_range=(1, 9), target_range=(10, 30))
    keys = {problem_key(p.numbers, p.target) for p in test}
    train = generate_problems(400, 0, "train", number_range=(1, 9), target_range=(10, 30),
                              exclude=keys)
    assert keys.isdisjoint(problem_key(p.numbers, p.target) for p in train)
    assert len({p.id for p in train}) == 400


def test_ood_problems():
    ood = generate_problems(10, 1, "ood", n_numbers=(5, 6), target_range=(250, 1000))
    for p in ood:
        assert p.n_numbers in (5, 6) and 250 <= p.target <= 1000 and p.n_solutions is None
        assert verify(f"<answer>{p.construction}</answer>", p.numbers, p.target).correct


def test_count_first_counts_only_a_prefix_and_keeps_the_problems():
    full = generate_problems(20, 5, "train")
    part = generate_problems(20, 5, "train", count_first=6)
    assert [(p.numbers, p.target) for p in part] == [(p.numbers, p.target) for p in full]
    assert [p.n_solutions for p in part[:6]] == [p.n_solutions for p in full[:6]]
    assert all(p.n_solutions is None for p in part[6:])


def test_generator_rejects_impossible_ranges():
    with pytest.raises(ValueError, match="widen"):
        generate_problems(5, 0, "x", number_range=(1, 1), target_range=(50, 60), max_tries=1000)


# --- rewards -----------------------------------------------------------------------------

@given(token_soup("0123456789+-*/() "),
       st.sampled_from(["binary", "format", "shaped"]))
def test_rewards_in_unit_interval_and_one_iff_correct(text, name):
    v = verify(text, [3, 4, 5], 12)
    r = get_reward(name)(v, 12)
    assert 0.0 <= r <= 1.0
    assert (r == 1.0) == v.correct


def test_reward_values():
    fmt, shaped = get_reward("format"), get_reward("shaped")
    assert fmt(verify("nothing", NUMS, TARGET), TARGET) == 0.0
    assert fmt(verify(ans("44 + 19"), NUMS, TARGET), TARGET) == 0.1
    wrong = verify(ans("44 + 19 - 35"), NUMS, TARGET)  # = 28, |28 - 98| / 98
    assert shaped(wrong, TARGET) == pytest.approx(0.1 + 0.5 * (1 - 70 / 98))
    far = verify(ans("44 * 19 * 35"), NUMS, TARGET)
    assert shaped(far, TARGET) == pytest.approx(0.1)
    assert shaped(verify(ans("44 + 19"), NUMS, TARGET), TARGET) == 0.0  # wrong pool


def test_unknown_reward_lists_valid_names():
    with pytest.raises(ValueError, match="binary, format, shaped"):
        get_reward("dense")


# --- prompts and feedback ----------------------------------------------------------------

def test_prompts_and_feedback_templates():
    chat = solve_prompt(NUMS, TARGET)
    assert chat.startswith("You are solving a Countdown arithmetic puzzle. Numbers: 44, 19, 35. Target: 98.")
    assert solve_prompt(NUMS, TARGET, "tiny") == "Numbers: 44 19 35 Target: 98\n"
    wrong = verify(ans("44 + 19 - 35"), NUMS, TARGET)
    assert feedback("F1", wrong, NUMS, TARGET) == "The answer is incorrect. Try again."
    assert feedback("F2", wrong, NUMS, TARGET) == "The equation is valid but does not reach the target."
    assert feedback("F3", wrong, NUMS, TARGET) == "Your expression evaluates to 28, but the target is 98."
    f4 = feedback("F4", wrong, NUMS, TARGET)
    assert "evaluates to 28 instead of the target 98" in f4 and "by 70" in f4
    reused = verify(ans("44 + 44 + 19"), NUMS, TARGET)
    assert feedback("F3", reused, NUMS, TARGET) == "Your equation reuses 44 and omits 35."
    assert feedback("F4", reused, NUMS, TARGET) == feedback("F3", reused, NUMS, TARGET)
    assert feedback("F-shuffled", wrong, NUMS, TARGET, shuffled_from="other") == "other"
    assert feedback("R-resample", wrong, NUMS, TARGET).startswith("Generate a fresh solution attempt.")
    with pytest.raises(ValueError, match="F1, F2"):
        feedback("F9", wrong, NUMS, TARGET)
