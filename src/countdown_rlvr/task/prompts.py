"""Prompt and feedback templates.

`SOLVE_PROMPT` and the feedback/control templates are verbatim from S0 Table 1
(`<answer>` written as plain ASCII tags). The tiny model uses a compact format
with the same `<think>`/`<answer>` contract (S4 §3.1) so the one verifier judges both.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .verify import Verdict

SOLVE_PROMPT = (
    "You are solving a Countdown arithmetic puzzle. Numbers: {numbers}. Target: {target}. "
    "Use each provided number exactly once. You may use +, -, *, and /. "
    "Show your reasoning briefly. Put your final expression inside <answer>...</answer>."
)
# Compact format for the embedded tiny model: a few tokens of prompt, the completion
# is "<think>a op b = c, ...</think>\n<answer>EXPR</answer>".
TINY_PROMPT = "Numbers: {numbers} Target: {target}\n"

PROMPT_STYLES = ("chat", "tiny")


def solve_prompt(numbers: list[int], target: int, style: str = "chat") -> str:
    if style == "chat":
        return SOLVE_PROMPT.format(numbers=", ".join(map(str, numbers)), target=target)
    if style == "tiny":
        return TINY_PROMPT.format(numbers=" ".join(map(str, numbers)), target=target)
    raise ValueError(f"unknown prompt style {style!r}; valid: {', '.join(PROMPT_STYLES)}")


# --- S0 Table 1 feedback / control templates --------------------------------------
F1_GENERIC = "The answer is incorrect. Try again."
F2_MESSAGES = {
    "FORMAT_MISSING": "The final expression is missing; put it inside <answer>...</answer>.",
    "PARSE_FAIL": "The final expression is not parseable.",
    "NUMBER_REUSED": "The equation uses the input numbers incorrectly.",
    "NUMBER_OMITTED": "The equation uses the input numbers incorrectly.",
    "NUMBER_UNKNOWN": "The equation uses the input numbers incorrectly.",
    "DIV_BY_ZERO": "The equation divides by zero.",
    "WRONG_TARGET": "The equation is valid but does not reach the target.",
}
F4_TARGETED = (
    "The expression is syntactically valid and uses the allowed numbers exactly once, "
    "but it evaluates to {value} instead of the target {target}. It must change the final "
    "value by {delta}. Search for a different expression over {numbers} that reaches "
    "{target}; do not just reformat."
)
R_RESAMPLE = "Generate a fresh solution attempt. Do not copy any previous expression."
# F0 (not in S0): the repair wrapper and the previous attempt with the feedback slot left
# empty, so "the model cannot use the repair prompt" and "the feedback's content does not
# help" can be told apart (F_i vs F0 isolates the content, F0 vs R-resample the format).
F0_NONE = ""

FEEDBACK_CONDITIONS = ("F0", "F1", "F2", "F3", "F4", "F-shuffled", "R-resample")
# The repair conditions (research.repair), owned here so that the report stage, which must
# not load torch, shares them: DVC-safe key (params repair/distill.conditions, file names)
# -> S0 name.
REPAIR_CONDITIONS: dict[str, str] = {"F0": "F0", "F1": "F1", "F2": "F2", "F3": "F3", "F4": "F4",
                                     "Fshuf": "F-shuffled", "R": "R-resample"}
RESAMPLE = "R"  # the same-budget control every condition is compared against
NO_FEEDBACK = "F0"  # the repair prompt with the feedback slot empty (not in S0)
# S0 Table 2's six conditions (F0 excluded) -> their label in the report and its figures
REPAIR_LABELS = {"F1": "F1 generic", "F2": "F2 error-class", "F3": "F3 localized",
                 "F4": "F4 targeted", "Fshuf": "F-shuffled", "R": "R-resample"}


def fmt_value(v: Fraction | None) -> str:
    if v is None:
        return "undefined"
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def _nums(xs: list[int]) -> str:
    return ", ".join(map(str, xs)) if xs else "none"


def f3_localized(verdict: Verdict, target: int) -> str:
    """Verifier-localized message (S0 Table 1, F3)."""
    f = verdict.failure
    if f == "WRONG_TARGET":
        return f"Your expression evaluates to {fmt_value(verdict.value)}, but the target is {target}."
    if f in ("NUMBER_REUSED", "NUMBER_OMITTED", "NUMBER_UNKNOWN"):
        msg = f"Your equation reuses {_nums(verdict.reused)} and omits {_nums(verdict.omitted)}"
        if verdict.unknown:
            msg += f", and uses {_nums(verdict.unknown)}, which are not provided"
        return msg + "."
    if f == "PARSE_FAIL":
        return (
            "The expression inside <answer>...</answer> is not parseable: "
            f"{verdict.detail or 'not a legal expression'}."
        )
    if f == "DIV_BY_ZERO":
        return "Your expression divides by zero."
    if f == "FORMAT_MISSING":
        return "No expression was found inside <answer>...</answer>."
    return F1_GENERIC  # correct answers get no localized feedback


def feedback(condition: str, verdict: Verdict, numbers: list[int], target: int,
             shuffled_from: str | None = None) -> str:
    """The feedback text of one S0 condition for one failed attempt.

    F-shuffled needs `shuffled_from`: the F3 text of a *different* failed attempt, shown
    instead (same style, broken credit assignment).
    """
    if condition == "F0":
        return F0_NONE
    if condition == "F1":
        return F1_GENERIC
    if condition == "F2":
        return F2_MESSAGES.get(verdict.failure or "", F1_GENERIC)
    if condition == "F3":
        return f3_localized(verdict, target)
    if condition == "F4":
        if verdict.failure != "WRONG_TARGET" or verdict.value is None:
            return f3_localized(verdict, target)  # S0: F4 backs off to F3
        return F4_TARGETED.format(
            value=fmt_value(verdict.value), target=target,
            delta=fmt_value(Fraction(target) - verdict.value), numbers=_nums(numbers),
        )
    if condition == "F-shuffled":
        if shuffled_from is None:
            raise ValueError("F-shuffled needs `shuffled_from`, the F3 text of another attempt")
        return shuffled_from
    if condition == "R-resample":
        return R_RESAMPLE
    raise ValueError(f"unknown feedback condition {condition!r}; valid: {', '.join(FEEDBACK_CONDITIONS)}")
