"""S4's claims: RLOO sharpens (pass@1 up, pass@k not), on-policy distillation beats
RLOO on pass@1 and pass@k, and anti-collapse OPD keeps pass@k above plain OPD."""

from __future__ import annotations

import numpy as np

from ...stats.crossed import CrossedTest
from ..plan import Plan as AnalysisPlan
from ..results import Inputs, get
from .builders import (
    apply_plan,
    ci_text,
    conjunction,
    crossed_fallback,
    fill_interval,
    no_rise_plan,
    one_draw,
    pair_chain,
    pair_crossed,
    pair_effect,
    pair_rows,
    pair_test,
    test_kind,
)
from .engine import EFFECT, NO_CHANGE, Claim, Part, Plan, beyond_margin


def _top_k(inp: Inputs, a: str, b: str) -> int | None:
    """The largest k compare.json has for the pair a vs b (test split)."""
    return max((int(k[1:]) for k in get(inp.compare, "pairs", f"{a}_vs_{b}", "test",
                                        default={})), default=None)


def rloo_sharpens(inp: Inputs, plan: AnalysisPlan) -> Claim:
    margin = plan.no_change_margin
    c = Claim(f"S4: RLOO raises pass@1 but not pass@k (sharpening), 'not' = no rise beyond "
              f"+{margin}", "pass@1 0.354 → 0.598; pass@16 0.800 → 0.740", NO_CHANGE,
              arms=("rloo",), chain=pair_chain("rloo", "sft"))
    cp = plan.claims.get("rloo_sharpens")
    k = max((int(k[1:]) for k in get(inp.compare, "pairs", "rloo_vs_sft", "test",
                                     default={})), default=None)
    c.unit = f"pass@{k or 16} difference"
    r1, why1 = pair_rows(inp, "rloo", "sft", 1)
    rk, whyk = pair_rows(inp, "rloo", "sft", k) if k else (None, "no k")
    # the seed's pass@1 rise at the plan's level; its pass@k effect: no rise (the claim)
    seed1, seedk = (None, None) if cp is None else (cp.scaled, cp.scaled_k)
    c.seed_scaled, c.delta = seedk, margin  # the row's effect: pass@k
    if cp is not None and seed1 is not None:
        c.scaling = (f"the seed's pass@1 {cp.seed_from:.3f} → {cp.seed_to:.3f} "
                     f"({cp.relative:+.0%}) at the development level {cp.level:.3f}: "
                     f"{seed1:+.3f}" + ("" if seedk is None else
                                        f"; its pass@16 {cp.seed_k[0]:.3f} → {cp.seed_k[1]:.3f} "
                                        f"at {cp.level_k:.3f}: {seedk:+.3f}")
                     + f"; the claim: pass@k rises by no more than +{margin}")
    if r1 is None or rk is None:
        c.why_not = why1 or whyk
        return c
    x1, xk = pair_crossed(inp, "rloo", "sft", 1), pair_crossed(inp, "rloo", "sft", k)
    c.model = crossed_fallback(x1) or crossed_fallback(xk)
    up, top = pair_test(inp, r1, x1), pair_test(inp, rk, xk)
    no_rise = pair_test(inp, rk, xk, null=margin, alternative="less")
    c.run = f"pass@1 diff {ci_text(up)}; pass@{k} diff {ci_text(top)}"
    c.effect = top.mean  # the claim is about pass@k
    c.per_replicate = "; ".join(
        f"{t} pass@1 {r1[t]['pass_diff']:+.3f} {one_draw(r1[t]['pass_diff'], r1[t]['pass_diff_pvalue'])}"
        f", pass@{k} {rk[t]['pass_diff']:+.3f}" for t in r1 if t in rk)
    c.test = (f"both: {test_kind(up)} of the pass@1 rise, and one-sided {test_kind(top)} that "
              f"pass@{k} rises by less than {margin} (p = the larger); against: pass@1 "
              f"significantly down or pass@k up by more than {margin} (one-sided; Bonferroni "
              "over the two)")
    c.parts = [Part("pass@1 diff", "pass@1 rises", up),
               Part(f"pass@{k} diff", f"pass@{k} rises by less than {margin} (one-sided)",
                    no_rise, positive=False)]
    if up.pvalue is not None and no_rise.pvalue is not None:
        c.pvalue = max(up.pvalue if up.mean > 0 else 1.0, no_rise.pvalue)
        c.right_way = up.mean > 0
        rise = beyond_margin(top, margin, rise_only=True)  # not "pass@k moved at all"
        c.against = min(1.0, 2 * min(up.pvalue if up.mean < 0 else 1.0,
                                     1.0 if rise is None else rise))
    fill_interval(c, top, [r["pass_diff"] for r in rk.values()])
    c.plans = [Plan("pass@1 rise", up.mean, seed1, up.sd,
                    crossed=up if isinstance(up, CrossedTest) else None, n=up.n),
               no_rise_plan(f"pass@{k} rise", top.mean, 0.0 if seedk is None else seedk, top,
                             margin)]
    return c


