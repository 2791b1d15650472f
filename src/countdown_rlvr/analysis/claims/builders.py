"""The shared builders: what several seeds' claims read from the details and how they fill a
`Claim` (the pair tests of compare.json's rows, the plan's numbers, the repair contrasts, the
per-problem records), above the engine and below the claims of each seed.

A pass@k difference of two policies on the test split, the zero-signal share and IPO's
average pass@k use the crossed problems x replicates model (`stats.crossed`: every replicate
shares the test problems); where the details lack what it needs (compare.json's mean squares,
or the per-problem records) the claim says so and falls back to the t-test across replicates
with its SD floored at the replicates' own sampling error (`stats.floored_t_test`).
"""

from __future__ import annotations

import numpy as np
from scipy.special import comb

from ...eval.metrics import pass_at_k
from ...stats import FlooredTest, binary_paired_var, floored_t_test, interval_var
from ...stats.crossed import CrossedTest, from_mean_squares
from ..chains import chain_of
from ..compare import fmt_ci
from ..plan import ClaimPlan
from ..results import Inputs, get
from .engine import ALPHA, NO_CROSSED, Claim, Part, Plan


def no_rise_plan(label: str, mean: float, seed_mean: float, res, margin: float) -> Plan:
    """A no-change test is decided by the one-sided test below the margin when the effect is
    below it, else by the test of the rise (two-sided): plan with the one that would."""
    return Plan(label, margin - mean if mean < margin else mean,
                margin - seed_mean if seed_mean < margin else seed_mean, res.sd,
                one_sided=mean < margin, seed_one_sided=seed_mean < margin,
                crossed=res if isinstance(res, CrossedTest) else None, n=res.n)


def ci_text(res) -> str:
    return fmt_ci(res.mean, res.ci_low, res.ci_high, "+.3f", " (one replicate)")


def floor_words(res: FlooredTest | CrossedTest) -> str:
    if isinstance(res, CrossedTest):
        if res.se is None or res.df is None:
            return ""
        comps = res.components()
        return (f", SE {res.se:.3g} from the shared problems (variance {comps[0]:.3g}), the "
                f"draws ({comps[1]:.3g}) and their interaction ({comps[2]:.3g}), df {res.df:.1f}"
                + (" (the draws' mean square floored at the interaction's)" if res.floored
                   else ""))
    if res.sd is None:
        return ""  # one replicate: no SD, no test
    if res.sd_within is None:
        return ", no within-replicate error to floor its SD"
    return (f", SD {res.sd:.3g} = max(observed {res.sd_observed or 0:.3g}, within-replicate "
            f"{res.sd_within:.3g})" + (" (the floor binds)" if res.floored else ""))


def fill_interval(c: Claim, res: FlooredTest | CrossedTest, effects) -> None:
    """The numbers the forest plot draws: the interval and each replicate's effect."""
    if res.ci_low is not None and res.ci_high is not None:
        c.ci = (float(res.ci_low), float(res.ci_high))
    c.replicate_effects = tuple(float(e) for e in effects)


def one_draw(effect: float, p: float | None, positive: bool = True) -> str:
    """A replicate's own verdict from its within-draw test: + (significant, the seed's way),
    − (significant, the other way), ns."""
    if p is None or p >= ALPHA:
        return "ns"
    return "+" if (effect > 0) == positive else "−"


def pair_chain(a: str, b: str) -> str:
    """The chain whose seeds decide a pair: the one that is not SFT's (every chain's policies
    start from SFT on the same seed, so the pair's replicates are that chain's)."""
    chains = [c for c in map(chain_of, (a, b)) if c is not None]
    return next((c for c in chains if c != "sft"), "sft")


def pair_rows(inp: Inputs, a: str, b: str, k: int) -> tuple[dict | None, str | None]:
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


def row_var(inp: Inputs, r: dict) -> float | None:
    """A compare row's within-replicate sampling variance of pass_diff, from its bootstrap
    interval over problems (compare.json keeps the interval, not the per-problem values)."""
    lo, hi = r.get("pass_diff_ci_low"), r.get("pass_diff_ci_high")
    if lo is None or hi is None:
        return None
    return interval_var(lo, hi, get(inp.compare, "settings", "alpha", default=0.05))


