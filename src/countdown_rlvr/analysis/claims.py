"""The seeds' headline claims, each tested with the training draw (the replicate) as the unit.

One function per claim returns a `Claim`: this run's number (mean over replicates), each
replicate's own number and one-draw verdict, the check that its arms moved, and a pooled p
whose rule is stated:

    effect     the seed claims a change in a direction. A pass@k difference of two policies
               on the test split: the crossed problems x replicates test (`stats.crossed`:
               every replicate shares the test problems, so their per-problem effects are in
               its variance). Other effects: a t-test across replicates of the per-replicate
               effect, its SD floored at the replicates' own sampling error
               (`stats.floored_t_test`). Reproduced / contradicted only when significant
               after Holm's correction across the family, in / against the seed's direction;
               equivalent when two one-sided tests put the effect within ±delta, delta half
               the seed's effect scaled to this model (its relative change applied to this
               run's level: the seeds' 0.5B-model differences exceed this model's whole
               pass@k); else inconclusive. A claim made of several contrasts (S0's feedback) is
               reproduced only when every contrast is (its p: the largest of theirs) and
               contradicted when one is significant against the seed (its p: Bonferroni over
               the contrasts), each contrast saying what it isolates.
    no change  the seed claims something does NOT rise. Reproduced only when the pooled
               interval excludes a rise larger than MARGIN (a one-sided equivalence test)
               together with the claim's effect; "not significant" is never read as "no
               change". Contradicted when the rise is significant (its p against).
    above      the seed concludes a share is above a threshold (S0: most prompts give binary
               RLVR no signal, a share > 50%). One-sided floored t-test across replicates that
               the share exceeds it; contradicted by the one-sided test the other way (its
               p against). The seed's own rate, measured on its own model, is context.

Holm's family counts each claim once: its p is the smallest of its tests' (for, against,
equivalent) times their number (Bonferroni within the claim), and a significant claim is
decided by that smallest test. The seed's scaled effect is also the one replicates are
planned at.

Not tested: a claim whose arm failed its check (`checks`: one stated check per arm, measured in
every replicate on training or validation data, never the test split) or whose check was not
measured gets no verdict and stays out of Holm's family.

Why a t-test across replicates: each replicate's effect is estimated from all its samples,
paired over problems, so what varies between replicates is the training draw plus the
sampling noise; the t-test's variance is that spread, whatever its mix, and it holds its
size when draws differ (tests/test_stats.py simulates it), where a test over the problems of
one draw (the per-replicate verdicts shown beside it) rejects far more often than 5%. Why the
floor: three replicates that agree by chance (+0.059, +0.058, +0.059, each from 3 discordant
problems) would make that spread ~0 and the test sure of an effect its counts cannot carry.
For an inconclusive claim the report gives the replicates a test would need (80% power at
alpha 0.05, from the model the test used) at the observed effect and at the seed's, and the
command that adds them to the claim's chain (`replicates.<chain>`: each chain has its own
seeds, so a claim's replicates are those its pair has in common, and more of them cost that
chain's minutes, plus SFT's for a seed new to `replicates.seeds`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binomtest
from scipy.stats import t as t_dist

from ..core.config import chain_path, seeds_key
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
    from_mean_squares,
)
from . import checks
from .chains import chain_of
from .compare import fmt_ci, fmt_p
from .results import Inputs, get

ALPHA = 0.05
POWER = 0.8  # replicates to decide: the t-test's power at ALPHA
MARGIN = 0.05  # the largest pass@k change (absolute) read as "no change"
SHARE = 0.5  # S0's conclusion: MOST prompts give no signal
EFFECT, NO_CHANGE, ABOVE = "effect", "no change", "above"
ADD_REPLICATES = "dvc exp run"  # then one -S 'replicates.<list>=[...]' per list that grows


@dataclass(frozen=True)
class Part:
    """One contrast of a claim: its pooled test and how to read it."""
    label: str  # e.g. "R − best F (F1)"
    isolates: str  # what the contrast isolates
    test: FlooredTest
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
    """What an inconclusive claim needs: one test's effect (distance from its null, in the
    direction it would decide) at this run and at the seed, and the SD it would be tested
    with."""
    label: str
    observed: float
    seed: float | None  # None: the seed's effect is not a number we can use
    sd: float | None
    one_sided: bool = False
    seed_one_sided: bool | None = None  # the seed's effect decided by another test (None: same)
    crossed: CrossedTest | None = None  # the crossed test it was tested with: plan with its
    # variance components (the shared problems' part does not shrink with replicates)
    n: int = 0  # replicates it was tested with


@dataclass
class Claim:
    claim: str  # what the seed says
    seed: str  # the seed's number
    rule: str  # EFFECT | NO_CHANGE | ABOVE
    run: str = "–"  # this run: mean over replicates [t interval]
    per_replicate: str = "–"  # each replicate's number and one-draw verdict
    test: str = "–"  # the pooled test, in words
    pvalue: float | None = None  # the pooled p of the test for the claim
    effect: float | None = None  # the number the p tests: the pooled effect (seed's sign
    # convention of the pair, a - b) or, for ABOVE, this run's share minus the threshold
    right_way: bool | None = None  # the pooled effect points the seed's way
    against: float | None = None  # NO_CHANGE / ABOVE / several contrasts: p of the test
    # that contradicts the claim (with `pvalue`, one entry of Holm's family: `claim_p`)
    why_not: str | None = None  # not testable: why
    note: str = ""  # e.g. an underpowered arm
    arms: tuple[str, ...] = ()  # the arms whose check the claim rests on (checks.CHECKS)
    chain: str = "sft"  # the chain whose seeds decide it (config.CHAINS): more replicates of
    # the claim are more seeds of `replicates.<chain>`
    no_check: str = ""  # why a claim has no arm to check
    parts: list[Part] = field(default_factory=list)  # its contrasts, read in the verdict
    plans: list[Plan] = field(default_factory=list)  # replicates to decide, per test
    seed_unusable: str = ""  # why the seed's effect is not a number to plan with
    context: str = ""  # appended to the verdict (e.g. the premise's outcome)
    ci: tuple[float, float] | None = None  # the pooled test's interval of `effect`
    replicate_effects: tuple[float, ...] = ()  # each replicate's `effect`
    seed_scaled: float | None = None  # the seed's effect at this model's level (`effect`'s scale)
    scaling: str = ""  # how it was scaled, in words
    delta: float | None = None  # equivalence margin: |effect| < delta is "no effect"
    equiv: float | None = None  # TOST p that |effect| < delta (an EFFECT claim's third way)
    premise: str = ""  # why the claim's premise failed (e.g. no collapse for anti-collapse
    # to prevent): then not tested, whatever the p
    arm_checks: list[checks.ArmCheck] = field(default_factory=list, init=False)
    check_status: str = field(default=checks.PASS, init=False)
    check_why: str | None = field(default=None, init=False)
    adjusted: float | None = field(default=None, init=False)  # claim_p, Holm-adjusted
    decided_by: str = field(default="for", init=False)  # the test behind claim_p: for |
    # against | equivalent
    plan_alpha: float = field(default=ALPHA, init=False)  # the level replicates are planned at
    name: str = field(default="", init=False)  # its function's: reports/metrics/claims/<name>.json

    @property
    def tested(self) -> bool:
        """Gets a verdict: testable, its arms moved and its premise held (so it is in
        Holm's family)."""
        return not self.why_not and self.check_status == checks.PASS and not self.premise

    def tests(self) -> dict[str, float]:
        """Its decision tests' ps: `for` and, where it has them, `against` and `equivalent`."""
        out = {} if self.pvalue is None else {"for": self.pvalue}
        for key, p in (("against", self.against), ("equivalent", self.equiv)):
            if self.pvalue is not None and p is not None:
                out[key] = p
        return out

    def claim_p(self) -> float | None:
        """The claim's one p in Holm's family: the smaller of its tests' ps times their
        number (Bonferroni within the claim), so a claim with a test against counts once."""
        ps = self.tests()
        return min(1.0, len(ps) * min(ps.values())) if ps else None

    def outcome(self) -> str:
        """The verdict's first words: not testable / not tested / reproduced / ..."""
        if self.why_not:
            return f"not testable: {self.why_not}"
        if self.check_status != checks.PASS:
            return f"not tested: {self.check_why}"
        if self.premise:
            return f"not tested: {self.premise}"
        p = self.adjusted
        if p is None:
            return "inconclusive: one replicate (the pooled test needs two or more)"
        if p < ALPHA:
            if self.decided_by == "equivalent":
                return f"equivalent (|effect| < {self.delta:.3g})"
            return "reproduced" if self.right_way and self.decided_by == "for" \
                else "contradicted"
        return "inconclusive"

    def verdict(self) -> str:
        parts = "; ".join(p.reading() for p in self.parts)
        return (self.outcome() + (f" ({parts})" if parts else "")
                + (f"; {self.context}" if self.context else ""))

    def check_cell(self) -> str:
        if not self.arm_checks:
            return f"none: {self.no_check}" if self.no_check else "none"
        return "; ".join(c.cell() for c in self.arm_checks)

    @property
    def n(self) -> int:
        """Its replicates: those its tests pooled (a pair's: the replicates both have); 0
        when its plans do not say."""
        return min((p.n for p in self.plans), default=0)

    def needed(self, replicates: Mapping[str, Sequence[int]],
               minutes: Mapping[str, float] | None = None) -> str:
        """For an inconclusive claim: the replicates a test across replicates would need to
        decide it (every one of its tests, so the largest) with POWER at `plan_alpha` (the
        family's Bonferroni level, which decides under Holm whatever the other claims do),
        at the observed effect and at the seed's, with the variance the test estimated, the
        command that adds them to its chain (`replicates`: {chain: seeds}) and, given
        `minutes` per replicate of each chain, their CPU time."""
        if not self.outcome().startswith("inconclusive") or not self.plans:
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
            text += f", {_n_text(at_seed)} at the seed's"
        # replicates it has: its pair's, or fewer when its chain's list is shorter (data of a
        # longer list than the params have now); the list grows to reach the count needed
        listed = len(replicates[self.chain])
        have = min(self.n or listed, listed)
        for n, at in ((obs, "observed"), (at_seed, "seed's")):
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

    def seed_power(self) -> float | None:
        """The power its tests have, with this run's replicates and the variance they
        estimated, at the seed's effect scaled to this model (the smallest over its tests,
        at `plan_alpha`): the planned power of a run like this one. None: no seed effect on
        this scale, or one replicate."""
        if self.seed_unusable or any(p.seed is None for p in self.plans):
            return None
        return self._power([(p.seed, p.one_sided if p.seed_one_sided is None
                             else p.seed_one_sided) for p in self.plans])

    def observed_power(self) -> float | None:
        """The same power at the effects this run observed (post hoc: it restates the p-value
        on another scale, so it says how far the run was from deciding, not whether to trust
        it). None: one replicate."""
        return self._power([(p.observed, p.one_sided) for p in self.plans])

    def _power(self, effects: Sequence[tuple[float, bool]]) -> float | None:
        """The smallest power over the tests, each at (effect, one-sided) in plans' order."""
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


def _no_rise_plan(label: str, mean: float, seed_mean: float, res) -> Plan:
    """A no-change test is decided by the one-sided test below MARGIN when the effect is
    below it, else by the test of the rise (two-sided): plan with the one that would."""
    return Plan(label, MARGIN - mean if mean < MARGIN else mean,
                MARGIN - seed_mean if seed_mean < MARGIN else seed_mean, res.sd,
                one_sided=mean < MARGIN, seed_one_sided=seed_mean < MARGIN,
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


def _scaled(c: Claim, seed_from: float, seed_to: float, level: float, what: str) -> float:
    """The seed's change from `seed_from` to `seed_to` as a relative change, applied to this
    run's `level` of the same quantity; its half is the claim's equivalence margin."""
    rel = (seed_to - seed_from) / seed_from
    c.seed_scaled = rel * level
    c.delta = abs(c.seed_scaled) / 2 or None  # a level of 0 scales the seed's effect away
    c.scaling = (f"the seed's {what} {seed_from:.3f} → {seed_to:.3f} ({rel:+.0%}) at this "
                 f"run's {level:.3f}: {c.seed_scaled:+.3f}; δ = half of it, "
                 f"{c.delta or 0:.3f}")
    return c.seed_scaled


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


def _pair_effect(inp: Inputs, a: str, b: str, k: int, c: Claim,
                 seed: tuple[float, float] | None = None, positive: bool = True) -> Claim:
    """c filled with the pooled test of a - b at k (effect rule). seed: the seed's pass@k of
    b and of a, scaled to this run's b (`_scaled`); then the claim can also be decided
    equivalent (TOST within half the scaled effect)."""
    c.chain = pair_chain(a, b)
    rows, why = _pair_rows(inp, a, b, k)
    if rows is None:
        c.why_not = why
        return c
    res = _pair_test(inp, rows, _pair_crossed(inp, a, b, k))
    means = [np.mean([r[f"pass_{x}"] for r in rows.values()]) for x in ("b", "a")]
    c.run = f"pass@{k} {means[0]:.3f} → {means[1]:.3f}, diff {_ci(res)}"
    c.per_replicate = _per_replicate(rows, positive)
    c.test = _test_words(res, k)
    c.pvalue, c.right_way, c.effect = res.pvalue, (res.mean > 0) == positive, res.mean
    _fill(c, res, [r["pass_diff"] for r in rows.values()])
    scaled = None
    if seed is not None:
        scaled = _scaled(c, *seed, float(means[0]), f"pass@{k}")
        c.equiv = _tost(res, c.delta)
    c.plans = [Plan(f"{a} − {b}", res.mean, scaled, res.sd,
                    crossed=res if isinstance(res, CrossedTest) else None, n=res.n)]
    return c


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


# --------------------------------------------------------------------------- the claims

def zero_informative(inp: Inputs) -> Claim:
    c = Claim("S0: most prompts give binary RLVR no signal: the share of zero-informative "
              f"prompts (all K samples alike) of the SFT policy is above {SHARE:.0%}, K=8",
              "59.2% (500 prompts of its model)", ABOVE, chain="sft",
              no_check="the SFT policy is measured as it is, no arm is trained for it")
    runs = {t: m for t, m in inp.runs.get("diagnose.json", {}).items()
            if m.get("zero_informative") is not None}
    if not runs:
        c.why_not = "no diagnose details"
        return c
    rates = [m["zero_informative"] for m in runs.values()]
    ns = [int(m["n_problems"]) for m in runs.values()]
    # each replicate's share is a proportion of its prompts: binomial sampling error
    res = floored_t_test(rates, [s * (1 - s) / n for s, n in zip(rates, ns, strict=True)],
                         null=SHARE, alternative="greater")
    low = floored_t_test(rates, [s * (1 - s) / n for s, n in zip(rates, ns, strict=True)],
                         null=SHARE, alternative="less")
    ref = rate_vs_reference(rates, ns[0], 0.592, 500)
    first = next(iter(runs.values()))
    all_correct = np.mean([m.get("all_correct", 0.0) for m in runs.values()])
    passk = [m.get("pass@k") for m in runs.values()]
    c.run = (f"{np.mean(rates):.1%} (K={first.get('k')}, {ns[0]} prompts)"
             + (f"; all-correct {all_correct:.1%}, so the share is ~1 - pass@K "
                f"({1 - np.mean(passk):.1%}), a property of this model" if None not in passk
                else "")
             + f"; vs the seed's 59.2% (context, not the verdict): {ref['diff']:+.3f} ± "
               f"{1.96 * ref['se']:.3f}, p {fmt_p(ref['pvalue'], 2)}")
    c.per_replicate = ", ".join(
        f"{t} {m['zero_informative']:.1%} "
        + _one_draw(m["zero_informative"] - SHARE,
                    binomtest(round(m["zero_informative"] * int(m["n_problems"])),
                              int(m["n_problems"]), SHARE).pvalue)
        for t, m in runs.items())
    c.test = (f"one-sided t-test across {res.n} replicates that the share is above "
              f"{SHARE:.0%}" + _floor_words(res) + "; against: the one-sided test below it")
    c.pvalue, c.against, c.right_way = res.pvalue, low.pvalue, True
    c.effect = res.mean - SHARE
    if res.ci_low is not None:
        c.ci = (res.ci_low - SHARE, res.ci_high - SHARE)
    c.replicate_effects = tuple(r - SHARE for r in rates)
    c.seed_scaled = 0.592 - SHARE  # a share: no scaling (the seed's own model's rate)
    c.scaling = f"the seed's share 59.2% minus the threshold {SHARE:.0%}, not scaled"
    # decided by the test above or the one below, whichever side the share is on
    c.plans = [Plan(f"share − {SHARE:.0%}", abs(res.mean - SHARE), 0.592 - SHARE, res.sd, True,
                    n=res.n)]
    return c


FEEDBACK = ("F1", "F2", "F3", "F4")


def _mc_var(cond: dict, key: str, n: int) -> float | None:
    """A repair condition's paired McNemar counts -> the within-replicate variance of its
    success-rate difference (matched attempts, one outcome each)."""
    mc = cond.get(key) or {}
    if mc.get("b") is None or mc.get("c") is None:
        return None
    return binary_paired_var(int(mc["b"]), int(mc["c"]), n)


def feedback(inp: Inputs) -> Claim:
    c = Claim("S0: a fresh resample (R) repairs more than execution feedback (F1-F4), the "
              "repair format without feedback (F0) far less than R, and every F beats F0",
              "R-resample best (6.9%), every F lower, F0 lowest", EFFECT, chain="repair",
              no_check="no arm is trained: repair samples the SFT policy",
              seed_unusable="the seed's F and F0 rates are not in this claim as paired effects")
    runs = {t: m.get("conditions", {}) for t, m in inp.runs.get("repair.json", {}).items()}
    runs = {t: cs for t, cs in runs.items()
            if "R" in cs and "F0" in cs and any(f in cs for f in FEEDBACK)}
    if not runs:
        c.why_not = "no repair details with R, F0 and F conditions"
        return c
    fs = [f for f in FEEDBACK if all(f in cs for cs in runs.values())]

    def rate(f):
        return np.mean([cs[f]["success_rate"] for cs in runs.values()])

    best, worst = max(fs, key=rate), min(fs, key=rate)

    def contrast(a, b, key, mc_of):
        eff = [cs[a]["success_rate"] - cs[b]["success_rate"] for cs in runs.values()]
        wv = [_mc_var(cs[mc_of], key, int(cs[mc_of].get("n") or 0) or 1)
              for cs in runs.values()]
        return eff, floored_t_test(eff, _within(wv))

    r_f, t_rf = contrast("R", best, "mcnemar_vs_resample", best)
    r_0, t_r0 = contrast("R", "F0", "mcnemar_vs_resample", "F0")
    f_0, t_f0 = contrast(worst, "F0", "mcnemar_vs_F0", worst)
    parts = [Part(f"R − best F ({best})", "F vs R, feedback against a fresh resample", t_rf),
             Part("R − F0", "F0 vs R, the repair format itself", t_r0),
             Part(f"worst F ({worst}) − F0", "F vs F0, the feedback's content given the "
                  "repair format", t_f0)]
    c = _conjunction(c, parts)
    c.effect = t_rf.mean  # the seed's headline: R repairs best
    _fill(c, t_rf, r_f)
    c.run = (f"R {rate('R'):.1%}, best F ({best}) {rate(best):.1%}, worst F ({worst}) "
             f"{rate(worst):.1%}, F0 {rate('F0'):.1%}; R − {best} {_ci(t_rf)}")
    c.per_replicate = ", ".join(
        f"{t} R−{best} {a:+.3f} {_one_draw(a, get(cs, best, 'mcnemar_vs_resample', 'pvalue'))}"
        f" / R−F0 {b:+.3f} {_one_draw(b, get(cs, 'F0', 'mcnemar_vs_resample', 'pvalue'))}"
        f" / {worst}−F0 {d:+.3f} {_one_draw(d, get(cs, worst, 'mcnemar_vs_F0', 'pvalue'))}"
        for (t, cs), a, b, d in zip(runs.items(), r_f, r_0, f_0, strict=True))
    c.test = ("three t-tests across replicates of paired success-rate differences (SD floored "
              "at McNemar's counts of the matched attempts); reproduced only if all three "
              "hold (p = the largest), contradicted if one is significant against the seed "
              "(Bonferroni over the three); per replicate: McNemar")
    c.plans = [Plan(p.label, p.test.mean, None, p.test.sd, n=p.test.n) for p in parts]
    return c


def self_distill(inp: Inputs) -> Claim:
    c = Claim("S0: self-distillation on successful resamples (SD-R) raises pass@1 over SFT",
              "pass@1 0.086 → 0.168", EFFECT, arms=("distill_R",))
    return _pair_effect(inp, "distill_R", "sft", 1, c, seed=(0.086, 0.168))


def shaped_premise(inp: Inputs) -> Claim:
    c = Claim(f"S1 premise: binary-reward RLOO flat-lines, pass@1 no higher than SFT's "
              f"('no' = no rise beyond +{MARGIN})", "flat reward curve, no learning",
              NO_CHANGE, chain=pair_chain("rloo", "sft"),
              no_check="whether binary RLOO learns is the claim itself")
    rows, why = _pair_rows(inp, "rloo", "sft", 1)
    if rows is None:
        c.why_not = why
        return c
    crossed = _pair_crossed(inp, "rloo", "sft", 1)
    two = _pair_test(inp, rows, crossed)
    below = _pair_test(inp, rows, crossed, null=MARGIN, alternative="less")
    c.run = f"binary RLOO − SFT, pass@1 {_ci(two)}"
    c.per_replicate = _per_replicate(rows)
    c.test = (f"one-sided {_kind(two)} that pass@1 rises by less than {MARGIN}"
              + _floor_words(two) + f"; against: the two-sided {_kind(two)} of the rise")
    c.pvalue, c.right_way, c.effect = below.pvalue, True, two.mean
    _fill(c, two, [r["pass_diff"] for r in rows.values()])
    c.seed_scaled, c.delta = 0.0, MARGIN  # the seed: no learning; no change = below MARGIN
    if two.pvalue is not None:
        c.against = two.pvalue if two.mean > 0 else 1.0
    c.parts = [Part("binary RLOO − SFT pass@1", "does binary RLOO learn?", two,
                    says=("binary learns", "binary falls below SFT", "no detectable change"))]
    c.plans = [_no_rise_plan("pass@1 rise", two.mean, 0.0, two)]
    return c


def shaped(inp: Inputs) -> Claim:
    # S1 reports the shaped arm as a rollout accuracy (~0.73 on 3-number problems), not as a
    # pass@1 difference; S0 ran the same pair on Countdown and gives one (its Table 3: binary
    # RLOO pass@1 0.088, shaped 0.120), so that is the effect scaled to this run
    c = Claim("S1: the shaped reward restores learning: shaped-reward RLOO beats binary",
              "shaped > binary (S1: ~0.73 3-number rollout acc.; S0: pass@1 "
              "0.088 → 0.120)", EFFECT, arms=("rloo", "rloo_shaped"))
    c = _pair_effect(inp, "rloo_shaped", "rloo", 1, c, seed=(0.088, 0.120))
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
              "pass@k over k", "avg pass@k easyneg 0.62 ≈ hardneg 0.61 > scripted 0.46", EFFECT,
              arms=("ipo_easyneg", "ipo_scripted"),
              chain=pair_chain("ipo_easyneg", "ipo_scripted"))
    ks = sorted(int(k[1:]) for k in get(inp.compare, "pairs", "ipo_easyneg_vs_ipo_scripted",
                                         "test", default={}))
    per_k = {k: _pair_rows(inp, "ipo_easyneg", "ipo_scripted", k)[0] for k in ks}
    if not ks or any(v is None for v in per_k.values()):
        c.why_not = _pair_rows(inp, "ipo_easyneg", "ipo_scripted", 1)[1] or "no k"
        return c
    tags = list(per_k[ks[0]])
    effects = [float(np.mean([per_k[k][t]["pass_diff"] for k in ks])) for t in tags]
    # the average over k of differences measured on the same samples: its sampling SD is at
    # most the average of the per-k SDs (equal when the k are perfectly correlated), which
    # this uses: the conservative end
    ses = [[_row_var(inp, per_k[k][t]) for k in ks] for t in tags]
    wv = _within([None if None in s else float(np.mean(np.sqrt(s))) ** 2 for s in ses])
    res = floored_t_test(effects, wv)
    c.run = f"avg over k={ks} of pass@k easyneg - scripted {_ci(res)}"
    c.per_replicate = ", ".join(f"{t} {e:+.3f}" for t, e in zip(tags, effects, strict=True))
    c.test = (f"t-test across {res.n} replicates of the per-replicate average pass@k "
              "difference" + _floor_words(res))
    c.pvalue, c.right_way, c.effect = res.pvalue, res.mean > 0, res.mean
    _fill(c, res, effects)
    level = float(np.mean([per_k[k][t]["pass_b"] for k in ks for t in tags]))
    scaled = _scaled(c, 0.46, 0.62, level, "average pass@k of scripted → easyneg")
    c.equiv = _tost(res, c.delta)
    c.plans = [Plan("easyneg − scripted", res.mean, scaled, res.sd, n=res.n)]
    pairs = {s: m.get("pairs") for s, m in ((s, inp.data.get(f"ipo/{s}.json") or {})
                                            for s in ("scripted", "easyneg", "hardneg", "base"))}
    c.note = "pairs per source: " + ", ".join(f"{s} {n}" for s, n in pairs.items() if n)
    return c


def rloo_sharpens(inp: Inputs) -> Claim:
    c = Claim(f"S4: RLOO raises pass@1 but not pass@k (sharpening), 'not' = no rise beyond "
              f"+{MARGIN}", "pass@1 0.354 → 0.598; pass@16 0.800 → 0.740", NO_CHANGE,
              arms=("rloo",), chain=pair_chain("rloo", "sft"))
    k = max((int(k[1:]) for k in get(inp.compare, "pairs", "rloo_vs_sft", "test",
                                     default={})), default=None)
    r1, why1 = _pair_rows(inp, "rloo", "sft", 1)
    rk, whyk = _pair_rows(inp, "rloo", "sft", k) if k else (None, "no k")
    if r1 is None or rk is None:
        c.why_not = why1 or whyk
        return c
    x1, xk = _pair_crossed(inp, "rloo", "sft", 1), _pair_crossed(inp, "rloo", "sft", k)
    up, top = _pair_test(inp, r1, x1), _pair_test(inp, rk, xk)
    # one-sided: pass@k rises by less than MARGIN (the upper half of a TOST)
    no_rise = _pair_test(inp, rk, xk, null=MARGIN, alternative="less")
    c.run = f"pass@1 diff {_ci(up)}; pass@{k} diff {_ci(top)}"
    c.effect = top.mean  # the claim is about pass@k
    c.per_replicate = "; ".join(
        f"{t} pass@1 {r1[t]['pass_diff']:+.3f} {_one_draw(r1[t]['pass_diff'], r1[t]['pass_diff_pvalue'])}"
        f", pass@{k} {rk[t]['pass_diff']:+.3f}" for t in r1 if t in rk)
    c.test = (f"both: {_kind(up)} of the pass@1 rise, and one-sided {_kind(top)} that "
              f"pass@{k} rises by less than {MARGIN} (p = the larger)"
              + ("" if isinstance(up, CrossedTest) else "; SDs floored at the "
                 "within-replicate error") + "; against: pass@1 significantly down or "
              "pass@k significantly up (Bonferroni over the two)")
    c.parts = [Part("pass@1 diff", "pass@1 rises", up),
               Part(f"pass@{k} diff", f"pass@{k} rises by less than {MARGIN} (one-sided)",
                    no_rise, positive=False)]
    if up.pvalue is not None and no_rise.pvalue is not None:
        c.pvalue = max(up.pvalue if up.mean > 0 else 1.0, no_rise.pvalue)
        c.right_way = up.mean > 0
        # contradicted: pass@1 significantly down, or pass@k significantly up
        c.against = min(1.0, 2 * min(up.pvalue if up.mean < 0 else 1.0,
                                     top.pvalue if top.pvalue is not None and top.mean > 0
                                     else 1.0))
    _fill(c, top, [r["pass_diff"] for t, r in rk.items()])
    sft1, sftk = (float(np.mean([r["pass_b"] for r in rows.values()])) for rows in (r1, rk))
    seed1 = _scaled(c, 0.354, 0.598, sft1, "pass@1")
    seedk = _scaled(c, 0.800, 0.740, sftk, "pass@16")  # the row's effect: pass@k
    c.scaling = (f"the seed's pass@1 0.354 → 0.598 (+69%) at this run's {sft1:.3f}: "
                 f"{seed1:+.3f}; its pass@16 0.800 → 0.740 (-8%) at this run's {sftk:.3f}: "
                 f"{seedk:+.3f}")
    c.delta = MARGIN  # the no-change rule's margin
    c.plans = [Plan("pass@1 rise", up.mean, seed1, up.sd,
                    crossed=up if isinstance(up, CrossedTest) else None, n=up.n),
               _no_rise_plan(f"pass@{k} rise", top.mean, seedk, top)]
    return c


COLLAPSE_DROP = 0.25  # plain OPD "collapsed": its rollout entropy fell by this share


def _no_collapse(runs: dict, tags: list[str]) -> str:
    """Why the anti-collapse claim has nothing to test, or "": S4's anti-collapse variant
    prevents plain OPD's diversity collapse, so the claim needs plain OPD to collapse first,
    measured on its training rollouts (not the test split) in every replicate: their
    per-token entropy falls by at least COLLAPSE_DROP from the first log window to the last."""
    tags = tags or sorted(runs)
    seen = {t: tuple(get(runs, t, key) for key in ("entropy_first", "entropy_final"))
            for t in tags}
    if not seen or any(None in v for v in seen.values()):
        return "plain OPD's rollout entropy not measured, so no collapse is shown to prevent"
    kept = {t: v for t, v in seen.items() if v[1] > (1 - COLLAPSE_DROP) * v[0]}
    if not kept:
        return ""
    return (f"no collapse to prevent: plain OPD's rollout entropy fell by less than "
            f"{COLLAPSE_DROP:.0%} in " + ", ".join(f"{t} ({a:.3f} → {b:.3f})"
                                                 for t, (a, b) in kept.items()))


def opd_anti_collapse(inp: Inputs) -> Claim:
    k = max((int(k[1:]) for k in get(inp.compare, "pairs", "opd_ac_vs_opd", "test",
                                     default={})), default=16)
    c = Claim(f"S4: anti-collapse OPD keeps pass@{k} above plain OPD", "pass@16 0.840 vs 0.780",
              EFFECT, arms=("opd", "opd_ac"))
    c = _pair_effect(inp, "opd_ac", "opd", k, c, seed=(0.780, 0.840))
    c.premise = _no_collapse(inp.runs.get("opd.json", {}), inp.tags_of("opd"))
    opd, rloo = inp.data.get("opd.json") or {}, inp.data.get("rloo.json") or {}
    if opd.get("groups") and rloo.get("groups"):
        c.note = (f"both arms from SFT, same budget: {opd['groups']} prompt groups each vs "
                  f"RLOO's {rloo['groups']}" + (" (underpowered)" if opd["groups"] <
                                                 rloo["groups"] / 4 else ""))
    return c


def interventions(inp: Inputs) -> Claim:
    c = Claim("S3: interventions then RL beat plain RL on previously unsolved problems",
              "InT + RL > RL on D_hard (S3 Table 2, Fig. 8)", EFFECT, arms=("int",), chain="int",
              seed_unusable="S3 gives no effect on this scale")
    runs = {t: m for t, m in inp.runs.get("int.json", {}).items()
            if isinstance(get(m, "heldout_pass_at_k", "plain_rl"), dict)}
    if not runs:
        c.why_not = "no int details with a plain-RL arm"
        return c
    k = next(iter(runs.values())).get("k", "K")
    effects = {t: get(m, "heldout_pass_at_k", "int", "pass@k")
               - get(m, "heldout_pass_at_k", "plain_rl", "pass@k") for t, m in runs.items()}

    def var(m):  # held-out problems solved within K samples or not: McNemar's counts
        mc, n = get(m, "heldout_mcnemar", "int_vs_plain_rl") or {}, m.get("unsolved_heldout")
        if mc.get("b") is None or not n:
            return None
        return binary_paired_var(int(mc["b"]), int(mc["c"]), int(n))

    res = floored_t_test(list(effects.values()), _within([var(m) for m in runs.values()]))
    c.run = (f"held-out pass@{k} int - plain RL {_ci(res)}"
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


# each claim in a few words, for the forest plot (the table has the full sentence)
SHORT = {"zero_informative": "S0: zero-signal share > 50% (share − 50%)",
         "feedback": "S0: resample R repairs more than feedback F",
         "self_distill": "S0: SD-R > SFT, pass@1",
         "shaped_premise": "S1 premise: binary RLOO not above SFT, pass@1",
         "shaped": "S1: shaped > binary RLOO, pass@1",
         "ipo_sources": "S1: IPO easyneg > scripted, mean pass@k",
         "rloo_sharpens": "S4: RLOO does not raise pass@k",
         "opd_anti_collapse": "S4: anti-collapse OPD > OPD, pass@k",
         "interventions": "S3: InT + RL > RL, held-out pass@K"}


CLAIMS: tuple[Callable[[Inputs], Claim], ...] = (
    zero_informative, feedback, self_distill, shaped_premise, shaped, ipo_sources,
    rloo_sharpens, opd_anti_collapse, interventions)


def _check_arms(c: Claim, inp: Inputs) -> None:
    """Each arm checked in every replicate of its own chain (its seeds, not the union's)."""
    def tags(arm: str) -> list[str]:
        runs = inp.runs.get(checks.CHECKS[arm].file, {})
        return inp.tags_of(chain_of(arm) or "sft") or sorted(runs)

    c.arm_checks = [checks.check(arm, inp.runs.get(checks.CHECKS[arm].file, {}), tags(arm))
                    for arm in c.arms]
    c.check_status, c.check_why = checks.summarize(c.arm_checks)


def family(claims: Sequence[Claim]) -> list[tuple[Claim, float]]:
    """Holm's family: each claim that can give a verdict, once, with its `claim_p`."""
    return [(c, c.claim_p()) for c in claims if c.tested and c.claim_p() is not None]


def evaluate(inp: Inputs) -> list[Claim]:
    """Every claim, its arms checked, its ps Holm-adjusted across the family (claims not
    tested left out)."""
    claims = [claim(inp) for claim in CLAIMS]
    for c, claim in zip(claims, CLAIMS, strict=True):
        c.name = claim.__name__
        _check_arms(c, inp)
    fam = family(claims)
    for c in claims:  # Holm's first step, the strictest: Bonferroni over the family, and
        # within the claim over its tests
        c.plan_alpha = ALPHA / max(1, len(fam)) / max(1, len(c.tests()))
    for (c, _), p in zip(fam, holm([p for _, p in fam]), strict=True):
        c.adjusted = p
        ps = c.tests()
        c.decided_by = min(ps, key=ps.get)
    by = {c.name: c for c in claims}
    premise, main = by.get("shaped_premise"), by.get("shaped")
    if premise is not None and main is not None and premise.parts:
        main.context = (f"premise (its own row): {premise.outcome()}, binary RLOO − SFT "
                        f"pass@1 {premise.effect:+.3f}, so this row asks whether shaped adds "
                        "to a binary arm that " + ("learns" if (premise.parts[0].test.pvalue or 1)
                                                   < ALPHA and premise.effect > 0
                                                   else "is not shown to learn"))
    return claims
