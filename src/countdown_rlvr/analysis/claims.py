"""The claims, each tested with the training draw (the replicate) as the unit.

One function per claim returns a `Claim`: numbers (this run's pooled effect, its interval,
each replicate's effect, the ps of its decision tests) and, after `evaluate`, a `Decision`.
Words are rendered at the edge: the report (`report.py`) and the metrics (`headline.py`).
docs/statistics.md states the rules; plan.yaml (`plan.py`) fixes each claim's smallest
effect of interest (delta), its family and its planned power.

Decision tests, one entry per claim in its family's Holm correction (its p: the smallest of
its tests' times their number, Bonferroni within the claim):

    effect     for: the two-sided test of the effect (reproduced in the seed's direction,
               contradicted against it); smaller: the one-sided test that the effect is
               below delta in the seed's direction ("smaller than the seed's": gains above
               delta excluded, which is not "no effect"). A claim of several contrasts (S0's
               "R beats every F") is reproduced only when every contrast is (p: the largest)
               and contradicted when one is significant against the seed (Bonferroni).
    no change  the seed claims something does not move: for: an equivalence test (both
               sides within the plan's margin, "equivalent"; one side where the seed claims
               only no rise); against: the test of the change.
    above      a share above a threshold (S0: most prompts give no signal): one-sided tests
               above (for) and below (against).

A pass@k difference of two policies on the test split, the zero-signal share and IPO's
average pass@k use the crossed problems x replicates model (`stats.crossed`: every replicate
shares the test problems); where the details lack what it needs (compare.json's mean squares,
or the per-problem records) the claim says so and falls back to the t-test across replicates
with its SD floored at the replicates' own sampling error (`stats.floored_t_test`).

Families: the seeds' claims as the seeds state them are one Holm family; the project's
extensions (contrasts no seed tested: F vs F0, R vs F0, whether plain OPD collapsed, the
precondition of anti-collapse OPD) are another, so a seed's claim is never decided by a
question it did not ask. The RL claims (S1's shaped reward at two operating points, S4's OPD
rows) are in `claims_rl`.

Not tested: a claim whose arm failed its check (`checks`) gets no decision and stays out of
its family. For an inconclusive claim the report gives the replicates a test would need
(POWER at the family's Bonferroni level) over every decision route, and the command that adds
them to the claim's chain (`replicates.<chain>`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
from scipy.special import comb
from scipy.stats import binomtest
from scipy.stats import t as t_dist

from ..core.config import chain_path, seeds_key
from ..eval.metrics import pass_at_k
from ..stats import (
    MAX_REPLICATES,
    FlooredTest,
    binary_paired_var,
    floored_t_test,
    holm,
    interval_var,
    rate_vs_reference,
    replicates_needed,
    t_power,
)
from ..stats.crossed import (
    CrossedTest,
    crossed_power,
    crossed_replicates_needed,
    crossed_test,
    from_mean_squares,
)
from . import checks
from .chains import chain_of
from .compare import fmt_ci, fmt_p
from .plan import ClaimPlan, load_plan
from .plan import Plan as AnalysisPlan
from .results import Inputs, get

ALPHA = 0.05  # defaults; evaluate() takes them from the plan
POWER = 0.8
MARGIN = 0.05
SHARE = 0.5
EFFECT, NO_CHANGE, ABOVE = "effect", "no change", "above"
SEED, EXTENSION = "seed", "extension"
ADD_REPLICATES = "dvc exp run"  # then one -S 'replicates.<list>=[...]' per list that grows


class Decision(str, Enum):
    """What a claim's tests showed. The value is the metrics' `decision`; CODES its number."""
    REPRODUCED = "reproduced"
    REPRODUCED_SMALLER = "reproduced_smaller"  # the seed's direction, gains above delta excluded
    SMALLER = "smaller"  # gains above delta excluded, no effect shown either way
    EQUIVALENT = "equivalent"  # a no-change claim: the change is within +-delta
    CONTRADICTED = "contradicted"
    INCONCLUSIVE = "inconclusive"
    NOT_TESTED = "not_tested"  # an arm failed its check
    NOT_TESTABLE = "not_testable"  # no data for it


# one number per decision, so `dvc metrics diff` shows a decision change as a number too
CODES = {Decision.REPRODUCED: 1, Decision.REPRODUCED_SMALLER: 2, Decision.SMALLER: 3,
         Decision.EQUIVALENT: 4, Decision.INCONCLUSIVE: 0, Decision.CONTRADICTED: -1,
         Decision.NOT_TESTED: -2, Decision.NOT_TESTABLE: -3}


@dataclass(frozen=True)
class Part:
    """One contrast of a claim: its pooled test and how to read it."""
    label: str  # e.g. "R − F3"
    isolates: str  # what the contrast isolates
    test: FlooredTest | CrossedTest
    positive: bool = True  # the seed's direction: mean above the test's null
    says: tuple[str, str, str] = ("holds", "against the seed", "ns")  # significant the
    # seed's way, significant the other way, not significant

    @property
    def right_way(self) -> bool:
        return (self.test.mean > self.test.null) == self.positive

    def reading(self) -> str:
        p = self.test.pvalue
        state = ("one replicate" if p is None else self.says[2] if p >= ALPHA
                 else self.says[0] if self.right_way else self.says[1])
        return (f"{self.isolates}: {self.label} {self.test.mean:+.3f}"
                + ("" if p is None else f", p {fmt_p(p, 2)}") + f", {state}")


@dataclass(frozen=True)
class Plan:
    """One decision route's planning numbers: the distance from its null it would be decided
    at (observed, and at the plan's effect: the seed's scaled effect for the effect test, a
    true effect of 0 for the smaller-than test) and the SD it would be tested with."""
    label: str
    observed: float
    seed: float | None  # None: the seed's effect is not a number we can use
    sd: float | None
    one_sided: bool = False
    seed_one_sided: bool | None = None  # at the seed's effect decided by another test
    crossed: CrossedTest | None = None  # plan with its variance components
    n: int = 0  # replicates it was tested with


@dataclass
class Claim:
    claim: str  # what the seed says
    seed: str  # the seed's number, as the seed states it
    rule: str  # EFFECT | NO_CHANGE | ABOVE
    run: str = "–"  # this run: mean over replicates [interval]
    per_replicate: str = "–"  # each replicate's number and one-draw verdict
    test: str = "–"  # the pooled test, in words
    pvalue: float | None = None  # p of the test for the claim
    effect: float | None = None  # the number the p tests (seed's sign convention, a - b; for
    # ABOVE: this run's share minus the threshold)
    right_way: bool | None = None  # the pooled effect points the seed's way
    against: float | None = None  # p of the test that contradicts the claim, where it has one
    smaller: float | None = None  # p of the one-sided test that the effect is below delta
    equiv: float | None = None  # NO_CHANGE: the equivalence test's p (also `pvalue`)
    why_not: str | None = None  # not testable: why
    note: str = ""  # e.g. an underpowered arm
    arms: tuple[str, ...] = ()  # the arms whose check the claim rests on (checks.CHECKS)
    chain: str = "sft"  # the chain whose seeds decide it (config.CHAINS)
    no_check: str = ""  # why a claim has no arm to check
    parts: list[Part] = field(default_factory=list)  # its contrasts
    plans: list[Plan] = field(default_factory=list)  # replicates to decide, per route
    seed_unusable: str = ""  # why the seed's effect is not a number to plan with
    context: str = ""  # appended to the details (e.g. the premise's outcome)
    ci: tuple[float, float] | None = None  # the pooled test's interval of `effect`
    replicate_effects: tuple[float, ...] = ()  # each replicate's `effect`
    seed_scaled: float | None = None  # the seed's effect on this run's scale (the plan's)
    scaling: str = ""  # how it was scaled, in words
    delta: float | None = None  # the plan's smallest effect of interest / no-change margin
    family: str = SEED  # SEED | EXTENSION: each its own Holm family
    unit: str = "effect"  # what `effect` measures (the forest plot's panel)
    model: str = ""  # which model tested it, where the crossed one could not be used: why
    for_decision: Decision = Decision.REPRODUCED  # what its `for` test shows when it decides
    arm_checks: list[checks.ArmCheck] = field(default_factory=list, init=False)
    check_status: str = field(default=checks.PASS, init=False)
    check_why: str | None = field(default=None, init=False)
    adjusted: float | None = field(default=None, init=False)  # claim_p, Holm-adjusted
    significant: frozenset[str] = field(default=frozenset(), init=False)  # its tests that
    # decide at the claim's Holm step
    decision: Decision = field(default=Decision.INCONCLUSIVE, init=False)
    plan_alpha: float = field(default=ALPHA, init=False)  # the level replicates are planned at
    planned: ClaimPlan | None = field(default=None, init=False)  # plan.yaml's entry
    name: str = field(default="", init=False)  # reports/metrics/claims/<name>.json

    @property
    def tested(self) -> bool:
        """Gets a decision: testable and its arms moved (so it is in its Holm family)."""
        return not self.why_not and self.check_status == checks.PASS

    def tests(self) -> dict[str, float]:
        """Its decision tests' ps: `for` and, where it has them, `against` and `smaller`."""
        out = {} if self.pvalue is None else {"for": self.pvalue}
        for key, p in (("against", self.against), ("smaller", self.smaller)):
            if self.pvalue is not None and p is not None:
                out[key] = p
        return out

    def claim_p(self) -> float | None:
        """The claim's one p in Holm's family: the smallest of its tests' ps times their
        number (Bonferroni within the claim)."""
        ps = self.tests()
        return min(1.0, len(ps) * min(ps.values())) if ps else None

    def decide(self, alpha: float = ALPHA) -> Decision:
        """The decision from the Holm-adjusted p and the tests significant at its step."""
        if self.why_not:
            return Decision.NOT_TESTABLE
        if self.check_status != checks.PASS:
            return Decision.NOT_TESTED
        if self.adjusted is None or self.adjusted >= alpha:
            return Decision.INCONCLUSIVE
        sig = self.significant
        if "against" in sig or ("for" in sig and not self.right_way):
            return Decision.CONTRADICTED
        if "for" in sig:
            if self.for_decision == Decision.REPRODUCED and "smaller" in sig:
                return Decision.REPRODUCED_SMALLER
            return self.for_decision
        if "smaller" in sig:
            return Decision.SMALLER
        return Decision.INCONCLUSIVE

    def check_cell(self) -> str:
        if not self.arm_checks:
            return f"none: {self.no_check}" if self.no_check else "none"
        return "; ".join(c.cell() for c in self.arm_checks)

    @property
    def n(self) -> int:
        """Its replicates: those its tests pooled; 0 when its plans do not say."""
        return min((p.n for p in self.plans), default=0)

    def needed(self, replicates: Mapping[str, Sequence[int]],
               minutes: Mapping[str, float] | None = None) -> str:
        """For an inconclusive claim: the replicates its tests would need to decide it (every
        decision route, so the largest) with POWER at `plan_alpha`, at the observed effect
        and at the plan's, the command that adds them to its chain and their CPU time."""
        if self.decision != Decision.INCONCLUSIVE or not self.plans:
            return "–"
        if any(p.sd is None for p in self.plans):
            return "one replicate: no spread between replicates to plan from"
        obs = _most([_n(p.observed, p, p.one_sided, self.plan_alpha) for p in self.plans])
        text = f"{_n_text(obs)} at the observed effect"
        if self.seed_unusable or any(p.seed is None for p in self.plans):
            text += (f"; the seed's effect is not a number we can use here"
                     f" ({self.seed_unusable or 'not stated on this scale'})")
            at_seed = None
        else:
            at_seed = _most([_n(p.seed, p, p.one_sided if p.seed_one_sided is None
                                else p.seed_one_sided, self.plan_alpha) for p in self.plans])
            text += f", {_n_text(at_seed)} at the plan's (every route)"
        listed = len(replicates[self.chain])
        have = min(self.n or listed, listed)
        for n, at in ((obs, "observed"), (at_seed, "plan's")):
            if isinstance(n, int) and n > have:  # the observed effect's count first
                lists, added = _grown(replicates, self.chain, n - have)
                cost = "" if minutes is None else \
                    f" ≈ {_cost(replicates, self.chain, added, minutes):.0f} CPU-min on the " \
                    "fast 2-core kind"
                flags = " ".join(f"-S 'replicates.{key}=[{','.join(map(str, seeds))}]'"
                                 for key, seeds in lists.items())
                return text + (f"; to reach {n} (the {at} effect's, {len(added)} more "
                               f"replicates of the {self.chain} chain{cost}): "
                               f"`{ADD_REPLICATES} {flags}`")
        return text

    def run_power(self) -> float | None:
        """This run's estimate of its power over every decision route: with this run's
        replicates and the variance they estimated, the smallest power of its routes at the
        plan's effects (the effect test at the seed's scaled effect, the smaller-than test at
        a true effect of 0), at `plan_alpha`. None: no seed effect on this scale, or one
        replicate. Not observed power: no route is evaluated at the observed effect."""
        if self.seed_unusable or any(p.seed is None for p in self.plans):
            return None
        return self._power([(p.seed, p.one_sided if p.seed_one_sided is None
                             else p.seed_one_sided) for p in self.plans])

    def _power(self, effects: Sequence[tuple[float, bool]]) -> float | None:
        """The smallest power over the routes, each at (effect, one-sided) in plans' order."""
        if not self.plans or any(not p.sd for p in self.plans):
            return None
        powers = []
        for p, (effect, one_sided) in zip(self.plans, effects):
            effect = effect if one_sided else abs(effect)
            if effect <= 0:
                return 0.0  # the effect points away from the test that decides it
            alt = "greater" if one_sided else "two-sided"
            if p.crossed is not None and (comps := p.crossed.components()) is not None:
                powers.append(crossed_power(effect, comps, p.crossed.n_problems, p.crossed.n,
                                            self.plan_alpha, alt))
            else:
                powers.append(t_power(effect, p.sd, p.n, self.plan_alpha, alt))
        return min(powers)