def within_vars(vs: list[float | None]) -> list[float] | None:
    return None if any(v is None for v in vs) else vs


def pair_crossed(inp: Inputs, a: str, b: str, k: int) -> dict | None:
    """compare.json's crossed problems x replicates summary of a vs b at k (test split)."""
    return get(inp.compare or {}, "pairs", f"{a}_vs_{b}", "test", f"k{k}", "crossed")


def pair_test(inp: Inputs, rows: dict, crossed: dict | None = None, **kw
               ) -> FlooredTest | CrossedTest:
    """The pooled test of a pair's per-replicate rows: the crossed problems x replicates test
    when compare.json has its summary (every replicate on the same test problems), else the
    floored t-test across replicates (a compare.json written before it)."""
    if crossed is not None and crossed.get("ms_problem") is not None:
        return from_mean_squares(crossed["mean"], crossed["ms_problem"],
                                 crossed["ms_replicate"], crossed["ms_residual"],
                                 crossed["n_problems"], crossed["n"], **kw)
    return floored_t_test([r["pass_diff"] for r in rows.values()],
                          within_vars([row_var(inp, r) for r in rows.values()]), **kw)


def test_kind(res: FlooredTest | CrossedTest) -> str:
    return "crossed test" if isinstance(res, CrossedTest) else "t-test"


def _test_words(res: FlooredTest | CrossedTest, k: int) -> str:
    if isinstance(res, CrossedTest):
        return (f"crossed test over {res.n_problems} problems x {res.n} replicates of the "
                f"paired pass@{k} difference" + floor_words(res))
    return (f"t-test across {res.n} replicates of the paired pass@{k} difference"
            + floor_words(res))


def per_replicate_text(rows: dict, positive: bool = True, nd: int = 3) -> str:
    return ", ".join(f"{t} {r['pass_diff']:+.{nd}f} {one_draw(r['pass_diff'], r['pass_diff_pvalue'], positive)}"
                     for t, r in rows.items())


def apply_plan(c: Claim, cp: ClaimPlan | None, what: str) -> float | None:
    """The plan's numbers on the claim: its delta and the seed's effect on this run's scale
    (the seed's relative change at the plan's development level, fixed before the run
    decided; never this run's own level)."""
    if cp is None:
        return None
    c.delta, c.seed_scaled, c.delta_abs = cp.delta, cp.scaled, cp.delta_abs
    if cp.relative is not None and cp.level is not None:
        c.scaling = (f"the seed's {what} {cp.seed_from:.3f} → {cp.seed_to:.3f} "
                     f"({cp.relative:+.0%}) at the development level {cp.level:.3f} "
                     f"({cp.level_source}): {cp.scaled:+.3f}; δ {cp.delta:.3f}")
    return c.seed_scaled


def smaller_route(c: Claim, res: FlooredTest | CrossedTest, below: FlooredTest | CrossedTest
                   ) -> Plan | None:
    """The smaller-than test's p on the claim, and its planning route: decided at a true
    effect of 0, which lies delta from its bound."""
    if c.delta is None or below.pvalue is None:
        return None
    c.smaller = below.pvalue
    return Plan("smaller than δ", c.delta - res.mean, c.delta, res.sd, one_sided=True,
                crossed=res if isinstance(res, CrossedTest) else None, n=res.n)


def pair_effect(inp: Inputs, a: str, b: str, k: int, c: Claim, cp: ClaimPlan | None
                 ) -> Claim:
    """c filled with the pooled test of a - b at k (effect rule, the seed's direction up),
    and, where the plan gives delta, the one-sided test that a - b is below it."""
    c.chain = pair_chain(a, b)
    c.unit = f"pass@{k} difference"
    rows, why = pair_rows(inp, a, b, k)
    apply_plan(c, cp, f"pass@{k}")
    if rows is None:
        c.why_not = why
        return c
    crossed = pair_crossed(inp, a, b, k)
    res = pair_test(inp, rows, crossed)
    c.model = crossed_fallback(crossed)
    means = [np.mean([r[f"pass_{x}"] for r in rows.values()]) for x in ("b", "a")]
    c.run = f"pass@{k} {means[0]:.3f} → {means[1]:.3f}, diff {ci_text(res)}"
    c.per_replicate = per_replicate_text(rows)
    c.test = _test_words(res, k)
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    fill_interval(c, res, [r["pass_diff"] for r in rows.values()])
    c.plans = [Plan(f"{a} − {b}", res.mean, c.seed_scaled, res.sd,
                    crossed=res if isinstance(res, CrossedTest) else None, n=res.n)]
    if c.delta is not None:
        below = pair_test(inp, rows, crossed, null=c.delta, alternative="less")
        if (route := smaller_route(c, res, below)) is not None:
            c.plans.append(route)
    if c.delta_abs is not None:
        c.smaller_abs = pair_test(inp, rows, crossed, null=c.delta_abs, alternative="less").pvalue
    return c


