"""Repair-format SFT examples: teach the student to read feedback (S0 §3.3).

Without them the student never sees a repair prompt in training, and the `repair` stage
measures how an out-of-distribution prompt breaks a tiny model instead of S0's question
(does the feedback's content beat a plain resample?). Each example is

    prompt      the repair prompt exactly as `task.repair_prompt` renders it (the one the
                repair stage samples) for one condition
                (original prompt + the wrong attempt + that condition's feedback)
    completion  the problem's verified solver trace

built from a train problem's solver trace alone: the wrong attempt is made from its
solution deterministically, one failure type per example, so every feedback template has
something to say (F2/F3 name the failure, F4 the value and the gap):

    WRONG_TARGET    one operator flipped (S1's scripted negative), steps run to its value
    NUMBER_REUSED   one operand replaced by another pool number
    NUMBER_UNKNOWN  one operand replaced by a number not in the pool
    NUMBER_OMITTED  the last operand (that can go) and its operator dropped
    DIV_BY_ZERO     operators changed so that a divisor is zero (few problems allow one)
    PARSE_FAIL      "expr = target" in the answer (an '=' the parser refuses)
    FORMAT_MISSING  the reasoning cut before </think>, no answer (a truncated sample)

Conditions F1-F4 rotate (example j gets F[j mod 4]), so no condition is favoured. Failure
types follow a mix (`traces.repair_mix`, by default the student's own failures: mostly number
misuse, few format errors), apportioned exactly over the examples and dealt in a seeded
order, so the made attempts look like the failures `repair` will show the student; a failure
type a problem cannot produce falls through to the next one in FAILURE_ORDER. F-shuffled and R-resample are not trained:
F-shuffled is F3 text of another problem (a learned F3 reader reads it), R is the plain prompt.
"""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence

from ..task.repair_prompt import condition_feedback, repair_prompt
from ..task.solve import operator_flips, step_trace
from ..task.verify import PREC, ParseError, evaluate, extract_answer, parse, verify

CONDITIONS = ("F1", "F2", "F3", "F4")  # rotated equally; keys of task.prompts.REPAIR_CONDITIONS
FAILURE_ORDER = ("WRONG_TARGET", "NUMBER_REUSED", "NUMBER_UNKNOWN", "NUMBER_OMITTED",
                 "PARSE_FAIL", "FORMAT_MISSING", "DIV_BY_ZERO")
_LITERAL = re.compile(r"[0-9]+")


def _attempt(expr: str) -> str | None:
    """A model-style completion answering `expr`: its steps, then the answer (None when the
    steps cannot be written, e.g. a division by zero on the way)."""
    try:
        steps = step_trace(expr)
    except (ParseError, ZeroDivisionError):
        return None
    return f"<think>{steps}</think>\n<answer>{expr}</answer>"


def _replace_literal(expr: str, pick: Callable[[int], list[int]], rng: random.Random) -> str | None:
    spans = list(_LITERAL.finditer(expr))
    rng.shuffle(spans)
    for m in spans:
        options = pick(int(m.group()))
        if options:
            return expr[:m.start()] + str(rng.choice(options)) + expr[m.end():]
    return None


def wrong_target(expr, numbers, target, rng):
    flips = operator_flips(expr, target)
    # whole-number steps read like a model's slip; fractions only if nothing else
    whole = [f for f in flips if "/" not in step_trace(f).replace(" / ", " ")]
    pool = whole or flips
    return _attempt(rng.choice(pool)) if pool else None


def number_reused(expr, numbers, target, rng):
    wrong = _replace_literal(expr, lambda x: sorted({n for n in numbers if n != x}), rng)
    return _attempt(wrong) if wrong else None


def number_unknown(expr, numbers, target, rng):
    def near(x: int) -> list[int]:  # an off-by-a-little operand, as a slip would make it
        return [y for y in (x + 1, x - 1, x + 10, x - 10) if y > 0 and y not in numbers][:1]
    wrong = _replace_literal(expr, near, rng)
    return _attempt(wrong) if wrong else None


def number_omitted(expr, numbers, target, rng):
    """Drop one operand with its operator, last operand first ("(3 + 5) * (7 - 2)" ->
    "(3 + 5) * (7)"), as an answer written before the last step would be."""
    for m in reversed(list(_LITERAL.finditer(expr))):
        before = re.search(r"\s*[-+*/]\s*$", expr[:m.start()])
        after = re.match(r"\s*[-+*/]\s*", expr[m.end():])
        for wrong in ((expr[:before.start()] + expr[m.end():]) if before else None,
                      (expr[:m.start()] + expr[m.end() + after.end():]) if after else None):
            if wrong and (a := _attempt(wrong)) is not None:
                return a
    return None


def div_by_zero(expr, numbers, target, rng):
    positions = [i for i, ch in enumerate(expr) if ch in PREC]
    for ops in itertools.product(PREC, repeat=len(positions)):  # <= 4^5 for 6 numbers
        chars = list(expr)
        for i, op in zip(positions, ops):
            chars[i] = op
        wrong = "".join(chars)
        try:
            evaluate(*parse(wrong))
        except ZeroDivisionError:
            return f"<think>{step_trace(expr)}</think>\n<answer>{wrong}</answer>"
    return None


