"""Single-step interventions with the solver as the oracle (S3 §4, Alg. 1).

A failed trace is read as "a op b = c" steps (the verifier's own claim pattern, so both
solver trace styles and malformed model text parse the same way). Only the final attempt
counts: in the `search` style a dead end closed by "backtrack" is an error the model
already corrected (S3: the first error "that itself is not corrected"), and the pool of
numbers starts afresh after it. Walking the final attempt's steps, the remaining numbers
are tracked; the first erroneous step is the first UNRECOVERABLE one, the first that
    - uses an operand that is not among the remaining numbers   (reason "operand"),
    - claims a wrong result, and its true result leaves numbers
      from which the target is unreachable                      (reason "arithmetic"),
    - leaves numbers from which the target is unreachable       (reason "unreachable"),
A wrong claim whose true result keeps the target reachable is a slip the answer can survive
(most correct samples hold one: the answer is an expression, checked exactly, not the
narrated arithmetic), so the walk goes on with the true value in the pool, later mentions of
the claimed value standing for it; patching such a slip would teach nothing that matters.
and if every step is sound but the attempt stops while several numbers remain (truncated,
or it answered early), the missing next step is the error     (reason "missing").
A trace whose steps end at exactly [target] has no step to fix (its answer is what failed):
no intervention.

The intervention replaces that step by a correct one: a step over the numbers before it
that keeps the target reachable, i.e. the first step of some solver solution. Among those
we prefer the smallest edit of the model's step (the same two operands), then a whole,
non-negative result (as in the solver traces), then enumeration order; deterministic.

    prefix        the completion text before the erroneous step (on-policy)
    step          "a op b = c" (the oracle's single step)
    prefix + step is what InT clones (S3 Table 1, "prefix, no suffix"), and what the policy
                  continues from in the filter.

The `int` stage's phases (stages/int.py lists them) are the functions at the end: one per
phase, called by the stage in order, and the metrics built from their results.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from typing import Any

from ..core.int_config import Interventions
from ..core.rl_config import RL
from ..core.train_config import SFT
from ..data.traces import solver_traces
from ..eval.metrics import pass_at_k
from ..eval.scoring import evaluate_policy
from ..model.policy import policy_ref
from ..model.sampling import generate
from ..model.untrained import untrained
from ..stats import mcnemar
from ..task.arith import OPS, apply_op  # Fractions in, a Fraction (or None: ÷0) out
from ..task.prompts import solve_prompt
from ..task.solve import fmt, solve
from ..task.verify import (
    ARITH_CLAIM,  # the verifier's "a op b = c" claim pattern, reused as is
    verify,
)
from ..train.rloo import train_rloo
from ..train.runtime import fit_and_save, frozen_copy, init_policy
from ..train.sft import train_sft

# Where an attempt's steps begin: after "<think>" or after a "backtrack" (search style),
# skipping the "try " that opens an attempt in the solver's search traces.
_ATTEMPT = re.compile(r"(?:<think>|backtrack\.?)[ \t]*(?:try[ \t]+)?")


@dataclass(frozen=True)
class Step:
    a: Fraction
    op: str
    b: Fraction
    c: Fraction  # the claimed result
    start: int  # character span of the claim in the completion
    end: int

    def text(self) -> str:
        return f"{fmt(self.a)} {self.op} {fmt(self.b)} = {fmt(self.c)}"


@dataclass(frozen=True)
class Intervention:
    index: int  # position of the replaced step in the final attempt (== len(steps): missing)
    reason: str  # operand | arithmetic | unreachable | missing
    prefix: str  # completion text before the intervention
    step: str  # the oracle's replacement step, "a op b = c"
    pool: tuple[str, ...]  # the numbers remaining before the step


def reachable(pool: Sequence[Fraction], target: int) -> bool:
    """Can the target be made from exactly these numbers (each once)?"""
    return bool(solve(sorted(Fraction(x) for x in pool), target))


def reasoning_span(completion: str) -> int:
    """End of the reasoning: `</think>`, else the last `<answer>`, else the whole text."""
    i = completion.find("</think>")
    if i >= 0:
        return i
    i = completion.rfind("<answer>")
    return i if i >= 0 else len(completion)


def final_attempt(completion: str) -> tuple[int, list[Step]]:
    """(start offset, steps) of the last attempt in the reasoning."""
    end = reasoning_span(completion)
    text = completion[:end]
    start = 0
    for m in _ATTEMPT.finditer(text):
        start = m.end()
    steps = []
    for m in ARITH_CLAIM.finditer(text, start):
        a, op, b, c = m.groups()
        steps.append(Step(Fraction(a), "*" if op in "×x" else op, Fraction(b), Fraction(c),
                          m.start(), m.end()))
    return start, steps


def _take(pool: list[Fraction], a: Fraction, b: Fraction) -> list[Fraction] | None:
    rest = list(pool)
    for x in (a, b):
        if x not in rest:
            return None
        rest.remove(x)
    return rest


def correct_step(pool: Sequence[Fraction], target: int, wrong: Step | None = None,
                 latest: Fraction | None = None) -> tuple[Fraction, str, Fraction, Fraction] | None:
    """A step over `pool` after which the target stays reachable (None if there is none).

    Preference: the operands of the `wrong` step (in its order), then a whole non-negative
    result, then enumeration order. `+` and `*` are tried once, with the `latest` result
    first when it is an operand ("63 + 35", as a running total is written).
    """
    pool = [Fraction(x) for x in pool]
    candidates = []
    for n, (i, j) in enumerate(combinations(range(len(pool)), 2)):
        x, y = pool[i], pool[j]
        rest = [pool[m] for m in range(len(pool)) if m not in (i, j)]
        if wrong is not None and (x, y) == (wrong.b, wrong.a) or y == latest:
            x, y = y, x  # the model's own order first / the running total first
        for (a, b), swapped in (((x, y), False), ((y, x), True)):
            for op in OPS:
                if swapped and op in "+*":
                    continue  # commutative: one order is enough
                c = apply_op(a, op, b)
                if c is None or not reachable(rest + [c], target):
                    continue
                same = wrong is not None and sorted((a, b)) == sorted((wrong.a, wrong.b))
                natural = c.denominator == 1 and c >= 0
                candidates.append(((not same, not natural, n, swapped), (a, op, b, c)))
    return min(candidates, key=lambda t: t[0])[1] if candidates else None


def find_intervention(completion: str, numbers: Sequence[int], target: int) -> Intervention | None:
    """The single-step intervention of a failed trace, or None (nothing to fix)."""
    start, steps = final_attempt(completion)
    pool = [Fraction(x) for x in numbers]
    latest = None  # the result of the last sound step
    alias: dict[Fraction, Fraction] = {}  # a slip's claimed result -> its true value
    for i, s in enumerate(steps):
        a, b = alias.get(s.a, s.a), alias.get(s.b, s.b)
        rest = _take(pool, a, b)
        true = None if rest is None else apply_op(a, s.op, b)
        if rest is None:
            reason = "operand"
        elif true is None or not reachable(rest + [true], target):
            reason = "arithmetic" if true != s.c else "unreachable"
        else:  # sound, or a slip the answer can survive: walk on with the true value
            if true != s.c:
                alias[s.c] = true
            pool, latest = rest + [true], true
            continue
        return _intervene(completion[:s.start], i, reason, pool, target, s, latest)
    if len(pool) == 1:  # the steps reach [target]: the reasoning is sound, the answer is not
        return None
    if steps:  # sound so far, but it stopped early: the next step is missing
        prefix = completion[:steps[-1].end] + ", "
    else:  # no step at all in the final attempt: intervene where it begins
        prefix = completion[:start] if start else "<think>"
    return _intervene(prefix, len(steps), "missing", pool, target, None, latest)


def _intervene(prefix: str, index: int, reason: str, pool: list[Fraction], target: int,
               wrong: Step | None, latest: Fraction | None) -> Intervention | None:
    step = correct_step(pool, target, wrong, latest)
    if step is None:  # cannot happen from a solvable pool; kept for malformed inputs
        return None
    a, op, b, c = step
    return Intervention(index, reason, prefix, f"{fmt(a)} {op} {fmt(b)} = {fmt(c)}",
                        tuple(fmt(x) for x in pool))


# --------------------------------------------------------------------------- the search
def search_interventions(policy: tuple, problems: Sequence[dict], samples: dict[str, list[dict]],
                         n_continuations: int, traces_per_problem: int, sampler: dict[str, Any],
                         seed: int, style: str, batch_size: int, backend: str = "hf",
                         progress: bool = True) -> list[dict[str, Any]]:
    """Interventions on the unsolved problems, each with its continuations (S3 Alg. 1 plus
    the filter of S3 Table 1).

    samples: problem_id -> that problem's sample records (every one failed). The first
    `traces_per_problem` failed traces that yield an intervention are used. Each gets
    `n_continuations` samples from prompt + prefix + step; `kept` = one of them verifies
    (the full text prefix + step + continuation is judged). One row per intervention.
    """
    rows = []
    for p in problems:
        found = 0
        for r in samples[p["id"]]:
            if found >= traces_per_problem:
                break
            iv = find_intervention(r["completion"], p["numbers"], p["target"])
            if iv is None:
                continue
            found += 1
            rows.append({"problem_id": p["id"], "numbers": list(p["numbers"]),
                         "target": int(p["target"]), "sample": int(r["sample"]),
                         "completion": r["completion"], "index": iv.index, "reason": iv.reason,
                         "prefix": iv.prefix, "step": iv.step, "pool": list(iv.pool)})
    if not rows:
        return rows
    by_id = {p["id"]: p for p in problems}
    prompts = [solve_prompt(r["numbers"], r["target"], style) + r["prefix"] + r["step"]
               for r in rows]
    out = generate(policy, prompts, n_continuations, sampler, seed, backend=backend,
                   batch_size=batch_size, progress=progress)
    for r, conts in zip(rows, out):
        p = by_id[r["problem_id"]]
        ok = [verify(r["prefix"] + r["step"] + c.text, p["numbers"], p["target"]).correct
              for c in conts]
        r["continuations_correct"] = int(sum(ok))
        r["kept"] = any(ok)
        r["continuation"] = next((c.text for c, good in zip(conts, ok) if good), conts[0].text)
    return rows


# --------------------------------------------------------------------------- stage helpers
def solved_counts(records) -> dict[str, int]:
    """Correct samples per problem_id, from evaluation records."""
    return {pid: int(c) for pid, c in records.groupby("problem_id")["correct"].sum().items()}


def patch_examples(rows: Sequence[dict], style: str, use_filter: bool = True) -> list[tuple]:
    """InT's SFT data (S3 §4.2): (prompt, prefix + intervention step, no EOS) per intervention
    kept by the filter (all of them with use_filter=False, S3 Table 1 "no filter"). The loss
    covers the on-policy prefix and the oracle step, not the continuation, and no end of text:
    the model must go on after the step."""
    return [(solve_prompt(r["numbers"], r["target"], style), r["prefix"] + r["step"], False)
            for r in rows if r["kept"] or not use_filter]


def replay_examples(sft_rows: Sequence[dict], n: int, seed: int) -> list[tuple[str, str]]:
    """`n` seeded (prompt, completion) examples of the SFT training data (train problems
    only), mixed into the patch and the solver baseline: alone, the patch's few hundred short
    examples overfit the tiny policy and cost it most of its skill (a pilot's pass@8 on
    train problems fell 0.25 -> 0.06), and a policy that can no longer finish a trace earns no
    reward from the patched step either."""
    return [(r["prompt"], r["completion"])
            for r in random.Random(seed).sample(list(sft_rows), min(n, len(sft_rows)))]


def solver_examples(problems: Sequence[dict], style: str, styles: Sequence[str],
                    seed: int) -> list[tuple[str, str]]:
    """The full-solution baseline: one verified solver trace per problem (styles rotated)."""
    rng = random.Random(seed)
    out = []
    for i, p in enumerate(problems):
        prompt = solve_prompt(p["numbers"], p["target"], style)
        out += [(r["prompt"], r["completion"])
                for r in solver_traces(p, prompt, tuple(styles), 1, rng, offset=i)]
    return out


# --------------------------------------------------------------------------- the stage's phases
# the training summaries' keys in reports/details/int/r<seed>.json (sft, solver_sft; rloo):
# no_signal_steps = RL steps with no reward contrast, which left the weights as they were
TRAIN_SUMMARY = ("examples", "steps", "epochs", "loss_first", "loss_final", "token_acc_final")
RL_SUMMARY = ("steps", "reward_mean_first", "reward_mean_final", "pass_rate_first",
              "pass_rate_final", "zero_std_frac_first", "zero_std_frac_final", "no_signal_steps",
              "kl_first", "kl_final")


def replicate_problems(pool: Sequence[dict], n: int, mode: str, position: int) -> list[dict]:
    """The n unseen problems a replicate samples for unsolved ones: the pool's first n for
    every replicate (`shared`: their held-out problems overlap, ~60% pairwise in the
    committed run), or the replicate's own, the `position`-th n (`own`, position = its place
    in replicates.int: held-out problems nest in replicates, so more replicates average the
    problems' variance too, docs/defaults.md#int)."""
    start = position * n if mode == "own" else 0
    if start + n > len(pool):
        raise ValueError(f"int.pool {mode}: replicate {position + 1} of replicates.int needs "
                         f"unseen problems {start + 1}-{start + n}, the pool has {len(pool)}; "
                         f"raise problems.n_unseen to {start + n}")
    return list(pool[start:start + n])


