"""Figures and reports/report.md, from the stages' measurement files only.

The inputs are the JSON files the other stages write under reports/details/ and the
dvclive per-step TSVs under dvclive/<run>/plots/metrics/. Nothing here loads a model or a
dataset, so the report re-renders in seconds and always agrees with `dvc metrics show`
(whose headline numbers are picked from the same files).

    expected_inputs(policies)           -> {metrics file: stage that writes it}
    load_inputs(metrics, dvclive, ...)  -> Inputs (the loaded files, curves and what is missing)
    write_figures(inputs, fig_dir)      -> {figure name: file name}  (figures.py)
    build_markdown(inputs, figures)     -> the report text
    render_report(...)                  all of the above; require_all=True raises MissingInputs

A missing input renders as a "not run" row (or paragraph) naming the stage that writes it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.config import CHAINS
from ..core.io import write_text
from ..research import INT_POLICIES  # int.json pass_at_k rows
from ..task.prompts import NO_FEEDBACK, REPAIR_LABELS, RESAMPLE
from .compare import compare_markdown, fmt_ci, fmt_p, md_table, pair_key
from .figures import FIGURES, pass_ks, write_figures
from .results import (
    IPO_SOURCES,
    NA,
    RL_RUNS,
    SECONDARY_RUNS,
    Inputs,
    MissingInputs,
    load_inputs,
    report_policies,
)
from .results import fmt as _f
from .results import get as _get

__all__ = ["IPO_SOURCES", "MissingInputs", "render_report", "report_policies"]


# --------------------------------------------------------------------------- context

@dataclass(frozen=True)
class Context:
    """What every section reads: the loaded inputs, the figures drawn and the run's choices.
    A table row whose inputs are missing is `marker_row(...)`."""

    inp: Inputs
    figures: dict[str, str]  # figure name -> file name, for the figures drawn
    fig_rel: str  # the figure dir, relative to report.md
    ref: str  # `report.reference`: p-values and differences are against this policy
    ks: tuple[int, ...]  # every test k of any policy, ascending ((1,) when none)
    bon: str | None  # the best-of-N policy (None: no policy has eval metrics)
    chain_minutes: Mapping[str, float] | None = None  # what one more replicate of each chain
    # costs (`report.chain_minutes`)
    claims: tuple = ()  # the evaluated claims (claims.evaluate), in plan order
    plan: Any = None  # the analysis plan they were decided with (plan.Plan)

    @property
    def data(self) -> dict[str, Any]:
        return self.inp.data

    @property
    def kmax(self) -> int:
        return self.ks[-1]

    def not_run(self, *rels: str) -> str | None:
        """The marker for the first missing file among rels, None when all are present."""
        for rel in rels:
            if _get(self.data, rel, "trained") is False:  # evaluate skipped it
                return f"*not trained* (`{rel}`: {self.data[rel].get('not_evaluated', 'no training examples')})"
            if rel not in self.data:
                stage = self.inp.stages.get(rel)
                if stage is None:  # e.g. an IPO source left out of `ipo.sources`
                    return f"*not run* (not in this run's params: no `{rel}`)"
                return f"*not run* (stage `{stage}` has no metrics: `{rel}`)"
        return None

    def marker_row(self, name: str, rels: list[str], ncols: int) -> list[str] | None:
        marker = self.not_run(*rels)
        return [name, marker, *[""] * (ncols - 2)] if marker else None

    def figure(self, name: str) -> list[str]:
        if name in self.figures:
            return [f"![{FIGURES[name][1]}]({self.fig_rel}/{self.figures[name]})", ""]
        return [f"*not run* (figure `{name}`: its inputs have no metrics yet)", ""]

    def ev(self, policy: str, *path):
        """A value of the policy's eval metrics (None when absent)."""
        return _get(self.data.get(f"eval/{policy}.json"), *path)


def make_context(inp: Inputs, figures: dict[str, str], fig_rel: str, reference: str,
                 bon_policy: str | None, chain_minutes: Mapping[str, float] | None = None,
                 found=(), plan=None) -> Context:
    """bon_policy None: the policy with the highest test pass@1."""
    evals = inp.evals()
    ks = sorted({k for m in evals.values() for k in pass_ks(m["test"])}) or [1]
    bon = bon_policy or (max(evals, key=lambda p: evals[p]["test"]["pass@1"])
                         if evals else None)
    return Context(inp, figures, fig_rel, reference, tuple(ks), bon, chain_minutes,
                   tuple(found), plan)


# --------------------------------------------------------------------------- cells

def _ci(ctx: Context, policy: str, k: int, split: str = "test") -> str:
    """pass@k with its compare.json interval, the bare eval value when compare lacks it."""
    v = _get(ctx.data.get("compare.json"), "policies", policy, split, f"pass@{k}")
    if v is None:
        return _f(ctx.ev(policy, split, f"pass@{k}"))
    return fmt_ci(v["value"], v["ci_low"], v["ci_high"])


def _vs_ref(ctx: Context, policy: str, k: int, split: str = "test") -> tuple[dict | None, int]:
    """The compare.json result of policy vs the reference (either pair order) and the
    sign that makes its differences read policy - reference."""
    pairs = _get(ctx.data.get("compare.json"), "pairs", default={})
    for (a, b), sign in (((policy, ctx.ref), 1), ((ctx.ref, policy), -1)):
        r = _get(pairs, pair_key(a, b), split, f"k{k}")
        if r is not None:
            return r, sign
    return None, 1


def _pvalue(ctx: Context, policy: str, k: int, split: str = "test") -> str:
    """The headline p of policy vs the reference from compare.json: the paired sign-flip
    permutation test on per-problem pass@k from every sample."""
    if policy == ctx.ref:
        return "ref."
    r, _ = _vs_ref(ctx, policy, k, split)
    return NA if r is None else fmt_p(r.get("pass_diff_pvalue"))


def _mcnemar(ctx: Context, policy: str, k: int, split: str = "test") -> str:
    """S0's test, kept as a secondary column: McNemar on the first k samples of one seed."""
    if policy == ctx.ref:
        return "ref."
    r, _ = _vs_ref(ctx, policy, k, split)
    return NA if r is None else fmt_p(r["pvalue"])


def _pass_diff(ctx: Context, policy: str, k: int, split: str = "test") -> str:
    """pass@k(policy) - pass@k(reference) from all samples, with its paired interval."""
    if policy == ctx.ref:
        return "ref."
    r, sign = _vs_ref(ctx, policy, k, split)
    if r is None or "pass_diff" not in r:
        return NA
    lo, hi = sorted((sign * r["pass_diff_ci_low"], sign * r["pass_diff_ci_high"]))
    return fmt_ci(sign * r["pass_diff"], lo, hi, "+.3f")


# --------------------------------------------------------------------------- sections

