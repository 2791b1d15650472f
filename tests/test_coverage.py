"""Solution coverage (#58.5): task.canonical (one text per solution up to the order and grouping
of `+` / `*` chains), eval.coverage (distinct correct solutions per problem, the mean over
problems with unsolved ones at 0), and where compare, the per-problem records and the figure
carry it."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr.analysis.compare import (
    PER_PROBLEM_COLUMNS,
    SHARED,
    compare_replicates,
    per_problem_records,
)
from countdown_rlvr.analysis.figures import COVERAGE_CHAIN, coverage_policies, fig_coverage
from countdown_rlvr.analysis.results import Inputs
from countdown_rlvr.eval.coverage import coverage, distinct_correct
from countdown_rlvr.task.canonical import canonical
from countdown_rlvr.task.solve import solve
from countdown_rlvr.task.verify import ParseError, evaluate, parse, verify

# --------------------------------------------------------------------------- canonical

# an expression tree: an int leaf or (op, left, right)
trees = st.recursive(st.integers(0, 30),
                     lambda kids: st.tuples(st.sampled_from("+-*/"), kids, kids), max_leaves=6)
few_leaves = st.recursive(st.integers(1, 3),  # few literals: equal solutions are common
                          lambda kids: st.tuples(st.sampled_from("+-*/"), kids, kids),
                          max_leaves=4)


def text(t) -> str:
    """Fully parenthesised text of a tree."""
    return str(t) if isinstance(t, int) else f"({text(t[1])} {t[0]} {text(t[2])})"


def mirror(t):
    """Every `+` and `*` with its operands swapped."""
    if isinstance(t, int):
        return t
    op, a, b = t[0], mirror(t[1]), mirror(t[2])
    return (op, b, a) if op in "+*" else (op, a, b)


def regroup(t):
    """(a op b) op c -> a op (b op c) for op in + *, wherever it applies (top-down)."""
    if isinstance(t, int):
        return t
    op, a, b = t
    if op in "+*" and not isinstance(a, int) and a[0] == op:
        return (op, regroup(a[1]), regroup((op, a[2], b)))
    return (op, regroup(a), regroup(b))


def oracle(t):
    """An independent normal form: `+` / `*` chains as sorted operand tuples."""
    if isinstance(t, int):
        return ("n", t)
    op = t[0]
    if op in "+*":
        kids = []
        for k in (t[1], t[2]):
            form = oracle(k)
            kids.extend(form[1] if form[0] == op else [form])
        return (op, tuple(sorted(kids, key=repr)))
    return (op, (oracle(t[1]), oracle(t[2])))


def value(expr: str):
    try:
        return evaluate(*parse(expr))
    except ZeroDivisionError:
        return None


@given(trees)
def test_commuting_and_regrouping_plus_and_times_keep_the_canonical_text(t):
    assert canonical(text(mirror(t))) == canonical(text(t))
    assert canonical(text(regroup(t))) == canonical(text(t))


@given(trees)
def test_canonical_is_the_same_computation_and_a_fixed_point(t):
    out = canonical(text(t))
    assert value(out) == value(text(t))
    assert Counter(parse(out)[1]) == Counter(parse(text(t))[1])  # the same literals
    assert canonical(out) == out  # it parses back to its own tree


@settings(max_examples=300)
@given(few_leaves, few_leaves)
def test_two_expressions_share_a_text_exactly_when_their_normal_forms_agree(a, b):
    assert (canonical(text(a)) == canonical(text(b))) == (oracle(a) == oracle(b))


@given(trees, trees)
def test_minus_and_divide_keep_their_operand_order(a, b):
    if oracle(a) != oracle(b):
        for op in "-/":
            assert canonical(f"{text(a)} {op} {text(b)}") != canonical(f"{text(b)} {op} {text(a)}")


@pytest.mark.parametrize("same", [
    ("44 + 19", "19+44"), ("(44 + 19) + 35", "35 + (19 + 44)"), ("2 * (3 * 4)", "(4*3)*2"),
    ("07 + 3", "3 + 7"), ("(1 + 2) * 3", "3 * (2 + 1)"), ("((1)) + 2", "2 + 1")])
def test_spellings_of_one_solution(same):
    assert canonical(same[0]) == canonical(same[1])


@pytest.mark.parametrize("different", [
    ("5 - 3", "3 - 5"), ("6 / 3", "3 / 6"), ("(1 - 2) + 3", "(1 + 3) - 2"),
    ("1 - (2 - 3)", "(1 - 2) - 3"), ("2 * (3 / 4)", "(2 * 3) / 4"), ("1 + 2 * 3", "(1 + 2) * 3")])
def test_different_solutions(different):
    assert canonical(different[0]) != canonical(different[1])


def test_not_an_expression_raises():
    with pytest.raises(ParseError):
        canonical("1 + ")


@pytest.mark.parametrize("numbers, target", [([1, 2, 3, 4], 10), ([3, 5, 7], 15), ([2, 2, 6], 10)])
def test_the_solvers_solutions_fall_into_at_most_as_many_canonical_classes(numbers, target):
    """The solver counts trees up to swapping the operands of `+` / `*`; canonical also merges
    regroupings, so its classes are never more, and every one is still a solution."""
    found = solve(numbers, target)
    forms = {canonical(s) for s in found}
    assert 1 <= len(forms) <= len(found)
    assert all(verify(f"<answer>{f}</answer>", numbers, target).correct for f in forms)
    if numbers == [1, 2, 3, 4]:  # 1+2+3+4 in several groupings: one solution here
        assert sum(f == "1 + 2 + 3 + 4" for f in forms) == 1
        assert sum("+" in s and "-" not in s and "*" not in s and "/" not in s
                   for s in found) > 1


# --------------------------------------------------------------------------- eval.coverage

def rec(problem: str, correct: bool, expression: str | None, seed: int = 0, sample: int = 0):
    return {"problem_id": problem, "seed": seed, "sample": sample, "correct": correct,
            "expression": expression}


def test_distinct_correct_counts_spellings_once_and_wrong_answers_not_at_all():
    records = pd.DataFrame([
        rec("p1", True, "1 + 2 + 3"), rec("p1", True, "3 + (2 + 1)"), rec("p1", True, "3 * 2"),
        rec("p1", False, "1 + 2 - 3"), rec("p1", False, None),
        rec("p2", False, "4 + 4"), rec("p2", False, None),  # unsolved: 0
        rec("p3", True, "9 - 1"), rec("p3", True, "9 - 1", seed=1)])  # seeds are pooled
    counts = distinct_correct(records)
    assert counts.to_dict() == {"p1": 2, "p2": 0, "p3": 1}
    assert counts.index.tolist() == ["p1", "p2", "p3"]
    assert coverage(records) == pytest.approx(1.0)  # (2 + 0 + 1) / 3: unsolved counts 0


@given(st.lists(st.tuples(st.integers(0, 4), st.booleans(), st.integers(0, 5)), min_size=1))
def test_coverage_is_bounded_by_correct_samples_and_zero_without_any(rows):
    records = pd.DataFrame([rec(f"p{p}", ok, f"{a} + 10" if a % 2 else f"10 + {a}")
                            for p, ok, a in rows])
    counts = distinct_correct(records)
    solved = records.groupby("problem_id")["correct"].sum()
    assert (counts <= solved.reindex(counts.index)).all()
    assert ((counts == 0) == (solved.reindex(counts.index) == 0)).all()
    assert coverage(records) == pytest.approx(counts.mean())


def test_records_without_answers_or_with_a_corrupt_one_are_refused():
    with pytest.raises(ValueError, match="expression"):
        distinct_correct(pd.DataFrame([{"problem_id": "p", "correct": True}]))
    with pytest.raises(ValueError, match="corrupt"):
        distinct_correct(pd.DataFrame([rec("p", True, "1 +")]))


# --------------------------------------------------------------------------- compare

def evaluation(width: int, seed: int, answers: bool = True) -> pd.DataFrame:
    """Two test problems x 8 samples: every other sample correct, spread over `width`
    solutions (each spelt both ways); the third problem never solved."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(3):
        for j in range(8):
            ok = i < 2 and j % 2 == 0
            a = int(rng.integers(0, width)) if ok else 0
            row = {"problem_id": f"test-{i}", "split": "test", "n_numbers": 3, "seed": 0,
                   "sample": j, "correct": ok, "failure": None if ok else "WRONG_TARGET",
                   "reward": float(ok), "n_tokens": 5}
            if answers:
                row["expression"] = (f"{a} + 50" if j % 4 else f"50 + {a}") if ok else None
            rows.append(row)
    return pd.DataFrame(rows)


