"""S1's claims: the shaped reward restores learning where binary-reward RLOO
flat-lines, at two operating points, each with its premise as its own row; and verified
teacher pairs beat scripted pairs for IPO.

    shaped_premise, shaped              binary RLOO flat vs SFT; shaped beats binary: from
                                        this run's SFT
    shaped_premise_early, shaped_early  the same pair at S0's operating point: from an early
                                        SFT checkpoint (`sft_early`, pass@1 ~0.09 like S0's)
    ipo_sources                         easyneg pairs beat scripted pairs, average pass@k

A claim whose policies this run did not evaluate (older details, params without the early
operating point) gets no decision and says why, like any claim without data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...stats import floored_t_test
from ...stats.crossed import CrossedTest, crossed_test
from .. import checks
from ..plan import Plan as AnalysisPlan
from ..results import Inputs, get
from .builders import (
    apply_plan,
    ci_text,
    crossed_fallback,
    fill_interval,
    floor_words,
    pair_chain,
    pair_crossed,
    pair_effect,
    pair_rows,
    pair_test,
    pass_at_k_per_problem,
    per_problem,
    per_replicate_text,
    row_var,
    smaller_route,
    test_kind,
    within_vars,
)
from .engine import (
    EFFECT,
    NO_CHANGE,
    NO_RECORDS,
    Claim,
    Decision,
    Part,
    Plan,
    beyond_margin,
    tost,
)


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


def _premise(inp: Inputs, plan: AnalysisPlan, point: Point, seed: str) -> Claim:
    margin = plan.no_change_margin
    c = Claim(f"S1 premise, {point.words}: binary-reward RLOO flat-lines: its pass@1 stays "
              f"within ±{margin} of its SFT's", seed, NO_CHANGE,
              chain=pair_chain(point.binary, point.sft), unit="pass@1 difference",
              no_check="whether binary RLOO learns is the claim itself",
              for_decision=Decision.EQUIVALENT)
    c.seed_scaled, c.delta = 0.0, margin  # the seed: no learning; no change = within margin
    rows, why = pair_rows(inp, point.binary, point.sft, 1)
    if rows is None:
        c.why_not = _not_evaluated(inp, point.sft, point.binary) or why
        return c
    crossed = pair_crossed(inp, point.binary, point.sft, 1)
    c.model = crossed_fallback(crossed)
    two = pair_test(inp, rows, crossed)
    c.run = f"binary RLOO − {point.sft_label}, pass@1 {ci_text(two)}"
    c.per_replicate = per_replicate_text(rows)
    c.test = (f"two one-sided {test_kind(two)}s that pass@1 moves by less than {margin} either "
              f"way" + floor_words(two) + f"; against: the one-sided {test_kind(two)} that it moves by "
              f"more than {margin} (on the side it moved)")
    c.equiv = tost(two, margin)
    c.pvalue, c.right_way, c.effect = c.equiv, True, two.mean
    c.against = beyond_margin(two, margin)  # contradicted only by |change| > margin
    fill_interval(c, two, [r["pass_diff"] for r in rows.values()])
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
    c = pair_effect(inp, point.shaped, point.binary, 1, c, plan.claims.get(name))
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


def ipo_sources(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = Claim("S1: verified teacher pairs (easyneg) beat scripted pairs for IPO, average "
              "pass@k over k", "avg pass@k easyneg 0.62 ≈ hardneg 0.61 > scripted 0.46", EFFECT,
              arms=("ipo_easyneg", "ipo_scripted"),
              chain=pair_chain("ipo_easyneg", "ipo_scripted"),
              unit="average pass@k difference")
    apply_plan(c, plan.claims.get("ipo_sources"), "average pass@k of scripted → easyneg")
    ks = sorted(int(k[1:]) for k in get(inp.compare, "pairs", "ipo_easyneg_vs_ipo_scripted",
                                         "test", default={}))
    per_k = {k: pair_rows(inp, "ipo_easyneg", "ipo_scripted", k)[0] for k in ks}
    if not ks or any(v is None for v in per_k.values()):
        c.why_not = pair_rows(inp, "ipo_easyneg", "ipo_scripted", 1)[1] or "no k"
        return c
    tags = list(per_k[ks[0]])
    effects = [float(np.mean([per_k[k][t]["pass_diff"] for k in ks])) for t in tags]
    a_rec, b_rec = per_problem(inp, "ipo_easyneg"), per_problem(inp, "ipo_scripted")
    crossed = (a_rec is not None and b_rec is not None and len(tags) > 1
               and all(t in a_rec and t in b_rec for t in tags))
    if crossed:
        def avg(rec, t):
            return np.mean([pass_at_k_per_problem(*rec[t], k) for k in ks], axis=0)

        d = np.column_stack([avg(a_rec, t) - avg(b_rec, t) for t in tags])
        res = crossed_test(d)
        below = crossed_test(d, null=c.delta, alternative="less") if c.delta else None
        below_abs = crossed_test(d, null=c.delta_abs, alternative="less") \
            if c.delta_abs else None
        effects = list(d.mean(axis=0))
        c.test = (f"crossed test over {res.n_problems} problems x {res.n} replicates of the "
                  "per-problem average pass@k difference" + floor_words(res))
    else:
        # the average over k of differences measured on the same samples: its sampling SD is
        # at most the average of the per-k SDs (equal when the k are perfectly correlated),
        # which this uses: the conservative end
        ses = [[row_var(inp, per_k[k][t]) for k in ks] for t in tags]
        wv = within_vars([None if None in s else float(np.mean(np.sqrt(s))) ** 2 for s in ses])
        res = floored_t_test(effects, wv)
        below = floored_t_test(effects, wv, null=c.delta, alternative="less") \
            if c.delta else None
        below_abs = floored_t_test(effects, wv, null=c.delta_abs, alternative="less") \
            if c.delta_abs else None
        c.model = NO_RECORDS
        c.test = (f"t-test across {res.n} replicates of the per-replicate average pass@k "
                  "difference" + floor_words(res))
    c.run = f"avg over k={ks} of pass@k easyneg − scripted {ci_text(res)}"
    c.per_replicate = ", ".join(f"{t} {e:+.3f}" for t, e in zip(tags, effects, strict=True))
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    fill_interval(c, res, effects)
    c.plans = [Plan("easyneg − scripted", res.mean, c.seed_scaled, res.sd,
                    crossed=res if isinstance(res, CrossedTest) else None, n=res.n)]
    if below is not None and (route := smaller_route(c, res, below)) is not None:
        c.plans.append(route)
    if below_abs is not None:
        c.smaller_abs = below_abs.pvalue
    pairs = {s: m.get("pairs") for s, m in ((s, inp.data.get(f"ipo/{s}.json") or {})
                                            for s in ("scripted", "easyneg", "hardneg", "base"))}
    c.note = "pairs per source: " + ", ".join(f"{s} {n}" for s, n in pairs.items() if n)
    return c
