"""Research-stage logic: zero-signal diagnosis, repair prompts and metrics, interventions."""

import random
from fractions import Fraction

import pandas as pd
import pytest
from helpers import config_of
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_sft import TINY, TOY  # a one-layer model and its toy data: trains in a second

from countdown_rlvr.core.train_config import SFT
from countdown_rlvr.data.traces import direct_trace, search_trace, solver_traces
from countdown_rlvr.eval.metrics import records_frame
from countdown_rlvr.model.policy import build_tiny, load_model
from countdown_rlvr.research.diagnose import diagnosis
from countdown_rlvr.research.interventions import (
    apply_op,
    find_intervention,
    patch_examples,
    reachable,
    replay_examples,
    replicate_problems,
    search_interventions,
    solver_examples,
    train_solver_baseline,
)
from countdown_rlvr.research.repair import (
    CONDITIONS,
    by_failure,
    distill_examples,
    distilled_problems,
    failed_attempts,
    pool_problems,
    repair_metrics,
    run_repairs,
    select_attempts,
)
from countdown_rlvr.task.generate import generate_problems
from countdown_rlvr.task.prompts import feedback, solve_prompt
from countdown_rlvr.task.repair_prompt import condition_feedback, derangement, repair_prompt
from countdown_rlvr.task.solve import solve, step_trace
from countdown_rlvr.task.verify import verify
from countdown_rlvr.train.sft import encode

NUMS, TARGET = [44, 19, 35], 98  # 44 + 19 + 35 = 98


@pytest.fixture(scope="module")
def problems():
    return [p.to_dict() for p in generate_problems(40, 11, "train")]


# --------------------------------------------------------------------------- interventions
def parse_step(text: str) -> tuple[Fraction, str, Fraction, Fraction]:
    a, op, b, _, c = text.split(" ")
    return Fraction(a), op, Fraction(b), Fraction(c)


def assert_valid_replacement(iv, target: int) -> None:
    """The oracle step is true arithmetic over the remaining numbers and keeps the target
    reachable, checked with the solver directly."""
    a, op, b, c = parse_step(iv.step)
    assert apply_op(a, op, b) == c
    pool = [Fraction(x) for x in iv.pool]
    for x in (a, b):
        pool.remove(x)  # ValueError if the step used a number that is not there
    assert solve(sorted(pool + [c]), target)


@pytest.mark.parametrize("completion, index, reason, prefix, step", [
    # an arithmetic slip whose true result cannot reach the target: same operands, replaced
    ("<think>44 * 19 = 800, 800 + 35 = 835</think>\n<answer>835</answer>",
     0, "arithmetic", "<think>", "44 + 19 = 63"),
    # a slip the answer could survive (44 + 19 is 63, and 63 + 35 = 98): walked past, with
    # 62 standing for 63; the next step is the unrecoverable one
    ("<think>44 + 19 = 62, 62 - 35 = 27</think>\n<answer>62 - 35</answer>",
     1, "arithmetic", "<think>44 + 19 = 62, ", "63 + 35 = 98"),
    # true arithmetic, but 25, 35 cannot make 98: the smallest edit keeps 44 and 19
    ("<think>44 - 19 = 25, 25 + 35 = 60</think>\n<answer>44 - 19 + 35</answer>",
     0, "unreachable", "<think>", "44 + 19 = 63"),
    # the first step is sound, the second derails: its prefix (model text) is kept
    ("<think>44 + 19 = 63, 63 - 35 = 28</think>\n<answer>44 + 19 - 35</answer>",
     1, "unreachable", "<think>44 + 19 = 63, ", "63 + 35 = 98"),
    # a number that is not in the pool
    ("<think>77 + 19 = 96, 96 + 2 = 98</think>\n<answer>77 + 19 + 2</answer>",
     0, "operand", "<think>", "44 + 19 = 63"),
    # sound but stopped early (answered with numbers left): the next step is missing
    ("<think>44 + 19 = 63</think>\n<answer>63</answer>",
     1, "missing", "<think>44 + 19 = 63, ", "63 + 35 = 98"),
    # search style: the closed dead end is the model's own correction; only the final
    # attempt is judged, and its pool starts afresh
    (("<think>try 44 - 19 = 25, 25 + 35 = 60 (not 98), backtrack. try 44 * 19 = 836, "
      "836 - 35 = 801</think>\n<answer>44 * 19 - 35</answer>"),
     0, "unreachable", "<think>try 44 - 19 = 25, 25 + 35 = 60 (not 98), backtrack. try ",
     "44 + 19 = 63"),
    # malformed text with no step at all
    ("<answer>98</answer>", 0, "missing", "<think>", "44 + 19 = 63"),
])
def test_first_erroneous_step_and_its_replacement(completion, index, reason, prefix, step):
    assert not verify(completion, NUMS, TARGET).correct
    iv = find_intervention(completion, NUMS, TARGET)
    assert (iv.index, iv.reason, iv.prefix, iv.step) == (index, reason, prefix, step)
    assert_valid_replacement(iv, TARGET)


