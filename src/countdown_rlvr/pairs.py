"""Preference pairs from each source of S1 §3.1.3 (plus the base-model source of SPEC §4).

  scripted  solver trace (chosen) vs the trace of one operator flip of its answer
            (rejected): same operands and style, wrong value — S1's solver pairs.
  easyneg   teacher correct vs teacher wrong (any failure) on the same problem.
  hardneg   teacher correct vs the teacher's closest format-valid near miss
            (WRONG_TARGET with the smallest |value - target|).
  base      a correct trace vs a sample of the pre-trained base model that fails.

Every pair is re-judged by the verifier, and the verdicts and lengths travel with it.
"""

from __future__ import annotations

import random
from collections import defaultdict
from fractions import Fraction

from .task import operator_flips, verify
from .traces import direct_trace

SOURCES = ("scripted", "easyneg", "hardneg", "base")


def _pair(source: str, prompt: str, problem: dict, chosen: str, rejected: str) -> dict:
    vc = verify(chosen, problem["numbers"], problem["target"])
    vr = verify(rejected, problem["numbers"], problem["target"])
    if not vc.correct or vr.correct:  # a pair must prefer correct over incorrect
        raise AssertionError(f"bad {source} pair for {problem['problem_id']}: {vc.failure}, {vr.failure}")
    return {
        "source": source, "problem_id": problem["problem_id"], "n_numbers": problem["n_numbers"],
        "prompt": prompt, "chosen": chosen, "rejected": rejected,
        "chosen_failure": vc.failure, "rejected_failure": vr.failure,
        "rejected_value": None if vr.value is None else str(vr.value),
        "chosen_chars": len(chosen), "rejected_chars": len(rejected),
    }


def scripted_pairs(solver_traces: list[dict], rng: random.Random, per_problem: int = 1) -> list[dict]:
    out = []
    for t in solver_traces:
        answer = verify(t["completion"], t["numbers"], t["target"]).expression.strip()
        flips = operator_flips(answer, t["target"])
        for flip in rng.sample(flips, min(per_problem, len(flips))):
            out.append(_pair("scripted", t["prompt"], t, t["completion"], direct_trace(flip)))
    return out


def _by_problem(samples: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for s in samples:
        groups[s["problem_id"]].append(s)
    return dict(sorted(groups.items()))


def teacher_pairs(samples: list[dict], rng: random.Random, per_problem: int = 1) -> list[dict]:
    """easyneg and hardneg pairs from the teacher's verified samples of each problem.

    `samples` rows: problem_id, numbers, target, n_numbers, prompt (the student prompt),
    completion, correct, failure, value (str or None).
    """
    out = []
    for group in _by_problem(samples).values():
        good = [s for s in group if s["correct"]]
        bad = [s for s in group if not s["correct"]]
        if not good or not bad:
            continue
        near = [s for s in bad if s["failure"] == "WRONG_TARGET" and s["value"] is not None]
        near.sort(key=lambda s: abs(Fraction(s["value"]) - s["target"]))
        for i in range(min(per_problem, len(bad))):
            chosen = rng.choice(good)
            out.append(_pair("easyneg", chosen["prompt"], chosen, chosen["completion"],
                             rng.choice(bad)["completion"]))
            if i < len(near):
                out.append(_pair("hardneg", chosen["prompt"], chosen, chosen["completion"],
                                 near[i]["completion"]))
    return out


def base_pairs(correct_traces: list[dict], base_samples: list[dict], rng: random.Random,
               per_problem: int = 1) -> list[dict]:
    """A correct trace (chosen) vs a failing base-model sample (rejected)."""
    chosen_by = _by_problem(correct_traces)
    out = []
    for pid, group in _by_problem(base_samples).items():
        bad = [s for s in group if not s["correct"]]
        if pid not in chosen_by or not bad:
            continue
        for rejected in rng.sample(bad, min(per_problem, len(bad))):
            chosen = rng.choice(chosen_by[pid])
            out.append(_pair("base", chosen["prompt"], chosen, chosen["completion"], rejected["completion"]))
    return out