def header_section(ctx: Context) -> list[str]:
    lines = ["# countdown-rlvr report", "",
             ("Generated by `stages/report.py` from `reports/details/` and `dvclive/` "
              "only; do not edit, re-run `dvc repro report`."), ""]
    test = next((m["test"] for m in ctx.inp.evals().values()), None)
    if test:
        lines += [(f"Test split: {test['n_problems']} problems, "
                   f"{test['samples_per_group']} samples per prompt and seed, per replicate. "
                   f"Replicates (training draws): {', '.join(ctx.inp.replicates) or 'none'}"
                   f"{_chains_text(ctx)}. "
                   "The claims and the policies table are pooled over replicates, with "
                   "the replicate as the unit; every other table shows ONE draw, replicate "
                   f"`{ctx.inp.first}` (the first seed), and its p-values are that draw's paired "
                   "tests over problems (a sign-flip permutation test on per-problem pass@k "
                   "from every sample; McNemar on sample 0, S0's test), which leave out the "
                   f"training variance. p-values are against `{ctx.ref}` (`report.reference`); "
                   "NA = pair not in `compare.pairs`."), ""]
    if ctx.inp.missing:
        lines += ["**Incomplete run:** these inputs are missing and render as *not run*:", ""]
        lines += [f"- `{path}` (stage `{stage}`)" for path, stage in ctx.inp.missing.items()]
        lines.append("")
    return lines


def _chains_text(ctx: Context) -> str:
    """Each chain's replicates, when some chain has other seeds than SFT's (a policy's are its
    chain's; a pair is compared on the replicates both have)."""
    own = {c: ctx.inp.tags_of(c) for c in CHAINS}
    if all(tags == ctx.inp.replicates for tags in own.values()):
        return ""
    first = f"one SFT, {', '.join(own['sft'])}, for every replicate" if ctx.inp.shared_sft \
        else "SFT's"
    return f" ({first}; each chain's: " + "; ".join(
        f"{c} {', '.join(tags)}" for c, tags in own.items() if c != "sft") + \
        "; a pair is compared on the replicates both have)"


def findings_section(ctx: Context) -> list[str]:
    """What was found, first: one plain line per claim, its decision and its effect."""
    plan = ctx.plan
    lines = ["## What was found", ""]
    ext = "Extensions (contrasts no seed tested; their own Holm family)"
    exploratory = ("Exploratory (planned below 80% power and declared so in plan.yaml before "
                   "the run: their own Holm family, reported, deciding nothing)")
    for fam, title in (("seed", "The seeds' claims"), ("extension", ext),
                       ("exploratory", exploratory)):
        rows = [c for c in ctx.claims if c.family == fam]
        if rows:
            lines += [f"{title}:", "", *(f"- {finding_line(c)}" for c in rows), ""]
    if plan is not None:  # after the findings: how they were decided, then the plan's note
        when = ("written before this run" if plan.written_before_run
                else "**written after this run was seen**")
        lines += [(f"Decided with the analysis plan `plan.yaml`, {when}, and the rules in "
                   "docs/statistics.md (\"Claims: how a test becomes a decision\"). "
                   f"The plan's note: {plan.note}"), ""]
    return lines + ["Each claim's test, numbers and plan: \"Claims in detail\" at the end.", ""]


def finding_line(c) -> str:
    from .claims import SHORT

    text = f"**{SHORT.get(c.name, c.name)}**: {decision_words(c)}"
    if c.effect is not None and not c.why_not:
        text += f"; {c.unit} {_effect_ci(c)}"
        if c.rule == "no change" and c.seed_scaled == 0:
            text += " (the seed: no change)"
        elif c.seed_scaled is not None:
            text += f" (the seed's, scaled: {c.seed_scaled:+.3f})"
    return text


def _effect_ci(c) -> str:
    return fmt_ci(c.effect, *(c.ci or (None, None)), "+.3f")


def decision_words(c, short: bool = False) -> str:
    """A decision in words (the edge: the claims package keeps the enum). `short`: without the
    reason a claim was not tested."""
    from .claims import Decision

    d, delta = c.decision, c.delta
    bound = " (gains > δ excluded)" if short or delta is None else \
        f" (gains above {delta:+.3g} excluded)"
    if d == Decision.REPRODUCED_SMALLER:
        return "reproduced, smaller than the seed's" + bound
    # one reading only: not "smaller than the seed's", which needs both (docs/statistics.md)
    relative = " (relative δ only)" if short or c.delta_abs is None or delta is None else \
        (f" on the relative reading only: gains above {delta:+.3g} (the seed's relative "
         f"change at this level) excluded, above {c.delta_abs:+.3g} (its absolute change) not")
    if d == Decision.REPRODUCED_SMALLER_RELATIVE:
        return "reproduced, smaller" + relative
    if d == Decision.SMALLER_RELATIVE:
        return "smaller" + relative + ("" if short else "; an effect below that is not ruled out")
    if d == Decision.SMALLER:
        return "smaller than the seed's" + bound + (
            "" if short else "; an effect below that is not ruled out")
    if d == Decision.EQUIVALENT:
        return "equivalent (no change beyond ±δ)" if short else \
            f"equivalent: no change beyond ±{delta:.3g} (the seed claims none)"
    if d == Decision.NOT_TESTED:
        return "not tested (an arm failed its check)" if short else f"not tested: {c.check_why}"
    if d == Decision.NOT_TESTED_PREMISE:
        return "not tested (premise)" if short else \
            f"not tested (premise: S4's teacher standing, plan.yaml): {c.premise_failed}"
    if d == Decision.NOT_TESTABLE:
        return "not testable" if short else f"not testable: {c.why_not}"
    if d == Decision.INCONCLUSIVE and c.adjusted is None and c.tested:
        return "inconclusive (one replicate: the pooled test needs two or more)"
    return d.value


def answers_section(ctx: Context) -> list[str]:
    """The forest plot of the claims."""
    return ["## The answers at a glance", "",
            ("Each claim's effect, one panel per unit: its interval (line) and each "
             "replicate's effect (small points), the seed's effect scaled by the plan "
             "(diamond), the plan's ±δ (grey band) and the decision as the colour; the numbers "
             "are in the table below."), "", *ctx.figure("claims")]


def _pooled(ctx: Context, policy: str, k: int, split: str = "test") -> dict | None:
    return _pooled_key(ctx, policy, f"pass@{k}", split)


def _pooled_key(ctx: Context, policy: str, key: str, split: str = "test") -> dict | None:
    """compare.json's pooled `key` (pass@k, coverage) of a policy; None when absent."""
    return _get(ctx.inp.compare, "policies", policy, split, key)


def _mean_ci(v: dict | None, spec: str = ".3f") -> str:
    """A mean over replicates with its t interval (one draw: the bare value); spec "+.3f"
    for a signed difference."""
    return NA if v is None else fmt_ci(v["mean"], v.get("ci_low"), v.get("ci_high"), spec)


def _diff_ci(d: dict | None) -> str:
    return _mean_ci(d, "+.3f")


def _pooled_vs_ref(ctx: Context, policy: str, k: int) -> dict | None:
    """compare.json's pooled effect of policy - reference at k (either pair order): the
    crossed problems x replicates test where compare.json has it (the claims' test of the
    same contrast), else the t-test across replicates; `crossed` says which."""
    for (a, b), sign in (((policy, ctx.ref), 1), ((ctx.ref, policy), -1)):
        block = _get(ctx.inp.compare, "pairs", pair_key(a, b), "test", f"k{k}") or {}
        crossed = block.get("crossed") or {}
        use = crossed if crossed.get("pvalue") is not None else block.get("pooled")
        r = use
        if r is not None:
            flip = {"mean": sign * r["mean"], "pvalue": r["pvalue"], "n": r["n"],
                    "crossed": r is crossed}
            if r.get("ci_low") is not None:
                flip["ci_low"], flip["ci_high"] = sorted((sign * r["ci_low"], sign * r["ci_high"]))
            return flip
    return None


