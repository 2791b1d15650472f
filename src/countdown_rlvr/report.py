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

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .figures import CURVES, FIGURES, RL_RUNS, pass_ks, write_figures
from .io import write_text
from .pairs import SOURCES as IPO_SOURCES  # the pair sources (ipo.sources)
from .research import INT_POLICIES  # int.json pass_at_k rows
from .task.prompts import REPAIR_LABELS, RESAMPLE

# The seeds' table rows. Metrics files and policy names follow the producing stages:
# ipo/<source>.json + eval/ipo_<source>.json, distill/<key>.json + eval/distill_<key>.json.
# The RL runs come from figures.py (their figures draw them too); the repair conditions
# (task.prompts) and stage int's policies (research) from the torch-free modules that the
# stages writing those files import them from.
REQUIRED_CURVES = ("reward_mean", "zero_std_frac", "entropy")  # kl only when rloo.kl_coef > 0
NA = "–"
# read when present, never required: the shaped-reward RLOO arm (seed claims) and the
# teacher's strategies (design differences)
EXTRA_INPUTS = ("rloo_shaped.json", "teacher_traces.json")


class MissingInputs(ValueError):
    """require_all and some metrics files are absent; .missing maps each to its stage."""

    def __init__(self, missing: dict[str, str]):
        self.missing = missing
        lines = "\n".join(f"  {path}  (stage {stage})" for path, stage in missing.items())
        super().__init__(f"{len(missing)} report input(s) missing:\n{lines}")


@dataclass
class Inputs:
    data: dict[str, Any]  # metrics file (relative to the metrics dir) -> parsed JSON
    curves: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]  # run -> metric -> steps, values
    missing: dict[str, str]  # file -> stage that writes it
    policies: list[str]  # report order
    stages: dict[str, str] = field(default_factory=dict)  # every expected file -> its stage

    def evals(self) -> dict[str, dict]:
        """Eval metrics of the policies that have them, in report order."""
        return {p: m for p in self.policies
                if (m := self.data.get(f"eval/{p}.json")) is not None and "test" in m}


# --------------------------------------------------------------------------- inputs

def report_policies(configured=(), ipo_sources=IPO_SOURCES, distill=tuple(REPAIR_LABELS)) -> list[str]:
    """The seeds' policies of this configuration, then any other configured one (e.g. a
    teacher), in params order."""
    seeds = ("base", "sft", *(f"ipo_{s}" for s in ipo_sources), *RL_RUNS, "int",
             *(f"distill_{c}" for c in distill))
    return [*seeds, *(p for p in configured if p not in seeds)]


def expected_inputs(policies, ipo_sources=IPO_SOURCES, distill=tuple(REPAIR_LABELS)) -> dict[str, str]:
    """Every measurement file (relative to reports/details) the report reads -> its stage."""
    files = {f"eval/{p}.json": f"evaluate@{p}" for p in policies}
    files["compare.json"] = "compare"
    files["sft.json"] = "sft"
    files |= {f"ipo/{s}.json": f"ipo@{s}" for s in ipo_sources}
    files |= {f"{run}.json": run for run in RL_RUNS}
    files |= {"diagnose.json": "diagnose", "repair.json": "repair", "int.json": "int"}
    files |= {f"distill/{c}.json": f"distill@{c}" for c in distill}
    return files