def find_unsolved(policy: tuple, problems: Sequence[dict], k: int, sampler: dict[str, Any],
                  seed: int, style: str, **gen: Any) -> tuple[list[dict], dict[str, list[dict]]]:
    """Phase 1: `k` samples per problem from the loaded `policy`; (the problems where all k
    fail, problem_id -> that problem's sample records in sample order). gen: batch_size,
    backend."""
    records = evaluate_policy(policy, problems, k, sampler, [seed], style, **gen)
    hits = solved_counts(records)
    unsolved = [p for p in problems if hits[p["id"]] == 0]
    by_problem = {pid: g.sort_values("sample").to_dict("records")
                  for pid, g in records.groupby("problem_id")}
    return unsolved, by_problem


def train_patch(name: str, examples: list, cfg: SFT, init: str, out: str,
                run: str = "int") -> tuple:
    """Phases 3 and 5: SFT from the policy in `init` (the SFT policy) -> out, curves in
    dvclive/<run>/<name> (run: int/r<seed>); (model, tok, summary). No examples: `init` saved
    unchanged as out."""
    model, tok = init_policy("int", init, cfg)
    if not examples:
        print(f"[int] warning: no {name} examples; saving the SFT policy unchanged as {out}")
        untrained(init, out, f"{run}/{name}")
        return model, tok, {"trained": False, "examples": 0}
    model, stats = fit_and_save(f"{run}/{name}", tok, out, lambda live, stats: train_sft(
        model, tok, examples, cfg, live, stats, section="int.sft"))
    return model, tok, {"trained": True, **{k: stats[k] for k in TRAIN_SUMMARY}}