def _p_cell(d: dict | None) -> str:
    """A pooled p; † when it is the t-test across replicates, not the crossed test."""
    if d is None or d["pvalue"] is None:
        return fmt_p(None)
    return fmt_p(d["pvalue"]) + ("" if d.get("crossed") else " †")


def policies_table(ctx: Context) -> list[str]:
    """S4 Table 1, pooled over replicates: every non-distill policy at k = 1 and the largest k,
    each replicate's pass@1, its solution coverage (NA in compare.json written before it),
    and the replicate-unit difference from the reference."""
    k1, kx, ref = 1, ctx.kmax, ctx.ref
    header = ["policy", "replicates", f"pass@{k1} [95% CI]", f"pass@{kx} [95% CI]",
              f"pass@{k1} per replicate", f"OOD pass@{kx}", f"pass@{k1} - {ref} [95% CI]",
              f"p vs {ref} (k={k1})", f"p vs {ref} (k={kx})", "coverage [95% CI]"]
    rows = []
    for p in (p for p in ctx.inp.policies if not p.startswith("distill_")):
        marker = ctx.marker_row(p, [f"eval/{p}.json"], len(header))
        one = _pooled(ctx, p, k1)
        if marker or one is None:
            rows.append(marker or [p, *[NA] * (len(header) - 1)])
            continue
        d1, dx = _pooled_vs_ref(ctx, p, k1), _pooled_vs_ref(ctx, p, kx)
        per = ", ".join(f"{t} {v:.3f}" for t, v in one["per_replicate"].items())
        rows.append([p, str(one["n"]) if one["per_replicate"].keys() != {"shared"} else "shared",
                     _mean_ci(one), _mean_ci(_pooled(ctx, p, kx)), per,
                     _mean_ci(_pooled(ctx, p, kx, "ood")),
                     "ref." if p == ref else _diff_ci(d1),
                     "ref." if p == ref else _p_cell(d1), "ref." if p == ref else _p_cell(dx),
                     _mean_ci(_pooled_key(ctx, p, "coverage"), ".2f")])
    ood = _ood_operands(ctx)
    ood = (f"the OOD split ({ood} numbers, targets from `problems.ood_target_range`, beyond "
           "the training targets)" if ood else
           "the OOD split (not sampled in this run: it is opt-in, `params.secondary.yaml`)")
    return ["## Policies (S4 Table 1)", "",
            (f"Unbiased pass@k on the held-out 3-4-number test split and {ood}, "
             "as the mean over replicates (training draws) with its "
             "95% t interval over replicates; `shared` = trained once, one draw. The difference "
             f"from `{ref}` is the mean of the per-replicate paired differences (all samples, "
             "paired by problem), its interval and p the crossed problems x replicates test "
             "(the test the claims use for the same contrast; where compare.json lacks it, the "
             "t-test across replicates, marked †): the unit is the training draw. A policy of "
             "`evaluate.first_replicate_only` has one replicate: "
             "no interval, no p. Per-replicate paired tests (permutation over problems, "
             "McNemar on sample 0): `reports/compare.md`. Coverage: the distinct correct "
             "solutions per test problem among all its samples (`a+b` and `b+a` once; an "
             "unsolved problem counts 0), mean over replicates with the same t interval; S4's "
             "collapse onto one answer per problem is a loss of coverage, which pass@1 alone "
             "does not show (docs/statistics.md, \"Solution coverage\")."), "",
            *md_table(header, rows), "", *ctx.figure("pass_at_k"), *ctx.figure("splits"),
            *ctx.figure("coverage")]


def _ood_operands(ctx: Context) -> str:
    """The OOD split's operand counts, from the `n<m>` parts of its eval metrics ("" when no
    policy was sampled on it)."""
    counts = sorted({int(key[1:]) for m in ctx.inp.evals().values()
                     for key in m.get("ood", {}) if key[:1] == "n" and key[1:].isdigit()})
    return "/".join(map(str, counts))


def best_of_n_tables(ctx: Context) -> list[str]:
    """S4 Table 2: the best-of-N policy at every budget (left), every policy at the
    largest budget (right)."""
    lines = ["## Test-time best-of-N with the verifier (S4 Table 2)", ""]
    if ctx.bon is None or ctx.not_run(f"eval/{ctx.bon}.json"):
        return lines + [ctx.not_run(f"eval/{ctx.bon}.json") or "*not run*", ""]
    bon = ctx.ev(ctx.bon, "best_of_n")
    budgets = sorted(bon, key=lambda key: int(key[1:]))  # "N1", "N2", ...
    left = [[key[1:], _f(b["expected_acc"]), _f(b["acc"]),
             _f(ctx.ev(ctx.bon, "test", "n4", f"pass@{key[1:]}")),
             _f(b["expected_samples"], 2), _f(b["avg_samples"], 2)]
            for key in budgets for b in [bon[key]]]
    top = budgets[-1]
    right = [ctx.marker_row(p, [f"eval/{p}.json"], 5) or [
        p, _f(ctx.ev(p, "best_of_n", top, "expected_acc")),
        _f(ctx.ev(p, "best_of_n", top, "acc")),
        _f(ctx.ev(p, "test", "n4", f"pass@{top[1:]}")),
        _f(ctx.ev(p, "best_of_n", top, "expected_samples"), 2)]
        for p in ctx.inp.policies]
    return lines + [
        (f"Left: accuracy vs budget N for `{ctx.bon}` (`report.best_of_n_policy`; by "
         "default the highest test pass@1). acc = expected accuracy (pass@N, S4 eq. 5), "
         "realized = on the recorded sample order; avg n = expected samples drawn under "
         "early stopping; 4-num = pass@N on 4-number problems (NA where N is not in "
         "`evaluate.ks`)."), "",
        *md_table(["N", "acc", "realized acc", "4-num", "avg n", "realized avg n"], left), "",
        f"Right: every policy at N = {top[1:]}.", "",
        *md_table(["policy", f"best-of-{top[1:]}", "realized", "4-num", "avg n"], right), "",
        *ctx.figure("best_of_n")]


def _ipo_eval_cells(ctx: Context, policy: str) -> list[str]:
    """pass@k for every k, their mean and the k=1 p-value: the eval half of an IPO row."""
    vals = [ctx.ev(policy, "test", f"pass@{k}") for k in ctx.ks]
    known = [v for v in vals if v is not None]
    avg = float(np.mean(known)) if known else None
    return [*map(_f, vals), _f(avg), _pvalue(ctx, policy, 1)]