def _n(effect: float, plan: Plan, one_sided: bool, alpha: float) -> int | None | str:
    """Replicates for one test (None: more than stats.MAX_REPLICATES, or, for a crossed test,
    beyond what the shared problems let replicates resolve; "away": the effect points away
    from the test's alternative or is 0)."""
    sd = plan.sd
    if sd is None or sd <= 0 or effect == 0 or (one_sided and effect < 0):
        return "away"
    alternative = "greater" if one_sided else "two-sided"
    if plan.crossed is not None and (comps := plan.crossed.components()) is not None:
        n = crossed_replicates_needed(abs(effect), comps, plan.crossed.n_problems, alpha,
                                      POWER, alternative, MAX_REPLICATES)
        if n is None and crossed_power(abs(effect), comps, plan.crossed.n_problems, 10**9,
                                       alpha, alternative) < POWER:
            return PROBLEMS  # even endless replicates leave the shared problems' variance
        return n
    return replicates_needed(abs(effect), sd, alpha, POWER, alternative)


def _no_rise_plan(label: str, mean: float, seed_mean: float, res, margin: float) -> Plan:
    """A no-change test is decided by the one-sided test below the margin when the effect is
    below it, else by the test of the rise (two-sided): plan with the one that would."""
    return Plan(label, margin - mean if mean < margin else mean,
                margin - seed_mean if seed_mean < margin else seed_mean, res.sd,
                one_sided=mean < margin, seed_one_sided=seed_mean < margin,
                crossed=res if isinstance(res, CrossedTest) else None, n=res.n)


