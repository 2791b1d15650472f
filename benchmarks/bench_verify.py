"""Throughput of the safe verifier vs a plain regex + eval scorer, and of the solver.

Both scorers judge the same 20k realistic completions (correct traces, wrong targets,
misused numbers, parse failures, missing tags) in one run. Goal: verify >= 1.5x the
regex+eval scorer. Run: python benchmarks/bench_verify.py
"""

from __future__ import annotations

import random
import re
import time

from countdown_rlvr.task.generate import generate_problems
from countdown_rlvr.task.solve import operator_flips, solve, step_trace
from countdown_rlvr.task.verify import verify


def regex_eval_score(completion: str, numbers: list[int], target: int) -> float:
    """The common TinyZero-style scorer: regex extraction, character whitelist, eval."""
    matches = re.findall(r"<answer>(.*?)</answer>", completion)
    if not matches:
        return 0.0
    eq = matches[-1].strip()
    if not re.match(r"^[\d+\-*/().\s]+$", eq):
        return 0.1
    if sorted(int(n) for n in re.findall(r"\d+", eq)) != sorted(numbers):
        return 0.1
    try:
        value = eval(eq, {"__builtins__": None}, {})
    except Exception:  # noqa: BLE001 - the baseline scorer swallows everything
        return 0.1
    return 1.0 if abs(value - target) < 1e-5 else 0.1


def realistic_completions(n: int, seed: int = 0) -> list[tuple[str, list[int], int]]:
    rng = random.Random(seed)
    problems = generate_problems(500, seed, "bench")
    out = []
    for i in range(n):
        p = problems[i % len(problems)]
        sol = p.construction
        kind = rng.random()
        if kind < 0.3:
            expr = sol
        elif kind < 0.7:
            expr = rng.choice(operator_flips(sol, p.target) or [sol])
        elif kind < 0.8:
            expr = sol + f" + {p.numbers[0]}"
        elif kind < 0.9:
            expr = sol.replace("(", "", 1) + " ="
        else:
            expr = None
        think = f"<think>{step_trace(sol)}</think>\n"
        text = think + (f"<answer>{expr}</answer>" if expr is not None else "I give up.")
        out.append((text, p.numbers, p.target))
    return out


def timed(fn, items) -> float:
    start = time.perf_counter()
    for text, numbers, target in items:
        fn(text, numbers, target)
    return time.perf_counter() - start


def main() -> None:
    items = realistic_completions(20_000)
    timed(verify, items[:500]), timed(regex_eval_score, items[:500])  # warm-up
    t_safe = min(timed(verify, items) for _ in range(3))
    t_eval = min(timed(regex_eval_score, items) for _ in range(3))
    rng = random.Random(1)
    puzzles = [([rng.randint(1, 99) for _ in range(4)], rng.randint(10, 99)) for _ in range(1000)]
    start = time.perf_counter()
    n_solutions = sum(len(solve(nums, t)) for nums, t in puzzles)
    t_solve = time.perf_counter() - start

    print(f"{'benchmark':<38}{'items':>8}{'seconds':>10}{'items/s':>12}")
    print(f"{'verify (safe, exact)':<38}{len(items):>8}{t_safe:>10.3f}{len(items) / t_safe:>12,.0f}")
    print(f"{'regex + eval scorer (baseline)':<38}{len(items):>8}{t_eval:>10.3f}{len(items) / t_eval:>12,.0f}")
    print(f"{'solve, random 4-number problems':<38}{len(puzzles):>8}{t_solve:>10.3f}{len(puzzles) / t_solve:>12,.1f}")
    ratio = t_eval / t_safe
    print(f"\nverify throughput / regex+eval throughput = {ratio:.2f}x (goal >= 1.5x)"
          f"{'' if ratio >= 1.5 else '  BELOW GOAL'}")
    print(f"solve found {n_solutions} solutions in total ({n_solutions / len(puzzles):.1f} per problem)")


if __name__ == "__main__":
    main()
