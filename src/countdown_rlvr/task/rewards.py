"""Rewards computed from a Verdict. `rloo.reward` picks one by name."""

from __future__ import annotations

from collections.abc import Callable

from .verify import Verdict


def binary_reward(v: Verdict, target: int) -> float:
    return 1.0 if v.correct else 0.0


def format_reward(v: Verdict, target: int) -> float:
    """TinyZero / S4 convention: 1.0 correct, 0.1 answer extracted, 0 no answer tags."""
    if v.correct:
        return 1.0
    return 0.0 if v.failure == "FORMAT_MISSING" else 0.1


def shaped_reward(v: Verdict, target: int) -> float:
    """S1 §3.1.4 dense partial credit: a legal expression over exactly the pool earns
    0.1 + 0.5 * closeness, so near-misses outscore far-misses and all-wrong groups
    still carry contrast. Anything else (malformed, wrong pool, ÷0) earns 0."""
    if v.correct:
        return 1.0
    if v.failure != "WRONG_TARGET" or v.value is None:
        return 0.0
    closeness = 1 - abs(v.value - target) / max(1, abs(target))
    return 0.1 + 0.5 * max(0.0, float(closeness))


REWARDS: dict[str, Callable[[Verdict, int], float]] = {
    "binary": binary_reward,
    "format": format_reward,
    "shaped": shaped_reward,
}


def get_reward(name: str) -> Callable[[Verdict, int], float]:
    try:
        return REWARDS[name]
    except KeyError:
        raise ValueError(
            f"unknown reward {name!r}; valid rewards: {', '.join(sorted(REWARDS))}"
        ) from None
