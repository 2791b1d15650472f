"""The repair prompt of S0 §3.3: a failed attempt and one feedback condition's text (S0
Table 1), rendered for each prompt style. Task code: the repair stage samples these prompts
(research.repair) and the SFT traces teach their format (data.repair_data), so both render
them with these functions.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from .prompts import F0_NONE, NO_FEEDBACK, R_RESAMPLE, RESAMPLE, feedback, solve_prompt
from .prompts import REPAIR_CONDITIONS as CONDITIONS  # DVC-safe key -> S0 name
from .verify import verify

REPAIR_WRAPPER = (  # S0 Table 1, "Repair wrapper"
    "Problem: Numbers: {numbers}. Target: {target}. Previous attempt: {completion}. "
    "Verifier feedback: {feedback}. Revise the solution. Use each provided number exactly "
    "once. Put the final expression inside <answer>...</answer>."
)
TINY_REPAIR = "Previous attempt: {completion}\nFeedback: {feedback}\n"


def derangement(groups: Sequence[Any], rng: random.Random) -> list[int]:
    """A seeded permutation src with src[i] != i for every i, and groups[src[i]] != groups[i]
    whenever that is possible (no group holds more than half the items): F-shuffled feedback
    then always comes from another problem.

    Construction: shuffle the groups and their members, lay them out group after group,
    and map each position to the one m places further on (cyclically), m = the largest
    group's size. A group spans at most m consecutive places, so the item m places on
    belongs to another group as long as m <= n / 2; and 0 < m < n is never a fixed point.
    """
    n = len(groups)
    if n < 2:
        raise ValueError("F-shuffled needs at least two attempts to shuffle feedback between")
    members: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    order_groups = sorted(members, key=str)
    rng.shuffle(order_groups)
    order = []
    for g in order_groups:
        idx = members[g][:]
        rng.shuffle(idx)
        order += idx
    m = max(len(v) for v in members.values())
    shift = m if m < n else 1  # one group only: any cycle will do
    src = [0] * n
    for pos, i in enumerate(order):
        src[i] = order[(pos + shift) % n]
    return src


def attempt_verdicts(attempts: Sequence[dict]):
    """Re-verify each stored attempt: the full Verdict (reused / omitted numbers, parser
    message) feeds the F2-F4 texts; the stored failure code must agree."""
    out = []
    for a in attempts:
        v = verify(a["completion"], a["numbers"], a["target"])
        if v.correct or v.failure != a["failure"]:
            raise ValueError(f"attempt {a['attempt_id']} re-verifies as {v.failure}, not its "
                             f"stored {a['failure']}; re-run `dvc repro repair`")
        out.append(v)
    return out


def condition_feedback(attempts: Sequence[dict], condition: str, seed: int) -> list[str | None]:
    """The feedback text of `condition` for each attempt (None for R-resample, "" for F0)."""
    name = CONDITIONS[condition]
    if condition == RESAMPLE:
        return [None] * len(attempts)
    if condition == NO_FEEDBACK:  # the wrapper and the attempt, no feedback content
        return [F0_NONE] * len(attempts)
    verdicts = attempt_verdicts(attempts)
    if condition == "Fshuf":
        f3 = [feedback("F3", v, a["numbers"], a["target"]) for a, v in zip(attempts, verdicts)]
        src = derangement([a["problem_id"] for a in attempts], random.Random(seed))
        return [feedback(name, v, a["numbers"], a["target"], shuffled_from=f3[s])
                for a, v, s in zip(attempts, verdicts, src)]
    return [feedback(name, v, a["numbers"], a["target"]) for a, v in zip(attempts, verdicts)]


def repair_prompt(attempt: dict, feedback_text: str | None, style: str) -> str:
    """The prompt of one repair sample; `feedback_text` None = R-resample (fresh attempt)."""
    numbers, target = attempt["numbers"], attempt["target"]
    if feedback_text is None:
        plain = solve_prompt(numbers, target, style)
        return plain if style == "tiny" else f"{plain} {R_RESAMPLE}"
    if style == "chat":
        return REPAIR_WRAPPER.format(numbers=", ".join(map(str, numbers)), target=target,
                                     completion=attempt["completion"], feedback=feedback_text)
    return solve_prompt(numbers, target, style) + TINY_REPAIR.format(
        completion=attempt["completion"], feedback=feedback_text)