def test_a_recoverable_slip_is_not_an_error():
    """A wrong "a op b = c" claim whose true value keeps the target reachable does not drive
    the answer (correct samples often hold one): no step to patch in such a trace."""
    text = "<think>44 + 19 = 62, 62 + 35 = 98</think>\n<answer>44 + 19 + 35</answer>"
    assert verify(text, NUMS, TARGET).correct and verify(text, NUMS, TARGET).arithmetic_errors
    assert find_intervention(text, NUMS, TARGET) is None


def test_a_sound_trace_has_no_intervention():
    for text in (direct_trace("44 + 19 + 35"), search_trace("44 + 19 + 35", TARGET, random.Random(0)),
                 # sound steps ending at [target], only the answer is wrong: no step to fix
                 "<think>44 + 19 = 63, 63 + 35 = 98</think>\n<answer>44 + 19 - 35</answer>"):
        assert find_intervention(text, NUMS, TARGET) is None


def test_correct_solver_traces_never_get_an_intervention(problems):
    rng = random.Random(0)
    for i, p in enumerate(problems):
        prompt = solve_prompt(p["numbers"], p["target"], "tiny")
        for r in solver_traces(p, prompt, ("direct", "search"), 2, rng, offset=i):
            assert find_intervention(r["completion"], p["numbers"], p["target"]) is None


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_corrupted_step_is_found_no_later_than_the_corruption(problems, data):
    """Change one step of a correct direct trace (its operator or its result): when its true
    value cannot reach the target it is the step patched; when it can, it is walked past. The
    prefix is the trace text before the patched step, and the replacement is sound
    arithmetic that keeps the target reachable."""
    p = data.draw(st.sampled_from(problems))
    solution = solve(p["numbers"], p["target"])[0]
    steps = step_trace(solution).split(", ")
    j = data.draw(st.integers(0, len(steps) - 1))
    a, op, b, _, c = steps[j].split(" ")
    if data.draw(st.booleans()):
        steps[j] = f"{a} {op} {b} = {Fraction(c) + data.draw(st.integers(1, 9))}"
    else:
        new_op = data.draw(st.sampled_from([o for o in "+-*" if o != op]))
        assume(apply_op(Fraction(a), new_op, Fraction(b)) != Fraction(c))  # 2 * 2 = 2 + 2
        steps[j] = f"{a} {new_op} {b} = {c}"
    text = "<think>" + ", ".join(steps) + f"</think>\n<answer>{solution}</answer>"
    iv = find_intervention(text, p["numbers"], p["target"])
    pool = [Fraction(x) for x in p["numbers"]]
    for step in steps[:j]:  # the sound steps before the corruption
        x, _, y, _, z = step.split(" ")
        pool.remove(Fraction(x)), pool.remove(Fraction(y)), pool.append(Fraction(z))
    a2, op2, b2, _, _ = steps[j].split(" ")
    pool.remove(Fraction(a2)), pool.remove(Fraction(b2))
    true = apply_op(Fraction(a2), op2, Fraction(b2))
    if true is not None and solve(sorted(pool + [true]), p["target"]):
        # a slip the answer can survive: walked past (a later step may still derail)
        assert iv is None or iv.index > j
    else:  # unrecoverable: the steps before it are sound, so it is the one patched
        assert iv is not None and iv.index == j
    if iv is not None:
        assert text.startswith(iv.prefix) and iv.prefix == "<think>" + "".join(
            s + ", " for s in steps[:iv.index])
        assert_valid_replacement(iv, p["target"])