def read_curves(run_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The CURVES metrics dvclive wrote under run_dir/plots/metrics (one TSV per metric,
    columns `step` and the metric's leaf name; nested names become sub-folders)."""
    out = {}
    for tsv in sorted((run_dir / "plots" / "metrics").rglob("*.tsv")):
        if tsv.stem in CURVES and tsv.stem not in out:  # sorted: train/kl before zz/kl
            with open(tsv, newline="") as fh:
                rows = list(csv.DictReader(fh, delimiter="\t"))
            out[tsv.stem] = (np.array([int(r["step"]) for r in rows]),
                             np.array([float(r[tsv.stem]) for r in rows]))
    return out


def load_inputs(metrics_dir: str | Path, dvclive_dir: str | Path, configured=(),
                ipo_sources=IPO_SOURCES, distill=tuple(REPAIR_LABELS)) -> Inputs:
    """Read whatever exists of the report's inputs; record the expected ones that are absent.

    Expected: the files of this configuration (configured policies, `ipo_sources`, `distill`
    conditions) and the RLOO curves of REQUIRED_CURVES (the rest, and OPD's, are drawn when
    present). The seeds' other rows
    (e.g. an IPO source not in `ipo.sources`) are read when present, never required.
    """
    metrics_dir, dvclive_dir = Path(metrics_dir), Path(dvclive_dir)
    policies = report_policies(configured, ipo_sources, distill)
    stages = expected_inputs(policies, ipo_sources, distill)
    optional = expected_inputs(report_policies(configured), IPO_SOURCES, tuple(REPAIR_LABELS))
    optional |= dict.fromkeys(EXTRA_INPUTS, "")  # the seed claims and caveats, when present
    data = {rel: json.loads((metrics_dir / rel).read_text())
            for rel in {**optional, **stages} if (metrics_dir / rel).is_file()}
    curves = {run: c for run in RL_RUNS if (c := read_curves(dvclive_dir / run))}
    missing = {(metrics_dir / rel).as_posix(): stage
               for rel, stage in stages.items() if rel not in data}
    missing |= {(dvclive_dir / "rloo/plots/metrics" / f"**/{m}.tsv").as_posix(): "rloo"
                for m in REQUIRED_CURVES if m not in curves.get("rloo", {})}
    return Inputs(data, curves, missing, policies, stages)


# --------------------------------------------------------------------------- markdown

def _f(x, nd: int = 3) -> str:
    if x is None:
        return NA
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def _p(x) -> str:
    return NA if x is None else f"{x:.3g}"


def _get(d: dict | None, *path, default=None):
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return default
        d = d[key]
    return d


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells):
        return "| " + " | ".join(cells) + " |"
    return [line(header), line(["---"] * len(header)), *map(line, rows), ""]


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
                 bon_policy: str | None) -> Context:
    """bon_policy None: the policy with the highest test pass@1."""
    evals = inp.evals()
    ks = sorted({k for m in evals.values() for k in pass_ks(m["test"])}) or [1]
    bon = bon_policy or (max(evals, key=lambda p: evals[p]["test"]["pass@1"])
                         if evals else None)
    return Context(inp, figures, fig_rel, reference, tuple(ks), bon)


# --------------------------------------------------------------------------- cells

def _ci(ctx: Context, policy: str, k: int, split: str = "test") -> str:
    """pass@k with its compare.json interval, the bare eval value when compare lacks it."""
    v = _get(ctx.data.get("compare.json"), "policies", policy, split, f"pass@{k}")
    if v is None:
        return _f(ctx.ev(policy, split, f"pass@{k}"))
    return f"{v['value']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"


def _vs_ref(ctx: Context, policy: str, k: int, split: str = "test") -> tuple[dict | None, int]:
    """The compare.json result of policy vs the reference (either pair order) and the
    sign that makes its differences read policy - reference."""
    from .compare import pair_key

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
    return NA if r is None else _p(r.get("pass_diff_pvalue"))


def _mcnemar(ctx: Context, policy: str, k: int, split: str = "test") -> str:
    """S0's test, kept as a secondary column: McNemar on the first k samples of one seed."""
    if policy == ctx.ref:
        return "ref."
    r, _ = _vs_ref(ctx, policy, k, split)
    return NA if r is None else _p(r["pvalue"])


def _pass_diff(ctx: Context, policy: str, k: int, split: str = "test") -> str:
    """pass@k(policy) - pass@k(reference) from all samples, with its paired interval."""
    if policy == ctx.ref:
        return "ref."
    r, sign = _vs_ref(ctx, policy, k, split)
    if r is None or "pass_diff" not in r:
        return NA
    lo, hi = sorted((sign * r["pass_diff_ci_low"], sign * r["pass_diff_ci_high"]))
    return f"{sign * r['pass_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


# --------------------------------------------------------------------------- sections

