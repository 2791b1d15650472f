"""Seeded problem generator: solvable by construction, disjoint splits.

Forward construction: draw the numbers, then fold them together in a random order
with random operators, keeping every intermediate a non-negative integer (a natural
puzzle); the final value is the target. So every problem has at least the construction
as a solution, and the exhaustive solver counts the rest.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from .solve import solve


@dataclass(frozen=True)
class Problem:
    id: str
    split: str
    numbers: list[int]
    target: int
    n_numbers: int
    n_solutions: int | None  # distinct solutions; None when not counted (large pools)
    construction: str  # one known solution

    def to_dict(self) -> dict:
        return asdict(self)


def _construct(rng: random.Random, k: int, lo: int, hi: int) -> tuple[list[int], int, str]:
    numbers = [rng.randint(lo, hi) for _ in range(k)]
    items = [(x, str(x)) for x in numbers]
    while len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        (a, ea), (b, eb) = items[i], items[j]
        op = rng.choice("+-*/")
        if op == "-" and a < b:
            (a, ea), (b, eb) = (b, eb), (a, ea)
        if op == "/" and (b == 0 or a % b):
            op = "*" if rng.random() < 0.5 else "+"
        value = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0}[op]
        items = [it for n, it in enumerate(items) if n not in (i, j)]
        items.append((value, f"({ea} {op} {eb})"))
    value, expr = items[0]
    return numbers, value, expr[1:-1] if expr.startswith("(") else expr


def generate_problems(
    n: int,
    seed: int,
    split: str,
    n_numbers: tuple[int, ...] = (3, 4),
    number_range: tuple[int, int] = (1, 99),
    target_range: tuple[int, int] = (10, 99),
    exclude: set[tuple] | None = None,
    count_solutions_up_to: int = 4,
    count_first: int | None = None,
    max_tries: int = 1_000_000,
) -> list[Problem]:
    """`n` distinct problems, operand counts cycling through `n_numbers`.

    `exclude` holds keys (sorted numbers, target) of other splits; problems with those
    keys are skipped so splits never overlap. Solutions are counted exactly for pools of
    at most `count_solutions_up_to` numbers (larger pools are slow to enumerate), and only
    for the first `count_first` problems when given (counting costs ~4 ms a problem; a
    large trace-only pool does not need it). The problems themselves do not depend on
    either setting.
    """
    if n < 0 or not n_numbers or min(n_numbers) < 2:
        raise ValueError("need n >= 0 and every operand count >= 2")
    lo, hi = number_range
    tlo, thi = target_range
    if not (0 <= lo <= hi and tlo <= thi):
        raise ValueError(f"empty range: number_range={number_range}, target_range={target_range}")
    rng = random.Random(f"{seed}-{split}")
    seen = set(exclude or ())
    out: list[Problem] = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > max_tries:
            raise ValueError(
                f"could only make {len(out)}/{n} {split} problems; widen number_range/target_range"
            )
        k = n_numbers[len(out) % len(n_numbers)]
        numbers, target, expr = _construct(rng, k, lo, hi)
        key = problem_key(numbers, target)
        # a target equal to one of the numbers makes a degenerate puzzle ("a - b + b")
        if not (tlo <= target <= thi) or target in numbers or key in seen:
            continue
        seen.add(key)
        counted = k <= count_solutions_up_to and (count_first is None or len(out) < count_first)
        n_sol = len(solve(numbers, target)) if counted else None
        out.append(Problem(f"{split}-{len(out):05d}", split, numbers, target, k, n_sol, expr))
    return out


def problem_key(numbers: list[int], target: int) -> tuple:
    return (tuple(sorted(numbers)), target)