def test_reachable_uses_every_number_once():
    assert reachable([Fraction(63), Fraction(35)], 98)
    assert not reachable([Fraction(98), Fraction(5)], 98)  # 98 is there, but 5 must be used
    assert reachable([Fraction(98)], 98) and not reachable([Fraction(97)], 98)
    assert reachable([Fraction(7, 2), Fraction(2)], 7)  # fractional intermediates count


def test_patch_examples_are_partial_and_filtered():
    rows = [{"numbers": NUMS, "target": TARGET, "prefix": "<think>", "step": "44 + 19 = 63",
             "kept": True},
            {"numbers": NUMS, "target": TARGET, "prefix": "<think>9 + 9 = 18, ",
             "step": "44 + 19 = 63", "kept": False}]
    prompt = solve_prompt(NUMS, TARGET, "tiny")
    assert patch_examples(rows, "tiny") == [(prompt, "<think>44 + 19 = 63", False)]
    assert len(patch_examples(rows, "tiny", use_filter=False)) == 2


def test_replay_examples_are_seeded_distinct_sft_rows():
    rows = [{"prompt": f"p{i}", "completion": f"c{i}", "problem_id": f"train-{i}"} for i in range(10)]
    picked = replay_examples(rows, 4, seed=3)
    assert len(set(picked)) == 4 and set(picked) <= {(r["prompt"], r["completion"]) for r in rows}
    assert picked == replay_examples(rows, 4, seed=3) != replay_examples(rows, 4, seed=4)
    assert len(replay_examples(rows, 25, seed=0)) == 10  # capped at the rows there are
    assert replay_examples(rows, 0, seed=0) == replay_examples([], 5, seed=0) == []


def test_partial_examples_train_without_eos(tiny):
    _, tok = load_model(tiny)
    full, n = encode(tok, "Numbers: 1 2\n", "<think>1 + 2 = 3")
    part, m = encode(tok, "Numbers: 1 2\n", "<think>1 + 2 = 3", end=False)
    assert n == m and full == part + [tok.eos_token_id] and part[-1] != tok.eos_token_id


def test_solver_examples_are_verified_traces(problems):
    ex = solver_examples(problems[:6], "tiny", ("direct", "search"), seed=0)
    assert len(ex) == 6
    for p, (prompt, completion) in zip(problems, ex):
        assert prompt == solve_prompt(p["numbers"], p["target"], "tiny")
        assert verify(completion, p["numbers"], p["target"]).correct


def test_solver_baseline_trains_the_patch_steps_whatever_its_epochs(problems, tmp_path,
                                                                     monkeypatch):
    """The full-solution baseline gets the patch's optimizer steps even when `int.sft.epochs`
    would stop it earlier on its fewer examples: one budget, only the data differs."""
    monkeypatch.chdir(tmp_path)  # dvclive/ and the model land here
    init = str(build_tiny(TINY, tmp_path / "sft", seed=0))
    cfg = config_of(SFT, "int.sft", {"epochs": 1, "max_steps": 2, "batch_size": 4, "max_len": 64,
                                     "log_every": 1})
    sft_rows = [{"prompt": p, "completion": c} for p, c in TOY]
    out = train_solver_baseline(problems[:4], "tiny", ("direct",), 0, cfg, init, "solver",
                                steps=5, replay=sft_rows, replay_per_example=1.0)
    # 4 solutions + 4 replayed examples = 2 batches an epoch: 1 epoch would stop at 2 steps
    assert out["trained"] and out["steps"] == 5 and out["epochs"] > 1
    assert out["examples"] == 8 and out["replay_examples"] == 4


# --------------------------------------------------------------------------- repair
def attempt(i: int, completion: str, numbers=NUMS, target=TARGET, problem=None) -> dict:
    v = verify(completion, numbers, target)
    return {"attempt_id": f"p{i}/0", "problem_id": problem or f"p{i}", "n_numbers": len(numbers),
            "numbers": numbers, "target": target, "sample": 0, "completion": completion,
            "failure": v.failure}


WRONG = attempt(0, "<think>44 + 19 = 63</think>\n<answer>44 + 19 - 35</answer>")  # = 28
REUSED = attempt(1, "<answer>44 + 44 + 35</answer>")  # NUMBER_REUSED