def test_compare_pools_coverage_over_replicates_and_writes_it_per_problem():
    recs = {"base": {SHARED: evaluation(1, 0)},
            "sft": {f"r{r}": evaluation(4, r) for r in (1, 2, 3)},
            "old": {"r1": evaluation(4, 9, answers=False)}}  # records without answers
    report = compare_replicates(recs, [["sft", "base"]], [1], n_boot=50)
    per_run = {t: report["replicates"][t]["policies"]["sft"]["test"]["coverage"]["value"]
               for t in ("r1", "r2", "r3")}
    for t, v in per_run.items():
        assert v == pytest.approx(distinct_correct(recs["sft"][t]).mean())
    pooled = report["policies"]["sft"]["test"]["coverage"]
    assert pooled["per_replicate"] == per_run and pooled["n"] == 3
    assert pooled["mean"] == pytest.approx(np.mean(list(per_run.values())))
    assert pooled["ci_low"] <= pooled["mean"] <= pooled["ci_high"]
    base = report["policies"]["base"]["test"]["coverage"]
    assert base["per_replicate"] == {SHARED: pytest.approx(2 / 3)} and base["ci_low"] is None
    assert "coverage" not in report["policies"]["old"]["test"]  # absent, not 0
    frame = per_problem_records(recs, ["test"])["test"]
    assert tuple(frame.columns) == PER_PROBLEM_COLUMNS
    sft = frame[(frame["policy"] == "sft") & (frame["replicate"] == "r2")]
    assert sft["distinct"].tolist() == distinct_correct(recs["sft"]["r2"]).tolist()
    assert sft["distinct"].iloc[2] == 0  # the unsolved problem
    assert frame.loc[frame["policy"] == "old", "distinct"].isna().all()
    csv = frame.to_csv(index=False, lineterminator="\n").splitlines()
    assert csv[0] == ",".join(PER_PROBLEM_COLUMNS)
    assert "sft,r2,test-2,0,8,0" in csv and "old,r1,test-2,0,8," in csv  # ints; none: empty


