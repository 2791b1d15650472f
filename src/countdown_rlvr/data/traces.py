"""Verified solver traces in several written styles (S1 §3.1.1's deterministic source).

Each trace is a completion in the `<think>...</think>\n<answer>...</answer>` format whose
reasoning is a sequence of "a op b = c" steps. Styles:
  direct  the solution's steps in evaluation order;
  search  dead ends (an operator-flipped attempt run to its wrong value, then
          "backtrack") before the solution: search with backtracking, as in S4's corpus.
Every trace is gated by the verifier, so all data is correct by construction.
"""

from __future__ import annotations

import random

from ..task.solve import operator_flips, solution_steps, solve, step_trace
from ..task.verify import verify

STYLES = ("direct", "search")
STRATEGY_HINTS = {"direct": "Strategy: direct\n", "search": "Strategy: search\n"}


def completion(think: str, answer: str) -> str:
    return f"<think>{think}</think>\n<answer>{answer}</answer>"


def direct_trace(solution: str) -> str:
    return completion(step_trace(solution), solution)


def search_trace(solution: str, target: int, rng: random.Random, max_dead_ends: int = 1) -> str:
    flips = operator_flips(solution, target)
    # dead ends with whole-number steps read like a person's search; fractions only if needed
    whole = [f for f in flips if "/" not in step_trace(f).replace(" / ", " ")]
    pool = whole or flips
    dead = rng.sample(pool, min(len(pool), rng.randint(1, max_dead_ends)))
    parts = [f"try {step_trace(attempt)} (not {target}), backtrack." for attempt in dead]
    parts.append(f"try {step_trace(solution)}")
    return completion(" ".join(parts), solution)


def strategy_prompt(prompt: str, strategy: str) -> str:
    """The teacher's prompt for one rotated strategy (S1 rotates strategies in its prompt)."""
    if strategy not in STRATEGY_HINTS:
        raise ValueError(f"unknown strategy {strategy!r}; valid: {', '.join(STYLES)}")
    return prompt + STRATEGY_HINTS[strategy]


SOLUTION_SOURCES = ("solver", "construction")


def solver_traces(problem: dict, prompt: str, styles: tuple[str, ...], per_problem: int,
                  rng: random.Random, offset: int = 0, solutions: str = "solver") -> list[dict]:
    """`per_problem` verified traces of one problem; solutions sampled, styles rotated
    (trace number `offset + i` gets style `i mod len(styles)`, so styles balance across
    problems even with one trace each).

    solutions: "solver" samples among every solution of the exhaustive solver (whole,
    non-negative intermediates preferred; ~4 ms a problem); "construction" uses the
    generator's known solution, which has such intermediates by construction (free: the
    choice for a large pool with one trace per problem).
    """
    if solutions not in SOLUTION_SOURCES:
        raise ValueError(f"unknown solution source {solutions!r}; valid: {', '.join(SOLUTION_SOURCES)}")
    for s in styles:
        if s not in STYLES:
            raise ValueError(f"unknown trace style {s!r}; valid: {', '.join(STYLES)}")
    numbers, target = problem["numbers"], problem["target"]
    if solutions == "construction":
        pool = [problem["construction"]]
    else:
        pool = solve(numbers, target) or [problem["construction"]]
        # prefer solutions a person would write: every intermediate a whole number >= 0
        natural = [s for s in pool if all(
            "/" not in c and not c.startswith("-") for *_, c in solution_steps(s))]
        pool = natural or pool
    rows = []
    for i in range(per_problem):
        style = styles[(offset + i) % len(styles)]
        solution = rng.choice(pool)
        text = direct_trace(solution) if style == "direct" else search_trace(solution, target, rng)
        verdict = verify(text, numbers, target)
        if not verdict.correct or verdict.arithmetic_errors:  # the gate: never keep a bad trace
            raise AssertionError(f"solver trace failed verification: {text!r} ({verdict.failure})")
        rows.append({
            "problem_id": problem["id"], "numbers": numbers, "target": target,
            "n_numbers": problem["n_numbers"], "prompt": prompt, "completion": text,
            "strategy": style, "source": "solver",
        })
    return rows