def test_f4_targets_wrong_target_and_backs_off_to_f3_otherwise():
    f3 = condition_feedback([WRONG, REUSED], "F3", seed=0)
    f4 = condition_feedback([WRONG, REUSED], "F4", seed=0)
    assert f3[0] == "Your expression evaluates to 28, but the target is 98."
    assert "evaluates to 28 instead of the target 98" in f4[0] and "by 70" in f4[0]
    assert f4[1] == f3[1] and "reuses 44" in f3[1]  # NUMBER_REUSED: F4 is the F3 text
    assert condition_feedback([WRONG, REUSED], "R", seed=0) == [None, None]
    assert condition_feedback([WRONG, REUSED], "F0", seed=0) == ["", ""]  # no feedback content


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 12), n_problems=st.integers(1, 12), seed=st.integers(0, 10**6))
def test_shuffled_feedback_never_comes_from_its_own_attempt(n, n_problems, seed):
    # one wrong expression (= 871), a distinct target per attempt: every F3 text is unique
    atts = [{"attempt_id": f"a{i}", "problem_id": f"q{i % n_problems}", "n_numbers": 3,
             "numbers": NUMS, "target": 10 + i, "sample": 0,
             "completion": "<answer>44 * 19 + 35</answer>", "failure": "WRONG_TARGET"}
            for i in range(n)]
    own = condition_feedback(atts, "F3", seed)
    shuffled = condition_feedback(atts, "Fshuf", seed)
    assert len(set(own)) == n
    src = [own.index(t) for t in shuffled]  # ValueError unless it is some attempt's F3 text
    assert all(s != i for i, s in enumerate(src))  # never its own
    assert sorted(src) == list(range(n))  # a permutation: every text is used once
    largest = max(sum(1 for a in atts if a["problem_id"] == q) for q in {a["problem_id"] for a in atts})
    if largest <= n / 2:  # then it can, and does, always come from another problem
        assert all(atts[s]["problem_id"] != a["problem_id"] for s, a in zip(src, atts))
    assert shuffled == condition_feedback(atts, "Fshuf", seed)  # seeded


def test_derangement_needs_two_attempts():
    with pytest.raises(ValueError, match="at least two"):
        derangement(["p"], random.Random(0))


def test_repair_prompt_layout():
    plain = solve_prompt(NUMS, TARGET, "tiny")
    fb = feedback("F1", verify(WRONG["completion"], NUMS, TARGET), NUMS, TARGET)
    assert repair_prompt(WRONG, fb, "tiny") == (
        plain + f"Previous attempt: {WRONG['completion']}\nFeedback: {fb}\n")
    assert repair_prompt(WRONG, None, "tiny") == plain  # R-resample: a fresh attempt
    chat = repair_prompt(WRONG, fb, "chat")
    assert chat.startswith("Problem: Numbers: 44, 19, 35. Target: 98. Previous attempt: <think>")
    assert f"Verifier feedback: {fb}. Revise the solution." in chat
    assert repair_prompt(WRONG, None, "chat").endswith(
        "Generate a fresh solution attempt. Do not copy any previous expression.")
    # F0: the very same layout, the feedback slot empty
    assert repair_prompt(WRONG, "", "tiny") == (
        plain + f"Previous attempt: {WRONG['completion']}\nFeedback: \n")
    assert repair_prompt(WRONG, "", "chat") == chat.replace(fb, "")


def test_attempt_pool_is_the_end_of_the_train_split(problems):
    """`distill` trains on the repairs of the pool's failures: train problems only (the last
    N, away from the first ones RL prompts and pairs take), never a test or OOD problem."""
    pool = pool_problems(problems, 10)
    assert pool == problems[-10:] and pool_problems(problems, None) == problems
    assert {p["id"] for p in pool}.isdisjoint(p["id"] for p in problems[:30])
    held_out = [p.to_dict() for p in generate_problems(3, 11, "test")]
    with pytest.raises(ValueError, match="train split only"):
        pool_problems(problems + held_out, 3)  # even when the slice itself is all test
    with pytest.raises(ValueError, match="the train split has 40"):
        pool_problems(problems, 41)


def test_attempt_selection_covers_problems_first():
    failed = [attempt(i, "<answer>1</answer>", problem=f"p{i % 3}") | {"attempt_id": f"p{i % 3}/{i}"}
              for i in range(9)]
    first = select_attempts(failed, 3, seed=0)
    assert {a["problem_id"] for a in first} == {"p0", "p1", "p2"}
    five = select_attempts(failed, 5, seed=0)
    assert five[:3] == first and len({a["attempt_id"] for a in five}) == 5
    assert select_attempts(failed, 5, seed=0) == five
    assert len(select_attempts(failed, 100, seed=0)) == 9