PROBLEMS = "problems"  # no replicate count: the shared test problems bound the test


def _most(ns: list) -> int | None | str:
    """The claim needs every test decided: the largest count (None = too many wins)."""
    if any(n == PROBLEMS for n in ns):
        return PROBLEMS
    if any(n is None for n in ns):
        return None
    if any(n == "away" for n in ns):
        return "away"
    return max(ns)


def _n_text(n: int | None | str) -> str:
    if n == PROBLEMS:
        return ("no replicate count (the shared test problems' variance alone keeps the "
                "effect out of reach: more test problems would decide it)")
    if n == "away":
        return "no replicate count (the effect is 0 or points away from the test)"
    return f"more than {MAX_REPLICATES} replicates" if n is None else f"{n} replicates"


def _grown(replicates: Mapping[str, Sequence[int]], chain: str, more: int
           ) -> tuple[dict[str, list[int]], list[int]]:
    """({`replicates` key: its new list} of every list that grows, the seeds added): `more`
    seeds added to `chain`'s list, first those an upstream chain already trained (the nearest
    first: they cost least), then the next unused integers (adding seeds trains only the new
    replicates), each also added to the upstream lists that lack it, SFT's first. New
    integers start above every listed seed: one below them may be a pilot's (the defaults
    start at 1 because pilots tuned on 0)."""
    own = list(replicates[chain])
    pool = [s for c in chain_path(chain)[1:] for s in replicates[c]]
    added = [s for s in dict.fromkeys(pool) if s not in own][:more]
    fresh = 1 + max((x for seeds in replicates.values() for x in seeds), default=-1)
    added += range(fresh, fresh + more - len(added))  # above every list: none taken yet
    lists = {}
    for c in reversed(chain_path(chain)):
        new = [s for s in added if s not in replicates[c]]
        if new:
            lists[seeds_key(c)] = [*replicates[c], *new]
    return lists, added