def parse_fail(expr, numbers, target, rng):
    return f"<think>{step_trace(expr)}</think>\n<answer>{expr} = {target}</answer>"


def format_missing(expr, numbers, target, rng):
    steps = step_trace(expr).split(", ")
    return "<think>" + ", ".join(steps[:max(1, len(steps) - 1)]) + ","  # cut mid-reasoning


MAKERS = {"WRONG_TARGET": wrong_target, "NUMBER_REUSED": number_reused,
          "NUMBER_UNKNOWN": number_unknown, "NUMBER_OMITTED": number_omitted,
          "DIV_BY_ZERO": div_by_zero, "PARSE_FAIL": parse_fail, "FORMAT_MISSING": format_missing}


def wrong_attempt(solution: str, numbers: Sequence[int], target: int, failure: str,
                  rng: random.Random) -> tuple[str, str] | None:
    """(completion, verifier failure code) of a wrong attempt of `failure`'s type, falling
    through FAILURE_ORDER when the problem cannot produce it; the code is the verifier's, and
    every returned attempt fails it. None if no type works (never seen in practice)."""
    start = FAILURE_ORDER.index(failure)
    for f in FAILURE_ORDER[start:] + FAILURE_ORDER[:start]:
        text = MAKERS[f](solution, list(numbers), target, rng)
        if text is None:
            continue
        v = verify(text, numbers, target)
        if not v.correct:
            return text, v.failure
    return None


def apportion(mix: dict[str, float], n: int, rng: random.Random) -> list[str]:
    """n failure types in the shares of `mix` (largest remainders: exact counts), in a seeded
    order."""
    if set(mix) - set(FAILURE_ORDER) or abs(sum(mix.values()) - 1) > 1e-6 or \
            any(v < 0 for v in mix.values()):
        raise ValueError(f"repair_mix must map failure types ({', '.join(FAILURE_ORDER)}) to "
                         f"shares >= 0 that sum to 1, got {mix}")
    exact = {f: mix.get(f, 0.0) * n for f in FAILURE_ORDER}
    counts = {f: int(v) for f, v in exact.items()}
    for f in sorted(FAILURE_ORDER, key=lambda f: counts[f] - exact[f])[:n - sum(counts.values())]:
        counts[f] += 1
    types = [f for f in FAILURE_ORDER for _ in range(counts[f])]
    rng.shuffle(types)
    return types


def repair_examples(traces: Sequence[dict], frac: float, seed: int, style: str,
                    mix: dict[str, float] | None = None) -> list[dict]:
    """Repair-format examples for a seeded share `frac` of the problems in `traces` (the
    solver traces of train problems; the first trace of each problem is used); failure types
    in the shares of `mix` (None: every type equally often).

    One row per chosen problem: the trace row's fields, with `prompt` the repair prompt and
    `source` "repair", plus `condition`, `failure` (the attempt's verifier code) and `attempt`.
    """
    if not 0 <= frac <= 1:
        raise ValueError(f"repair_frac must be in [0, 1], got {frac!r}")
    by_problem: dict[str, dict] = {}
    for r in traces:
        by_problem.setdefault(r["problem_id"], r)
    first = list(by_problem.values())
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(first)), round(frac * len(first))))
    types = apportion(mix or dict.fromkeys(FAILURE_ORDER, 1 / len(FAILURE_ORDER)), len(chosen),
                      rng)
    rows = []
    for j, i in enumerate(chosen):
        row = first[i]
        numbers, target = row["numbers"], row["target"]
        cond = CONDITIONS[j % len(CONDITIONS)]
        want = types[j]
        made = wrong_attempt(extract_answer(row["completion"]), numbers, target, want, rng)
        if made is None:
            continue
        text, failure = made
        attempt = {"attempt_id": f"repair-{row['problem_id']}", "problem_id": row["problem_id"],
                   "numbers": numbers, "target": target, "completion": text, "failure": failure}
        # the repair stage's own code path: re-verifies the attempt, renders the condition's text
        fb = condition_feedback([attempt], cond, seed)[0]
        answer = verify(row["completion"], numbers, target)
        if not answer.correct:  # the solver traces are gated; a bad one is a bug upstream
            raise AssertionError(f"solver trace of {row['problem_id']} does not verify")
        rows.append({**row, "prompt": repair_prompt(attempt, fb, style), "source": "repair",
                     "condition": cond, "failure": failure, "attempt": text})
    return rows


def repair_counts(rows: Sequence[dict]) -> dict:
    """Counts for reports/details/traces.json: per condition, per failure type, and both."""
    return {
        "count": len(rows),
        "by_condition": dict(sorted(Counter(r["condition"] for r in rows).items())),
        "by_failure": dict(sorted(Counter(r["failure"] for r in rows).items())),
        "by_condition_failure": {c: dict(sorted(Counter(
            r["failure"] for r in rows if r["condition"] == c).items())) for c in CONDITIONS},
    }
