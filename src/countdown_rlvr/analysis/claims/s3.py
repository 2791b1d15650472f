"""S3's claim: interventions then RL beat plain RL on previously unsolved problems."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from ...stats import binary_paired_var, floored_t_test
from ...stats.design import pass_at_k_differences, problem_variance, shared_covariance
from ..plan import Plan as AnalysisPlan
from ..results import Inputs, get
from .builders import (
    apply_plan,
    ci_text,
    fill_interval,
    floor_words,
    one_draw,
    smaller_route,
    within_vars,
)
from .engine import EFFECT, Claim, Plan


def claim_differences(claim: dict) -> np.ndarray:
    """Per held-out problem: int's unbiased pass@K minus plain RL's, from the `heldout_claim`
    block of int's details (n samples per problem, `research.interventions.claim_counts`)."""
    return pass_at_k_differences(claim["correct"]["int"], claim["correct"]["plain_rl"],
                                 claim["n"], claim["k"])[0]


def claim_sampling(claim: dict) -> np.ndarray:
    """Per held-out problem: unbiased estimates of the sampling variance of its difference
    (both arms, `stats.design.sampling_var_estimate`)."""
    return pass_at_k_differences(claim["correct"]["int"], claim["correct"]["plain_rl"],
                                 claim["n"], claim["k"])[1]


def mcnemar_var(m: dict) -> float | None:
    """The sampling variance of a replicate's held-out pass@K difference from phase 6's K
    samples: each problem solved within K or not, McNemar's discordant counts."""
    mc, n = get(m, "heldout_mcnemar", "int_vs_plain_rl") or {}, m.get("unsolved_heldout")
    if mc.get("b") is None or not n:
        return None
    return binary_paired_var(int(mc["b"]), int(mc["c"]), int(n))


def interventions(inp: Inputs, plan: AnalysisPlan) -> Claim:
    """S3's transfer claim at its K: held-out pass@K after RL from the patched policy minus
    after plain RL. Where the plan gives S3's own change (Table 2: held-out pass@8 0.159 →
    0.236 for its e3-1.7B), its delta and a smaller-than route as every effect claim has;
    without one, the effect test only. Where every replicate sampled the two arms many times
    per problem (`heldout_claim`, int.claim_samples), the unbiased pass@K from those samples
    and its per-problem spread; else the K samples of phase 6 and McNemar's counts."""
    cp = plan.claims.get("interventions")
    c = Claim("S3: interventions then RL beat plain RL on previously unsolved problems",
              "InT + RL > RL on D_hard (S3 Table 2, Fig. 8)", EFFECT, arms=("int",), chain="int")
    seed = apply_plan(c, cp, "held-out pass@8, RL → InT + RL")
    if seed is None:
        c.seed_unusable = "the plan gives S3's change no level on this scale"
    runs = {t: m for t, m in inp.runs.get("int.json", {}).items()
            if isinstance(get(m, "heldout_pass_at_k", "plain_rl"), dict)}
    if not runs:
        c.why_not = "no int details with a plain-RL arm"
        return c
    k = next(iter(runs.values())).get("k", "K")
    c.unit = f"held-out pass@{k} difference"
    many = all(m.get("heldout_claim") for m in runs.values())
    shared = 0.0
    if many:  # n samples per problem: each problem's unbiased pass@K difference
        per_problem = {t: claim_differences(m["heldout_claim"]) for t, m in runs.items()}
        effects = {t: float(d.mean()) for t, d in per_problem.items()}
        floor = [float(d.var(ddof=1)) / d.size if d.size > 1 else None
                 for d in per_problem.values()]
        # replicates whose held-out problems overlap (int.pool shared) share those problems'
        # part of the variance, which their spread hides and their mean does not average
        if len(runs) > 1 and None not in floor:
            shared = shared_covariance(
                problem_variance(list(per_problem.values()),
                                 [claim_sampling(m["heldout_claim"]) for m in runs.values()]),
                [m["heldout_claim"]["problems"] for m in runs.values()])
    else:
        effects = {t: get(m, "heldout_pass_at_k", "int", "pass@k")
                   - get(m, "heldout_pass_at_k", "plain_rl", "pass@k") for t, m in runs.items()}
        floor = [mcnemar_var(m) for m in runs.values()]
    diffs, floor = list(effects.values()), within_vars(floor)
    res = floored_t_test(diffs, floor, shared=shared)
    first = next(iter(runs.values()))
    samples = f" x {first['heldout_claim']['n']} samples" if many else ""
    c.run = (f"held-out pass@{k} int − plain RL {ci_text(res)}"
             f" ({first.get('unsolved_heldout')} problems{samples} per replicate)")
    # a replicate's own test: McNemar on K samples; on many, the mean over its problems (CLT)
    own = {t: 2 * float(norm.sf(abs(e) / math.sqrt(v))) if v else None
           for (t, e), v in zip(effects.items(), floor or [None] * len(effects))} if many else \
        {t: get(runs[t], "heldout_mcnemar", "int_vs_plain_rl", "pvalue") for t in effects}
    c.per_replicate = ", ".join(f"{t} {e:+.3f} {one_draw(e, own[t])}" for t, e in effects.items())
    c.test = (f"t-test across {res.n} replicates of the held-out pass@{k} difference"
              + floor_words(res) + ("; per replicate: the unbiased pass@K from "
                                    f"{first['heldout_claim']['n']} samples a problem" if many
                                    else "; per replicate: McNemar"))
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    fill_interval(c, res, list(effects.values()))
    c.plans = [Plan("int − plain RL", res.mean, seed, res.sd, n=res.n)]
    if c.delta is not None:  # "smaller than the seed's": gains above delta excluded
        route = smaller_route(c, res, floored_t_test(diffs, floor, c.delta, "less",
                                                     shared=shared))
        c.plans += [route] if route else []
        if c.delta_abs is not None:
            c.smaller_abs = floored_t_test(diffs, floor, c.delta_abs, "less",
                                           shared=shared).pvalue
    return c
