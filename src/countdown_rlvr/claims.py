"""The seeds' headline claims, each tested with the training draw (the replicate) as the unit.

One function per claim returns a `Claim`: this run's number (mean over replicates), each
replicate's own number and one-draw verdict, and one pooled p whose rule is stated:

    effect     the seed claims a change in a direction. Pooled one-sample t-test across
               replicates of the per-replicate paired effect (`stats.replicate_t_test`).
               Reproduced / contradicted only when significant after Holm's correction
               across the claim family, in / against the seed's direction; else inconclusive.
    no change  the seed claims something does NOT rise (S4: RLOO's pass@16). Reproduced only
               when the pooled interval excludes a rise larger than MARGIN (a one-sided
               equivalence test) together with the claim's effect; "not significant" is never
               read as "no change".
    rate       the seed reports a rate measured on its own sample of prompts and model. This
               run's rate (mean over replicates) is compared with it counting both sampling
               errors (`stats.rate_vs_reference`); a significant difference contradicts it,
               anything else is inconclusive (consistent with the seed's rate).

Why a t-test across replicates: each replicate's effect is estimated from all its samples,
paired over problems, so what varies between replicates is the training draw plus the
sampling noise; the t-test's variance is that spread, whatever its mix, and it holds its
size when draws differ (tests/test_stats.py simulates it), where a test over the problems of
one draw (the per-replicate verdicts shown beside it) rejects far more often than 5%. With 3
replicates it has 2 degrees of freedom: only effects large against the between-draw spread
reach significance, which is the honest answer to "is this more than one draw's luck?".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .results import Inputs, get
from .stats import below_margin_test, holm, rate_vs_reference, replicate_t_test

ALPHA = 0.05
MARGIN = 0.05  # the largest pass@k change (absolute) read as "no change"
EFFECT, NO_CHANGE, RATE = "effect", "no change", "rate"


@dataclass
class Claim:
    claim: str  # what the seed says
    seed: str  # the seed's number
    rule: str  # EFFECT | NO_CHANGE | RATE
    run: str = "–"  # this run: mean over replicates [t interval]
    per_replicate: str = "–"  # each replicate's number and one-draw verdict
    test: str = "–"  # the pooled test, in words
    pvalue: float | None = None  # the pooled p (Holm-adjusted by `evaluate`)
    effect: float | None = None  # the number the p tests: the pooled effect (seed's sign
    # convention of the pair, a - b) or, for a rate, this run's rate minus the seed's
    right_way: bool | None = None  # the pooled effect points the seed's way
    against: float | None = None  # NO_CHANGE: p of the two-sided test of the effect itself
    why_not: str | None = None  # not testable: why
    note: str = ""  # e.g. an underpowered arm
    adjusted: float | None = field(default=None, init=False)
    name: str = field(default="", init=False)  # its function's: reports/metrics/claims/<name>.json

    def verdict(self) -> str:
        if self.why_not:
            return f"not testable: {self.why_not}"
        p = self.adjusted
        if p is None:
            return "inconclusive: one replicate (the pooled test needs two or more)"
        if self.rule == RATE:
            return ("contradicted (differs from the seed's rate)" if p < ALPHA else
                    "inconclusive (consistent with the seed's rate)")
        if p < ALPHA:
            return "reproduced" if self.right_way else "contradicted"
        if self.rule == NO_CHANGE and self.against is not None and self.against < ALPHA:
            return "contradicted"
        return "inconclusive"


def _ci(res) -> str:
    if res.ci_low is None:
        return f"{res.mean:+.3f} (one replicate)"
    return f"{res.mean:+.3f} [{res.ci_low:+.3f}, {res.ci_high:+.3f}]"


def _one_draw(effect: float, p: float | None, positive: bool = True) -> str:
    """A replicate's own verdict from its within-draw test: + (significant, the seed's way),
    − (significant, the other way), ns."""
    if p is None or p >= ALPHA:
        return "ns"
    return "+" if (effect > 0) == positive else "−"


def _pair_rows(inp: Inputs, a: str, b: str, k: int) -> tuple[dict | None, str | None]:
    """compare.json's per-replicate rows of a vs b at k (test split), or why there are none."""
    rep = inp.compare
    if rep is None:
        return None, "no compare.json"
    key = f"{a}_vs_{b}"
    if key in (rep.get("skipped") or {}):
        return None, rep["skipped"][key]
    row = get(rep, "pairs", key, "test", f"k{k}")
    if row is None:
        return None, f"[{a}, {b}] at k={k} not in `compare.pairs`"
    return row["per_replicate"], None