def ipo_table(ctx: Context) -> list[str]:
    """S1 Table 1: one row per pair source (the seeds' and any configured one), then the
    SFT and RLOO policies as references."""
    header = ["pairs source", "pairs", "steps", "loss first → final",
              "margin first → final", "pref. acc", *(f"p@{k}" for k in ctx.ks), "avg",
              f"p vs {ctx.ref} (k=1, all samples)"]
    configured = [rel[4:-5] for rel in ctx.inp.stages if rel.startswith("ipo/")]
    rows = []
    for s in dict.fromkeys([*IPO_SOURCES, *configured]):
        m = ctx.data.get(f"ipo/{s}.json")
        rows.append(ctx.marker_row(s, [f"ipo/{s}.json", f"eval/ipo_{s}.json"], len(header))
                    or [s, _f(m.get("pairs")), _f(m.get("steps")), _arrow(m, "loss", 4),
                        _arrow(m, "margin", 4), _f(m.get("pref_acc_final")),
                        *_ipo_eval_cells(ctx, f"ipo_{s}")])
    rows += [ctx.marker_row(f"({p}, reference)", [f"eval/{p}.json"], len(header))
             or [f"({p}, reference)", *[NA] * 5, *_ipo_eval_cells(ctx, p)]
             for p in ("sft", "rloo")]
    return ["## IPO by preference-pair source (S1 Table 1)", "",
            ("IPO from the SFT policy, one run per pair source; pass@k on the test split, "
             "avg = mean over k."), "", *md_table(header, rows), ""]


def training_tables(ctx: Context) -> list[str]:
    """The SFT summary, then the RL runs' per-step diagnostics, first → final."""
    sft = ctx.data.get("sft.json")
    lines = ["## Training", "", "### SFT", ""]
    lines += ([ctx.not_run("sft.json"), ""] if sft is None else [*md_table(
        ["examples", "steps", "loss first → final", "token acc final", "val loss"],
        [[_f(sft.get("examples")), _f(sft.get("steps")), _arrow(sft, "loss", 4),
          _f(sft.get("token_acc_final")), _f(sft.get("val_loss"), 4)]]), ""])
    header = ["run", "reward", "steps", "reward mean", "pass rate", "zero-std groups",
              "KL", "entropy", "forward KL", "4-number tier unlocked at (per replicate)"]
    rows = []
    extra = [r for r in SECONDARY_RUNS if f"{r}.json" in ctx.data]  # secondary arms, if run
    for run in (*RL_RUNS, *extra):
        m = ctx.data.get(f"{run}.json")
        rows.append(ctx.marker_row(run, [f"{run}.json"], len(header)) or [
            run, _f(m.get("reward")), _f(m.get("steps")), _arrow(m, "reward_mean"),
            _arrow(m, "pass_rate"), _arrow(m, "zero_std_frac"), _arrow(m, "kl", 4),
            _arrow(m, "entropy"), _arrow(m, "forward_kl", 4), _unlocks(ctx, run)])
    return lines + [("### RLOO (binary and shaped reward, no curriculum, and both from the "
                     "early SFT checkpoint at S0's budget), OPD and anti-collapse OPD (from "
                     "the RLOO policy)"), "",
                    (f"Replicate `{ctx.inp.first}`: per-step diagnostics, first → final (means "
                     "over the first and last 10% of the steps); NA = not logged by that run. "
                     "The curriculum column is every replicate's step at which the 4-number "
                     "tier unlocked (never = it did not); `rloo_nocurr` trains on every tier "
                     "from step 0, so `rloo` vs `rloo_nocurr` is what the curriculum does."), "",
                    *md_table(header, rows), "", *ctx.figure("rl_curves")]


def _unlocks(ctx: Context, run: str) -> str:
    """Each replicate's curriculum unlock step of an RL run ("–": no curriculum)."""
    runs = ctx.inp.runs.get(f"{run}.json", {})
    if not any("tier_unlock_step" in m for m in runs.values()):
        return NA
    return ", ".join(f"{t} {'never' if m.get('tier_unlock_step') is None else m['tier_unlock_step']}"
                     for t, m in runs.items() if m.get("curriculum", True))


def diagnose_table(ctx: Context) -> list[str]:
    """S0 §5.1: the SFT policy's zero-signal diagnosis."""
    m = ctx.data.get("diagnose.json")
    lines = ["## Zero-signal diagnosis (S0 §5.1)", ""]
    if m is None:
        return lines + [ctx.not_run("diagnose.json"), "", *ctx.figure("zero_signal")]
    k = m.get("k")
    header = ["pass@1", f"pass@{k}", "avg score", "all-fail", "all-correct",
              "zero-informative", "reward contrast", "failed attempts"]
    keys = ("pass@1", "pass@k", "avg_score", "all_fail", "all_correct", "zero_informative",
            "reward_contrast", "n_failed_attempts")
    return lines + [
        (f"The SFT policy, K = {k} samples per test prompt ({_f(m.get('n_problems'))} "
         "problems)."), "",
        *md_table(header, [[_f(m.get(key)) for key in keys]]), "", *ctx.figure("zero_signal")]


F0_LABEL = "F0 no feedback (not in S0)"  # the repair table's row of the bare repair prompt


def _mcnemar_cells(c: dict, key: str, is_reference: bool) -> list[str]:
    mc = c.get(key)
    if is_reference or not mc:
        return ["(reference)" if is_reference else NA, NA]
    return [f"{mc['b']} / {mc['c']}", fmt_p(mc["pvalue"])]


def _repair_row(cond: str, label: str, c: dict | None, ncols: int) -> list[str]:
    """One S0 Table 2 row: a condition's repair outcome and its McNemar vs R-resample and
    vs F0 (what the feedback's content adds over the bare repair prompt)."""
    if c is None:
        return [label, "*not run* (condition not in `repair.conditions`)", *[""] * (ncols - 2)]
    return [label, _f(c["success_rate"], 4), _f(c["successes"]), _f(c["n"]),
            _f(c["new_error_rate"], 4), _f(c["feedback_tokens"], 2),
            *_mcnemar_cells(c, "mcnemar_vs_resample", cond == RESAMPLE),
            *_mcnemar_cells(c, "mcnemar_vs_F0", cond == NO_FEEDBACK)]


def repair_table(ctx: Context) -> list[str]:
    """S0 Table 2: repair success of the SFT policy's failed attempts per condition."""
    lines = ["## Feedback repair by condition (S0 Table 2)", ""]
    m = ctx.data.get("repair.json")
    if m is None:
        return lines + [ctx.not_run("repair.json"), "", *ctx.figure("repair")]
    header = ["condition", "success", "count", "n", "new error", "avg. feedback tokens",
              "McNemar vs R-resample (b / c)", "p", "McNemar vs F0 (b / c)", "p vs F0"]
    rows = [_repair_row(cond, label, m["conditions"].get(cond), len(header))
            for cond, label in {NO_FEEDBACK: F0_LABEL, **REPAIR_LABELS}.items()]
    return lines + [
        (f"{m.get('n_attempts', NA)} fixed failed attempts of the SFT policy, each repaired "
         f"under every condition ({m.get('k', NA)} sample(s) each); McNemar on the matched "
         "attempts (b = repaired by the condition only, c = by the reference only). F0, not in "
         "S0, is the repair prompt with the feedback slot empty: F_i vs F0 is what the "
         "feedback's content adds, F0 vs R-resample what the repair format does."), "",
        *md_table(header, rows), "", *ctx.figure("repair")]


