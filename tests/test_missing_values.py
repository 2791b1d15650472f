"""Code that reads DataFrames must not care how pandas marks a missing value.

A verifier record's `failure` (correct samples), `expression` and `value` (no answer) are
missing strings. pandas 2 reads them back as None, pandas 3 as NaN (its default string dtype),
the nullable "string" dtype as pd.NA; NaN is truthy, is not None and does not sort among
strings. Every function below is fed the same records under each marker and must give the
result it gives with None.
"""

import importlib.util
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from countdown_rlvr.data.pairs import teacher_pairs
from countdown_rlvr.eval.metrics import failure_counts, is_missing, none_if_missing, teacher_yield
from countdown_rlvr.eval.scoring import score_samples
from countdown_rlvr.model.sampling import Sample
from countdown_rlvr.research.repair import failed_attempts
from countdown_rlvr.task.rewards import get_reward

ROOT = Path(__file__).resolve().parents[1]
MISSABLE = ("failure", "expression", "value")

# completions of "3 7 -> 21": correct, wrong target (a value), no answer tags (no expression,
# no value), unparseable (an expression, no value), a number reused (no value)
ANSWERS = ["3 * 7", "3 + 7", None, "3 +", "3 * 3"]


def _completion(answer: str | None) -> str:
    return "no answer" if answer is None else f"<think>x</think>\n<answer>{answer}</answer>"


def _records() -> pd.DataFrame:
    """Teacher-style sample records (`evaluate.score_samples`) of two problems under two
    strategies, missing values as None."""
    rows = []
    for pid, n in (("p0", 2), ("p1", 3)):
        problem = {"id": pid, "split": "test", "n_numbers": n, "numbers": [3, 7], "target": 21}
        answers = ANSWERS if pid == "p0" else ANSWERS[1:]  # p1: no correct sample
        samples = [Sample(_completion(a), [1], 1, "stop") for a in answers]
        for r in score_samples(problem, samples, 0, get_reward("binary")):
            rows.append({**r, "strategy": ("direct", "search")[r["sample"] % 2]})
    return pd.DataFrame(rows)


def _marked(records: pd.DataFrame, marker: str) -> pd.DataFrame:
    """`records` with their missing strings marked as pandas `marker` marks them."""
    out = records.copy()
    for col in MISSABLE:
        values = [None if is_missing(v) else v for v in records[col]]
        if marker == "None":
            out[col] = pd.Series(values, dtype=object)
        elif marker == "NaN":
            out[col] = pd.Series([np.nan if v is None else v for v in values], dtype=object)
        elif marker == "str":  # pandas 3's default string dtype: NaN
            out[col] = pd.Series(values, dtype=pd.StringDtype("python", na_value=np.nan))
        else:  # the nullable "string" dtype: pd.NA
            out[col] = pd.Series(values, dtype="string")
    return out


MARKERS = ["NaN", "str", "pd.NA"]


@pytest.fixture(scope="module")
def records():
    df = _records()
    assert df["failure"].isna().sum() == 1 and df["value"].isna().sum() == 6  # as designed
    return df


def test_is_missing():
    for v in (None, float("nan"), np.nan, np.float64("nan"), pd.NA, pd.NaT):
        assert is_missing(v) and none_if_missing(v) is None
    for v in ("", "0", "WRONG_TARGET", 0, 0.0, False, [], np.array([1, 2]), [None]):
        assert not is_missing(v)
        assert none_if_missing(v) is v


@pytest.mark.parametrize("marker", MARKERS)
def test_teacher_yield(records, marker):
    """teacher_traces' summary; with NaN its failure count sorted NaN among the codes and
    raised (float < str)."""
    want = {"samples": 9, "kept": 1, "yield": 1 / 9, "problems_with_a_trace": 0.5,
            "yield_by_operands": {"n2": 0.2, "n3": 0.0},
            "yield_by_strategy": {"direct": 1 / 5, "search": 0.0},
            "failures": {"FORMAT_MISSING": 2, "NUMBER_REUSED": 2, "PARSE_FAIL": 2,
                         "WRONG_TARGET": 2}}
    assert teacher_yield(_marked(records, "None")) == want
    assert teacher_yield(_marked(records, marker)) == want


@pytest.mark.parametrize("marker", MARKERS)
def test_failure_counts(records, marker):
    want = failure_counts(_marked(records, "None")["failure"])
    assert want["correct"] == 1 and want["WRONG_TARGET"] == 2
    assert failure_counts(_marked(records, marker)["failure"]) == want


@pytest.mark.parametrize("marker", MARKERS)
def test_failed_attempts(records, marker):
    """repair's attempts: no answer -> expression and value None, never NaN."""
    want = failed_attempts(_marked(records, "None"))
    got = failed_attempts(_marked(records, marker))
    assert len(got) == 8 and got == want
    assert {(a["expression"], a["value"]) for a in got} == {
        ("3 + 7", "10"), (None, None), ("3 +", None), ("3 * 3", None)}


def _pairs_stage():
    spec = importlib.util.spec_from_file_location("pairs_stage", ROOT / "stages/pairs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the stage runs only under __main__
    return module


@pytest.mark.parametrize("marker", MARKERS)
def test_pairs_stage_samples(records, marker):
    """The rows `pairs` builds from the teacher's samples: `value` is "str or None" (the
    hard negatives test it with `is not None`), and the pairs built from them agree."""
    samples = _pairs_stage()._samples
    prompts = {"p0": "P0", "p1": "P1"}
    want = samples(_marked(records, "None"), prompts)
    got = samples(_marked(records, marker), prompts)
    assert got == want
    assert [s["value"] for s in got if s["failure"] is None] == ["21"]
    assert {s["value"] for s in got if s["failure"] == "FORMAT_MISSING"} == {None}
    assert teacher_pairs(got, random.Random(0), 2) == teacher_pairs(want, random.Random(0), 2)