def split_heldout(unsolved: Sequence[dict], frac: float, seed: int) -> tuple[list, list]:
    """(train, held-out) halves of the unsolved problems: a seeded `frac` share is held
    out, never trained on (no intervention, patch, RL or solver solution), so pass@k on it
    measures transfer rather than memorising the trained problems. Both keep input order."""
    n_out = round(len(unsolved) * frac)
    held = set(random.Random(seed).sample(range(len(unsolved)), n_out))
    return ([p for i, p in enumerate(unsolved) if i not in held],
            [p for i, p in enumerate(unsolved) if i in held])


def train_rl(model, tok, problems: Sequence[dict], cfg: RL, style: str, init: str,
             out: str, curves: str = "rloo", run: str = "int") -> dict[str, Any]:
    """Phase 4: RLOO of `model` (saved in `init`, the KL reference) on `problems` -> out,
    curves in dvclive/<run>/<curves>; the summary. No problems: `init` saved unchanged as out.
    The patched policy (InT) and the plain SFT policy (S3's "RL on the same problems with the
    same config" arm) both go through here with one config."""
    if problems:
        ref_model = frozen_copy(init) if cfg.kl_coef > 0 else None
        _, stats = fit_and_save(f"{run}/{curves}", tok, out, lambda live, stats: train_rloo(
            model, tok, problems, cfg, ref_model=ref_model, prompt_style=style, live=live,
            stats=stats, section="int.rloo"))
        return {"trained": True, "n_problems": len(problems), **{k: stats[k] for k in RL_SUMMARY}}
    print(f"[int] warning: no problems to run RL on; saving {init} unchanged as {out}")
    untrained(init, out, f"{run}/{curves}")
    return {"trained": False, "n_problems": 0}