DISTILL_COLS = ("pass@1", "pass@k", "avg_score", "all_fail", "zero_informative",
                "reward_contrast")
NOT_TRAINED = "not trained (no successful repairs)"


def _distill_cells(ctx: Context, policy: str, k: int) -> list[str]:
    """The eval half of an S0 Table 3 row, every number from the same k-sample groups
    (eval.diagnostics_at_k), then the all-sample p and S0's McNemar vs the reference."""
    d = ctx.ev(policy, "diagnostics_by_k", f"k{k}") or {}
    return [*(_f(d.get(key), 4 if key not in ("pass@1", "pass@k") else 3)
              for key in DISTILL_COLS), _pvalue(ctx, policy, 1),
            *(_pass_diff(ctx, policy, kk) for kk in dict.fromkeys((k, ctx.kmax))),
            _mcnemar(ctx, policy, 1)]


def distill_table(ctx: Context) -> list[str]:
    """S0 Table 3: SFT and RLOO, then SFT self-distilled on each condition's repairs."""
    k = 8 if 8 in ctx.ks else ctx.kmax
    header = ["policy", "training signal", "examples", "pass@1", f"pass@{k}", "avg. score",
              "all-fail", "zero-info", "contrast", f"p vs {ctx.ref} (all samples)",
              *(f"pass@{kk} - {ctx.ref}" for kk in dict.fromkeys((k, ctx.kmax))),
              "McNemar p, sample 0 (S0's test)"]
    n = len(header)
    rows = [ctx.marker_row("SFT", ["eval/sft.json"], n) or [
                "SFT", "SFT traces", _f(_get(ctx.data.get("sft.json"), "examples")),
                *_distill_cells(ctx, "sft", k)],
            ctx.marker_row("RLOO", ["eval/rloo.json"], n) or [
                "RLOO", f"{_get(ctx.data.get('rloo.json'), 'reward', default='?')} reward", NA,
                *_distill_cells(ctx, "rloo", k)]]
    for cond, label in REPAIR_LABELS.items():
        name, rel = f"SD-{cond}", f"distill/{cond}.json"
        if _get(ctx.data, rel, "trained") is False:
            rows.append([name, f"successful {label} repairs", _f(ctx.data[rel].get("examples")),
                         f"*{NOT_TRAINED}*", *[NA] * (n - 4)])
            continue
        rows.append(ctx.marker_row(name, [rel, f"eval/distill_{cond}.json"], n) or [
            name, f"successful {label} repairs", _f(ctx.data[rel].get("examples")),
            *_distill_cells(ctx, f"distill_{cond}", k)])
    return ["## Self-distillation per condition (S0 Table 3)", "",
            ("No-feedback policies on the test split; SD-X = SFT further trained on the "
             "successful repairs of condition X (examples = distinct successful repairs). "
             f"Every column comes from the same samples at K = {k}: each problem's samples are "
             f"cut into groups of {k} (S0's K), and pass@1, pass@{k}, the mean `evaluate.reward` "
             f"(avg. score), all-fail, zero-informative and contrast are rates over those "
             f"groups, so all-fail = 1 - pass@{k}. A condition without a successful repair "
             f"trains nothing (its policy is SFT unchanged) and is not evaluated: "
             f"*{NOT_TRAINED}*."), "", *md_table(header, rows), ""]


def failures_section(ctx: Context) -> list[str]:
    return ["## Failure types", "", *ctx.figure("failures")]


def interventions_table(ctx: Context) -> list[str]:
    """S3: pass@k on the problems SFT leaves unsolved (trained-on and held-out halves),
    McNemar of `int` vs each policy on each half."""
    m = ctx.data.get("int.json")
    lines = ["## Interventions with the solver as oracle (S3)", ""]
    if m is None:
        return lines + [ctx.not_run("int.json"), ""]
    iv, k = m.get("interventions", {}), m.get("k", "K")

    def cells(prefix: str, name: str) -> list[str]:
        return [_f(_get(m, f"{prefix}pass_at_k", name, "pass@k")),
                NA if name == "int" else fmt_p(_get(m, f"{prefix}mcnemar", f"int_vs_{name}", "pvalue"))]

    rows = [[name, _f(_get(m, "pass_at_k", name, "pass@1")), *cells("", name),
             *cells("heldout_", name)] for name in INT_POLICIES]
    slips = {p: v for p in ("sft", "rloo")
             if (v := ctx.ev(p, "samples", "correct_with_arithmetic_error")) is not None}
    slip_text = ("" if not slips else " Wrong steps often do not drive the answer: "
                 + ", ".join(f"{v:.0%} of `{p}`'s correct test samples" for p, v in slips.items())
                 + " hold at least one wrong \"a op b = c\" claim, so an intervention replaces "
                 "the first unrecoverable step (after which the remaining numbers can no longer "
                 "reach the target), not the first slip.")
    return lines + [
        (f"Replicate `{ctx.inp.first}`. {_f(m.get('unsolved'))} of {_f(m.get('n_problems'))} "
         "problems of the `unseen` split (no stage trains on it) unsolved by the SFT policy in "
         f"{_f(m.get('select_k', k))} samples: {_f(m.get('unsolved_train'))} trained on (interventions, "
         f"patch, RL), {_f(m.get('unsolved_heldout'))} held out (never trained on). "
         f"{_f(iv.get('found'))} interventions found, {_f(iv.get('kept'))} kept by the filter. "
         f"`plain_rl` is S3's control: the same RL, same problems and steps, from SFT without "
         f"the patch. pass@{k} with a fresh sampling seed; McNemar of `int` against each policy."
         + slip_text),
        "", *md_table(["policy", "pass@1 (trained-on)", f"pass@{k} (trained-on)", "p vs int",
                       f"pass@{k} (held-out)", "p vs int (held-out)"], rows), ""]


def significance_section(ctx: Context) -> list[str]:
    lines = ["## Significance (compare)", ""]
    if "compare.json" not in ctx.data:
        return lines + [ctx.not_run("compare.json"), ""]
    report = _test_split_in_order(ctx.data["compare.json"], ctx.inp.policies)
    body = compare_markdown(report).splitlines()[1:]  # drop its title
    return lines + [(f"Replicate `{ctx.inp.first}`, the test split (pooled over replicates and "
                    "every replicate, all splits: `reports/compare.md`).")] + body + [""]


# --------------------------------------------------------------------------- seed claims

def _esc(cell: str) -> str:
    """A markdown table cell: a `|` inside it would end the cell."""
    return cell.replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return md_table([_esc(h) for h in header], [[_esc(x) for x in r] for r in rows])


def _power_cell(c) -> str:
    """The plan's power (at its replicates) and this run's estimate, labelled."""
    cp = c.planned
    planned = NA if cp is None or cp.planned_power is None else \
        f"plan {cp.planned_power:.0%} at {cp.replicates}"
    run = c.run_power()
    return f"{planned}; run {NA if run is None else f'{run:.0%}'} at {c.n or NA}"


