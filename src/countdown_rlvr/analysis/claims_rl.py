"""The RL claims: S1's shaped reward at two operating points, S4's OPD rows and their
precondition. Each function returns a `claims.Claim`; `claims.CLAIMS` lists them with the
others and `claims.evaluate` decides them (docs/statistics.md states the rules).

    shaped_premise, shaped              binary RLOO flat vs SFT; shaped beats binary: from
                                        this run's SFT
    shaped_premise_early, shaped_early  the same pair at S0's operating point: from an early
                                        SFT checkpoint (`sft_early`, pass@1 ~0.09 like S0's)
    opd_beats_rloo                      S4: OPD beats RLOO on pass@1 and pass@k (both)
    opd_anti_collapse                   S4: anti-collapse OPD beats plain OPD on pass@k
    opd_collapses                       extension, the precondition as S4 defines collapse:
                                        on the dev split, plain OPD's pass@k below SFT's while
                                        its pass@1 is not
    relate(by, alpha)                   what a premise's decision says, written into the row
                                        it is the premise of (never a test)

A claim whose policies this run did not evaluate (older details, params without the early
operating point or the dev split) gets no decision and says why, like any claim without data.

The helpers come from `claims`, imported at the bottom: `claims` imports this module for its
list, and the functions here read those names only when they run, so either module may be
imported first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from . import checks
from .plan import Plan as AnalysisPlan
from .results import Inputs, get

DEV = "dev"  # the development split `evaluate.dev_policies` samples (not the test problems)


@dataclass(frozen=True)
class Point:
    """An operating point of S1's binary-vs-shaped question: the SFT policy both RLOO arms
    start from, the two arms, and the words that say which point it is."""
    sft: str
    binary: str
    shaped: str
    words: str  # for the claim's text: which SFT the arms start from
    sft_label: str  # the SFT policy, in a difference's label


THIS_RUN = Point("sft", "rloo", "rloo_shaped", "from this run's SFT", "SFT")
EARLY = Point("sft_early", "rloo_early", "rloo_early_shaped",
              "at S0's operating point, from an early SFT checkpoint (`sft_early`)", "early SFT")


def _checked(*arms: str) -> tuple[str, ...]:
    """The arms that have a check (checks.CHECKS): an arm this configuration does not declare
    has none to run, and the claim then says so instead of failing."""
    return tuple(a for a in arms if a in checks.CHECKS)


def _not_evaluated(inp: Inputs, *policies: str) -> str | None:
    """Why a pair of these policies has no rows: the policies this run did not evaluate
    (None when compare.json has them all)."""
    if inp.compare is None:
        return None  # no compare.json: the pair's own reason says so
    have = set(inp.compare.get("policies") or {})
    missing = [p for p in policies if p not in have]
    if not missing:
        return None
    return (f"{', '.join(missing)} not evaluated in this run (details from before "
            f"{'it' if len(missing) == 1 else 'them'}, or params without "
            f"{'it' if len(missing) == 1 else 'them'})")


def _top_k(inp: Inputs, a: str, b: str) -> int | None:
    """The largest k compare.json has for the pair a vs b (test split)."""
    return max((int(k[1:]) for k in get(inp.compare, "pairs", f"{a}_vs_{b}", "test",
                                        default={})), default=None)


# --------------------------------------------------------------------------- S1 shaped

def _premise(inp: Inputs, plan: AnalysisPlan, point: Point, seed: str) -> Claim:
    margin = plan.no_change_margin
    c = Claim(f"S1 premise, {point.words}: binary-reward RLOO flat-lines: its pass@1 stays "
              f"within ±{margin} of its SFT's", seed, NO_CHANGE,
              chain=pair_chain(point.binary, point.sft), unit="pass@1 difference",
              no_check="whether binary RLOO learns is the claim itself",
              for_decision=Decision.EQUIVALENT)
    c.seed_scaled, c.delta = 0.0, margin  # the seed: no learning; no change = within margin
    rows, why = _pair_rows(inp, point.binary, point.sft, 1)
    if rows is None:
        c.why_not = _not_evaluated(inp, point.sft, point.binary) or why
        return c
    crossed = _pair_crossed(inp, point.binary, point.sft, 1)
    c.model = _model_words(crossed)
    two = _pair_test(inp, rows, crossed)
    c.run = f"binary RLOO − {point.sft_label}, pass@1 {_ci(two)}"
    c.per_replicate = _per_replicate(rows)
    c.test = (f"two one-sided {_kind(two)}s that pass@1 moves by less than {margin} either "
              f"way" + _floor_words(two) + f"; against: the two-sided {_kind(two)} of the change")
    c.equiv = _tost(two, margin)
    c.pvalue, c.right_way, c.effect = c.equiv, True, two.mean
    c.against = two.pvalue
    _fill(c, two, [r["pass_diff"] for r in rows.values()])
    c.parts = [Part(f"binary RLOO − {point.sft_label} pass@1", "does binary RLOO learn?", two,
                    says=("binary learns", "binary falls below SFT", "no detectable change"))]
    c.plans = [Plan("within ±margin", margin - abs(two.mean), margin, two.sd, one_sided=True,
                    crossed=two if isinstance(two, CrossedTest) else None, n=two.n)]
    return c


def _shaped(inp: Inputs, plan: AnalysisPlan, point: Point, name: str) -> Claim:
    # S1 reports the shaped arm as a rollout accuracy (~0.73 on 3-number problems), not as a
    # pass@1 difference; S0 ran the same pair on Countdown and gives one (its Table 3: binary
    # RLOO pass@1 0.088, shaped 0.120), so that is the effect the plan scales
    arms = _checked(point.binary, point.shaped)
    c = Claim(f"S1, {point.words}: the shaped reward restores learning: shaped-reward RLOO "
              "beats binary", "shaped > binary (S1: ~0.73 3-number rollout acc.; S0: pass@1 "
              "0.088 → 0.120)", EFFECT, arms=arms,
              no_check="" if arms else f"{point.binary} and {point.shaped} have no arm check "
              "in this configuration")
    c = _pair_effect(inp, point.shaped, point.binary, 1, c, plan.claims.get(name))
    if point is EARLY:
        c.chain = "rloo"  # both arms train on the RLOO chain's seeds, from sft_early
    if c.why_not:
        c.why_not = _not_evaluated(inp, point.sft, point.binary, point.shaped) or c.why_not
    diag = []
    for arm in (point.binary, point.shaped):
        runs = inp.runs.get(f"{arm}.json", {})
        rise = [m["reward_mean_final"] - m["reward_mean_first"] for m in runs.values()
                if m.get("reward_mean_final") is not None and m.get("reward_mean_first") is not None]
        zs = [m["zero_std_groups"] / m["groups"] for m in runs.values() if m.get("groups")]
        if rise:
            diag.append(f"{arm}: reward rise {np.mean(rise):+.3f}, zero-std groups "
                        f"{np.mean(zs):.0%} over the whole run" if zs
                        else f"{arm}: reward rise {np.mean(rise):+.3f}")
    c.note = ("diagnostic (not the test; any multi-level reward lowers it by construction): "
              + "; ".join(diag)) if diag else ""
    return c


def shaped_premise(inp: Inputs, plan: AnalysisPlan) -> Claim:
    return _premise(inp, plan, THIS_RUN, "flat reward curve, no learning")


def shaped(inp: Inputs, plan: AnalysisPlan) -> Claim:
    return _shaped(inp, plan, THIS_RUN, "shaped")


def shaped_premise_early(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = _premise(inp, plan, EARLY, "flat reward curve; S0 Table 3 from an early SFT "
                 "checkpoint: SFT pass@1 0.086, binary RLOO 0.088")
    c.chain = "rloo"
    return c


def shaped_early(inp: Inputs, plan: AnalysisPlan) -> Claim:
    return _shaped(inp, plan, EARLY, "shaped_early")


# each shaped row -> its premise's row
PREMISES = {"shaped": ("shaped_premise", THIS_RUN), "shaped_early": ("shaped_premise_early",
                                                                     EARLY)}


# --------------------------------------------------------------------------- S4 OPD

def opd_beats_rloo(inp: Inputs, plan: AnalysisPlan) -> Claim:
    """Both of S4's gains at once (a conjunction, as `claims._conjunction`): reproduced only
    when pass@1 and pass@k both rise, contradicted when either falls significantly; smaller
    than the seed's when either part's gain above its delta is excluded (Bonferroni over the
    two). The row's effect, interval and delta are pass@1's."""
    k = _top_k(inp, "opd", "rloo") or 16
    cp = plan.claims.get("opd_beats_rloo")
    c = Claim(f"S4: on-policy distillation from RLOO's policy beats RLOO on pass@1 and on "
              f"pass@{k}", "pass@1 0.598 → 0.640 (+0.042), pass@16 0.740 → 0.780 (+0.040) "
              "(S4 Table 1)", EFFECT, arms=("opd", "rloo"), chain=pair_chain("opd", "rloo"),
              unit="pass@1 difference")
    seed1 = _apply_plan(c, cp, "pass@1, RLOO → OPD")
    seedk, delta_k = (None, None) if cp is None else (cp.scaled_k, cp.delta_k)
    if cp is not None and seedk is not None:
        c.scaling += (f"; its pass@16 {cp.seed_k[0]:.3f} → {cp.seed_k[1]:.3f} at "
                      f"{cp.level_k:.3f}: {seedk:+.3f}"
                      + ("" if delta_k is None else f"; δ of pass@{k} {delta_k:.3f}"))
    r1, why1 = _pair_rows(inp, "opd", "rloo", 1)
    rk, whyk = _pair_rows(inp, "opd", "rloo", k)
    if r1 is None or rk is None:
        c.why_not = why1 or whyk
        return c
    x1, xk = _pair_crossed(inp, "opd", "rloo", 1), _pair_crossed(inp, "opd", "rloo", k)
    c.model = _model_words(x1) or _model_words(xk)
    t1, tk = _pair_test(inp, r1, x1), _pair_test(inp, rk, xk)
    c = _conjunction(c, [Part("pass@1 diff", "pass@1 rises", t1),
                         Part(f"pass@{k} diff", f"pass@{k} rises", tk)])
    c.effect = t1.mean
    _fill(c, t1, [r["pass_diff"] for r in r1.values()])

    def means(rows):
        return tuple(np.mean([r[f"pass_{x}"] for r in rows.values()]) for x in ("b", "a"))

    c.run = "; ".join(f"pass@{kk} RLOO {b:.3f} → OPD {a:.3f}, diff {_ci(t)}"
                      for kk, (b, a), t in ((1, means(r1), t1), (k, means(rk), tk)))
    c.per_replicate = "; ".join(
        f"{t} pass@1 {r1[t]['pass_diff']:+.3f} {_one_draw(r1[t]['pass_diff'], r1[t]['pass_diff_pvalue'])}"
        f", pass@{k} {rk[t]['pass_diff']:+.3f} {_one_draw(rk[t]['pass_diff'], rk[t]['pass_diff_pvalue'])}"
        for t in r1 if t in rk)
    c.test = (f"both: {_kind(t1)} of the pass@1 rise and {_kind(tk)} of the pass@{k} rise "
              "(reproduced only if both hold, p = the larger); against: either significantly "
              "down (Bonferroni over the two); smaller: one-sided tests that each rise is below "
              "its δ (either, Bonferroni over the two)")
    c.plans = [Plan("pass@1 OPD − RLOO", t1.mean, seed1, t1.sd,
                    crossed=t1 if isinstance(t1, CrossedTest) else None, n=t1.n),
               Plan(f"pass@{k} OPD − RLOO", tk.mean, seedk, tk.sd,
                    crossed=tk if isinstance(tk, CrossedTest) else None, n=tk.n)]
    if c.delta is not None and delta_k is not None:
        below1 = _pair_test(inp, r1, x1, null=c.delta, alternative="less")
        belowk = _pair_test(inp, rk, xk, null=delta_k, alternative="less")
        if below1.pvalue is not None and belowk.pvalue is not None:
            c.smaller = min(1.0, 2 * min(below1.pvalue, belowk.pvalue))
            c.plans += [Plan(f"pass@{kk} smaller than δ", d - t.mean, d, t.sd, one_sided=True,
                             crossed=t if isinstance(t, CrossedTest) else None, n=t.n)
                        for kk, d, t in ((1, c.delta, t1), (k, delta_k, tk))]
    return c


def opd_anti_collapse(inp: Inputs, plan: AnalysisPlan) -> Claim:
    k = _top_k(inp, "opd_ac", "opd") or 16
    c = Claim(f"S4: anti-collapse OPD keeps pass@{k} above plain OPD", "pass@16 0.780 → 0.840",
              EFFECT, arms=("opd", "opd_ac"))
    c = _pair_effect(inp, "opd_ac", "opd", k, c, plan.claims.get("opd_anti_collapse"))
    opd, ac = inp.data.get("opd.json") or {}, inp.data.get("opd_ac.json") or {}
    if opd.get("groups") and ac.get("groups"):
        c.note = (f"both arms from the same start (`opd.init`), same budget: plain OPD "
                  f"{opd['groups']} prompt groups, anti-collapse {ac['groups']}"
                  + ("" if opd["groups"] == ac["groups"] else " (the budgets differ)"))
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
    _fill(c, two, dk)

    def mean(split, key):
        return float(np.mean([split[t][key] for t in tags]))

    c.run = "; ".join(f"dev pass@{kk} SFT {mean(sft, f'pass@{kk}'):.3f} → OPD "
                      f"{mean(opd, f'pass@{kk}'):.3f}" for kk in (1, k)) \
        + f"; pass@{k} diff {_ci(two)}"
    c.per_replicate = "; ".join(f"{t} pass@1 {a:+.3f}, pass@{k} {b:+.3f}"
                                for t, a, b in zip(tags, d1, dk, strict=True))
    c.test = (f"both: one-sided t-test across {below.n} replicates that OPD − SFT dev pass@{k} "
              f"is below 0, and one that dev pass@1 is above −{margin} (p = the larger)"
              + _floor_words(below) + f"; against: pass@{k} above SFT's or pass@1 below it by "
              f"more than {margin} (Bonferroni over the two)")
    c.plans = [Plan(f"pass@{k} below SFT's", -below.mean, None, below.sd, one_sided=True,
                    n=below.n),
               Plan("pass@1 non-inferior", noninf.mean + margin, None, noninf.sd,
                    one_sided=True, n=noninf.n)]
    return c


# --------------------------------------------------------------------------- premises

def relate(by: Mapping[str, Claim], alpha: float) -> None:
    """Each row that rests on another's outcome states it (decided rows; no test changes):
    a shaped row its premise's (does binary RLOO learn there?), the anti-collapse row its
    precondition's (did plain OPD collapse?), which it is tested without."""
    for name, (premise_name, point) in PREMISES.items():
        premise, main = by.get(premise_name), by.get(name)
        if premise is None or main is None or not premise.parts:
            continue
        learns = (premise.parts[0].test.pvalue or 1) < alpha and premise.effect > 0
        main.context = (f"premise (its own row): {premise.decision.value}, binary RLOO − "
                        f"{point.sft_label} pass@1 {premise.effect:+.3f}, so this row asks whether shaped adds "
                        "to a binary arm that " + ("learns" if learns else "is not shown to learn"))
    ac, col = by.get("opd_anti_collapse"), by.get("opd_collapses")
    if ac is not None and col is not None:
        found = (f"not testable: {col.why_not}" if col.why_not else col.decision.value
                 + ("" if col.effect is None else f", {col.unit} OPD − SFT {col.effect:+.3f}"))
        said = (f"precondition (plain OPD collapsed on the dev split, its own extension "
                f"row): {found}; this row is tested whatever it found")
        ac.note = "; ".join(x for x in (said, ac.note) if x)


# the helpers, last: `claims` imports this module for its list of claims (see the docstring)
from .claims import (
    EFFECT,
    EXTENSION,
    NO_CHANGE,
    Claim,
    CrossedTest,
    Decision,
    Part,
    Plan,
    _apply_plan,
    _ci,
    _conjunction,
    _fill,
    _floor_words,
    _kind,
    _model_words,
    _one_draw,
    _pair_crossed,
    _pair_effect,
    _pair_rows,
    _pair_test,
    _per_replicate,
    _tost,
    floored_t_test,
    pair_chain,
)