def train_solver_baseline(unsolved: Sequence[dict], style: str, styles: Sequence[str], seed: int,
                          cfg: SFT, init: str, out: str, steps: int | None = None,
                          run: str = "int", replay: Sequence[dict] = (),
                          replay_per_example: float = 0.0) -> dict[str, Any]:
    """Phase 5: the full-solution baseline, SFT from `init` on one solver solution per
    unsolved problem, plus `replay_per_example` SFT examples (from `replay`) per solution as
    the patch gets -> out; the summary. steps: the patch's optimizer steps, so both get the
    same budget, however many epochs that makes of the baseline's fewer examples (with
    `epochs` left on, the epochs stopped it at 112 steps against the patch's 472); None (no
    patch was trained) = the configured budget."""
    if steps is not None:
        cfg = dataclasses.replace(cfg, max_steps=steps, epochs=None)
    examples = solver_examples(unsolved, style, styles, seed)
    mixed = replay_examples(replay, round(replay_per_example * len(examples)), seed)
    _, _, summary = train_patch("solver_sft", examples + mixed, cfg, init, out, run)
    return {**summary, "replay_examples": len(mixed)}


def unsolved_pass_at_k(policies: dict[str, str], unsolved: Sequence[dict], k: int,
                       sampler: dict[str, Any], seed: int, style: str,
                       **gen: Any) -> tuple[dict[str, dict], dict[str, list[bool]]]:
    """Phase 6: pass@1 and pass@k of each policy (name -> dir) on the previously unsolved
    problems, `k` samples each with `seed`; (name -> pass@k summary, name -> solved flag per
    problem, empty when no problem is unsolved). gen: batch_size, backend."""
    solved, passk = {}, {}
    for name, path in policies.items():
        if not unsolved:
            passk[name] = {"pass@1": None, "pass@k": None, "solved": 0}
            continue
        rec = evaluate_policy(policy_ref(path), unsolved, k, sampler, [seed], style,
                              progress=False, **gen)
        c = solved_counts(rec)
        solved[name] = [c[p["id"]] > 0 for p in unsolved]
        passk[name] = {
            "pass@1": sum(pass_at_k(k, c[p["id"]], 1) for p in unsolved) / len(unsolved),
            "pass@k": sum(solved[name]) / len(unsolved), "solved": int(sum(solved[name]))}
    return passk, solved