def _delta_cell(c) -> str:
    """The plan's delta and, beside it, the absolute reading's bound and whether gains above
    it are excluded at the claim's Holm step (one cell: the table fits a wide terminal)."""
    if c.delta is None:
        return NA
    if c.delta_abs is None:
        return f"{c.delta:.3g}"
    said = {True: "excl.", False: "not excl.", None: NA}[c.absolute]
    return f"{c.delta:.3g}; abs. {c.delta_abs:.3g} {said}"


def claims_table(ctx: Context) -> list[str]:
    """One short row per claim: decision, effect, the plan's delta and the seed's effect,
    the adjusted p and the power (the plan's, and this run's estimate); the details are in
    `claims_details`."""
    from . import claims

    rows = [[claims.SHORT.get(c.name, c.name), c.family, decision_words(c, short=True),
             NA if c.effect is None or c.why_not else _effect_ci(c), c.unit,
             _delta_cell(c),
             NA if c.seed_scaled is None else f"{c.seed_scaled:+.3f}", fmt_p(c.adjusted),
             _power_cell(c)] for c in ctx.claims]
    fams = {f: len(claims.family(ctx.claims, f)) for f in claims.FAMILIES}
    explore = f", {fams['exploratory']} exploratory" if fams["exploratory"] else ""
    return ["## Claims vs this run", "",
            (f"Replicates (training draws) are the unit. p (Holm): adjusted within the claim's "
             f"family ({fams['seed']} seed claims, {fams['extension']} extensions{explore} "
             "decided). δ: the plan's smallest effect of interest (a no-change claim: its "
             "margin), half the seed's relative change at this model's level; abs.: half "
             "the seed's own change, unscaled, and whether gains above it are excluded "
             "(excl.); \"smaller than the seed's\" needs both. Power: the plan's (from before the run where "
             "plan.yaml says so, at its replicates) and this run's estimate from its own "
             "variance at its replicates, both at the seed's scaled effect and over every "
             "decision route (not observed power); beside the plan's, in the details, the "
             "minimum detectable effect."), "",
            *_table(["claim", "family", "decision", "effect [95% CI]", "unit", "δ",
                     "seed (scaled)", "p (Holm)", "power: plan; this run"], rows), ""]


def claims_details(ctx: Context) -> list[str]:
    """Per claim: what it says, the seed, the test, the numbers, the plan."""
    from . import claims

    chains = {chain: ctx.inp.seeds_of(chain) for chain in CHAINS}
    by = {c.name: c for c in ctx.claims}
    alpha = claims.ALPHA if ctx.plan is None else ctx.plan.alpha
    lines = ["## Claims in detail", ""]
    for c in ctx.claims:
        cp = c.planned
        ps = c.tests()
        premise = premise_words(c, by, alpha)
        lines += [f"### {claims.SHORT.get(c.name, c.name)}", "",
                  f"- **Decision**: {decision_words(c)}" + (f"; {premise}" if premise
                                                            else ""),
                  f"- **Claim** ({c.family}, {c.rule}): {c.claim}",
                  f"- **Seed**: {c.seed}" + (f"; scaled: {c.scaling}" if c.scaling else ""),
                  f"- **This run**: {c.run}",
                  (f"- **Per replicate** (+ / − = that draw alone significant for / "
                   f"against, ns = not): {c.per_replicate}"),
                  f"- **Test**: {c.test}" + (f" ({model})" if (model := model_words(c)) else "")]
        if c.parts:
            lines.append("- **Contrasts**: " + "; ".join(map(contrast_words, c.parts)))
        if ps:
            lines.append("- **p**: " + ", ".join(f"{k} {fmt_p(v)}" for k, v in ps.items())
                         + f"; claim {fmt_p(c.claim_p())}, Holm {fmt_p(c.adjusted)}"
                         + ("; deciding: " + ", ".join(sorted(c.significant))
                            if c.significant else ""))
        lines.append(f"- **Arm check**: {check_words(c)}")
        if cp is not None:
            mde = c.mde()
            lines.append(f"- **Plan**: {cp.replicates} replicates, planned power "
                         + (NA if cp.planned_power is None else f"{cp.planned_power:.0%}")
                         + ("" if mde is None else f", minimum detectable effect {mde:.3f} (80% "
                            f"power for its first test at {cp.replicates} replicates and its "
                            f"α {c.plan_alpha:.2g}, this run's variance)")
                         + (f", δ {cp.delta:.3g}" if cp.delta is not None else "")
                         + (f" (level: {cp.level_source})" if cp.level_source else ""))
        if c.delta_abs is not None and c.smaller_abs is not None:
            lines.append(f"- **Absolute reading**: gains above δ abs. {c.delta_abs:.3g} (the "
                         f"plan's fraction of the seed's own change) "
                         + ("excluded" if c.absolute else "not excluded")
                         + f", one-sided p {fmt_p(c.smaller_abs)}")
        run = c.run_power()
        if run is not None:
            lines.append(f"- **This run's power estimate** (its variance, {c.n} replicates, "
                         f"every route at the plan's effects): {run:.0%}")
        if (need := needed_words(c, chains, ctx.chain_minutes, ctx.inp.shared_sft)) != "–":
            lines.append(f"- **Replicates to decide**: {need}")
        if note := note_words(c, by):
            lines.append(f"- **Note**: {note}")
        lines.append("")
    return lines


def contrast_words(p) -> str:
    """One contrast of a claim (claims.Part): what it isolates, its mean difference, its p
    and what that says (significant the seed's way, the other way, or not, at claims.ALPHA)."""
    from .claims import ALPHA

    pv = p.test.pvalue
    state = ("one replicate" if pv is None else p.says[2] if pv >= ALPHA
             else p.says[0] if p.right_way else p.says[1])
    return (f"{p.isolates}: {p.label} {p.test.mean:+.3f}"
            + ("" if pv is None else f", p {fmt_p(pv, 2)}") + f", {state}")


def check_words(c) -> str:
    """The claim's arm checks, one cell each (checks.ArmCheck.cell); without an arm: why."""
    if not c.arm_checks:
        return f"none: {c.no_check}" if c.no_check else "none"
    return "; ".join(a.cell() for a in c.arm_checks)


def count_words(n: int | str | None) -> str:
    """A replicate count of claims.Needed in words (None: more than stats.MAX_REPLICATES)."""
    from ..stats import MAX_REPLICATES
    from .claims import AWAY, PROBLEMS

    if n == PROBLEMS:
        return ("no replicate count (the shared test problems' variance alone keeps the "
                "effect out of reach: more test problems would decide it)")
    if n == AWAY:
        return "no replicate count (the effect is 0 or points away from the test)"
    return f"more than {MAX_REPLICATES} replicates" if n is None else f"{n} replicates"