def header_section(ctx: Context) -> list[str]:
    lines = ["# countdown-rlvr report", "",
             ("Generated by `stages/report.py` from `reports/details/` and `dvclive/` "
              "only; do not edit, re-run `dvc repro report`."), ""]
    test = next((m["test"] for m in ctx.inp.evals().values()), None)
    if test:
        lines += [(f"Test split: {test['n_problems']} problems, "
                   f"{test['samples_per_group']} samples per prompt and seed "
                   f"({test['n_groups']} groups). p-values are against `{ctx.ref}` "
                   "(`report.reference`), paired by problem, from `compare.json`: the headline "
                   "p is a sign-flip permutation test on the per-problem pass@k estimated from "
                   "every sample; McNemar on sample 0 (S0's test) is a labelled secondary "
                   "column. NA = pair not in `compare.pairs`."), ""]
    if ctx.inp.missing:
        lines += ["**Incomplete run:** these inputs are missing and render as *not run*:", ""]
        lines += [f"- `{path}` (stage `{stage}`)" for path, stage in ctx.inp.missing.items()]
        lines.append("")
    return lines


def policies_table(ctx: Context) -> list[str]:
    """S4 Table 1: every non-distill policy at k = 1 and the largest k."""
    k1, kx, ref = 1, ctx.kmax, ctx.ref
    header = ["policy", f"pass@{k1} [95% CI]", f"pass@{kx} [95% CI]", f"n3 pass@{k1}",
              f"n4 pass@{k1}", f"n3 pass@{kx}", f"n4 pass@{kx}", f"OOD pass@{k1}",
              f"OOD pass@{kx}", f"pass@{k1} - {ref} [95% CI]", f"p vs {ref} (k={k1})",
              f"p vs {ref} (k={kx})", "McNemar p, sample 0 (S0's test)"]
    rows = [ctx.marker_row(p, [f"eval/{p}.json"], len(header)) or [
        p, _ci(ctx, p, k1), _ci(ctx, p, kx),
        *(_f(ctx.ev(p, "test", f"n{m}", f"pass@{k}")) for k in (k1, kx) for m in (3, 4)),
        _f(ctx.ev(p, "ood", f"pass@{k1}")), _f(ctx.ev(p, "ood", f"pass@{kx}")),
        _pass_diff(ctx, p, k1), _pvalue(ctx, p, k1), _pvalue(ctx, p, kx),
        _mcnemar(ctx, p, k1)]
        for p in ctx.inp.policies if not p.startswith("distill_")]
    return ["## Policies (S4 Table 1)", "",
            ("Unbiased pass@k on the held-out 3-4-number test split, its 3-/4-number parts "
             f"and the OOD split ({_ood_operands(ctx)} numbers, targets from "
             "`problems.ood_target_range`, beyond the training targets). The difference from "
             f"`{ref}` and its p-values use every sample: the pass@{k1} difference with its "
             "paired bootstrap interval over problems, and the paired sign-flip permutation "
             "test on per-problem pass@k. The last column is McNemar on sample 0 alone "
             "(S0's test), which throws away all other samples."), "",
            *_table(header, rows), *ctx.figure("pass_at_k"), *ctx.figure("splits")]


def _ood_operands(ctx: Context) -> str:
    """The OOD split's operand counts, from the `n<m>` parts of its eval metrics ("?" if none)."""
    counts = sorted({int(key[1:]) for m in ctx.inp.evals().values()
                     for key in m.get("ood", {}) if key[:1] == "n" and key[1:].isdigit()})
    return "/".join(map(str, counts)) or "?"


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
        *_table(["N", "acc", "realized acc", "4-num", "avg n", "realized avg n"], left),
        f"Right: every policy at N = {top[1:]}.", "",
        *_table(["policy", f"best-of-{top[1:]}", "realized", "4-num", "avg n"], right),
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
             "avg = mean over k."), "", *_table(header, rows)]