def _cost(replicates: Mapping[str, Sequence[int]], chain: str, added: Sequence[int],
          minutes: Mapping[str, float]) -> float:
    """CPU minutes of the added seeds: each chain of its path that lacks a seed trains it."""
    return sum(minutes[c] for s in added for c in chain_path(chain) if s not in replicates[c])


def _ci(res) -> str:
    return fmt_ci(res.mean, res.ci_low, res.ci_high, "+.3f", " (one replicate)")


def _floor_words(res: FlooredTest | CrossedTest) -> str:
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


def _se_df(res: FlooredTest | CrossedTest) -> tuple[float | None, float | None]:
    if isinstance(res, CrossedTest):
        return res.se, res.df
    return (None, None) if not res.sd else (res.sd / math.sqrt(res.n), res.n - 1)


def _tost(res: FlooredTest | CrossedTest, delta: float | None) -> float | None:
    """Two one-sided tests that the true effect lies within (-delta, +delta), with the
    claim's own test's standard error and degrees of freedom: the larger of the two ps."""
    se, df = _se_df(res)
    if delta is None or not se or df is None:
        return None
    low = t_dist.sf((res.mean + delta) / se, df)  # H0: effect <= -delta
    high = t_dist.cdf((res.mean - delta) / se, df)  # H0: effect >= +delta
    return float(max(low, high))


def _fill(c: Claim, res: FlooredTest | CrossedTest, effects) -> None:
    """The numbers the forest plot draws: the interval and each replicate's effect."""
    if res.ci_low is not None and res.ci_high is not None:
        c.ci = (float(res.ci_low), float(res.ci_high))
    c.replicate_effects = tuple(float(e) for e in effects)


def _one_draw(effect: float, p: float | None, positive: bool = True) -> str:
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


def _row_var(inp: Inputs, r: dict) -> float | None:
    """A compare row's within-replicate sampling variance of pass_diff, from its bootstrap
    interval over problems (compare.json keeps the interval, not the per-problem values)."""
    lo, hi = r.get("pass_diff_ci_low"), r.get("pass_diff_ci_high")
    if lo is None or hi is None:
        return None
    return interval_var(lo, hi, get(inp.compare, "settings", "alpha", default=0.05))


def _within(vs: list[float | None]) -> list[float] | None:
    return None if any(v is None for v in vs) else vs


def _pair_crossed(inp: Inputs, a: str, b: str, k: int) -> dict | None:
    """compare.json's crossed problems x replicates summary of a vs b at k (test split)."""
    return get(inp.compare or {}, "pairs", f"{a}_vs_{b}", "test", f"k{k}", "crossed")


def _pair_test(inp: Inputs, rows: dict, crossed: dict | None = None, **kw
               ) -> FlooredTest | CrossedTest:
    """The pooled test of a pair's per-replicate rows: the crossed problems x replicates test
    when compare.json has its summary (every replicate on the same test problems), else the
    floored t-test across replicates (a compare.json written before it)."""
    if crossed is not None and crossed.get("ms_problem") is not None:
        return from_mean_squares(crossed["mean"], crossed["ms_problem"],
                                 crossed["ms_replicate"], crossed["ms_residual"],
                                 crossed["n_problems"], crossed["n"], **kw)
    return floored_t_test([r["pass_diff"] for r in rows.values()],
                          _within([_row_var(inp, r) for r in rows.values()]), **kw)


def _kind(res: FlooredTest | CrossedTest) -> str:
    return "crossed test" if isinstance(res, CrossedTest) else "t-test"


def _test_words(res: FlooredTest | CrossedTest, k: int) -> str:
    if isinstance(res, CrossedTest):
        return (f"crossed test over {res.n_problems} problems x {res.n} replicates of the "
                f"paired pass@{k} difference" + _floor_words(res))
    return (f"t-test across {res.n} replicates of the paired pass@{k} difference"
            + _floor_words(res))


def _per_replicate(rows: dict, positive: bool = True, nd: int = 3) -> str:
    return ", ".join(f"{t} {r['pass_diff']:+.{nd}f} {_one_draw(r['pass_diff'], r['pass_diff_pvalue'], positive)}"
                     for t, r in rows.items())


def _apply_plan(c: Claim, cp: ClaimPlan | None, what: str) -> float | None:
    """The plan's numbers on the claim: its delta and the seed's effect on this run's scale
    (the seed's relative change at the plan's development level, fixed before the run
    decided; never this run's own level)."""
    if cp is None:
        return None
    c.delta, c.seed_scaled = cp.delta, cp.scaled
    if cp.relative is not None and cp.level is not None:
        c.scaling = (f"the seed's {what} {cp.seed_from:.3f} → {cp.seed_to:.3f} "
                     f"({cp.relative:+.0%}) at the development level {cp.level:.3f} "
                     f"({cp.level_source}): {cp.scaled:+.3f}; δ {cp.delta:.3f}")
    return c.seed_scaled


def _smaller_route(c: Claim, res: FlooredTest | CrossedTest, below: FlooredTest | CrossedTest
                   ) -> Plan | None:
    """The smaller-than test's p on the claim, and its planning route: decided at a true
    effect of 0, which lies delta from its bound."""
    if c.delta is None or below.pvalue is None:
        return None
    c.smaller = below.pvalue
    return Plan("smaller than δ", c.delta - res.mean, c.delta, res.sd, one_sided=True,
                crossed=res if isinstance(res, CrossedTest) else None, n=res.n)


