"""Preference pairs from each source of S1 §3.1.3, plus the base model's own failures as a
fourth source.

  scripted  solver trace (chosen) vs the same trace with its answer operator-flipped
            (rejected): same operands, style and dead ends, wrong value — S1's solver pairs.
  easyneg   teacher correct vs teacher wrong (any failure) on the same problem.
  hardneg   teacher correct vs the teacher's closest format-valid near miss
            (WRONG_TARGET with the smallest |value - target|).
  base      a correct trace vs a sample of the pre-trained base model that fails.

Chosen and rejected of a pair are always written in the same style (`trace_style`: search
with backtracking, or direct), so IPO cannot learn "prefer the search style" instead of
"prefer the correct answer" (issue #17: 125 of 500 scripted pairs once paired a search
chosen with a direct rejected). `cap_sources` then makes the sources the same size.
Every pair is re-judged by the verifier, and the verdicts and lengths travel with it.
"""

from __future__ import annotations

import random
from collections import defaultdict
from fractions import Fraction

from ..task.solve import operator_flips, step_trace
from ..task.verify import verify
from .traces import completion

SOURCES = ("scripted", "easyneg", "hardneg", "base")
BACKTRACK = "backtrack."  # what a search trace's dead end ends with (traces.search_trace)


def trace_style(text: str) -> str:
    """"search" when the reasoning backtracks from a dead end, else "direct" (of any
    completion: solver, teacher or base-model sample)."""
    think = text.split("</think>", 1)[0]
    return "search" if BACKTRACK in think else "direct"


def flipped_like(chosen: str, flip: str) -> str:
    """`chosen` with its final attempt replaced by the wrong expression `flip`: a direct trace
    becomes flip's direct trace; a search trace keeps its dead ends and ends in "try <flip's
    steps>". The rejected differs from the chosen only where the answer does."""
    think = chosen.split("<think>", 1)[-1].split("</think>", 1)[0]
    if trace_style(chosen) == "direct":
        return completion(step_trace(flip), flip)
    head = think[:think.rfind("try ")]
    return completion(f"{head}try {step_trace(flip)}", flip)


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
            out.append(_pair("scripted", t["prompt"], t, t["completion"],
                             flipped_like(t["completion"], flip)))
    return out


def _by_problem(samples: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for s in samples:
        groups[s["problem_id"]].append(s)
    return dict(sorted(groups.items()))


def teacher_pairs(samples: list[dict], rng: random.Random, per_problem: int = 1) -> list[dict]:
    """easyneg and hardneg pairs from the teacher's verified samples of each problem, the
    rejected of the chosen's style (`trace_style`).

    `samples` rows: problem_id, numbers, target, n_numbers, prompt (the student prompt),
    completion, correct, failure, value (str or None).
    """
    out = []
    for group in _by_problem(samples).values():
        good = [s for s in group if s["correct"]]
        bad: dict[str, list[dict]] = defaultdict(list)
        for s in group:
            if not s["correct"]:
                bad[trace_style(s["completion"])].append(s)
        good = [s for s in good if bad[trace_style(s["completion"])]]
        if not good:
            continue
        near = {style: sorted((s for s in b if s["failure"] == "WRONG_TARGET" and s["value"] is not None),
                              key=lambda s: abs(Fraction(s["value"]) - s["target"]))
                for style, b in bad.items()}
        used = defaultdict(int)  # near misses of each style already paired
        for _ in range(min(per_problem, sum(len(b) for b in bad.values()))):
            chosen = rng.choice(good)
            style = trace_style(chosen["completion"])
            out.append(_pair("easyneg", chosen["prompt"], chosen, chosen["completion"],
                             rng.choice(bad[style])["completion"]))
            if used[style] < len(near[style]):
                out.append(_pair("hardneg", chosen["prompt"], chosen, chosen["completion"],
                                 near[style][used[style]]["completion"]))
                used[style] += 1
    return out


def base_pairs(correct_traces: list[dict], base_samples: list[dict], rng: random.Random,
               per_problem: int = 1) -> list[dict]:
    """A correct trace (chosen) of the rejected's style vs a failing base-model sample
    (rejected); a failure no correct trace of its style matches is skipped."""
    chosen_by = _by_problem(correct_traces)
    out = []
    for pid, group in _by_problem(base_samples).items():
        bad = [s for s in group if not s["correct"]]
        if pid not in chosen_by or not bad:
            continue
        for rejected in rng.sample(bad, min(per_problem, len(bad))):
            style = trace_style(rejected["completion"])
            same = [c for c in chosen_by[pid] if trace_style(c["completion"]) == style]
            if same:
                chosen = rng.choice(same)
                out.append(_pair("base", chosen["prompt"], chosen, chosen["completion"],
                                 rejected["completion"]))
    return out


def cap_sources(pairs: list[dict], cap: int | str | None, rng: random.Random) -> list[dict]:
    """At most `cap` pairs per source, a seeded choice kept in file order: an int, "min" (the
    smallest non-empty source's count, so every source IPO trains on is the same size and
    its results compare per pair), or None (no cap)."""
    if cap is None:
        return list(pairs)
    by_source: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_source[p["source"]].append(i)
    if cap == "min":
        cap = min((len(v) for v in by_source.values()), default=0)
    if not (isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1) and by_source:
        raise ValueError(f"max_per_source must be a positive integer, min or null, got {cap!r}")
    keep = sorted(i for src in sorted(by_source)
                  for i in (by_source[src] if len(by_source[src]) <= cap
                            else rng.sample(by_source[src], cap)))
    return [pairs[i] for i in keep]


def style_counts(pairs: list[dict]) -> dict[str, int]:
    """Pairs per "<chosen style>/<rejected style>" (all same-style after this module's
    builders; the check that the style confound is gone)."""
    counts: dict[str, int] = defaultdict(int)
    for p in pairs:
        counts[f"{trace_style(p['chosen'])}/{trace_style(p['rejected'])}"] += 1
    return dict(sorted(counts.items()))