def opd_beats_rloo(inp: Inputs, plan: AnalysisPlan) -> Claim:
    """Both of S4's gains at once (a conjunction, as `builders.conjunction`): reproduced only
    when pass@1 and pass@k both rise, contradicted when either falls significantly; smaller
    than the seed's when either part's gain above its delta is excluded (Bonferroni over the
    two). The row's effect, interval and delta are pass@1's."""
    k = _top_k(inp, "opd", "rloo") or 16
    cp = plan.claims.get("opd_beats_rloo")
    c = Claim(f"S4: on-policy distillation from RLOO's policy beats RLOO on pass@1 and on "
              f"pass@{k}", "pass@1 0.598 → 0.640 (+0.042), pass@16 0.740 → 0.780 (+0.040) "
              "(S4 Table 1)", EFFECT, arms=("opd", "rloo"), chain=pair_chain("opd", "rloo"),
              unit="pass@1 difference")
    seed1 = apply_plan(c, cp, "pass@1, RLOO → OPD")
    seedk, delta_k = (None, None) if cp is None else (cp.scaled_k, cp.delta_k)
    if cp is not None and seedk is not None:
        c.scaling += (f"; its pass@16 {cp.seed_k[0]:.3f} → {cp.seed_k[1]:.3f} at "
                      f"{cp.level_k:.3f}: {seedk:+.3f}"
                      + ("" if delta_k is None else f"; δ of pass@{k} {delta_k:.3f}"))
    r1, why1 = pair_rows(inp, "opd", "rloo", 1)
    rk, whyk = pair_rows(inp, "opd", "rloo", k)
    if r1 is None or rk is None:
        c.why_not = why1 or whyk
        return c
    x1, xk = pair_crossed(inp, "opd", "rloo", 1), pair_crossed(inp, "opd", "rloo", k)
    c.model = crossed_fallback(x1) or crossed_fallback(xk)
    t1, tk = pair_test(inp, r1, x1), pair_test(inp, rk, xk)
    c = conjunction(c, [Part("pass@1 diff", "pass@1 rises", t1),
                         Part(f"pass@{k} diff", f"pass@{k} rises", tk)])
    c.effect = t1.mean
    fill_interval(c, t1, [r["pass_diff"] for r in r1.values()])

    def means(rows):
        return tuple(np.mean([r[f"pass_{x}"] for r in rows.values()]) for x in ("b", "a"))

    c.run = "; ".join(f"pass@{kk} RLOO {b:.3f} → OPD {a:.3f}, diff {ci_text(t)}"
                      for kk, (b, a), t in ((1, means(r1), t1), (k, means(rk), tk)))
    c.per_replicate = "; ".join(
        f"{t} pass@1 {r1[t]['pass_diff']:+.3f} {one_draw(r1[t]['pass_diff'], r1[t]['pass_diff_pvalue'])}"
        f", pass@{k} {rk[t]['pass_diff']:+.3f} {one_draw(rk[t]['pass_diff'], rk[t]['pass_diff_pvalue'])}"
        for t in r1 if t in rk)
    c.test = (f"both: {test_kind(t1)} of the pass@1 rise and {test_kind(tk)} of the pass@{k} rise "
              "(reproduced only if both hold, p = the larger); against: either significantly "
              "down (Bonferroni over the two); smaller: one-sided tests that each rise is below "
              "its δ (either, Bonferroni over the two)")
    c.plans = [Plan("pass@1 OPD − RLOO", t1.mean, seed1, t1.sd,
                    crossed=t1 if isinstance(t1, CrossedTest) else None, n=t1.n),
               Plan(f"pass@{k} OPD − RLOO", tk.mean, seedk, tk.sd,
                    crossed=tk if isinstance(tk, CrossedTest) else None, n=tk.n)]
    if c.delta is not None and delta_k is not None:
        below1 = pair_test(inp, r1, x1, null=c.delta, alternative="less")
        belowk = pair_test(inp, rk, xk, null=delta_k, alternative="less")
        if below1.pvalue is not None and belowk.pvalue is not None:
            c.smaller = min(1.0, 2 * min(below1.pvalue, belowk.pvalue))
            c.plans += [Plan(f"pass@{kk} smaller than δ", d - t.mean, d, t.sd, one_sided=True,
                             crossed=t if isinstance(t, CrossedTest) else None, n=t.n)
                        for kk, d, t in ((1, c.delta, t1), (k, delta_k, tk))]
    abs_k = None if cp is None else cp.delta_abs_k
    if c.delta_abs is not None and abs_k is not None:  # the absolute reading, both parts
        p1 = pair_test(inp, r1, x1, null=c.delta_abs, alternative="less").pvalue
        pk = pair_test(inp, rk, xk, null=abs_k, alternative="less").pvalue
        if p1 is not None and pk is not None:
            c.smaller_abs = min(1.0, 2 * min(p1, pk))
    return c


def opd_anti_collapse(inp: Inputs, plan: AnalysisPlan) -> Claim:
    k = _top_k(inp, "opd_ac", "opd") or 16
    c = Claim(f"S4: anti-collapse OPD keeps pass@{k} above plain OPD", "pass@16 0.780 → 0.840",
              EFFECT, arms=("opd", "opd_ac"))
    c = pair_effect(inp, "opd_ac", "opd", k, c, plan.claims.get("opd_anti_collapse"))
    opd, ac = inp.data.get("opd.json") or {}, inp.data.get("opd_ac.json") or {}
    if opd.get("groups") and ac.get("groups"):
        c.note = (f"both arms from the same start (`opd.init`), same budget: plain OPD "
                  f"{opd['groups']} prompt groups, anti-collapse {ac['groups']}"
                  + ("" if opd["groups"] == ac["groups"] else " (the budgets differ)"))
    return c