def _pair_effect(inp: Inputs, a: str, b: str, k: int, c: Claim, cp: ClaimPlan | None
                 ) -> Claim:
    """c filled with the pooled test of a - b at k (effect rule, the seed's direction up),
    and, where the plan gives delta, the one-sided test that a - b is below it."""
    c.chain = pair_chain(a, b)
    c.unit = f"pass@{k} difference"
    rows, why = _pair_rows(inp, a, b, k)
    _apply_plan(c, cp, f"pass@{k}")
    if rows is None:
        c.why_not = why
        return c
    crossed = _pair_crossed(inp, a, b, k)
    res = _pair_test(inp, rows, crossed)
    c.model = _model_words(crossed)
    means = [np.mean([r[f"pass_{x}"] for r in rows.values()]) for x in ("b", "a")]
    c.run = f"pass@{k} {means[0]:.3f} → {means[1]:.3f}, diff {_ci(res)}"
    c.per_replicate = _per_replicate(rows)
    c.test = _test_words(res, k)
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    _fill(c, res, [r["pass_diff"] for r in rows.values()])
    c.plans = [Plan(f"{a} − {b}", res.mean, c.seed_scaled, res.sd,
                    crossed=res if isinstance(res, CrossedTest) else None, n=res.n)]
    if c.delta is not None:
        below = _pair_test(inp, rows, crossed, null=c.delta, alternative="less")
        if (route := _smaller_route(c, res, below)) is not None:
            c.plans.append(route)
    return c


def _model_words(crossed: dict | None) -> str:
    return "" if crossed is not None and crossed.get("ms_problem") is not None else (
        "t-test across replicates: compare.json has no crossed summary for this pair")


def _conjunction(c: Claim, parts: list[Part]) -> Claim:
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


# --------------------------------------------------------------------------- per-problem data

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


NO_RECORDS = ("t-test across replicates: the crossed model needs per-problem records, "
              "which these details lack")


# --------------------------------------------------------------------------- the claims

def zero_informative(inp: Inputs, plan: AnalysisPlan) -> Claim:
    share = plan.share_threshold
    c = Claim("S0: most prompts give binary RLVR no signal: the share of zero-informative "
              f"prompts (all K samples alike) of the SFT policy is above {share:.0%}, K=8",
              "59.2% (500 prompts of its model)", ABOVE, chain="sft",
              no_check="the SFT policy is measured as it is, no arm is trained for it",
              unit=f"share − {share:.0%}")
    cp = plan.claims.get("zero_informative")
    c.seed_scaled = None if cp is None else cp.scaled
    c.scaling = f"the seed's share 59.2% minus the threshold {share:.0%}, not scaled"
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
        c.test = (f"one-sided crossed test over {res.n_problems} problems x {res.n} replicates "
                  f"that the share (each problem's chance that {k} samples are all alike) is "
                  f"above {share:.0%}" + _floor_words(res) + "; against: the one-sided test "
                  "below it")
    else:
        # each replicate's share is a proportion of its prompts: binomial sampling error
        wv = [s * (1 - s) / n for s, n in zip(rates, ns, strict=True)]
        res = floored_t_test(rates, wv, null=share, alternative="greater")
        low = floored_t_test(rates, wv, null=share, alternative="less")
        effects = rates
        c.model = NO_RECORDS
        c.test = (f"one-sided t-test across {res.n} replicates that the share is above "
                  f"{share:.0%}" + _floor_words(res) + "; against: the one-sided test below it")
    ref = rate_vs_reference(rates, ns[0], 0.592, 500)
    all_correct = np.mean([m.get("all_correct", 0.0) for m in runs.values()])
    passk = [m.get("pass@k") for m in runs.values()]
    c.run = (f"{res.mean:.1%} (K={k}, {ns[0]} prompts)"
             + (f"; all-correct {all_correct:.1%}, so the share is ~1 - pass@K "
                f"({1 - np.mean(passk):.1%}), a property of this model" if None not in passk
                else "")
             + f"; vs the seed's 59.2% (context, not the decision): {ref['diff']:+.3f} ± "
               f"{1.96 * ref['se']:.3f}, p {fmt_p(ref['pvalue'], 2)}")
    c.per_replicate = ", ".join(
        f"{t} {m['zero_informative']:.1%} "
        + _one_draw(m["zero_informative"] - share,
                    binomtest(round(m["zero_informative"] * int(m["n_problems"])),
                              int(m["n_problems"]), share).pvalue)
        for t, m in runs.items())
    c.pvalue, c.against, c.right_way = res.pvalue, low.pvalue, True
    c.effect = res.mean - share
    if res.ci_low is not None:
        c.ci = (res.ci_low - share, res.ci_high - share)
    c.replicate_effects = tuple(float(r) - share for r in effects)
    # decided by the test above or the one below, whichever side the share is on
    c.plans = [Plan(f"share − {share:.0%}", abs(res.mean - share), c.seed_scaled, res.sd, True,
                    crossed=res if isinstance(res, CrossedTest) else None, n=res.n)]
    return c


FEEDBACK = ("F1", "F2", "F3", "F4")


def _mc_var(cond: dict, key: str, n: int) -> float | None:
    """A repair condition's paired McNemar counts -> the within-replicate variance of its
    success-rate difference (matched attempts, one outcome each)."""
    mc = cond.get(key) or {}
    if mc.get("b") is None or mc.get("c") is None:
        return None
    return binary_paired_var(int(mc["b"]), int(mc["c"]), n)


def _repair_runs(inp: Inputs, need: tuple[str, ...]) -> dict[str, dict]:
    runs = {t: m.get("conditions", {}) for t, m in inp.runs.get("repair.json", {}).items()}
    return {t: cs for t, cs in runs.items()
            if all(x in cs for x in need) and any(f in cs for f in FEEDBACK)}