def repairs_frame(outcomes: dict[str, list[list[str | None]]],
                  original: list[str] | None = None) -> pd.DataFrame:
    """condition -> per attempt, per sample: failure code (None = correct); `original`: each
    attempt's own failure code (default WRONG_TARGET)."""
    rows = []
    for cond, per_attempt in outcomes.items():
        for i, samples in enumerate(per_attempt):
            for j, f in enumerate(samples):
                rows.append({"condition": cond, "attempt_id": f"a{i}", "problem_id": f"p{i}",
                             "n_numbers": 3, "numbers": NUMS, "target": TARGET,
                             "original_failure": original[i] if original else "WRONG_TARGET",
                             "feedback": None if cond == "R" else "x" * (i + 1),
                             "feedback_tokens": 0 if cond == "R" else i + 1, "prompt": "p",
                             "sample": j, "completion": f"c{cond}{i}{j}", "correct": f is None,
                             "failure": f, "n_tokens": 5, "finish_reason": "stop"})
    return pd.DataFrame(rows)


def test_repair_metrics_closed_form():
    W, P, ok = "WRONG_TARGET", "PARSE_FAIL", None
    df = repairs_frame({
        "F3": [[ok, W], [W, W], [P, W], [ok, ok]],  # repaired: a0, a3
        "R": [[W, W], [P, ok], [P, P], [ok, W]],    # repaired: a1, a3
    })
    m = repair_metrics(df)
    f3, r = m["F3"], m["R"]
    assert (f3["n"], f3["successes"], f3["success_rate"]) == (4, 2, 0.5)
    assert f3["sample_success_rate"] == 3 / 8
    assert f3["new_error_rate"] == 1 / 8 and r["new_error_rate"] == 3 / 8  # PARSE_FAIL samples
    assert f3["feedback_tokens"] == (1 + 2 + 3 + 4) / 4 and r["feedback_tokens"] == 0
    mc = f3["mcnemar_vs_resample"]
    assert (mc["b"], mc["c"]) == (1, 1) and mc["pvalue"] == 1.0  # a0 only F3, a1 only R
    assert r["mcnemar_vs_resample"]["b"] == r["mcnemar_vs_resample"]["c"] == 0
    assert set(m) == {"F3", "R"} and m["F3"]["label"] == "F3" and m["R"]["label"] == "R-resample"
    assert "mcnemar_vs_F0" not in f3  # no F0 run: nothing to compare against


def test_every_condition_is_tested_against_f0_and_per_failure_type():
    W, P, ok = "WRONG_TARGET", "PARSE_FAIL", None
    df = repairs_frame({
        "F0": [[W], [ok], [W], [W]],   # repaired: a1
        "F3": [[ok], [ok], [ok], [W]],  # repaired: a0, a1, a2
        "F4": [[ok], [ok], [W], [W]],   # repaired: a0, a1
        "R": [[W], [W], [W], [ok]],     # repaired: a3
    }, original=[W, W, P, P])
    m = repair_metrics(df)
    assert "mcnemar_vs_F0" not in m["F0"] and m["F0"]["mcnemar_vs_resample"]["b"] == 1
    f3 = m["F3"]["mcnemar_vs_F0"]
    assert (f3["b"], f3["c"]) == (2, 0)  # a0, a2 only under F3; nothing only under F0
    assert (m["R"]["mcnemar_vs_F0"]["b"], m["R"]["mcnemar_vs_F0"]["c"]) == (1, 1)
    table = by_failure(df)
    assert table[W] == {"attempts": 2, "successes": {"F0": 1, "F3": 2, "F4": 2, "R": 0},
                        "success_rate": {"F0": 0.5, "F3": 1.0, "F4": 1.0, "R": 0.0}}
    assert table[P]["attempts"] == 2 and table[P]["successes"] == {"F0": 0, "F3": 1, "F4": 0, "R": 1}


