"""The decision engine, the claims package's bottom: a `Claim`'s numbers, its decision tests,
Holm's correction within a family, the decision, and the replicates an inconclusive claim
would need. Nothing here knows a seed or reads the details.

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

Families: the seeds' claims as the seeds state them are one Holm family; the project's
extensions (contrasts no seed tested: F vs F0, R vs F0, whether plain OPD collapsed, the
precondition of anti-collapse OPD) are another, so a seed's claim is never decided by a
question it did not ask.

Not tested: a claim whose arm failed its check (`checks`) gets no decision and stays out of
its family. For an inconclusive claim the report gives the replicates a test would need
(POWER at the family's Bonferroni level) over every decision route, and the command that adds
them to the claim's chain (`replicates.<chain>`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from scipy.stats import t as t_dist

from ...core.config import chain_path, seeds_key
from ...stats import (
    MAX_REPLICATES,
    FlooredTest,
    holm,
    replicates_needed,
    t_power,
)
from ...stats.crossed import CrossedTest, crossed_power, crossed_replicates_needed
from .. import checks
from ..plan import ClaimPlan

ALPHA = 0.05  # defaults; evaluate() takes them from the plan
POWER = 0.8
MARGIN = 0.05
SHARE = 0.5
EFFECT, NO_CHANGE, ABOVE = "effect", "no change", "above"
SEED, EXTENSION, EXPLORATORY = "seed", "extension", "exploratory"
FAMILIES = (SEED, EXTENSION, EXPLORATORY)  # each its own Holm family; plan.yaml declares a row
# exploratory (planned below POWER) before the run: reported, deciding nothing
# Claim.model: why the t-test across replicates stood in for the crossed problems x replicates
# model ("": it did not); the report says it in words
NO_RECORDS = "no_records"  # the details lack the per-problem records the crossed model needs
NO_CROSSED = "no_crossed"  # compare.json has no crossed summary for the pair
ADD_REPLICATES = "dvc exp run"  # then one -S 'replicates.<list>=[...]' per list that grows


class Decision(str, Enum):
    """What a claim's tests showed. The value is the metrics' `decision`; CODES its number."""
    REPRODUCED = "reproduced"
    REPRODUCED_SMALLER = "reproduced_smaller"  # the seed's direction, gains above delta excluded
    SMALLER = "smaller"  # gains above delta excluded, no effect shown either way
    # the same, where only the relative reading holds: gains above the plan's delta excluded,
    # gains above the seed's absolute change's (delta_abs) not
    REPRODUCED_SMALLER_RELATIVE = "reproduced_smaller_relative"
    SMALLER_RELATIVE = "smaller_relative"
    EQUIVALENT = "equivalent"  # a no-change claim: the change is within +-delta
    CONTRADICTED = "contradicted"
    INCONCLUSIVE = "inconclusive"
    NOT_TESTED = "not_tested"  # an arm failed its check
    NOT_TESTED_PREMISE = "not_tested_premise"  # the plan's premise of it failed (the teacher)
    NOT_TESTABLE = "not_testable"  # no data for it


# one number per decision, so `dvc metrics diff` shows a decision change as a number too
CODES = {Decision.REPRODUCED: 1, Decision.REPRODUCED_SMALLER: 2, Decision.SMALLER: 3,
         Decision.EQUIVALENT: 4, Decision.INCONCLUSIVE: 0, Decision.CONTRADICTED: -1,
         Decision.NOT_TESTED: -2, Decision.NOT_TESTABLE: -3,
         Decision.REPRODUCED_SMALLER_RELATIVE: 5, Decision.SMALLER_RELATIVE: 6,
         Decision.NOT_TESTED_PREMISE: -4}


@dataclass(frozen=True)
class Part:
    """One contrast of a claim: its pooled test and how to read it (the report's words:
    report.contrast_words)."""
    label: str  # e.g. "R − F3"
    isolates: str  # what the contrast isolates
    test: FlooredTest | CrossedTest
    positive: bool = True  # the seed's direction: mean above the test's null
    says: tuple[str, str, str] = ("holds", "against the seed", "ns")  # significant the
    # seed's way, significant the other way, not significant

    @property
    def right_way(self) -> bool:
        return (self.test.mean > self.test.null) == self.positive


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


OBSERVED, PLANNED = "observed", "planned"  # Needed.reach_at: the effect a count is at
AWAY = "away"  # no replicate count: the effect is 0 or points away from the test
PROBLEMS = "problems"  # no replicate count: the shared test problems bound the test


@dataclass(frozen=True)
class Needed:
    """What an inconclusive claim's tests would need to decide it (Claim.to_decide): the
    replicates at the observed effect and at the plan's (each a count; None: more than
    stats.MAX_REPLICATES; AWAY or PROBLEMS: no count), and, for the first count above the
    replicates it has (`reach`, at OBSERVED or PLANNED), the `replicates` lists that grow to
    it, the seeds added and their CPU minutes (None: no minutes given)."""
    observed: int | str | None = None
    at_seed: int | str | None = None  # None also where the seed's effect is not usable
    seed_usable: bool = True  # the seed's effect is a number to plan with
    one_replicate: bool = False  # no spread between replicates to plan from
    reach: int | None = None
    reach_at: str = ""
    lists: Mapping[str, list[int]] = field(default_factory=dict)
    added: tuple[int, ...] = ()
    minutes: float | None = None


@dataclass
class Claim:
    """One claim: numbers (effect, interval, replicate effects, its tests' ps, the plan's
    numbers) and codes (rule, family, model, decision, check status). The words are rendered
    at the edge, report.py: the decision (decision_words), the fallback from the crossed
    model (model_words), a premise row's outcome (premise_words, note_words), the contrasts
    (contrast_words), the arm checks (check_words), the replicates to decide (needed_words,
    from `to_decide`'s numbers).

    Text it still carries, and why:
    - authored per claim, static: `claim` (the seed's claim, with the plan's threshold or
      margin and the k filled in), `seed` (the seed's number as the seed states it),
      `no_check` (why no arm is checked), `seed_unusable` (why the seed's effect is no number
      to plan with; also read as a flag by `to_decide` and `run_power`), `unit` (the effect's
      label, the forest plot's panel);
    - reasons read from the details, not numbers it holds: `why_not` (also the not-testable
      flag `decide` reads), `premise_failed` (how the teacher misses the plan's premise, from
      compare.json; also a flag), `note` (diagnostics from the training details);
    - words from numbers it does not hold, until those numbers are fields: `run` (the arms'
      levels, the k, the prompts), `per_replicate` (the replicates' tags and one-draw ps),
      `test` (the test's kind, problems, variance components or SD floor), `scaling` (the
      plan's numbers, on `planned`, worded per claim: the share's threshold, S4's second
      quantity and its k, the no-rise margin).
    """
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
    premise_failed: str | None = None  # the plan's premise of it (plan.TeacherPremise) failed:
    # how; then no decision, and out of its Holm family
    note: str = ""  # e.g. an underpowered arm
    arms: tuple[str, ...] = ()  # the arms whose check the claim rests on (checks.CHECKS)
    chain: str = "sft"  # the chain whose seeds decide it (config.CHAINS)
    no_check: str = ""  # why a claim has no arm to check
    parts: list[Part] = field(default_factory=list)  # its contrasts
    plans: list[Plan] = field(default_factory=list)  # replicates to decide, per route
    seed_unusable: str = ""  # why the seed's effect is not a number to plan with
    ci: tuple[float, float] | None = None  # the pooled test's interval of `effect`
    replicate_effects: tuple[float, ...] = ()  # each replicate's `effect`
    seed_scaled: float | None = None  # the seed's effect on this run's scale (the plan's)
    scaling: str = ""  # how it was scaled, in words
    delta: float | None = None  # the plan's smallest effect of interest / no-change margin
    delta_abs: float | None = None  # the absolute reading's bound: delta_fraction x the seed's
    # own change (to - from), not scaled to this model's level
    smaller_abs: float | None = None  # p of the one-sided test that the effect is below it
    family: str = SEED  # SEED | EXTENSION: each its own Holm family
    unit: str = "effect"  # what `effect` measures (the forest plot's panel)
    model: str = ""  # NO_RECORDS | NO_CROSSED: why the crossed model could not test it
    for_decision: Decision = Decision.REPRODUCED  # what its `for` test shows when it decides
    arm_checks: list[checks.ArmCheck] = field(default_factory=list, init=False)
    check_status: str = field(default=checks.PASS, init=False)
    check_why: str | None = field(default=None, init=False)
    adjusted: float | None = field(default=None, init=False)  # claim_p, Holm-adjusted
    significant: frozenset[str] = field(default=frozenset(), init=False)  # its tests that
    # decide at the claim's Holm step
    absolute: bool | None = field(default=None, init=False)  # the absolute reading holds at
    # the claim's Holm step (as a deciding test would); None: no absolute reading
    decision: Decision = field(default=Decision.INCONCLUSIVE, init=False)
    plan_alpha: float = field(default=ALPHA, init=False)  # the level replicates are planned at
    planned: ClaimPlan | None = field(default=None, init=False)  # plan.yaml's entry
    name: str = field(default="", init=False)  # reports/metrics/claims/<name>.json

    @property
    def tested(self) -> bool:
        """Gets a decision: testable and its arms moved (so it is in its Holm family)."""
        return not self.why_not and self.check_status == checks.PASS and not self.premise_failed

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
        if self.premise_failed:
            return Decision.NOT_TESTED_PREMISE
        if self.adjusted is None or self.adjusted >= alpha:
            return Decision.INCONCLUSIVE
        sig = self.significant
        if "against" in sig or ("for" in sig and not self.right_way):
            return Decision.CONTRADICTED
        # "smaller than the seed's" only where both readings hold: the relative one (the
        # plan's delta, the deciding test) and the absolute one (delta_abs, a reading beside
        # it that can only qualify the decision, never make one)
        relative_only = self.absolute is False
        if "for" in sig:
            if self.for_decision == Decision.REPRODUCED and "smaller" in sig:
                return Decision.REPRODUCED_SMALLER_RELATIVE if relative_only \
                    else Decision.REPRODUCED_SMALLER
            return self.for_decision
        if "smaller" in sig:
            return Decision.SMALLER_RELATIVE if relative_only else Decision.SMALLER
        return Decision.INCONCLUSIVE

    @property
    def n(self) -> int:
        """Its replicates: those its tests pooled; 0 when its plans do not say."""
        return min((p.n for p in self.plans), default=0)

    def to_decide(self, replicates: Mapping[str, Sequence[int]],
                  minutes: Mapping[str, float] | None = None, shared_sft: bool = False
                  ) -> Needed | None:
        """For an inconclusive claim (else None): the replicates its tests would need to
        decide it (every decision route, so the largest) with POWER at `plan_alpha`, at the
        observed effect and at the plan's, and for the first above those it has, the lists
        that add them to its chain and their CPU minutes (shared_sft: every replicate starts
        from one SFT, which they do not add to). The report words it (report.needed_words)."""
        if self.decision != Decision.INCONCLUSIVE or not self.plans:
            return None
        if any(p.sd is None for p in self.plans):
            return Needed(one_replicate=True)
        obs = _most([_n(p.observed, p, p.one_sided, self.plan_alpha) for p in self.plans])
        usable = not (self.seed_unusable or any(p.seed is None for p in self.plans))
        at_seed = None if not usable else \
            _most([_n(p.seed, p, p.one_sided if p.seed_one_sided is None
                       else p.seed_one_sided, self.plan_alpha) for p in self.plans])
        listed = len(replicates[self.chain])
        have = min(self.n or listed, listed)
        for n, at in ((obs, OBSERVED), (at_seed, PLANNED)):
            if isinstance(n, int) and n > have:  # the observed effect's count first
                lists, added = grown(replicates, self.chain, n - have, shared_sft)
                return Needed(obs, at_seed, usable, reach=n, reach_at=at, lists=lists,
                              added=tuple(added), minutes=None if minutes is None else
                              added_cost(replicates, self.chain, added, minutes, shared_sft))
        return Needed(obs, at_seed, usable)

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

    def mde(self) -> float | None:
        """The minimum detectable effect: the distance from its null at which the claim's
        first route (its `for` test) has POWER, with this run's variance at the plan's
        replicates and `plan_alpha`. None: no plan, no spread, or one replicate planned."""
        if self.planned is None or not self.plans or self.planned.replicates < 2:
            return None
        return detectable(self.plans[0], self.planned.replicates, self.plan_alpha)

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


def route_power(plan: Plan, effect: float, n: int, alpha: float) -> float:
    """One route's power at a true distance `effect` from its null with n replicates: the
    crossed model where the route has its components, else the t-test with its SD."""
    alt = "greater" if plan.one_sided else "two-sided"
    if plan.crossed is not None and (comps := plan.crossed.components()) is not None:
        return crossed_power(effect, comps, plan.crossed.n_problems, n, alpha, alt)
    return t_power(effect, plan.sd, n, alpha, alt)


def detectable(plan: Plan, n: int, alpha: float, power: float = POWER) -> float | None:
    """The smallest distance from the route's null that its test detects with `power` at n
    replicates (bisection: power rises with the distance). None: no spread to plan from."""
    if not plan.sd or n < 2:
        return None
    lo, hi = 0.0, plan.sd
    while route_power(plan, hi, n, alpha) < power:
        lo, hi = hi, 2 * hi
        if hi > 1e6 * plan.sd:
            return None
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if route_power(plan, mid, n, alpha) < power else (lo, mid)
    return hi


def _n(effect: float, plan: Plan, one_sided: bool, alpha: float) -> int | None | str:
    """Replicates for one test (None: more than stats.MAX_REPLICATES, or, for a crossed test,
    beyond what the shared problems let replicates resolve; AWAY: the effect points away
    from the test's alternative or is 0)."""
    sd = plan.sd
    if sd is None or sd <= 0 or effect == 0 or (one_sided and effect < 0):
        return AWAY
    alternative = "greater" if one_sided else "two-sided"
    if plan.crossed is not None and (comps := plan.crossed.components()) is not None:
        n = crossed_replicates_needed(abs(effect), comps, plan.crossed.n_problems, alpha,
                                      POWER, alternative, MAX_REPLICATES)
        if n is None and crossed_power(abs(effect), comps, plan.crossed.n_problems, 10**9,
                                       alpha, alternative) < POWER:
            return PROBLEMS  # even endless replicates leave the shared problems' variance
        return n
    return replicates_needed(abs(effect), sd, alpha, POWER, alternative)


def _most(ns: list) -> int | None | str:
    """The claim needs every test decided: the largest count (None = too many wins)."""
    if any(n == PROBLEMS for n in ns):
        return PROBLEMS
    if any(n is None for n in ns):
        return None
    if any(n == AWAY for n in ns):
        return AWAY
    return max(ns)


def grown(replicates: Mapping[str, Sequence[int]], chain: str, more: int,
          shared_sft: bool = False) -> tuple[dict[str, list[int]], list[int]]:
    """({`replicates` key: its new list} of every list that grows, the seeds added): `more`
    seeds added to `chain`'s list, first those an upstream chain already trained (the nearest
    first: they cost least), then the next unused integers (adding seeds trains only the new
    replicates), each also added to the upstream lists that lack it, SFT's first. New
    integers start above every listed seed: one below them may be a pilot's (the defaults
    start at 1 because pilots tuned on 0). shared_sft: every replicate starts from one SFT
    (`replicates.shared_sft`), whose list no added seed joins."""
    path = chain_path(chain, shared_sft)
    own = list(replicates[chain])
    pool = [s for c in path[1:] for s in replicates[c]]
    added = [s for s in dict.fromkeys(pool) if s not in own][:more]
    fresh = 1 + max((x for seeds in replicates.values() for x in seeds), default=-1)
    added += range(fresh, fresh + more - len(added))  # above every list: none taken yet
    lists = {}
    for c in reversed(path):
        new = [s for s in added if s not in replicates[c]]
        if new:
            lists[seeds_key(c)] = [*replicates[c], *new]
    return lists, added


def added_cost(replicates: Mapping[str, Sequence[int]], chain: str, added: Sequence[int],
               minutes: Mapping[str, float], shared_sft: bool = False) -> float:
    """CPU minutes of the added seeds: each chain of its path that lacks a seed trains it."""
    return sum(minutes[c] for s in added for c in chain_path(chain, shared_sft)
               if s not in replicates[c])


def _se_df(res: FlooredTest | CrossedTest) -> tuple[float | None, float | None]:
    if isinstance(res, CrossedTest):
        return res.se, res.df
    return (None, None) if not res.sd else (res.sd / math.sqrt(res.n), res.n - 1)


def beyond_margin(res: FlooredTest | CrossedTest, margin: float | None,
                  rise_only: bool = False) -> float | None:
    """A no-change claim's `against`: the one-sided test that the effect lies beyond the
    margin on the side its estimate is on (H0: effect <= +margin, or >= -margin), not that it
    differs from 0; `rise_only`: only a rise beyond +margin contradicts (a "no rise" claim).
    The two sides' rejection regions are disjoint, so the side need not be corrected for."""
    se, df = _se_df(res)
    if margin is None or not se or df is None:
        return None
    up = t_dist.sf((res.mean - margin) / se, df)
    return float(up if rise_only or res.mean >= 0 else t_dist.cdf((res.mean + margin) / se, df))


def tost(res: FlooredTest | CrossedTest, delta: float | None) -> float | None:
    """Two one-sided tests that the true effect lies within (-delta, +delta), with the
    claim's own test's standard error and degrees of freedom: the larger of the two ps."""
    se, df = _se_df(res)
    if delta is None or not se or df is None:
        return None
    low = t_dist.sf((res.mean + delta) / se, df)  # H0: effect <= -delta
    high = t_dist.cdf((res.mean - delta) / se, df)  # H0: effect >= +delta
    return float(max(low, high))


def family(claims: Sequence[Claim], name: str | None = None) -> list[tuple[Claim, float]]:
    """Holm's family (`name`: one of FAMILIES; None: all): each claim that can be decided,
    once, with its `claim_p`."""
    return [(c, c.claim_p()) for c in claims if c.tested and c.claim_p() is not None
            and (name is None or c.family == name)]


def holm_family(members: list[tuple[Claim, float]], alpha: float) -> None:
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
        c.absolute = None if c.smaller_abs is None else bool(
            p_adj is not None and p_adj < alpha and c.smaller_abs * len(ps) <= level)


def decide_families(claims: Sequence[Claim], alpha: float) -> None:
    """Each family's Holm correction (a claim only ever meets its own family's), the level
    its replicates are planned at, and every claim's decision."""
    for name in FAMILIES:
        fam = family(claims, name)
        for c in claims:  # Holm's first step, the strictest: Bonferroni over the family, and
            # within the claim over its tests
            if c.family == name:
                c.plan_alpha = alpha / max(1, len(fam)) / max(1, len(c.tests()))
        holm_family(fam, alpha)
    for c in claims:
        c.decision = c.decide(alpha)