def training_tables(ctx: Context) -> list[str]:
    """The SFT summary, then the RL runs' per-step diagnostics, first → final."""
    sft = ctx.data.get("sft.json")
    lines = ["## Training", "", "### SFT", ""]
    lines += ([ctx.not_run("sft.json"), ""] if sft is None else _table(
        ["examples", "steps", "loss first → final", "token acc final", "val loss"],
        [[_f(sft.get("examples")), _f(sft.get("steps")), _arrow(sft, "loss", 4),
          _f(sft.get("token_acc_final")), _f(sft.get("val_loss"), 4)]]))
    header = ["run", "reward", "steps", "reward mean", "pass rate", "zero-std groups",
              "KL", "entropy", "forward KL"]
    rows = []
    for run in RL_RUNS:
        m = ctx.data.get(f"{run}.json")
        rows.append(ctx.marker_row(run, [f"{run}.json"], len(header)) or [
            run, _f(m.get("reward")), _f(m.get("steps")), _arrow(m, "reward_mean"),
            _arrow(m, "pass_rate"), _arrow(m, "zero_std_frac"), _arrow(m, "kl", 4),
            _arrow(m, "entropy"), _arrow(m, "forward_kl", 4)])
    return lines + ["### RLOO (binary and shaped reward), OPD and anti-collapse OPD", "",
                    ("Per-step diagnostics, first → final (means over the first and last "
                     "10% of the steps); NA = not logged by that run."), "",
                    *_table(header, rows), *ctx.figure("rl_curves")]


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
        *_table(header, [[_f(m.get(key)) for key in keys]]), *ctx.figure("zero_signal")]


def _repair_row(cond: str, label: str, c: dict | None, ncols: int) -> list[str]:
    """One S0 Table 2 row: a condition's repair outcome and its McNemar vs R-resample."""
    if c is None:
        return [label, "*not run* (condition not in `repair.conditions`)", *[""] * (ncols - 2)]
    mc = c.get("mcnemar_vs_resample")
    test = (["(reference)", NA] if cond == RESAMPLE or not mc
            else [f"{mc['b']} / {mc['c']}", _p(mc["pvalue"])])
    return [label, _f(c["success_rate"], 4), _f(c["successes"]), _f(c["n"]),
            _f(c["new_error_rate"], 4), _f(c["feedback_tokens"], 2), *test]


def repair_table(ctx: Context) -> list[str]:
    """S0 Table 2: repair success of the SFT policy's failed attempts per condition."""
    lines = ["## Feedback repair by condition (S0 Table 2)", ""]
    m = ctx.data.get("repair.json")
    if m is None:
        return lines + [ctx.not_run("repair.json"), "", *ctx.figure("repair")]
    header = ["condition", "success", "count", "n", "new error", "avg. feedback tokens",
              "McNemar vs R-resample (b / c)", "p"]
    rows = [_repair_row(cond, label, m["conditions"].get(cond), len(header))
            for cond, label in REPAIR_LABELS.items()]
    return lines + [
        (f"{m.get('n_attempts', NA)} fixed failed attempts of the SFT policy, each repaired "
         f"under every condition ({m.get('k', NA)} sample(s) each); McNemar on the matched "
         "attempts (b = repaired by the condition only, c = by R-resample only)."), "",
        *_table(header, rows), *ctx.figure("repair")]


DISTILL_COLS = ("pass@1", "pass@k", "avg_score", "all_fail", "zero_informative",
                "reward_contrast")
NOT_TRAINED = "not trained (no successful repairs)"


def _distill_cells(ctx: Context, policy: str, k: int) -> list[str]:
    """The eval half of an S0 Table 3 row, every number from the same k-sample groups
    (eval.diagnostics_at_k), then the all-sample p and S0's McNemar vs the reference."""
    d = ctx.ev(policy, "diagnostics_by_k", f"k{k}") or {}
    return [*(_f(d.get(key), 4 if key not in ("pass@1", "pass@k") else 3)
              for key in DISTILL_COLS), _pvalue(ctx, policy, 1), _mcnemar(ctx, policy, 1)]