def crossed_fallback(crossed: dict | None) -> str:
    """Claim.model of a pair's test: NO_CROSSED where compare.json has no crossed summary."""
    return "" if crossed is not None and crossed.get("ms_problem") is not None else NO_CROSSED


def conjunction(c: Claim, parts: list[Part]) -> Claim:
    """A claim that holds only when every contrast does: reproduced at the largest p (an
    intersection-union test needs no correction), contradicted at the smallest p against the
    seed, Bonferroni-corrected over the contrasts (any one of them could be it)."""
    ps = [p.test.pvalue for p in parts]
    c.parts = parts
    if any(p is None for p in ps):
        return c
    c.right_way = all(p.right_way for p in parts)
    c.pvalue = max(ps) if c.right_way else 1.0
    wrong = [p.test.pvalue for p in parts if not p.right_way]
    c.against = min(1.0, len(parts) * min(wrong)) if wrong else 1.0
    return c


def per_problem(inp: Inputs, policy: str, split: str = "test"
                ) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """{replicate: (samples per problem, correct samples per problem)} of a policy, problems
    in problem-id order in every replicate, from the compare stage's per-problem records
    (reports/details/per_problem/<split>.csv); None when the details lack them (written
    before the records were)."""
    frame = inp.per_problem.get(split)
    if frame is None:
        return None
    rows = frame[frame["policy"] == policy]
    if rows.empty:
        return None
    out = {}
    for tag, g in rows.groupby("replicate", sort=False):
        g = g.sort_values("problem_id", kind="stable")
        out[tag] = (g["n"].to_numpy(dtype=float), g["correct"].to_numpy(dtype=float))
    return out


def pass_at_k_per_problem(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """Unbiased pass@k of each problem from n samples with c correct (eval.metrics.pass_at_k,
    the estimator every stage uses)."""
    return np.array([pass_at_k(int(ni), int(ci), k) for ni, ci in zip(n, c, strict=True)])


def zero_share_per_problem(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """The chance that k of a problem's samples drawn without replacement are all alike (all
    wrong or all right): each problem's unbiased zero-signal share at group size k."""
    return (comb(n - c, k) + comb(c, k)) / comb(n, k)


FEEDBACK = ("F1", "F2", "F3", "F4")


def _mc_var(cond: dict, key: str, n: int) -> float | None:
    """A repair condition's paired McNemar counts -> the within-replicate variance of its
    success-rate difference (matched attempts, one outcome each)."""
    mc = cond.get(key) or {}
    if mc.get("b") is None or mc.get("c") is None:
        return None
    return binary_paired_var(int(mc["b"]), int(mc["c"]), n)


def repair_runs(inp: Inputs, need: tuple[str, ...]) -> dict[str, dict]:
    runs = {t: m.get("conditions", {}) for t, m in inp.runs.get("repair.json", {}).items()}
    return {t: cs for t, cs in runs.items()
            if all(x in cs for x in need) and any(f in cs for f in FEEDBACK)}


def repair_contrast(runs: dict, a: str, b: str, key: str, mc_of: str, **kw):
    """Per-replicate success-rate differences a - b and their floored t-test (the floor:
    McNemar's counts of the matched attempts, `key` of condition `mc_of`)."""
    eff = [cs[a]["success_rate"] - cs[b]["success_rate"] for cs in runs.values()]
    wv = [_mc_var(cs[mc_of], key, int(cs[mc_of].get("n") or 0) or 1) for cs in runs.values()]
    return eff, floored_t_test(eff, within_vars(wv), **kw)


def repair_rate(runs: dict, f: str) -> float:
    return float(np.mean([cs[f]["success_rate"] for cs in runs.values()]))