def _pool(c: Claim, effects: dict[str, float], one_draw_p: dict[str, float | None],
          test: str) -> Claim:
    """c with the pooled t-test of per-replicate `effects` (tag -> effect, the seed's direction
    positive) and each replicate's own verdict from its within-draw p."""
    res = replicate_t_test(list(effects.values()))
    c.per_replicate = ", ".join(f"{t} {e:+.3f} {_one_draw(e, one_draw_p.get(t))}"
                                for t, e in effects.items())
    c.test = f"t-test across {res.n} replicates of {test}"
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    return c


def _per_replicate(rows: dict, positive: bool = True, nd: int = 3) -> str:
    return ", ".join(f"{t} {r['pass_diff']:+.{nd}f} {_one_draw(r['pass_diff'], r['pass_diff_pvalue'], positive)}"
                     for t, r in rows.items())


def _pair_effect(inp: Inputs, a: str, b: str, k: int, c: Claim, positive: bool = True) -> Claim:
    """c filled with the pooled test of a - b at k (effect rule)."""
    rows, why = _pair_rows(inp, a, b, k)
    if rows is None:
        c.why_not = why
        return c
    res = replicate_t_test([r["pass_diff"] for r in rows.values()])
    means = [np.mean([r[f"pass_{x}"] for r in rows.values()]) for x in ("b", "a")]
    c.run = f"pass@{k} {means[0]:.3f} → {means[1]:.3f}, diff {_ci(res)}"
    c.per_replicate = _per_replicate(rows, positive)
    c.test = f"t-test across {res.n} replicates of the paired pass@{k} difference"
    c.pvalue, c.right_way, c.effect = res.pvalue, (res.mean > 0) == positive, res.mean
    return c


# --------------------------------------------------------------------------- the claims

def zero_informative(inp: Inputs) -> Claim:
    c = Claim("S0: share of zero-informative prompts (all K samples alike) of the SFT policy, "
              "K=8", "59.2% (500 prompts of its model)", RATE)
    runs = {t: m for t, m in inp.runs.get("diagnose.json", {}).items()
            if m.get("zero_informative") is not None}
    if not runs:
        c.why_not = "no diagnose details"
        return c
    rates = [m["zero_informative"] for m in runs.values()]
    n = int(next(iter(runs.values()))["n_problems"])
    res = rate_vs_reference(rates, n, 0.592, 500)
    c.run = f"{np.mean(rates):.1%} (K={next(iter(runs.values())).get('k')}, {n} prompts)"
    c.per_replicate = ", ".join(f"{t} {m['zero_informative']:.1%}" for t, m in runs.items())
    c.test = (f"this run's rate vs 59.2% with both sampling errors (seed: n=500; this run: "
              f"{'the spread of ' + str(len(rates)) + ' replicates' if len(rates) > 1 else 'binomial'})"
              f": diff {res['diff']:+.3f} ± {1.96 * res['se']:.3f}")
    c.pvalue, c.effect = res["pvalue"], res["diff"]
    return c


def feedback(inp: Inputs) -> Claim:
    c = Claim("S0: execution feedback (F1-F4) repairs no more than a fresh resample (R)",
              "R-resample best: 6.9% vs every F lower", EFFECT)
    runs = {t: m.get("conditions", {}) for t, m in inp.runs.get("repair.json", {}).items()}
    runs = {t: cs for t, cs in runs.items() if "R" in cs and any(f in cs for f in
                                                                  ("F1", "F2", "F3", "F4"))}
    if not runs:
        c.why_not = "no repair details with R and F conditions"
        return c
    fs = [f for f in ("F1", "F2", "F3", "F4") if all(f in cs for cs in runs.values())]
    best = max(fs, key=lambda f: np.mean([cs[f]["success_rate"] for cs in runs.values()]))
    effects = {t: cs["R"]["success_rate"] - cs[best]["success_rate"] for t, cs in runs.items()}
    c.run = (f"R {np.mean([cs['R']['success_rate'] for cs in runs.values()]):.1%} vs best F "
             f"({best}) {np.mean([cs[best]['success_rate'] for cs in runs.values()]):.1%}; "
             f"R - {best} {_ci(replicate_t_test(list(effects.values())))}")
    return _pool(c, effects, {t: get(cs, best, "mcnemar_vs_resample", "pvalue")
                              for t, cs in runs.items()},
                 f"the success-rate difference R - {best} (the best F by mean); per "
                 "replicate: McNemar on the matched attempts")