def needed_words(c, replicates: Mapping[str, Any],
                 minutes: Mapping[str, float] | None = None, shared_sft: bool = False) -> str:
    """For an inconclusive claim (else "–"): the replicates its tests would need to decide it
    (claims.Claim.to_decide), at the observed effect and at the plan's, and the command that
    adds them to its chain with their CPU time."""
    from .claims import ADD_REPLICATES, OBSERVED

    need = c.to_decide(replicates, minutes, shared_sft)
    if need is None:
        return "–"
    if need.one_replicate:
        return "one replicate: no spread between replicates to plan from"
    text = f"{count_words(need.observed)} at the observed effect"
    if not need.seed_usable:
        text += (f"; the seed's effect is not a number we can use here"
                 f" ({c.seed_unusable or 'not stated on this scale'})")
    else:
        text += f", {count_words(need.at_seed)} at the plan's (every route)"
    if need.reach is None:
        return text
    cost = "" if need.minutes is None else \
        f" ≈ {need.minutes:.0f} CPU-min on the fast 2-core kind"
    flags = " ".join(f"-S 'replicates.{key}=[{','.join(map(str, seeds))}]'"
                     for key, seeds in need.lists.items())
    at = "observed" if need.reach_at == OBSERVED else "plan's"
    return text + (f"; to reach {need.reach} (the {at} effect's, {len(need.added)} more "
                   f"replicates of the {c.chain} chain{cost}): `{ADD_REPLICATES} {flags}`")


def model_words(c) -> str:
    """Why the t-test across replicates stood in for the crossed model (Claim.model's code),
    in words; "" where it did not."""
    from .claims import NO_CROSSED, NO_RECORDS

    return {"": "",
            NO_RECORDS: "t-test across replicates: the crossed model needs per-problem "
                        "records, which these details lack",
            NO_CROSSED: "t-test across replicates: compare.json has no crossed summary for "
                        "this pair"}[c.model]


def premise_words(c, by: Mapping[str, Any], alpha: float) -> str:
    """What the row a shaped claim rests on found (words beside its decision; no test
    changes): its premise's own row (does binary RLOO learn at its operating point?). "" for a
    row without one. by: every claim by name; alpha: the plan's."""
    from .claims import PREMISES

    premise_name, point = PREMISES.get(c.name, (None, None))
    premise = by.get(premise_name)
    if premise is None or not premise.parts:
        return ""
    learns = (premise.parts[0].test.pvalue or 1) < alpha and premise.effect > 0
    return (f"premise (its own row): {premise.decision.value}, binary RLOO − "
            f"{point.sft_label} pass@1 {premise.effect:+.3f}, so this row asks whether shaped "
            "adds to a binary arm that " + ("learns" if learns else "is not shown to learn"))


def note_words(c, by: Mapping[str, Any]) -> str:
    """The claim's note; the anti-collapse row's led by its precondition's outcome (did plain
    OPD collapse on the dev split? its own extension row), which it is tested without."""
    col = by.get("opd_collapses") if c.name == "opd_anti_collapse" else None
    if col is None:
        return c.note
    found = (f"not testable: {col.why_not}" if col.why_not else col.decision.value
             + ("" if col.effect is None else f", {col.unit} OPD − SFT {col.effect:+.3f}"))
    said = (f"precondition (plain OPD collapsed on the dev split, its own extension "
            f"row): {found}; this row is tested whatever it found")
    return "; ".join(x for x in (said, c.note) if x)


NUMBER_MISUSE = ("NUMBER_UNKNOWN", "NUMBER_REUSED", "NUMBER_OMITTED")


S4_TEACHER_RATIO = 0.535 / 0.354  # S4: its 7B teacher's pass@1 over its student SFT's (1.5x)


def _teacher_caveat(ctx: Context) -> list[str]:
    """What the teacher is (its size from its own training details, not an assumption) and
    its margin over the student against S4's (pass@1 1.5x the student's, pass@16 at least
    the student's), which OPD and the teacher pair sources rely on."""
    teacher, student = ctx.data.get("teacher.json") or {}, ctx.data.get("sft.json") or {}
    t1, s1 = _pooled(ctx, "teacher", 1), _pooled(ctx, "sft", 1)
    if not teacher.get("n_params") or t1 is None or s1 is None:
        return []
    same = teacher.get("n_params") == student.get("n_params")
    ratio = t1["mean"] / s1["mean"] if s1["mean"] else None
    tk, sk = _pooled(ctx, "teacher", ctx.kmax), _pooled(ctx, "sft", ctx.kmax)
    at_k = "" if tk is None or sk is None else \
        f", pass@{ctx.kmax} {tk['mean']:.3f} against {sk['mean']:.3f}"
    short = ratio is None or ratio < S4_TEACHER_RATIO or (tk and sk and tk["mean"] < sk["mean"])
    rl = teacher.get("rl")  # teacher.rl: RLOO after its trace training
    then_rl = "" if not rl else f", then {rl['steps']} RLOO steps ({rl['reward']} reward)"
    return [f"- **The teacher** has {teacher['n_params']:,} parameters"
            + (f" (the student's architecture, trained longer from the same base{then_rl})"
               if same else f" (the student: {student.get('n_params', 0):,}"
               + ("; its own pre-training" if teacher.get("pretrain") else "") + then_rl + ")")
            + f"; its test pass@1 is {t1['mean']:.3f} against the student's {s1['mean']:.3f} "
            + ("" if ratio is None else f"({ratio:.2f}x; S4's teacher: 1.51x)") + at_k
            + " (means over replicates). OPD distils toward it and the easyneg / hardneg pairs "
            "take its samples as chosen answers, so both rest on that margin"
            + (": it falls short of S4's, so OPD's premise (a stronger teacher supplies paths "
               "the student cannot find) holds only in part." if short else ", which meets "
               "S4's.")]


OOD_FLOOR = 0.1  # best OOD pass@k below this: the split cannot tell the policies apart


def _ood_caveat(ctx: Context) -> list[str]:
    """#25.7: say so when the OOD split cannot tell the policies apart at this model size."""
    compare = ctx.inp.compare or {}
    key = f"pass@{ctx.kmax}"
    best = max(((_get(v, "ood", key, "mean"), p) for p, v in compare.get("policies", {}).items()
                if _get(v, "ood", key, "mean") is not None), default=None)
    ps = [(_get(v, "ood", f"k{ctx.kmax}", "pooled", "pvalue"), pair)
          for pair, v in compare.get("pairs", {}).items()]
    ps = [(p, pair) for p, pair in ps if p is not None]
    if best is None or not ps or best[0] >= OOD_FLOOR:
        return []
    p_min, pair = min(ps)
    return [(f"- **The OOD split** (3 numbers, targets beyond training's): the best policy's "
             f"OOD {key} is {best[0]:.3f} (`{best[1]}`, mean over replicates) and the smallest "
             f"pooled OOD p is {fmt_p(p_min, 2)} (`{pair}`, before any correction for the "
             f"{len(ps)} pairs), so at this model size the OOD column measures almost nothing; "
             "it stays in the policies table (not the DVC headline) for larger students.")]