# --------------------------------------------------------------------------- figure

def inputs_with(compare: dict) -> Inputs:
    return Inputs(data={}, curves={}, missing={}, policies=list(COVERAGE_CHAIN), compare=compare)


def test_the_coverage_figure_draws_the_chain_and_is_written(tmp_path):
    def block(values):
        v = list(values.values())
        return {"n": len(v), "mean": float(np.mean(v)), "sd": None,
                "ci_low": min(v) - 0.1 if len(v) > 1 else None,
                "ci_high": max(v) + 0.1 if len(v) > 1 else None, "per_replicate": values}

    policies = {p: {"test": {"coverage": block({"r0": 3.0 - i, "r1": 2.5 - i, "r2": 2.8 - i}),
                             "pass@1": block({"r0": 0.2 + i / 10, "r1": 0.25, "r2": 0.3})}}
                for i, p in enumerate(("sft", "rloo", "opd"))}
    inp = inputs_with({"policies": policies})
    assert coverage_policies(inp) == ["sft", "rloo", "opd"]  # opd_ac absent: left out
    fig = fig_coverage(inp)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["sft", "rloo", "opd"]
    dest = tmp_path / "coverage.png"
    fig.savefig(dest, dpi=50)
    assert dest.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # compare.json written before coverage: nothing to draw
    old = {p: {"test": {"pass@1": b["test"]["pass@1"]}} for p, b in policies.items()}
    assert coverage_policies(inputs_with({"policies": old})) == []
    assert coverage_policies(inputs_with(None)) == []


def test_a_quotient_inside_a_product_keeps_its_operands():
    """A correct answer may pass through fractions (6 / 4 * 2 = 3): `/` is not reordered."""
    assert canonical("6 / 4 * 2") == canonical("2 * (6 / 4)") == "2 * (6 / 4)"
    assert canonical("4 / 6 * 2") != canonical("6 / 4 * 2")
    assert value(canonical("6 / 4 * 2")) == Fraction(3)