def self_distill(inp: Inputs) -> Claim:
    c = Claim("S0: self-distillation on successful resamples (SD-R) raises pass@1 over SFT",
              "pass@1 0.086 → 0.168", EFFECT)
    return _pair_effect(inp, "distill_R", "sft", 1, c)


def shaped(inp: Inputs) -> Claim:
    c = Claim("S1: binary-reward RLOO flat-lines; the shaped reward restores learning",
              "shaped > binary (~0.73 3-number rollout acc.)", EFFECT)
    c = _pair_effect(inp, "rloo_shaped", "rloo", 1, c)
    diag = []
    for arm in ("rloo", "rloo_shaped"):
        runs = inp.runs.get(f"{arm}.json", {})
        rise = [m["reward_mean_final"] - m["reward_mean_first"] for m in runs.values()
                if m.get("reward_mean_final") is not None and m.get("reward_mean_first") is not None]
        zs = [m["zero_std_groups"] / m["groups"] for m in runs.values() if m.get("groups")]
        if rise:
            diag.append(f"{arm}: reward rise {np.mean(rise):+.3f}, zero-std groups "
                        f"{np.mean(zs):.0%}" if zs else f"{arm}: reward rise {np.mean(rise):+.3f}")
    c.note = ("diagnostic (not the test; any multi-level reward lowers it by construction): "
              + "; ".join(diag)) if diag else ""
    return c


def ipo_sources(inp: Inputs) -> Claim:
    c = Claim("S1: verified teacher pairs (easyneg) beat scripted pairs for IPO, average "
              "pass@k over k", "avg pass@k easyneg 0.62 ≈ hardneg 0.61 > scripted 0.46", EFFECT)
    ks = sorted(int(k[1:]) for k in get(inp.compare, "pairs", "ipo_easyneg_vs_ipo_scripted",
                                         "test", default={}))
    per_k = {k: _pair_rows(inp, "ipo_easyneg", "ipo_scripted", k)[0] for k in ks}
    if not ks or any(v is None for v in per_k.values()):
        c.why_not = _pair_rows(inp, "ipo_easyneg", "ipo_scripted", 1)[1] or "no k"
        return c
    tags = list(per_k[ks[0]])
    effects = [float(np.mean([per_k[k][t]["pass_diff"] for k in ks])) for t in tags]
    res = replicate_t_test(effects)
    c.run = f"avg over k={ks} of pass@k easyneg - scripted {_ci(res)}"
    c.per_replicate = ", ".join(f"{t} {e:+.3f}" for t, e in zip(tags, effects, strict=True))
    c.test = f"t-test across {res.n} replicates of the per-replicate average pass@k difference"
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    pairs = {s: m.get("pairs") for s, m in ((s, inp.data.get(f"ipo/{s}.json") or {})
                                            for s in ("scripted", "easyneg", "hardneg", "base"))}
    c.note = "pairs per source: " + ", ".join(f"{s} {n}" for s, n in pairs.items() if n)
    return c


