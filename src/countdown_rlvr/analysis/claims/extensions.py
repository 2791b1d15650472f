"""The project's extensions, their own Holm family: contrasts no seed tested. Every feedback
condition beats the repair prompt without feedback (F0), a resample beats F0, and plain OPD
collapsed on the development split as S4 defines collapse (anti-collapse's precondition).

A claim whose policies this run did not evaluate (no dev split in its details) gets no
decision and says why."""

from __future__ import annotations

import numpy as np

from ...stats import floored_t_test
from ..plan import Plan as AnalysisPlan
from ..results import Inputs, get
from .builders import (
    FEEDBACK,
    ci_text,
    conjunction,
    fill_interval,
    floor_words,
    one_draw,
    repair_contrast,
    repair_rate,
    repair_runs,
)
from .engine import EFFECT, EXTENSION, Claim, Part, Plan

DEV = "dev"  # the development split `evaluate.dev_policies` samples (not the test problems)



def every_f_beats_f0(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = Claim("Extension (no seed ran F0): every feedback condition F1-F4 repairs more than "
              "the repair prompt with the feedback slot empty (F0): what the feedback's "
              "content adds", "not in any seed", EFFECT, chain="repair", family=EXTENSION,
              no_check="no arm is trained: repair samples the SFT policy",
              seed_unusable="no seed tested it", unit="success-rate difference")
    runs = repair_runs(inp, ("F0",))
    if not runs:
        c.why_not = "no repair details with F0 and F conditions"
        return c
    fs = [f for f in FEEDBACK if all(f in cs for cs in runs.values())]
    worst = min(fs, key=lambda f: repair_rate(runs, f))
    tests = {f: repair_contrast(runs, f, "F0", "mcnemar_vs_F0", f) for f in fs}
    c = conjunction(c, [Part(f"{f} − F0", f"{f} vs F0", t) for f, (_, t) in tests.items()])
    eff, t_w = tests[worst]
    c.effect = t_w.mean
    fill_interval(c, t_w, eff)
    c.run = (f"F0 {repair_rate(runs, 'F0'):.1%}; " + ", ".join(f"{f} {repair_rate(runs, f):.1%}"
                                                       for f in fs)
             + f"; worst F ({worst}) − F0 {ci_text(t_w)}")
    c.per_replicate = ", ".join(
        f"{t} {worst}−F0 {a:+.3f} {one_draw(a, get(cs, worst, 'mcnemar_vs_F0', 'pvalue'))}"
        for (t, cs), a in zip(runs.items(), eff, strict=True))
    c.test = (f"{len(fs)} t-tests across replicates of F − F0 (SD floored at McNemar's "
              "counts); holds only if every one does (p = the largest)")
    c.plans = [Plan(p.label, p.test.mean, None, p.test.sd, n=p.test.n) for p in c.parts]
    return c


def resample_beats_f0(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = Claim("Extension (no seed ran F0): a same-budget resample (R) repairs more than the "
              "repair prompt without feedback (F0): what the repair format costs",
              "not in any seed", EFFECT, chain="repair", family=EXTENSION,
              no_check="no arm is trained: repair samples the SFT policy",
              seed_unusable="no seed tested it", unit="success-rate difference")
    runs = repair_runs(inp, ("R", "F0"))
    if not runs:
        c.why_not = "no repair details with R and F0"
        return c
    eff, res = repair_contrast(runs, "R", "F0", "mcnemar_vs_resample", "F0")
    c.run = f"R {repair_rate(runs, 'R'):.1%}, F0 {repair_rate(runs, 'F0'):.1%}; R − F0 {ci_text(res)}"
    c.per_replicate = ", ".join(
        f"{t} {a:+.3f} {one_draw(a, get(cs, 'F0', 'mcnemar_vs_resample', 'pvalue'))}"
        for (t, cs), a in zip(runs.items(), eff, strict=True))
    c.test = (f"t-test across {res.n} replicates of R − F0" + floor_words(res))
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    fill_interval(c, res, eff)
    c.plans = [Plan("R − F0", res.mean, None, res.sd, n=res.n)]
    return c


def opd_collapses(inp: Inputs, plan: AnalysisPlan) -> Claim:
    """S4's collapse, on problems outside the test split: plain OPD's pass@k below SFT's while
    its pass@1 is not. Per replicate the paired differences OPD − SFT (same seed) on the dev
    split; for: one-sided t-tests across replicates that the pass@k difference is below 0
    and that the pass@1 difference is above −margin (non-inferiority), both (p = the larger);
    against: pass@k above SFT's or pass@1 below SFT's by more than the margin (Bonferroni)."""
    margin = plan.no_change_margin
    c = Claim("Extension (anti-collapse's precondition, as S4 defines collapse): on the "
              "development split (problems outside the test split), plain OPD's pass@k is "
              f"below SFT's while its pass@1 is not below SFT's (non-inferior within {margin})",
              "S4: SFT pass@1 0.354, pass@16 0.800; OPD 0.640, 0.780 (S4 does not test it)",
              EFFECT, chain="opd", family=EXTENSION,
              seed_unusable="S4 states collapse as a direction, not a size to plan with",
              no_check="the claim is about plain OPD's outcome (the anti-collapse row checks "
              "its arm)", unit="dev pass@k difference")
    opd, sft = inp.split_of("opd", DEV), inp.split_of("sft", DEV)
    tags = [t for t in (inp.tags_of("opd") or sorted(opd)) if t in opd and t in sft]
    ks = sorted(set.intersection(*({int(x[5:]) for x in b if x.startswith("pass@")}
                                   for b in (*(opd[t] for t in tags), *(sft[t] for t in tags))))
                ) if tags else []
    if not tags or 1 not in ks or len(ks) < 2:
        c.why_not = ("no development-split evaluation of plain OPD and SFT on the same "
                     "replicates (no `dev` block in their details: `evaluate.dev_policies`, or "
                     "details written before it)")
        return c
    k = ks[-1]
    c.unit = f"dev pass@{k} difference"
    d1 = [opd[t]["pass@1"] - sft[t]["pass@1"] for t in tags]
    dk = [opd[t][f"pass@{k}"] - sft[t][f"pass@{k}"] for t in tags]
    below = floored_t_test(dk, alternative="less")
    above = floored_t_test(dk, alternative="greater")
    noninf = floored_t_test(d1, null=-margin, alternative="greater")
    inferior = floored_t_test(d1, null=-margin, alternative="less")
    two = floored_t_test(dk)
    c.parts = [Part(f"OPD − SFT dev pass@{k}", f"pass@{k} below SFT's (one-sided)", below,
                    positive=False, says=("below SFT's", "above SFT's", "ns")),
               Part("OPD − SFT dev pass@1", f"pass@1 not below SFT's by {margin} or more "
                    "(non-inferiority)", noninf, says=("not below", "below", "ns"))]
    if below.pvalue is not None and noninf.pvalue is not None:
        c.pvalue = max(below.pvalue, noninf.pvalue)
        c.right_way = all(p.right_way for p in c.parts)
        c.against = min(1.0, 2 * min(above.pvalue, inferior.pvalue))
    c.effect = two.mean
    fill_interval(c, two, dk)

    def mean(split, key):
        return float(np.mean([split[t][key] for t in tags]))

    c.run = "; ".join(f"dev pass@{kk} SFT {mean(sft, f'pass@{kk}'):.3f} → OPD "
                      f"{mean(opd, f'pass@{kk}'):.3f}" for kk in (1, k)) \
        + f"; pass@{k} diff {ci_text(two)}"
    c.per_replicate = "; ".join(f"{t} pass@1 {a:+.3f}, pass@{k} {b:+.3f}"
                                for t, a, b in zip(tags, d1, dk, strict=True))
    c.test = (f"both: one-sided t-test across {below.n} replicates that OPD − SFT dev pass@{k} "
              f"is below 0, and one that dev pass@1 is above −{margin} (p = the larger)"
              + floor_words(below) + f"; against: pass@{k} above SFT's or pass@1 below it by "
              f"more than {margin} (Bonferroni over the two)")
    c.plans = [Plan(f"pass@{k} below SFT's", -below.mean, None, below.sd, one_sided=True,
                    n=below.n),
               Plan("pass@1 non-inferior", noninf.mean + margin, None, noninf.sd,
                    one_sided=True, n=noninf.n)]
    return c
