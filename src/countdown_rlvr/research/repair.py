"""Feedback-conditioned repair of failed attempts (S0 §3.3, Table 2) and the
self-distillation data built from the successful repairs (S0 §3.4).

Attempts: the SFT policy's failed samples on a slice of the TRAIN split (`pool_problems`),
never on a test or OOD problem: `distill` trains on the successful repairs of these
problems and `evaluate` scores the distilled policy on test and OOD, so an attempt drawn
from an evaluated problem would put the answer to a test question into training.

Conditions (DVC-safe key -> S0 name; texts from `task.prompts.feedback`):
    F0 no feedback (not in S0: the repair prompt and the previous attempt with an empty
    feedback slot, the control that separates the prompt format from the feedback content) |
    F1 generic | F2 error-class | F3 localized | F4 targeted (WRONG_TARGET only; other
    failures back off to F3) | Fshuf = F-shuffled (the F3 text of *another* attempt, a
    seeded derangement) | R = R-resample (a fresh attempt: no previous attempt, no feedback).

Repair prompt layout (task.repair_prompt). `chat` style: S0 Table 1's repair wrapper verbatim.
`tiny` style: the model's own prompt, then the failed attempt and the feedback on one
line each, then the model writes a fresh completion:

    Numbers: 3 5 7 Target: 22\\n
    Previous attempt: <think>3 + 5 = 8, 8 * 7 = 56</think>\\n<answer>(3 + 5) * 7</answer>\\n
    Feedback: Your expression evaluates to 56, but the target is 22.\\n
    -> completion "<think>...</think>\\n<answer>...</answer>"

("Previous attempt:" and "Feedback:" are words the tiny tokenizer has merges for.)
F0 is the same layout with the feedback slot empty ("Feedback: " / "Verifier feedback: .").
R-resample is the plain solve prompt for `tiny` (the tiny model cannot read an instruction;
the control is a second sample with the same budget) and S0's "solve prompt plus
R_RESAMPLE" for `chat`. Every condition gets `k` samples per attempt from the same sampling
seed and batch layout, so outcomes are paired attempt by attempt: McNemar of each condition vs R-resample (does
the repair prompt with this feedback beat a fresh attempt?) and vs F0 (does this feedback's
content beat the same prompt without it?).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.io import atomic_path
from ..eval.metrics import none_if_missing
from ..model.sampling import generate
from ..stats import mcnemar
from ..task.prompts import NO_FEEDBACK, RESAMPLE, solve_prompt
from ..task.prompts import REPAIR_CONDITIONS as CONDITIONS  # DVC-safe key -> S0 name
from ..task.repair_prompt import condition_feedback, repair_prompt
from ..task.verify import verify

REPAIRS_SCHEMA = pa.schema([
    ("condition", pa.string()), ("attempt_id", pa.string()), ("problem_id", pa.string()),
    ("n_numbers", pa.int64()), ("numbers", pa.list_(pa.int64())), ("target", pa.int64()),
    ("original_failure", pa.string()),  # the failed attempt's verifier code
    ("feedback", pa.string()),  # the condition's feedback text, "" for F0, null for R-resample
    ("feedback_tokens", pa.int64()),
    ("prompt", pa.string()), ("sample", pa.int64()), ("completion", pa.string()),
    ("correct", pa.bool_()), ("failure", pa.string()), ("n_tokens", pa.int64()),
    ("finish_reason", pa.string()),
])


def check_conditions(conditions: Sequence[str]) -> list[str]:
    bad = [c for c in conditions if c not in CONDITIONS]
    if bad or not conditions:
        raise ValueError(f"unknown repair condition(s) {bad or '(none given)'}; valid: "
                         f"{', '.join(CONDITIONS)}")
    if RESAMPLE not in conditions:
        raise ValueError(f"the conditions must include the control {RESAMPLE} (R-resample): "
                         "every condition is compared against it")
    return list(conditions)


# --------------------------------------------------------------------------- attempts
def pool_problems(train: Sequence[dict], n: int | None) -> list[dict]:
    """The problems whose failed samples are the attempt pool: the LAST `n` of the train
    split (null: all of it). No evaluation samples a train problem (evaluate: test and OOD;
    int: unseen). The end of the split, because the stages with a subset (pairs, teacher
    samples) take its first problems; SFT traces and RL (by default) cover all of it."""
    if bad := sorted({str(p.get("split")) for p in train} - {"train"}):
        raise ValueError(f"the attempt pool draws from the train split only, got split(s) {bad}")
    if n is not None and n > len(train):
        raise ValueError(f"{n} problems wanted, the train split has {len(train)}")
    return list(train if n is None else train[len(train) - n:])


def failed_attempts(records: pd.DataFrame) -> list[dict[str, Any]]:
    """The failed samples of per-sample records (`evaluate.evaluate_policy`'s) as repair
    inputs, in record order; `attempt_id` = problem_id/sample."""
    failed = records[~records["correct"].astype(bool)]
    rows = []
    for r in failed.itertuples(index=False):
        rows.append({
            "attempt_id": f"{r.problem_id}/{int(r.sample)}", "problem_id": r.problem_id,
            "n_numbers": int(r.n_numbers), "numbers": [int(x) for x in r.numbers],
            "target": int(r.target), "sample": int(r.sample), "completion": r.completion,
            # a failed sample may have no answer: None, whichever marker pandas read it as
            "failure": r.failure, "expression": none_if_missing(r.expression),
            "value": none_if_missing(r.value),
        })
    return rows


def select_attempts(failed: Sequence[dict], n: int, seed: int) -> list[dict]:
    """A seeded subset of `n` failed attempts: one per problem first (in a shuffled problem
    order), then a second per problem, and so on, so the set covers as many problems as
    possible. Fewer than `n` exist -> all of them (still in that order)."""
    rng = random.Random(seed)
    by_problem: dict[str, list[dict]] = {}
    for a in failed:
        by_problem.setdefault(a["problem_id"], []).append(a)
    problems = sorted(by_problem)
    rng.shuffle(problems)
    for p in problems:
        rng.shuffle(by_problem[p])
    out: list[dict] = []
    for rnd in range(max((len(v) for v in by_problem.values()), default=0)):
        for p in problems:
            if len(out) < n and rnd < len(by_problem[p]):
                out.append(by_problem[p][rnd])
    return out


# --------------------------------------------------------------------------- running
def run_repairs(policy: tuple, attempts: Sequence[dict], conditions: Sequence[str], k: int,
                sampler: dict[str, Any], seed: int, style: str, batch_size: int,
                backend: str = "hf", progress: bool = True) -> pd.DataFrame:
    """`k` samples per attempt under every condition; one row per sample (REPAIRS_SCHEMA).

    policy: a loaded (model, tokenizer) pair. Each condition is sampled with the same `seed`
    and `batch_size`, so attempt i meets the same sampling seed in every condition.
    """
    _, tok = policy
    rows = []
    for cond in check_conditions(conditions):
        texts = condition_feedback(attempts, cond, seed)
        prompts = [repair_prompt(a, t, style) for a, t in zip(attempts, texts)]
        if progress:
            print(f"  repair {cond}: {len(attempts)} attempts x {k} samples", flush=True)
        out = generate(policy, prompts, k, sampler, seed, backend=backend,
                       batch_size=batch_size, progress=progress)
        for a, text, prompt, samples in zip(attempts, texts, prompts, out):
            n_fb = 0 if not text else len(tok(text, add_special_tokens=False).input_ids)
            for j, s in enumerate(samples):
                v = verify(s.text, a["numbers"], a["target"])
                rows.append({
                    "condition": cond, "attempt_id": a["attempt_id"], "problem_id": a["problem_id"],
                    "n_numbers": int(a["n_numbers"]), "numbers": list(a["numbers"]),
                    "target": int(a["target"]), "original_failure": a["failure"],
                    "feedback": text, "feedback_tokens": n_fb, "prompt": prompt, "sample": j,
                    "completion": s.text, "correct": bool(v.correct), "failure": v.failure,
                    "n_tokens": int(s.n_tokens), "finish_reason": s.finish_reason,
                })
    return pa.Table.from_pylist(rows, schema=REPAIRS_SCHEMA).to_pandas()


def write_repairs(df: pd.DataFrame, dest) -> None:
    table = pa.Table.from_pandas(df[REPAIRS_SCHEMA.names], schema=REPAIRS_SCHEMA,
                                 preserve_index=False)
    with atomic_path(dest) as tmp:
        pq.write_table(table, tmp)


def read_repairs(path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas()


# --------------------------------------------------------------------------- metrics
def repaired(repairs: pd.DataFrame, condition: str) -> pd.Series:
    """Per attempt (sorted attempt_id): did any of its k samples under `condition` verify?"""
    part = repairs[repairs["condition"] == condition]
    return part.groupby("attempt_id")["correct"].any().sort_index()


def _mcnemar(ok: pd.Series, other: pd.Series, exact: bool) -> dict[str, Any]:
    a, b = ok.align(other, join="inner")
    res = mcnemar(a.to_numpy(), b.to_numpy(), exact=exact)
    return {"b": res.b, "c": res.c, "statistic": res.statistic, "pvalue": res.pvalue}


def repair_metrics(repairs: pd.DataFrame, exact: bool = True) -> dict[str, Any]:
    """S0 Table 2 per condition, plus McNemar of each condition against R-resample and F0.

    success_rate = successes / n with n attempts and successes = attempts repaired by one of
    their k samples (k = 1 is S0's protocol); sample_success_rate over samples.
    new_error_rate: S0 reports it without a formula; we count the samples that fail with a
    failure code other than the attempt's original one (a new kind of error), over all
    samples of the condition. feedback_tokens: mean tokens of the feedback text per attempt
    (0 for R-resample, which has none, as in S0 Table 2).
    mcnemar_vs_resample: b = repaired here and not by R, c = the reverse, on the same attempts;
    mcnemar_vs_F0 likewise against F0 (every condition but F0, when F0 was run).
    """
    conds = [c for c in CONDITIONS if c in set(repairs["condition"])]
    base = repaired(repairs, RESAMPLE) if RESAMPLE in conds else None
    f0 = repaired(repairs, NO_FEEDBACK) if NO_FEEDBACK in conds else None
    out: dict[str, Any] = {}
    for cond in conds:
        part = repairs[repairs["condition"] == cond]
        ok = repaired(repairs, cond)
        new_err = (~part["correct"]) & (part["failure"] != part["original_failure"])
        entry = {
            "label": CONDITIONS[cond], "n": len(ok), "successes": int(ok.sum()),
            "success_rate": float(ok.mean()), "samples": len(part),
            "sample_success_rate": float(part["correct"].mean()),
            "new_error_rate": float(new_err.mean()),
            "feedback_tokens": float(part.groupby("attempt_id")["feedback_tokens"].first().mean()),
        }
        if base is not None:
            entry["mcnemar_vs_resample"] = _mcnemar(ok, base, exact)
        if f0 is not None and cond != NO_FEEDBACK:
            entry["mcnemar_vs_F0"] = _mcnemar(ok, f0, exact)
        out[cond] = entry
    return out


def by_failure(repairs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per failure type of the original attempt (task.verify codes): its attempts, and the
    attempts repaired under each condition. The conditions differ only where their texts do
    (F4 = F3 except on WRONG_TARGET), so this is where a difference can come from."""
    conds = [c for c in CONDITIONS if c in set(repairs["condition"])]
    failure = repairs.groupby("attempt_id")["original_failure"].first()
    out: dict[str, dict[str, Any]] = {}
    for ftype in sorted(set(failure)):
        ids = failure.index[failure == ftype]
        ok = {c: repaired(repairs, c).reindex(ids, fill_value=False) for c in conds}
        out[ftype] = {"attempts": len(ids),
                      "successes": {c: int(v.sum()) for c, v in ok.items()},
                      "success_rate": {c: float(v.mean()) for c, v in ok.items()}}
    return out


# --------------------------------------------------------------------------- distillation
def distill_examples(repairs: pd.DataFrame, condition: str, style: str) -> list[tuple[str, str]]:
    """(plain solve prompt, successful repaired completion) pairs of one condition: the
    no-feedback training data of S0 §3.4. Exact duplicates are kept once (record order)."""
    part = repairs[(repairs["condition"] == condition) & repairs["correct"].astype(bool)]
    pairs = [(solve_prompt([int(x) for x in np.asarray(r.numbers)], int(r.target), style),
              r.completion) for r in part.itertuples(index=False)]
    return list(dict.fromkeys(pairs))


def distilled_problems(repairs: pd.DataFrame, condition: str) -> list[dict[str, Any]]:
    """The distinct problems of one condition's successful repairs (the problems
    `distill_examples` trains on), first-seen order, as problem rows (id, split, numbers,
    target, n_numbers). Their split is train: the attempts come from `pool_problems`."""
    part = repairs[(repairs["condition"] == condition) & repairs["correct"].astype(bool)]
    out: dict[str, dict[str, Any]] = {}
    for r in part.itertuples(index=False):
        out.setdefault(r.problem_id, {
            "id": r.problem_id, "split": "train", "numbers": [int(x) for x in r.numbers],
            "target": int(r.target), "n_numbers": int(r.n_numbers)})
    return list(out.values())