def distill_table(ctx: Context) -> list[str]:
    """S0 Table 3: SFT and RLOO, then SFT self-distilled on each condition's repairs."""
    k = 8 if 8 in ctx.ks else ctx.kmax
    header = ["policy", "training signal", "examples", "pass@1", f"pass@{k}", "avg. score",
              "all-fail", "zero-info", "contrast", f"p vs {ctx.ref} (all samples)",
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
             f"*{NOT_TRAINED}*."), "", *_table(header, rows)]


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
                NA if name == "int" else _p(_get(m, f"{prefix}mcnemar", f"int_vs_{name}", "pvalue"))]

    rows = [[name, _f(_get(m, "pass_at_k", name, "pass@1")), *cells("", name),
             *cells("heldout_", name)] for name in INT_POLICIES]
    return lines + [
        (f"{_f(m.get('unsolved'))} of {_f(m.get('n_problems'))} train problems unsolved by "
         f"the SFT policy in {k} samples: {_f(m.get('unsolved_train'))} trained on (interventions, "
         f"patch, RL), {_f(m.get('unsolved_heldout'))} held out (never trained on). "
         f"{_f(iv.get('found'))} interventions found, {_f(iv.get('kept'))} kept by the filter. "
         f"`plain_rl` is S3's control: the same RL, same problems and steps, from SFT without "
         f"the patch. pass@{k} with a fresh sampling seed; McNemar of `int` against each policy."),
        "", *_table(["policy", "pass@1 (trained-on)", f"pass@{k} (trained-on)", "p vs int",
                     f"pass@{k} (held-out)", "p vs int (held-out)"], rows)]


def significance_section(ctx: Context) -> list[str]:
    lines = ["## Significance (compare)", ""]
    if "compare.json" not in ctx.data:
        return lines + [ctx.not_run("compare.json"), ""]
    from .compare import compare_markdown  # the compare stage's own tables

    report = _test_split_in_order(ctx.data["compare.json"], ctx.inp.policies)
    body = compare_markdown(report).splitlines()[1:]  # drop its title
    return lines + ["The test split (all splits: `reports/compare.md`)."] + body + [""]


# --------------------------------------------------------------------------- seed claims

ALPHA = 0.05
NUMBER_MISUSE = ("NUMBER_UNKNOWN", "NUMBER_REUSED", "NUMBER_OMITTED")


def _verdict(p: float | None, right_way: bool) -> str:
    if p is None:
        return "not testable: no test"
    if p >= ALPHA:
        return "not significant"
    return "reproduced" if right_way else "contradicted"


def _pair(ctx: Context, a: str, b: str, k: int) -> tuple[dict | None, str | None]:
    """compare.json's result of a vs b at k on the test split, or why there is none."""
    from .compare import pair_key

    rep = ctx.data.get("compare.json")
    if rep is None:
        return None, "no compare.json"
    key = pair_key(a, b)
    if key in (rep.get("skipped") or {}):
        return None, rep["skipped"][key]
    r = _get(rep, "pairs", key, "test", f"k{k}")
    return (r, None) if r else (None, f"[{a}, {b}] at k={k} not in `compare.pairs`")


def _diff_cell(r: dict) -> str:
    return (f"{r['pass_diff']:+.3f} [{r['pass_diff_ci_low']:+.3f}, "
            f"{r['pass_diff_ci_high']:+.3f}]")


def _claim_zero_informative(ctx: Context) -> list[str]:
    from scipy.stats import binomtest

    claim, seed = "S0: zero-informative groups of the SFT policy at K=8", "59.2% (500 prompts)"
    m = ctx.data.get("diagnose.json")
    if m is None or m.get("zero_informative") is None:
        return [claim, seed, NA, NA, "not testable: no diagnose.json"]
    n = int(m["n_problems"])
    hits = round(m["zero_informative"] * n)
    p = binomtest(hits, n, 0.592).pvalue
    return [claim, seed, f"{m['zero_informative']:.1%} ({hits}/{n}, K={m.get('k')})",
            f"exact binomial vs 0.592: p {p:.3g}",
            "reproduced (consistent with 59%)" if p >= ALPHA else
            "contradicted (differs from 59%)"]