def test_distill_examples_use_the_plain_prompt_and_successes_only():
    df = repairs_frame({"F1": [[None, None, "WRONG_TARGET"]], "R": [[None]]})
    df.loc[1, "completion"] = df.loc[0, "completion"]  # an exact duplicate is kept once
    ex = distill_examples(df, "F1", "tiny")
    assert ex == [(solve_prompt(NUMS, TARGET, "tiny"), "cF100")]
    assert distill_examples(df, "F2", "tiny") == []


def test_distilled_problems_are_the_successes_problems_once_as_train_rows():
    """The skill check's problems (stages/distill.py): each problem with a successful repair
    of the condition, once, first-seen order, as a train-split problem row."""
    W = "WRONG_TARGET"
    df = repairs_frame({"R": [[W, None], [W, W], [None, None]], "F1": [[W, W], [None]]})
    row = {"split": "train", "numbers": NUMS, "target": TARGET, "n_numbers": 3}
    assert distilled_problems(df, "R") == [{"id": "p0", **row}, {"id": "p2", **row}]
    assert distilled_problems(df, "F1") == [{"id": "p1", **row}]
    assert distilled_problems(df, "F2") == []


# --------------------------------------------------------------------------- diagnosis
def records(outcomes: list[list[str | None]]) -> pd.DataFrame:
    rows = []
    for i, samples in enumerate(outcomes):
        for j, f in enumerate(samples):
            rows.append({"problem_id": f"test-{i}", "split": "test", "n_numbers": 3 + i % 2,
                         "seed": 0, "sample": j, "correct": f is None, "failure": f,
                         "reward": 1.0 if f is None else (0.1 if f == "WRONG_TARGET" else 0.0),
                         "n_tokens": 10, "numbers": [1, 2, 3], "target": 6,
                         "completion": f"c{i}{j}", "finish_reason": "stop",
                         "expression": None, "value": None, "arithmetic_errors": 0})
    return records_frame(rows)


def test_diagnosis_closed_form():
    W, F = "WRONG_TARGET", "FORMAT_MISSING"
    rec = records([[W, W, F, W], [None, W, None, W], [None, None, None, None]])
    d = diagnosis(rec, k=4)
    assert d["k"] == 4 and d["n_problems"] == 3 and d["n_samples"] == 12
    assert d["pass@1"] == pytest.approx((0 + 0.5 + 1) / 3)
    assert d["pass@k"] == pytest.approx(2 / 3)
    assert d["all_fail"] == d["all_correct"] == pytest.approx(1 / 3)
    assert d["zero_informative"] == pytest.approx(2 / 3)
    assert d["reward_contrast"] == pytest.approx(2 * 2 / (3 * 6))  # 4 mixed of 18 pairs
    assert d["avg_score"] == pytest.approx((0.1 * 5 + 6) / 12)
    assert d["failures"]["WRONG_TARGET"] == 5 and d["failures"]["FORMAT_MISSING"] == 1
    assert "correct" not in d["failures"] and d["n_failed_attempts"] == 6
    assert d["n3"]["n_problems"] == 2 and d["n4"]["pass@k"] == 1.0
    failed = failed_attempts(rec)
    assert [f["attempt_id"] for f in failed] == ["test-0/0", "test-0/1", "test-0/2", "test-0/3",
                                                 "test-1/1", "test-1/3"]
    assert failed[2]["failure"] == F and failed[0]["numbers"] == [1, 2, 3]


def test_diagnosis_wants_k_samples_of_one_seed():
    rec = records([[None, "WRONG_TARGET"]])
    with pytest.raises(ValueError, match="k=4"):
        diagnosis(rec, k=4)
    two = pd.concat([rec, rec.assign(seed=1)], ignore_index=True)
    with pytest.raises(ValueError, match="one sampling seed"):
        diagnosis(two, k=2)


# --------------------------------------------------------------------------- with a model
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    cfg = {"hidden_size": 32, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1,
           "intermediate_size": 64, "max_positions": 256}
    return str(build_tiny(cfg, tmp_path_factory.mktemp("research") / "m", seed=0))


SAMPLER = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 12}


