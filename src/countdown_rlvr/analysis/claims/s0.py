"""S0's claims: most prompts give binary RLVR no signal (the zero-signal share), a
same-budget resample repairs more than every execution-feedback condition, and
self-distillation on successful resamples raises pass@1 over SFT."""

from __future__ import annotations

import numpy as np
from scipy.stats import binomtest

from ...stats import floored_t_test, rate_vs_reference
from ...stats.crossed import CrossedTest, crossed_test
from ..compare import fmt_p
from ..plan import Plan as AnalysisPlan
from ..results import Inputs, get
from .builders import (
    FEEDBACK,
    apply_plan,
    ci_text,
    conjunction,
    fill_interval,
    floor_words,
    one_draw,
    pair_effect,
    per_problem,
    repair_contrast,
    repair_rate,
    repair_runs,
    smaller_route,
    zero_share_per_problem,
)
from .engine import ABOVE, EFFECT, NO_RECORDS, Claim, Part, Plan

S0_SHARE, S0_PROMPTS = 0.592, 500  # S0's zero-informative share and the prompts it measured


# both share rows measure the SFT policy: with one for every replicate, one draw
ONE_SFT = ("one SFT for every replicate (`replicates.shared_sft`): its share is one draw, "
           "with no spread between replicates to test")


def _share_claim(plan: AnalysisPlan, name: str, lead: str, policy: str, measured: str,
                 tail: str = "") -> Claim:
    """Both share rows' header: the claim (`lead`, then the share of `policy` above the
    plan's threshold), the seed's number, the rule, the unit and the seed's effect."""
    share = plan.share_threshold
    c = Claim(f"{lead}: the share of zero-informative prompts (all K samples alike) of {policy} "
              f"is above {share:.0%}{tail}",
              f"{S0_SHARE:.1%} ({S0_PROMPTS} prompts of its model)", ABOVE, chain="sft",
              no_check=f"{measured} is measured as it is, no arm is trained for it",
              unit=f"share − {share:.0%}")
    cp = plan.claims.get(name)
    c.seed_scaled = None if cp is None else cp.scaled
    c.scaling = f"the seed's share {S0_SHARE:.1%} minus the threshold {share:.0%}, not scaled"
    return c


def _share_words(c: Claim, res, k: int, share: float, tags, rates, ns, extra: str = "") -> None:
    """Both share rows' words: the test, this run's share (`extra` after it) beside the
    seed's (context, not the decision) and each replicate's share with its one-draw
    binomial verdict (rates: each replicate's share of its ns prompts)."""
    if isinstance(res, CrossedTest):
        c.test = (f"one-sided crossed test over {res.n_problems} problems x {res.n} replicates "
                  f"that the share (each problem's chance that {k} samples are all alike) is "
                  f"above {share:.0%}")
    else:
        c.test = f"one-sided t-test across {res.n} replicates that the share is above {share:.0%}"
    c.test += floor_words(res) + "; against: the one-sided test below it"
    ref = rate_vs_reference(rates, ns[0], S0_SHARE, S0_PROMPTS)
    c.run = (f"{res.mean:.1%} (K={k}, {ns[0]} prompts){extra}; vs the seed's {S0_SHARE:.1%} "
             f"(context, not the decision): {ref['diff']:+.3f} ± {1.96 * ref['se']:.3f}, "
             f"p {fmt_p(ref['pvalue'], 2)}")
    c.per_replicate = ", ".join(
        f"{t} {r:.1%} " + one_draw(r - share, binomtest(round(r * n), n, share).pvalue)
        for t, r, n in zip(tags, rates, ns, strict=True))


def zero_informative(inp: Inputs, plan: AnalysisPlan) -> Claim:
    share = plan.share_threshold
    c = _share_claim(plan, "zero_informative", "S0: most prompts give binary RLVR no signal",
                     "the SFT policy", "the SFT policy", ", K=8")
    if inp.shared_sft:
        c.why_not = ONE_SFT
        return c
    runs = {t: m for t, m in inp.runs.get("diagnose.json", {}).items()
            if m.get("zero_informative") is not None}
    if not runs:
        c.why_not = "no diagnose details"
        return c
    rates = [m["zero_informative"] for m in runs.values()]
    ns = [int(m["n_problems"]) for m in runs.values()]
    k = int(next(iter(runs.values())).get("k") or 8)
    records = per_problem(inp, "sft")
    if records is not None and set(runs) <= set(records) and len(runs) > 1:
        d = np.column_stack([zero_share_per_problem(*records[t], k) for t in runs])
        res = crossed_test(d, null=share, alternative="greater")
        low = crossed_test(d, null=share, alternative="less")
        effects = list(d.mean(axis=0))
    else:
        # each replicate's share is a proportion of its prompts: binomial sampling error
        wv = [s * (1 - s) / n for s, n in zip(rates, ns, strict=True)]
        res = floored_t_test(rates, wv, null=share, alternative="greater")
        low = floored_t_test(rates, wv, null=share, alternative="less")
        effects = rates
        c.model = NO_RECORDS
    all_correct = np.mean([m.get("all_correct", 0.0) for m in runs.values()])
    passk = [m.get("pass@k") for m in runs.values()]
    _share_words(c, res, k, share, list(runs), rates, ns,
                 f"; all-correct {all_correct:.1%}, so the share is ~1 - pass@K "
                 f"({1 - np.mean(passk):.1%}), a property of this model" if None not in passk
                 else "")
    _share_numbers(c, res, low, effects, share)
    return c