def _claim_feedback(ctx: Context) -> list[str]:
    claim = "S0: execution feedback (F1-F4) repairs no more than a fresh resample (R)"
    seed = "R-resample best: 6.9% vs every F lower"
    m = ctx.data.get("repair.json")
    conds = (m or {}).get("conditions", {})
    fs = {c: v for c, v in conds.items() if c.startswith("F") and c not in ("F0", "Fshuf")}
    if "R" not in conds or not fs:
        return [claim, seed, NA, NA, "not testable: no repair.json with R and F conditions"]
    best = max(fs, key=lambda c: fs[c]["successes"])
    mc = fs[best].get("mcnemar_vs_resample") or {}
    run = (f"R {conds['R']['successes']}/{conds['R']['n']}; best F ({best}) "
           f"{fs[best]['successes']}/{fs[best]['n']}")
    test = f"McNemar {best} vs R (b {mc.get('b')} / c {mc.get('c')}): p {_p(mc.get('pvalue'))}"
    if "F0" in conds:  # the repair wrapper without feedback text
        f0 = conds["F0"]
        run += f"; F0 {f0['successes']}/{f0['n']}"
        vs_f0 = (fs[best].get("mcnemar_vs_F0") or fs[best].get("mcnemar_vs_f0") or {})
        if vs_f0:
            test += f"; {best} vs F0: p {_p(vs_f0.get('pvalue'))}"
    ok = conds["R"]["successes"] >= fs[best]["successes"]
    return [claim, seed, run, test, _verdict(mc.get("pvalue"), ok)]


def _claim_self_distill(ctx: Context) -> list[str]:
    claim = "S0: self-distillation on successful resamples (SD-R) raises pass@1 over SFT"
    seed = "pass@1 0.086 → 0.168"
    r, why = _pair(ctx, "distill_R", ctx.ref, 1)
    if r is None:
        return [claim, seed, NA, NA, f"not testable: {why}"]
    run = f"pass@1 {r['pass_b']:.3f} → {r['pass_a']:.3f}, diff {_diff_cell(r)}"
    return [claim, seed, run, f"paired permutation, all samples: p {_p(r['pass_diff_pvalue'])}",
            _verdict(r["pass_diff_pvalue"], r["pass_diff"] > 0)]


_COUNT_KEYS = (("zero_std_groups", "groups"), ("zero_std_groups_total", "groups_total"),
               ("n_zero_std_groups", "n_groups"))


def _zero_std_counts(m: dict | None) -> tuple[int, int] | None:
    for zk, nk in _COUNT_KEYS:
        if isinstance(m, dict) and isinstance(m.get(zk), int) and isinstance(m.get(nk), int):
            return m[zk], m[nk]
    return None


def _claim_shaped(ctx: Context) -> list[str]:
    claim = "S1: the shaped reward lowers the zero-std group fraction vs binary (RLOO)"
    seed = "binary flatlines; dense reward restores learning (~0.73 3-number rollout acc.)"
    binary, shaped = ctx.data.get("rloo.json"), ctx.data.get("rloo_shaped.json")
    cb, cs = _zero_std_counts(binary), _zero_std_counts(shaped)
    if cb is None or cs is None:
        which = "rloo_shaped.json" if shaped is None else "zero-std group counts"
        return [claim, seed, NA, NA, f"not testable: no {which} (stage `rloo_shaped`)"]
    from statsmodels.stats.proportion import proportions_ztest

    _, p = proportions_ztest([cs[0], cb[0]], [cs[1], cb[1]])
    run = (f"zero-std groups over all steps: shaped {cs[0]}/{cs[1]} ({cs[0] / cs[1]:.1%}) vs "
           f"binary {cb[0]}/{cb[1]} ({cb[0] / cb[1]:.1%})")
    return [claim, seed, run, f"two-proportion z-test: p {_p(float(p))}",
            _verdict(float(p), cs[0] / cs[1] < cb[0] / cb[1])]


