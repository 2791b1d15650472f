"""S3's claim: interventions then RL beat plain RL on previously unsolved problems."""

from __future__ import annotations

from ...stats import binary_paired_var, floored_t_test
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


def interventions(inp: Inputs, plan: AnalysisPlan) -> Claim:
    """S3's transfer claim at its K: held-out pass@K after RL from the patched policy minus
    after plain RL. Where the plan gives S3's own change (Table 2: held-out pass@8 0.159 →
    0.236 for its e3-1.7B), its delta and a smaller-than route as every effect claim has;
    without one, the effect test only."""
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
    effects = {t: get(m, "heldout_pass_at_k", "int", "pass@k")
               - get(m, "heldout_pass_at_k", "plain_rl", "pass@k") for t, m in runs.items()}

    def var(m):  # held-out problems solved within K samples or not: McNemar's counts
        mc, n = get(m, "heldout_mcnemar", "int_vs_plain_rl") or {}, m.get("unsolved_heldout")
        if mc.get("b") is None or not n:
            return None
        return binary_paired_var(int(mc["b"]), int(mc["c"]), int(n))

    diffs, floor = list(effects.values()), within_vars([var(m) for m in runs.values()])
    res = floored_t_test(diffs, floor)
    c.run = (f"held-out pass@{k} int − plain RL {ci_text(res)}"
             f" ({get(next(iter(runs.values())), 'unsolved_heldout')} problems per replicate)")
    c.per_replicate = ", ".join(
        f"{t} {e:+.3f} {one_draw(e, get(runs[t], 'heldout_mcnemar', 'int_vs_plain_rl', 'pvalue'))}"
        for t, e in effects.items())
    c.test = (f"t-test across {res.n} replicates of the held-out pass@{k} difference"
              + floor_words(res) + "; per replicate: McNemar")
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    fill_interval(c, res, list(effects.values()))
    c.plans = [Plan("int − plain RL", res.mean, seed, res.sd, n=res.n)]
    if c.delta is not None:  # "smaller than the seed's": gains above delta excluded
        route = smaller_route(c, res, floored_t_test(diffs, floor, c.delta, "less"))
        c.plans += [route] if route else []
        if c.delta_abs is not None:
            c.smaller_abs = floored_t_test(diffs, floor, c.delta_abs, "less").pvalue
    return c