def zero_informative_early(inp: Inputs, plan: AnalysisPlan) -> Claim:
    """S0's share at S0's operating point: the early SFT checkpoint (`sft_early`, pass@1 ~0.09
    like S0's model), from the compare stage's per-problem records of the test split (the
    diagnose stage samples the final SFT policy only)."""
    share = plan.share_threshold
    c = _share_claim(plan, "zero_informative_early", "S0, at its operating point",
                     "the early SFT checkpoint (`sft_early`)", "the early SFT checkpoint")
    if inp.shared_sft:
        c.why_not = ONE_SFT
        return c
    records = per_problem(inp, "sft_early")
    tags = [t for t in (inp.tags_of("sft") or sorted(records or {})) if t in (records or {})]
    if len(tags) < 2:
        c.why_not = ("no per-problem test records of sft_early on two or more replicates "
                     "(params without `sft.early_step`, or details written before the records)")
        return c
    k = int(next(iter(inp.runs.get("diagnose.json", {}).values()), {}).get("k") or 8)
    d = np.column_stack([zero_share_per_problem(*records[t], k) for t in tags])
    res = crossed_test(d, null=share, alternative="greater")
    low = crossed_test(d, null=share, alternative="less")
    rates = list(d.mean(axis=0))
    _share_words(c, res, k, share, tags, rates, [d.shape[0]] * len(tags))
    _share_numbers(c, res, low, rates, share)
    return c


def _share_numbers(c: Claim, res, low, rates, share: float) -> None:
    """A share claim's numbers: its tests' ps, effect and interval as share − threshold, and
    its route, decided by the test above or the one below, whichever side the share is on."""
    c.pvalue, c.against, c.right_way = res.pvalue, low.pvalue, True
    c.effect = res.mean - share
    if res.ci_low is not None:
        c.ci = (res.ci_low - share, res.ci_high - share)
    c.replicate_effects = tuple(float(r) - share for r in rates)
    c.plans = [Plan(f"share − {share:.0%}", abs(res.mean - share), c.seed_scaled, res.sd, True,
                    crossed=res if isinstance(res, CrossedTest) else None, n=res.n)]


def feedback(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = Claim("S0: a same-budget resample (R) repairs more failed attempts than every "
              "execution-feedback condition (F1-F4)",
              "R-resample 0.069 > best F (F3 localized) 0.048 (S0 Table 2; S0 ran no F0)",
              EFFECT, chain="repair", no_check="no arm is trained: repair samples the SFT policy",
              unit="success-rate difference")
    apply_plan(c, plan.claims.get("feedback"), "repair success rate, best F → R")
    runs = repair_runs(inp, ("R",))
    if not runs:
        c.why_not = "no repair details with R and F conditions"
        return c
    fs = [f for f in FEEDBACK if all(f in cs for cs in runs.values())]
    best = max(fs, key=lambda f: repair_rate(runs, f))
    tests = {f: repair_contrast(runs, "R", f, "mcnemar_vs_resample", f) for f in fs}
    parts = [Part(f"R − {f}", f"R vs {f}", t) for f, (_, t) in tests.items()]
    c = conjunction(c, parts)
    eff, t_rb = tests[best]
    c.effect = t_rb.mean  # R's margin over the closest F: the contrast that decides
    fill_interval(c, t_rb, eff)
    c.run = (f"R {repair_rate(runs, 'R'):.1%}; " + ", ".join(f"{f} {repair_rate(runs, f):.1%}" for f in fs)
             + f"; R − best F ({best}) {ci_text(t_rb)}")
    c.per_replicate = ", ".join(
        f"{t} R−{best} {a:+.3f} {one_draw(a, get(cs, best, 'mcnemar_vs_resample', 'pvalue'))}"
        for (t, cs), a in zip(runs.items(), eff, strict=True))
    c.test = (f"{len(fs)} t-tests across replicates of paired success-rate differences R − F "
              "(SD floored at McNemar's counts of the matched attempts); reproduced only if "
              "every one holds (p = the largest), contradicted if one is significant against "
              f"the seed (Bonferroni over the {len(fs)}); smaller: one-sided t-test that R − "
              f"{best} is below δ; per replicate: McNemar")
    c.plans = [Plan(p.label, p.test.mean, c.seed_scaled, p.test.sd, n=p.test.n) for p in parts]
    if c.delta is not None:
        _, below = repair_contrast(runs, "R", best, "mcnemar_vs_resample", best,
                                    null=c.delta, alternative="less")
        if (route := smaller_route(c, t_rb, below)) is not None:
            c.plans.append(route)
    if c.delta_abs is not None:
        c.smaller_abs = repair_contrast(runs, "R", best, "mcnemar_vs_resample", best,
                                        null=c.delta_abs, alternative="less")[1].pvalue
    return c


def self_distill(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = Claim("S0: self-distillation on successful resamples (SD-R) raises pass@1 over SFT",
              "pass@1 0.086 → 0.168", EFFECT, arms=("distill_R",))
    return pair_effect(inp, "distill_R", "sft", 1, c, plan.claims.get("self_distill"))