def _claim_ipo(ctx: Context) -> list[str]:
    claim = "S1: IPO pair source matters: verified teacher pairs beat scripted (solver) pairs"
    seed = "avg pass@k easyneg 0.62 ≈ hardneg 0.61 > scripted 0.46"
    avgs = {}
    for src in IPO_SOURCES:
        vals = [v for k in ctx.ks if (v := ctx.ev(f"ipo_{src}", "test", f"pass@{k}")) is not None]
        if vals:
            avgs[src] = float(np.mean(vals))
    if not avgs:
        return [claim, seed, NA, NA, "not testable: no IPO policy evaluated"]
    run = "avg pass@k " + " > ".join(f"{s} {v:.3f}" for s, v in
                                      sorted(avgs.items(), key=lambda kv: -kv[1]))
    for a in ("ipo_easyneg", "ipo_hardneg"):
        for a_, b_, sign in ((a, "ipo_scripted", 1), ("ipo_scripted", a, -1)):
            r, _ = _pair(ctx, a_, b_, 1)
            if r is not None:
                return [claim, seed, run, (f"{a} vs ipo_scripted, paired permutation: "
                                           f"p {_p(r['pass_diff_pvalue'])}"),
                        _verdict(r["pass_diff_pvalue"], sign * r["pass_diff"] > 0)]
    vs_ref = ", ".join(f"{s} {_pvalue(ctx, f'ipo_{s}', 1)}" for s in avgs)
    return [claim, seed, run, f"only each source vs {ctx.ref} (p: {vs_ref})",
            "not testable: no source-vs-source pair in `compare.pairs`"]


def _claim_rloo(ctx: Context) -> list[str]:
    claim = "S4: RLOO raises pass@1 but not pass@16 (sharpening)"
    seed = "pass@1 0.354 → 0.598; pass@16 0.800 → 0.740"
    r1, why1 = _pair(ctx, "rloo", ctx.ref, 1)
    rk, whyk = _pair(ctx, "rloo", ctx.ref, ctx.kmax)
    if r1 is None or rk is None:
        return [claim, seed, NA, NA, f"not testable: {why1 or whyk}"]
    run = (f"pass@1 {r1['pass_b']:.3f} → {r1['pass_a']:.3f} ({_diff_cell(r1)}); "
           f"pass@{ctx.kmax} {rk['pass_b']:.3f} → {rk['pass_a']:.3f} ({_diff_cell(rk)})")
    test = (f"paired permutation, all samples: k=1 p {_p(r1['pass_diff_pvalue'])}, "
            f"k={ctx.kmax} p {_p(rk['pass_diff_pvalue'])}")
    up1 = r1["pass_diff_pvalue"] < ALPHA and r1["pass_diff"] > 0
    upk = rk["pass_diff_pvalue"] < ALPHA and rk["pass_diff"] > 0
    if r1["pass_diff_pvalue"] >= ALPHA:
        verdict = "not significant (pass@1)"
    else:
        verdict = "reproduced" if up1 and not upk else "contradicted"
    return [claim, seed, run, test, verdict]


def _claim_opd_ac(ctx: Context) -> list[str]:
    claim = f"S4: anti-collapse OPD keeps pass@{ctx.kmax} above plain OPD"
    seed = "pass@16 0.840 vs 0.780"
    r, why = _pair(ctx, "opd_ac", "opd", ctx.kmax)
    if r is None:
        return [claim, seed, NA, NA, f"not testable: {why}"]
    run = f"pass@{ctx.kmax} {r['pass_a']:.3f} vs {r['pass_b']:.3f}, diff {_diff_cell(r)}"
    return [claim, seed, run, f"paired permutation, all samples: p {_p(r['pass_diff_pvalue'])}",
            _verdict(r["pass_diff_pvalue"], r["pass_diff"] > 0)]


def _claim_int(ctx: Context) -> list[str]:
    claim = "S3: interventions then RL beat plain RL on previously unsolved problems"
    seed = "InT + RL > RL on D_hard (S3 Table 2, Fig. 8)"
    m = ctx.data.get("int.json")
    plain = _get(m, "heldout_pass_at_k", "plain_rl")
    if m is None or not isinstance(plain, dict):
        return [claim, seed, NA, NA, "not testable: int.json has no plain-RL arm"]
    k = m.get("k", "K")
    a, b = _get(m, "heldout_pass_at_k", "int", "pass@k"), plain.get("pass@k")
    ta, tb = (_get(m, "pass_at_k", n, "pass@k") for n in ("int", "plain_rl"))
    run = (f"pass@{k} held-out ({_f(m.get('unsolved_heldout'))} problems): int {_f(a)} vs "
           f"plain RL {_f(b)}; trained-on: {_f(ta)} vs {_f(tb)}")
    p = _get(m, "heldout_mcnemar", "int_vs_plain_rl", "pvalue")
    return [claim, seed, run, f"McNemar on the held-out set: p {_p(p)}",
            _verdict(p, a is not None and b is not None and a > b)]