def test_run_repairs_pairs_conditions_and_is_deterministic(tiny, one_thread):
    policy = load_model(tiny)
    atts = [WRONG, REUSED, attempt(2, "<answer>(44 + 19) * 35</answer>")]
    df = run_repairs(policy, atts, list(CONDITIONS), 2, SAMPLER, seed=3, style="tiny",
                     batch_size=4, progress=False)
    assert len(df) == 3 * len(CONDITIONS) * 2
    assert df.groupby(["condition", "attempt_id"]).size().eq(2).all()
    r = df[df["condition"] == "R"]
    assert (r["prompt"] == r.apply(lambda x: solve_prompt(list(x["numbers"]), x["target"],
                                                          "tiny"), axis=1)).all()
    assert (r["feedback_tokens"] == 0).all() and r["feedback"].isna().all()
    f1 = df[df["condition"] == "F1"]
    assert (f1["feedback_tokens"] > 0).all()
    f0 = df[df["condition"] == "F0"]
    assert (f0["feedback_tokens"] == 0).all() and (f0["feedback"] == "").all()
    assert f0["prompt"].str.endswith("\nFeedback: \n").all()
    assert f1["prompt"].str.contains("Previous attempt: ", regex=False).all()
    for row in df.itertuples():
        v = verify(row.completion, list(row.numbers), row.target)
        assert (v.correct, v.failure) == (row.correct, row.failure)
    again = run_repairs(policy, atts, list(CONDITIONS), 2, SAMPLER, seed=3, style="tiny",
                        batch_size=4, progress=False)
    pd.testing.assert_frame_equal(df, again)
    m = repair_metrics(df)
    assert set(m) == set(CONDITIONS) and all(v["n"] == 3 for v in m.values())


def test_search_interventions_judges_the_whole_continued_text(tiny, one_thread):
    policy = load_model(tiny)
    problem = {"id": "train-0", "numbers": NUMS, "target": TARGET}
    failed = [{"sample": 0, "completion": direct_trace("44 + 19 + 35")},  # sound: skipped
              {"sample": 1, "completion": "<think>44 - 19 = 25</think>\n<answer>25</answer>"},
              {"sample": 2, "completion": "<answer>1</answer>"}]
    rows = search_interventions(policy, [problem], {"train-0": failed}, n_continuations=3,
                                traces_per_problem=1, sampler=SAMPLER, seed=0, style="tiny",
                                batch_size=8, progress=False)
    assert len(rows) == 1  # one trace per problem, the first with an intervention
    r = rows[0]
    assert (r["sample"], r["reason"], r["prefix"], r["step"]) == (1, "unreachable", "<think>",
                                                                  "44 + 19 = 63")
    assert 0 <= r["continuations_correct"] <= 3 and r["kept"] == (r["continuations_correct"] > 0)
    full = r["prefix"] + r["step"] + r["continuation"]
    assert verify(full, NUMS, TARGET).correct == r["kept"]
    two = search_interventions(policy, [problem], {"train-0": failed}, 3, 2, SAMPLER, 0, "tiny",
                               8, progress=False)
    assert [x["sample"] for x in two] == [1, 2] and two[0]["step"] == r["step"]


@settings(max_examples=50, deadline=None)
@given(n=st.integers(0, 40), frac=st.floats(0, 0.9), seed=st.integers(0, 5))
def test_heldout_split_is_seeded_disjoint_and_sized(n, frac, seed):
    from countdown_rlvr.research.interventions import split_heldout

    problems = [{"id": f"p{i}"} for i in range(n)]
    train, held = split_heldout(problems, frac, seed)
    assert len(held) == round(n * frac) and len(train) + len(held) == n
    assert not {p["id"] for p in train} & {p["id"] for p in held}
    assert train == [p for p in problems if p in train]  # input order kept
    assert (train, held) == split_heldout(problems, frac, seed)


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 20), replicates=st.integers(1, 6), extra=st.integers(0, 10))
def test_int_pools_shared_or_one_slice_per_replicate(n, replicates, extra):
    """shared: every replicate the pool's first n; own: replicate j the j-th n, so no two
    replicates share a problem; a pool too small names the size it needs."""
    pool = [{"id": f"unseen-{i}"} for i in range(n * replicates + extra)]
    slices = [replicate_problems(pool, n, "own", j) for j in range(replicates)]
    assert all(len(s) == n for s in slices)
    ids = [p["id"] for s in slices for p in s]
    assert len(set(ids)) == len(ids) == n * replicates
    assert all(replicate_problems(pool, n, "shared", j) == pool[:n] for j in range(replicates))
    with pytest.raises(ValueError, match=f"raise problems.n_unseen to {n * (replicates + 1)}"):
        replicate_problems(pool[:n * replicates], n, "own", replicates)