def rloo_sharpens(inp: Inputs) -> Claim:
    c = Claim(f"S4: RLOO raises pass@1 but not pass@k (sharpening), 'not' = no rise beyond "
              f"+{MARGIN}", "pass@1 0.354 → 0.598; pass@16 0.800 → 0.740", NO_CHANGE)
    k = max((int(k[1:]) for k in get(inp.compare, "pairs", "rloo_vs_sft", "test",
                                     default={})), default=None)
    r1, why1 = _pair_rows(inp, "rloo", "sft", 1)
    rk, whyk = _pair_rows(inp, "rloo", "sft", k) if k else (None, "no k")
    if r1 is None or rk is None:
        c.why_not = why1 or whyk
        return c
    up = replicate_t_test([r["pass_diff"] for r in r1.values()])
    top = replicate_t_test([r["pass_diff"] for r in rk.values()])
    # one-sided: pass@k rises by less than MARGIN (the upper half of a TOST)
    no_rise = below_margin_test([r["pass_diff"] for r in rk.values()], MARGIN)
    c.run = f"pass@1 diff {_ci(up)}; pass@{k} diff {_ci(top)}"
    c.effect = top.mean  # the claim is about pass@k
    c.per_replicate = "; ".join(
        f"{t} pass@1 {r1[t]['pass_diff']:+.3f} {_one_draw(r1[t]['pass_diff'], r1[t]['pass_diff_pvalue'])}"
        f", pass@{k} {rk[t]['pass_diff']:+.3f}" for t in r1 if t in rk)
    c.test = (f"both: t-test of the pass@1 rise, and one-sided t-test that pass@{k} rises by "
              f"less than {MARGIN} (p = the larger)")
    if up.pvalue is not None and no_rise is not None:
        c.pvalue = max(up.pvalue if up.mean > 0 else 1.0, no_rise)
        c.right_way = up.mean > 0
        # contradicted: pass@1 significantly down, or pass@k significantly up
        c.against = min(up.pvalue if up.mean < 0 else 1.0,
                        top.pvalue if top.pvalue is not None and top.mean > 0 else 1.0)
    return c


def opd_anti_collapse(inp: Inputs) -> Claim:
    k = max((int(k[1:]) for k in get(inp.compare, "pairs", "opd_ac_vs_opd", "test",
                                     default={})), default=16)
    c = Claim(f"S4: anti-collapse OPD keeps pass@{k} above plain OPD", "pass@16 0.840 vs 0.780",
              EFFECT)
    c = _pair_effect(inp, "opd_ac", "opd", k, c)
    opd, rloo = inp.data.get("opd.json") or {}, inp.data.get("rloo.json") or {}
    if opd.get("groups") and rloo.get("groups"):
        c.note = (f"both arms from SFT, same budget: {opd['groups']} prompt groups each vs "
                  f"RLOO's {rloo['groups']}" + (" (underpowered)" if opd["groups"] <
                                                 rloo["groups"] / 4 else ""))
    return c


def interventions(inp: Inputs) -> Claim:
    c = Claim("S3: interventions then RL beat plain RL on previously unsolved problems",
              "InT + RL > RL on D_hard (S3 Table 2, Fig. 8)", EFFECT)
    runs = {t: m for t, m in inp.runs.get("int.json", {}).items()
            if isinstance(get(m, "heldout_pass_at_k", "plain_rl"), dict)}
    if not runs:
        c.why_not = "no int details with a plain-RL arm"
        return c
    k = next(iter(runs.values())).get("k", "K")
    effects = {t: get(m, "heldout_pass_at_k", "int", "pass@k")
               - get(m, "heldout_pass_at_k", "plain_rl", "pass@k") for t, m in runs.items()}
    c.run = (f"held-out pass@{k} int - plain RL {_ci(replicate_t_test(list(effects.values())))}"
             f" ({get(next(iter(runs.values())), 'unsolved_heldout')} problems per replicate)")
    return _pool(c, effects, {t: get(m, "heldout_mcnemar", "int_vs_plain_rl", "pvalue")
                              for t, m in runs.items()},
                 f"the held-out pass@{k} difference; per replicate: McNemar")


CLAIMS: tuple[Callable[[Inputs], Claim], ...] = (
    zero_informative, feedback, self_distill, shaped, ipo_sources, rloo_sharpens,
    opd_anti_collapse, interventions)


def evaluate(inp: Inputs) -> list[Claim]:
    """Every claim, its pooled p Holm-adjusted across the family (untestable ones left out)."""
    claims = [claim(inp) for claim in CLAIMS]
    for c, claim in zip(claims, CLAIMS, strict=True):
        c.name = claim.__name__
    for c, p in zip(claims, holm([None if c.why_not else c.pvalue for c in claims]),
                    strict=True):
        c.adjusted = p
    return claims