CLAIMS = (_claim_zero_informative, _claim_feedback, _claim_self_distill, _claim_shaped,
          _claim_ipo, _claim_rloo, _claim_opd_ac, _claim_int)


def seed_claims_table(ctx: Context) -> list[str]:
    """#15.3: one row per headline claim of the seeds, with this run's number, the test
    and a verdict; a claim whose inputs are absent says why it is not testable."""
    rows = [claim(ctx) for claim in CLAIMS]
    return ["## Seed claims vs this run", "",
            (f"Verdicts at alpha {ALPHA}: reproduced = significant in the seed's direction, "
             "contradicted = significant the other way (or, for a rate, different from the "
             "seed's), not significant = the test cannot tell at this size. Paired tests use "
             "every sample (sign-flip permutation on per-problem pass@k); the seeds ran "
             "0.5B-7B models on 50-500 problems, this run a ~1M-parameter student on the "
             "test split below."), "",
            *_table(["claim", "seed", "this run", "test", "verdict"], rows)]


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
        lines.append(f"- **OPD arms are underpowered**: `opd` and `opd_ac` train on "
                     f"{opd['groups']} prompt groups each against RLOO's {rloo['groups']} (S4 "
                     "gives them comparable budgets), and the teacher is a ~3M model, not a "
                     "much stronger one; read their rows as a smoke-level check of the "
                     "method, not as S4's comparison.")
    strategies = sorted(_get(ctx.data.get("teacher_traces.json"), "yield_by_strategy")
                         or {})
    if strategies:
        lines.append(f"- **Teacher strategies**: {len(strategies)} "
                     f"({', '.join(strategies)}) instead of S1's eight rotated reasoning "
                     "strategies, so the strategy diversity of teacher traces and pairs is "
                     "far smaller.")
    return lines + [""]


# report.md's sections, in order
SECTIONS = (header_section, seed_claims_table, caveats_section, policies_table, best_of_n_tables, ipo_table, training_tables,
            diagnose_table, repair_table, distill_table, failures_section, interventions_table,
            significance_section)


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
                   reference: str = "sft", best_of_n_policy: str | None = None) -> str:
    """report.md: the seeds' tables filled from the metrics, each figure embedded (figure
    paths relative to the report: fig_rel/<name>.png)."""
    ctx = make_context(inp, figures, fig_rel, reference, best_of_n_policy)
    return "\n".join(line for section in SECTIONS for line in section(ctx)).rstrip() + "\n"


def render_report(metrics_dir: str | Path, dvclive_dir: str | Path, out_md: str | Path,
                  fig_dir: str | Path, configured=(), ipo_sources=IPO_SOURCES,
                  distill=tuple(REPAIR_LABELS), require_all: bool = True, reference: str = "sft",
                  best_of_n_policy: str | None = None, dpi: int = 100) -> Inputs:
    """Load, check (before drawing anything), draw, write. Returns the loaded inputs.

    configured: the policy names of `evaluate.policies`; ipo_sources / distill: the IPO pair
    sources and distill conditions this run trains (`ipo.sources`, `distill.conditions`).
    """
    inp = load_inputs(metrics_dir, dvclive_dir, configured, ipo_sources, distill)
    if require_all and inp.missing:
        raise MissingInputs(inp.missing)
    figures = write_figures(inp, fig_dir, dpi)
    fig_rel = Path(os.path.relpath(Path(fig_dir), Path(out_md).parent)).as_posix()
    write_text(out_md, build_markdown(inp, figures, fig_rel, reference, best_of_n_policy))
    return inp