def _repair_contrast(runs: dict, a: str, b: str, key: str, mc_of: str, **kw):
    """Per-replicate success-rate differences a - b and their floored t-test (the floor:
    McNemar's counts of the matched attempts, `key` of condition `mc_of`)."""
    eff = [cs[a]["success_rate"] - cs[b]["success_rate"] for cs in runs.values()]
    wv = [_mc_var(cs[mc_of], key, int(cs[mc_of].get("n") or 0) or 1) for cs in runs.values()]
    return eff, floored_t_test(eff, _within(wv), **kw)


def _rate(runs: dict, f: str) -> float:
    return float(np.mean([cs[f]["success_rate"] for cs in runs.values()]))


def feedback(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = Claim("S0: a same-budget resample (R) repairs more failed attempts than every "
              "execution-feedback condition (F1-F4)",
              "R-resample 0.069 > best F (F3 localized) 0.048 (S0 Table 2; S0 ran no F0)",
              EFFECT, chain="repair", no_check="no arm is trained: repair samples the SFT policy",
              unit="success-rate difference")
    _apply_plan(c, plan.claims.get("feedback"), "repair success rate, best F → R")
    runs = _repair_runs(inp, ("R",))
    if not runs:
        c.why_not = "no repair details with R and F conditions"
        return c
    fs = [f for f in FEEDBACK if all(f in cs for cs in runs.values())]
    best = max(fs, key=lambda f: _rate(runs, f))
    tests = {f: _repair_contrast(runs, "R", f, "mcnemar_vs_resample", f) for f in fs}
    parts = [Part(f"R − {f}", f"R vs {f}", t) for f, (_, t) in tests.items()]
    c = _conjunction(c, parts)
    eff, t_rb = tests[best]
    c.effect = t_rb.mean  # R's margin over the closest F: the contrast that decides
    _fill(c, t_rb, eff)
    c.run = (f"R {_rate(runs, 'R'):.1%}; " + ", ".join(f"{f} {_rate(runs, f):.1%}" for f in fs)
             + f"; R − best F ({best}) {_ci(t_rb)}")
    c.per_replicate = ", ".join(
        f"{t} R−{best} {a:+.3f} {_one_draw(a, get(cs, best, 'mcnemar_vs_resample', 'pvalue'))}"
        for (t, cs), a in zip(runs.items(), eff, strict=True))
    c.test = (f"{len(fs)} t-tests across replicates of paired success-rate differences R − F "
              "(SD floored at McNemar's counts of the matched attempts); reproduced only if "
              "every one holds (p = the largest), contradicted if one is significant against "
              f"the seed (Bonferroni over the {len(fs)}); smaller: one-sided t-test that R − "
              f"{best} is below δ; per replicate: McNemar")
    c.plans = [Plan(p.label, p.test.mean, c.seed_scaled, p.test.sd, n=p.test.n) for p in parts]
    if c.delta is not None:
        _, below = _repair_contrast(runs, "R", best, "mcnemar_vs_resample", best,
                                    null=c.delta, alternative="less")
        if (route := _smaller_route(c, t_rb, below)) is not None:
            c.plans.append(route)
    return c


def every_f_beats_f0(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = Claim("Extension (no seed ran F0): every feedback condition F1-F4 repairs more than "
              "the repair prompt with the feedback slot empty (F0): what the feedback's "
              "content adds", "not in any seed", EFFECT, chain="repair", family=EXTENSION,
              no_check="no arm is trained: repair samples the SFT policy",
              seed_unusable="no seed tested it", unit="success-rate difference")
    runs = _repair_runs(inp, ("F0",))
    if not runs:
        c.why_not = "no repair details with F0 and F conditions"
        return c
    fs = [f for f in FEEDBACK if all(f in cs for cs in runs.values())]
    worst = min(fs, key=lambda f: _rate(runs, f))
    tests = {f: _repair_contrast(runs, f, "F0", "mcnemar_vs_F0", f) for f in fs}
    c = _conjunction(c, [Part(f"{f} − F0", f"{f} vs F0", t) for f, (_, t) in tests.items()])
    eff, t_w = tests[worst]
    c.effect = t_w.mean
    _fill(c, t_w, eff)
    c.run = (f"F0 {_rate(runs, 'F0'):.1%}; " + ", ".join(f"{f} {_rate(runs, f):.1%}"
                                                       for f in fs)
             + f"; worst F ({worst}) − F0 {_ci(t_w)}")
    c.per_replicate = ", ".join(
        f"{t} {worst}−F0 {a:+.3f} {_one_draw(a, get(cs, worst, 'mcnemar_vs_F0', 'pvalue'))}"
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
    runs = _repair_runs(inp, ("R", "F0"))
    if not runs:
        c.why_not = "no repair details with R and F0"
        return c
    eff, res = _repair_contrast(runs, "R", "F0", "mcnemar_vs_resample", "F0")
    c.run = f"R {_rate(runs, 'R'):.1%}, F0 {_rate(runs, 'F0'):.1%}; R − F0 {_ci(res)}"
    c.per_replicate = ", ".join(
        f"{t} {a:+.3f} {_one_draw(a, get(cs, 'F0', 'mcnemar_vs_resample', 'pvalue'))}"
        for (t, cs), a in zip(runs.items(), eff, strict=True))
    c.test = (f"t-test across {res.n} replicates of R − F0" + _floor_words(res))
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    _fill(c, res, eff)
    c.plans = [Plan("R − F0", res.mean, None, res.sd, n=res.n)]
    return c


def self_distill(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = Claim("S0: self-distillation on successful resamples (SD-R) raises pass@1 over SFT",
              "pass@1 0.086 → 0.168", EFFECT, arms=("distill_R",))
    return _pair_effect(inp, "distill_R", "sft", 1, c, plan.claims.get("self_distill"))


def ipo_sources(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = Claim("S1: verified teacher pairs (easyneg) beat scripted pairs for IPO, average "
              "pass@k over k", "avg pass@k easyneg 0.62 ≈ hardneg 0.61 > scripted 0.46", EFFECT,
              arms=("ipo_easyneg", "ipo_scripted"),
              chain=pair_chain("ipo_easyneg", "ipo_scripted"),
              unit="average pass@k difference")
    _apply_plan(c, plan.claims.get("ipo_sources"), "average pass@k of scripted → easyneg")
    ks = sorted(int(k[1:]) for k in get(inp.compare, "pairs", "ipo_easyneg_vs_ipo_scripted",
                                         "test", default={}))
    per_k = {k: _pair_rows(inp, "ipo_easyneg", "ipo_scripted", k)[0] for k in ks}
    if not ks or any(v is None for v in per_k.values()):
        c.why_not = _pair_rows(inp, "ipo_easyneg", "ipo_scripted", 1)[1] or "no k"
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
        effects = list(d.mean(axis=0))
        c.test = (f"crossed test over {res.n_problems} problems x {res.n} replicates of the "
                  "per-problem average pass@k difference" + _floor_words(res))
    else:
        # the average over k of differences measured on the same samples: its sampling SD is
        # at most the average of the per-k SDs (equal when the k are perfectly correlated),
        # which this uses: the conservative end
        ses = [[_row_var(inp, per_k[k][t]) for k in ks] for t in tags]
        wv = _within([None if None in s else float(np.mean(np.sqrt(s))) ** 2 for s in ses])
        res = floored_t_test(effects, wv)
        below = floored_t_test(effects, wv, null=c.delta, alternative="less") \
            if c.delta else None
        c.model = NO_RECORDS
        c.test = (f"t-test across {res.n} replicates of the per-replicate average pass@k "
                  "difference" + _floor_words(res))
    c.run = f"avg over k={ks} of pass@k easyneg − scripted {_ci(res)}"
    c.per_replicate = ", ".join(f"{t} {e:+.3f}" for t, e in zip(tags, effects, strict=True))
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    _fill(c, res, effects)
    c.plans = [Plan("easyneg − scripted", res.mean, c.seed_scaled, res.sd,
                    crossed=res if isinstance(res, CrossedTest) else None, n=res.n)]
    if below is not None and (route := _smaller_route(c, res, below)) is not None:
        c.plans.append(route)
    pairs = {s: m.get("pairs") for s, m in ((s, inp.data.get(f"ipo/{s}.json") or {})
                                            for s in ("scripted", "easyneg", "hardneg", "base"))}
    c.note = "pairs per source: " + ", ".join(f"{s} {n}" for s, n in pairs.items() if n)
    return c


def rloo_sharpens(inp: Inputs, plan: AnalysisPlan) -> Claim:
    margin = plan.no_change_margin
    c = Claim(f"S4: RLOO raises pass@1 but not pass@k (sharpening), 'not' = no rise beyond "
              f"+{margin}", "pass@1 0.354 → 0.598; pass@16 0.800 → 0.740", NO_CHANGE,
              arms=("rloo",), chain=pair_chain("rloo", "sft"))
    cp = plan.claims.get("rloo_sharpens")
    k = max((int(k[1:]) for k in get(inp.compare, "pairs", "rloo_vs_sft", "test",
                                     default={})), default=None)
    c.unit = f"pass@{k or 16} difference"
    r1, why1 = _pair_rows(inp, "rloo", "sft", 1)
    rk, whyk = _pair_rows(inp, "rloo", "sft", k) if k else (None, "no k")
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
    x1, xk = _pair_crossed(inp, "rloo", "sft", 1), _pair_crossed(inp, "rloo", "sft", k)
    c.model = _model_words(x1) or _model_words(xk)
    up, top = _pair_test(inp, r1, x1), _pair_test(inp, rk, xk)
    no_rise = _pair_test(inp, rk, xk, null=margin, alternative="less")
    c.run = f"pass@1 diff {_ci(up)}; pass@{k} diff {_ci(top)}"
    c.effect = top.mean  # the claim is about pass@k
    c.per_replicate = "; ".join(
        f"{t} pass@1 {r1[t]['pass_diff']:+.3f} {_one_draw(r1[t]['pass_diff'], r1[t]['pass_diff_pvalue'])}"
        f", pass@{k} {rk[t]['pass_diff']:+.3f}" for t in r1 if t in rk)
    c.test = (f"both: {_kind(up)} of the pass@1 rise, and one-sided {_kind(top)} that "
              f"pass@{k} rises by less than {margin} (p = the larger); against: pass@1 "
              "significantly down or pass@k significantly up (Bonferroni over the two)")
    c.parts = [Part("pass@1 diff", "pass@1 rises", up),
               Part(f"pass@{k} diff", f"pass@{k} rises by less than {margin} (one-sided)",
                    no_rise, positive=False)]
    if up.pvalue is not None and no_rise.pvalue is not None:
        c.pvalue = max(up.pvalue if up.mean > 0 else 1.0, no_rise.pvalue)
        c.right_way = up.mean > 0
        c.against = min(1.0, 2 * min(up.pvalue if up.mean < 0 else 1.0,
                                     top.pvalue if top.pvalue is not None and top.mean > 0
                                     else 1.0))
    _fill(c, top, [r["pass_diff"] for r in rk.values()])
    c.plans = [Plan("pass@1 rise", up.mean, seed1, up.sd,
                    crossed=up if isinstance(up, CrossedTest) else None, n=up.n),
               _no_rise_plan(f"pass@{k} rise", top.mean, 0.0 if seedk is None else seedk, top,
                             margin)]
    return c


def interventions(inp: Inputs, plan: AnalysisPlan) -> Claim:
    c = Claim("S3: interventions then RL beat plain RL on previously unsolved problems",
              "InT + RL > RL on D_hard (S3 Table 2, Fig. 8)", EFFECT, arms=("int",), chain="int",
              seed_unusable="S3 gives no effect on this scale")
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

    res = floored_t_test(list(effects.values()), _within([var(m) for m in runs.values()]))
    c.run = (f"held-out pass@{k} int − plain RL {_ci(res)}"
             f" ({get(next(iter(runs.values())), 'unsolved_heldout')} problems per replicate)")
    c.per_replicate = ", ".join(
        f"{t} {e:+.3f} {_one_draw(e, get(runs[t], 'heldout_mcnemar', 'int_vs_plain_rl', 'pvalue'))}"
        for t, e in effects.items())
    c.test = (f"t-test across {res.n} replicates of the held-out pass@{k} difference"
              + _floor_words(res) + "; per replicate: McNemar")
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    _fill(c, res, list(effects.values()))
    c.plans = [Plan("int − plain RL", res.mean, None, res.sd, n=res.n)]
    return c


# the RL claims (S1's shaped reward at two operating points, S4's OPD rows): claims_rl, which
# reads the helpers above
from .claims_rl import (
    opd_anti_collapse,
    opd_beats_rloo,
    opd_collapses,
    relate,
    shaped,
    shaped_early,
    shaped_premise,
    shaped_premise_early,
)

# each claim in a few words: the report's list and table, the forest plot
SHORT = {"zero_informative": "S0: zero-signal share > 50%",
         "feedback": "S0: resample R beats every feedback F",
         "self_distill": "S0: SD-R > SFT, pass@1",
         "shaped_premise": "S1 premise, this run's SFT: binary flat, pass@1",
         "shaped": "S1, this run's SFT: shaped > binary, pass@1",
         "shaped_premise_early": "S1 premise, early SFT (S0's): binary flat, pass@1",
         "shaped_early": "S1, early SFT (S0's): shaped > binary, pass@1",
         "ipo_sources": "S1: IPO easyneg > scripted, avg pass@k",
         "rloo_sharpens": "S4: RLOO raises pass@1, not pass@k",
         "opd_beats_rloo": "S4: OPD > RLOO, pass@1 and pass@k",
         "opd_anti_collapse": "S4: anti-collapse OPD > OPD, pass@k",
         "interventions": "S3: InT + RL > RL, held-out pass@K",
         "every_f_beats_f0": "ext: every F beats F0",
         "resample_beats_f0": "ext: R beats F0",
         "opd_collapses": "ext: OPD collapsed on dev (pass@k < SFT's, pass@1 not)"}


CLAIMS: tuple[Callable[[Inputs, AnalysisPlan], Claim], ...] = (
    zero_informative, feedback, self_distill, shaped_premise, shaped, shaped_premise_early,
    shaped_early, ipo_sources, rloo_sharpens, opd_beats_rloo, opd_anti_collapse, interventions,
    every_f_beats_f0, resample_beats_f0, opd_collapses)


def _check_arms(c: Claim, inp: Inputs) -> None:
    """Each arm checked in every replicate of its own chain (its seeds, not the union's)."""
    def tags(arm: str) -> list[str]:
        runs = inp.runs.get(checks.CHECKS[arm].file, {})
        return inp.tags_of(chain_of(arm) or "sft") or sorted(runs)

    c.arm_checks = [checks.check(arm, inp.runs.get(checks.CHECKS[arm].file, {}), tags(arm))
                    for arm in c.arms]
    c.check_status, c.check_why = checks.summarize(c.arm_checks)


def family(claims: Sequence[Claim], name: str | None = None) -> list[tuple[Claim, float]]:
    """Holm's family (`name`: SEED or EXTENSION; None: both): each claim that can be decided,
    once, with its `claim_p`."""
    return [(c, c.claim_p()) for c in claims if c.tested and c.claim_p() is not None
            and (name is None or c.family == name)]


def _holm_family(members: list[tuple[Claim, float]], alpha: float) -> None:
    """Holm within one family: each claim's adjusted p, and the tests that decide at its
    step (a test's p times the claim's test count within the step's level alpha/(m - i))."""
    m = len(members)
    adjusted = holm([p for _, p in members])
    order = sorted(range(m), key=lambda i: members[i][1])
    for rank, i in enumerate(order):
        c, p_adj = members[i][0], adjusted[i]
        c.adjusted = p_adj
        level = alpha / (m - rank)
        ps = c.tests()
        c.significant = frozenset(key for key, p in ps.items()
                                  if p_adj is not None and p_adj < alpha
                                  and p * len(ps) <= level)


def evaluate(inp: Inputs, plan: AnalysisPlan | None = None) -> list[Claim]:
    """Every claim with the plan's numbers (plan.yaml when None), its arms checked, its ps
    Holm-adjusted within its family (claims not tested left out) and its decision."""
    plan = plan or load_plan()
    claims = []
    for fn in CLAIMS:
        c = fn(inp, plan)
        c.name = fn.__name__
        c.planned = plan.claims.get(c.name)
        _check_arms(c, inp)
        claims.append(c)
    for name in (SEED, EXTENSION):
        fam = family(claims, name)
        for c in claims:  # Holm's first step, the strictest: Bonferroni over the family, and
            # within the claim over its tests
            if c.family == name:
                c.plan_alpha = plan.alpha / max(1, len(fam)) / max(1, len(c.tests()))
        _holm_family(fam, plan.alpha)
    for c in claims:
        c.decision = c.decide(plan.alpha)
    relate({c.name: c for c in claims}, plan.alpha)
    return claims