def claim_counts(policies: dict[str, str], heldout: Sequence[dict], n: int,
                 sampler: dict[str, Any], seed: int, style: str, **gen: Any) -> dict[str, Any]:
    """Phase 7: the S3 claim's two arms (int, plain_rl: names in `policies`) sampled n times
    per held-out problem with `seed`: their correct samples per problem in `heldout`'s order
    and the unbiased pass@1 / pass@K from them. With K samples a problem's pass@K is one
    "any correct" flag, most of the held-out difference's variance; n > K averages it over
    every K-subset (docs/defaults.md#int)."""
    counts = {}
    for name in ("int", "plain_rl"):
        c = solved_counts(evaluate_policy(policy_ref(policies[name]), heldout, n, sampler,
                                          [seed], style, progress=False, **gen))
        counts[name] = [int(c[p["id"]]) for p in heldout]
    return {"n": n, "seed": seed, "problems": [p["id"] for p in heldout], "correct": counts}


def mcnemar_vs_int(solved: dict[str, list[bool]], unsolved: Sequence[dict]) -> dict[str, dict]:
    """McNemar of `int` against plain_rl, rloo, int_solver_sft, int_sft and sft on the
    previously unsolved problems (matched by problem); empty when none is unsolved."""
    tests = {}
    for other in ("plain_rl", "rloo", "int_solver_sft", "int_sft", "sft"):
        if unsolved:
            res = mcnemar(solved["int"], solved[other])
            tests[f"int_vs_{other}"] = {"b": res.b, "c": res.c, "pvalue": res.pvalue}
    return tests


