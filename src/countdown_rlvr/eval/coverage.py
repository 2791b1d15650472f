"""Solution coverage: how many distinct correct solutions a policy finds per problem (#58.5).

pass@k asks whether a policy solves a problem; coverage asks in how many ways. S4's collapse
(the policy sharpening onto one answer per problem) shows as a fall in coverage at an
unchanged or rising pass@1, and a published Countdown study (Qwen2.5-3B, PPO and GRPO) measured
solution coverage falling by up to 67% during RL.

    distinct_correct(records) -> per problem_id, the distinct correct solutions among its samples
    coverage(records)         -> their mean over problems (an unsolved problem counts 0)

Two correct answers are one solution when their canonical texts are equal
(`task.canonical`: `a + b` and `b + a`, `(a + b) + c` and `a + (b + c)` count once). Every
sample of every sampling seed of a problem is pooled, as the per-problem records pool them, so
coverage is comparable between policies sampled with the same `evaluate.n` and `evaluate.seeds`.

Pure functions of the per-sample records (`eval.metrics`); read by the compare stage, not by
evaluate, so adding it re-samples no policy. Its own module for the same reason: the evaluate
stages do not depend on it.
"""

from __future__ import annotations

import pandas as pd

from ..task.canonical import canonical

NEEDS = ("problem_id", "correct", "expression")  # every evaluate stage's records hold them


def has_solutions(records: pd.DataFrame) -> bool:
    """Whether the records hold the answers coverage is counted from (records of evaluate
    stages do; hand-made records with only the verdicts do not)."""
    return all(c in records.columns for c in NEEDS)


def distinct_correct(records: pd.DataFrame) -> pd.Series:
    """Distinct canonical correct solutions per problem (int), indexed by every problem_id of
    the records, sorted; 0 for a problem no sample solved. ValueError when a correct record's
    expression does not parse (it was verified: the records are corrupt)."""
    if missing := [c for c in NEEDS if c not in records.columns]:
        raise ValueError(f"coverage needs the records' columns {list(NEEDS)}; missing {missing}")
    ids = pd.Index(sorted(records["problem_id"].unique()), name="problem_id")
    ok = records[records["correct"].astype(bool)]
    forms = {}
    for e in ok["expression"].unique():  # a collapsed policy repeats a few answers: parse once
        try:
            forms[e] = canonical(e)
        except (TypeError, ValueError) as exc:  # ParseError, or a missing expression
            raise ValueError(f"a correct record's answer {e!r} is not an expression "
                             f"({exc}); the records are corrupt") from exc
    counts = ok["expression"].map(forms).groupby(ok["problem_id"]).nunique()
    return counts.reindex(ids, fill_value=0).astype(int).rename("distinct")


def coverage(records: pd.DataFrame) -> float:
    """Mean distinct correct solutions per problem, unsolved problems included as 0."""
    counts = distinct_correct(records)
    if counts.empty:
        raise ValueError("coverage of no problems: the records are empty")
    return float(counts.mean())