def caveats_section(ctx: Context) -> list[str]:
    """#17.8: where this run's design departs from the seeds, and what that does."""
    lines = ["## Design differences from the seeds", ""]
    rloo = ctx.data.get("rloo.json") or {}
    lines.append(f"- **RLOO's KL term** (coefficient {_f(rloo.get('kl_coef'))}) is the k3 "
                 "estimate to the frozen SFT policy, as in S1; S4's pulls toward the sampling "
                 "policy. The KL column of the training table is distance from SFT, which "
                 "grows as the policy learns.")
    fails = ctx.ev(ctx.ref, "failures") or {}
    failed = sum(v for c, v in fails.items() if c != "correct")
    if failed:
        misuse = sum(fails.get(c, 0) for c in NUMBER_MISUSE) / failed
        lines.append(
            f"- **The shaped reward** (S1's partial credit) scores any answer that misuses the "
            f"pool (unknown, reused or omitted numbers) 0, below the format reward's 0.1, and "
            f"gives 0.1-0.6 only to legal expressions with the wrong value. {misuse:.0%} of "
            f"the `{ctx.ref}` policy's failed test samples are number misuse, so most of the "
            "contrast the shaped reward adds to a group separates misuse (0) from legal "
            "wrong-target answers, not wrong answers from right ones: shaped-vs-binary "
            "compares a reward that mostly teaches pool discipline with one that only "
            "rewards solutions, and a lower zero-std fraction under shaped does not by "
            "itself mean more signal toward correct answers.")
    opd = ctx.data.get("opd.json") or {}
    if opd.get("groups") and rloo.get("groups"):
        lines.append(f"- **OPD's budget**: `opd` and `opd_ac` both start from the same policy "
                     f"(`opd.init`) and train on {opd['groups']} prompt groups each, against RLOO's "
                     f"{rloo['groups']} (S4 gives them comparable budgets); where that is far "
                     "less, read their rows as a check of the method, not as S4's comparison.")
    lines += _teacher_caveat(ctx) + _ood_caveat(ctx)
    strategies = sorted(_get(ctx.data.get("teacher_traces.json"), "yield_by_strategy")
                         or {})
    if strategies:
        lines.append(f"- **Teacher strategies**: {len(strategies)} "
                     f"({', '.join(strategies)}) instead of S1's eight rotated reasoning "
                     "strategies, so the strategy diversity of teacher traces and pairs is "
                     "far smaller.")
    return lines + [""]


# report.md's sections, in order
SECTIONS = (header_section, findings_section, answers_section, claims_table, caveats_section,
            policies_table, best_of_n_tables, ipo_table, training_tables,
            diagnose_table, repair_table, distill_table, failures_section, interventions_table,
            significance_section, claims_details)


def _test_split_in_order(report: dict, policies: list[str]) -> dict:
    """The compare report restricted to the test split, policies in report order and k
    ascending (write_json sorts keys, so "k16" came before "k4" in the file)."""
    def by_k(per_k):
        return dict(sorted(per_k.items(), key=lambda item: int(item[0][1:])))

    rank = {p: i for i, p in enumerate(policies)}
    pols = sorted(report["policies"].items(), key=lambda item: rank.get(item[0], len(rank)))
    return {"settings": report["settings"],
            "policies": {p: {"test": v["test"]} for p, v in pols if "test" in v},
            "pairs": {key: {"test": by_k(v["test"])} if "test" in v else {}
                      for key, v in report["pairs"].items()}}


def _arrow(m: dict, key: str, nd: int = 3) -> str:
    """`<key>_first → <key>_final` of a training summary."""
    first, final = m.get(f"{key}_first"), m.get(f"{key}_final")
    if first is None and final is None:
        return NA
    return f"{_f(first, nd)} → {_f(final, nd)}"


def build_markdown(inp: Inputs, figures: dict[str, str], fig_rel: str = "figures",
                   reference: str = "sft", best_of_n_policy: str | None = None,
                   chain_minutes: Mapping[str, float] | None = None, found=None,
                   plan=None) -> str:
    """report.md: the seeds' tables filled from the metrics, each figure embedded (figure
    paths relative to the report: fig_rel/<name>.png). found: the evaluated claims
    (claims.evaluate(inp, plan) when None); plan: plan.yaml's (None: the repository's)."""
    from . import claims
    from .plan import load_plan

    plan = plan or load_plan()
    found = claims.evaluate(inp, plan) if found is None else found
    ctx = make_context(inp, figures, fig_rel, reference, best_of_n_policy, chain_minutes,
                       found, plan)
    return "\n".join(wrap_prose([line for section in SECTIONS for line in section(ctx)])
                     ).rstrip() + "\n"


WIDTH = 100  # report.md's prose lines, for a terminal: tables, headings and images stay whole
_MARKER = re.compile(r"([-+*>#|=]|\d+[.)])(\s|$)")  # starts a list, a quote, a heading, a row


def wrap_prose(lines: list[str], width: int = WIDTH) -> list[str]:
    """Each prose line (a paragraph or a list item) longer than `width` broken at spaces,
    a list item's continuation indented under its text. Never breaks before a word that would
    start a markdown block (a list marker, `#`, `|`), nor a table row, heading, image or a
    fenced block; joining a wrapped line's pieces with one space gives the line back."""
    out, fenced = [], False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        if fenced or len(line) <= width or line.startswith(("|", "#", "![", "    ", "```")):
            out.append(line)
            continue
        bullet = re.match(r"(?:[-*+]|\d+[.)]) ", line)
        indent = " " * (bullet.end() if bullet else 0)
        words = line.split(" ")
        cur = words[0]
        for word in words[1:]:
            if len(cur) + 1 + len(word) > width and cur.strip() and word \
                    and not _MARKER.match(word + " "):
                out.append(cur)
                cur = indent + word
            else:
                cur += " " + word
        out.append(cur)
    return out


def render_report(metrics_dir: str | Path, dvclive_dir: str | Path, out_md: str | Path,
                  fig_dir: str | Path, configured=(), ipo_sources=IPO_SOURCES,
                  distill=tuple(REPAIR_LABELS), require_all: bool = True, reference: str = "sft",
                  best_of_n_policy: str | None = None, dpi: int = 100,
                  replicates=None, chain_minutes: Mapping[str, float] | None = None,
                  plan=None, shared_sft: bool = False, arms=None) -> Inputs:
    """Load, check (before drawing anything), draw, write. Returns the loaded inputs.

    configured: every policy name of `evaluate`; ipo_sources / distill: the IPO pair sources
    and distill conditions this run trains (`ipo.sources`, `distill.conditions`); replicates:
    each chain's seeds ({chain: seeds}, the `replicates` section; None: the replicates found
    on disk, every chain's); chain_minutes: `report.chain_minutes`; plan: the analysis plan
    (plan.Plan; None: the repository's plan.yaml); shared_sft: every replicate started from
    one SFT (`replicates.shared_sft`); arms: the RL arms this run trains
    (chains.trained_arms; None: every arm of core.arms), the others render "not run".
    """
    from . import claims
    from .plan import load_plan

    inp = load_inputs(metrics_dir, dvclive_dir, configured, ipo_sources, distill, replicates,
                      shared_sft, arms)
    if require_all and inp.missing:
        raise MissingInputs(inp.missing)
    plan = plan or load_plan()
    found = claims.evaluate(inp, plan)
    figures = write_figures(inp, fig_dir, dpi, found)
    fig_rel = Path(os.path.relpath(Path(fig_dir), Path(out_md).parent)).as_posix()
    write_text(out_md, build_markdown(inp, figures, fig_rel, reference, best_of_n_policy,
                                      chain_minutes, found, plan))
    return inp