def interventions_metrics(cfg: Interventions, problems: Sequence[dict], unsolved: Sequence[dict],
                          heldout: Sequence[dict], rows: Sequence[dict], *, patch: dict, rl: dict,
                          plain_rl: dict, solver: dict, passk: dict, solved: dict,
                          heldout_passk: dict, heldout_solved: dict,
                          claim: dict | None = None) -> dict[str, Any]:
    """reports/details/int/r<seed>.json. cfg: params.yaml `int`.
    unsolved: the trained-on part of the unsolved problems; heldout: the rest (never
    trained on). pass_at_k / mcnemar are on `unsolved`, heldout_* on `heldout`.
    `patched_solved_frac`: the share of the trained-on problems the patched policy (int_sft,
    before any RL) solves in its K samples: S3's precondition that RL then sees reward (its
    arm check), not a test-split number. `claim`: phase 7's counts (`claim_counts`), kept as
    `heldout_claim` with each arm's unbiased pass@1 and pass@K; None (int.claim_samples 0):
    no such key, and the claim reads the K samples of `heldout_pass_at_k`."""
    kept = [r for r in rows if r["kept"]]
    n_unsolved = len(unsolved) + len(heldout)
    return {
        "patched_solved_frac": passk.get("int_sft", {}).get("pass@k"),
        "n_problems": len(problems), "select_k": cfg.select_k, "k": cfg.k,
        "unsolved": n_unsolved,
        "unsolved_frac": n_unsolved / len(problems),
        "unsolved_train": len(unsolved), "unsolved_heldout": len(heldout),
        "interventions": {
            "found": len(rows), "kept": len(kept), "filter": bool(cfg.filter),
            "n_continuations": cfg.n_continuations,
            "reasons": dict(sorted(Counter(r["reason"] for r in rows).items())),
            "kept_reasons": dict(sorted(Counter(r["reason"] for r in kept).items())),
            "continuation_success": (sum(r["continuations_correct"] for r in rows)
                                     / (len(rows) * cfg.n_continuations) if rows else None),
        },
        "sft": patch, "rloo": rl, "plain_rl": plain_rl, "solver_sft": solver,
        "pass_at_k": passk, "mcnemar": mcnemar_vs_int(solved, unsolved),
        "heldout_pass_at_k": heldout_passk, "heldout_mcnemar": mcnemar_vs_int(heldout_solved,
                                                                               heldout),
        **({"heldout_claim": {**claim, "k": cfg.k, "pass_at_k": {
            name: {f"pass@{j}": sum(pass_at_k(claim["n"], c, j) for c in cs) / len(cs)
                   for j in (1, cfg.k)} for name, cs in claim["correct"].items()}}}
           if claim and claim["problems"] else {}),
    }
