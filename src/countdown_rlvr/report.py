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

from .figures import CURVES, FIGURES, REPAIR, RESAMPLE, RL_RUNS, pass_ks, write_figures
from .io import write_text
from .pairs import SOURCES as IPO_SOURCES  # SPEC §4 pair sources (ipo.sources)

# The seeds' table rows. Metrics files and policy names follow the producing stages:
# ipo/<source>.json + eval/ipo_<source>.json, distill/<key>.json + eval/distill_<key>.json.
# The RL runs and the repair conditions come from figures.py (their figures draw them too).
# int.json pass_at_k rows: the POLICIES of stages/int.py, a script (and a torch one), so
# not importable here
INT_POLICIES = ("sft", "int_sft", "int", "int_solver_sft", "rloo")
REQUIRED_CURVES = ("reward_mean", "zero_std_frac", "entropy")  # kl only when rloo.kl_coef > 0
NA = "–"


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
        return {p: self.data[f"eval/{p}.json"] for p in self.policies
                if f"eval/{p}.json" in self.data}


# --------------------------------------------------------------------------- inputs

def report_policies(configured=(), ipo_sources=IPO_SOURCES, distill=tuple(REPAIR)) -> list[str]:
    """The seeds' policies of this configuration, then any other configured one (e.g. a
    teacher), in params order."""
    seeds = ("base", "sft", *(f"ipo_{s}" for s in ipo_sources), *RL_RUNS, "int",
             *(f"distill_{c}" for c in distill))
    return [*seeds, *(p for p in configured if p not in seeds)]


def expected_inputs(policies, ipo_sources=IPO_SOURCES, distill=tuple(REPAIR)) -> dict[str, str]:
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
                ipo_sources=IPO_SOURCES, distill=tuple(REPAIR)) -> Inputs:
    """Read whatever exists of the report's inputs; record the expected ones that are absent.

    Expected: the files of this configuration (configured policies, `ipo_sources`, `distill`
    conditions) and the RLOO curves of REQUIRED_CURVES (the rest, and OPD's, are drawn when
    present). The seeds' other rows
    (e.g. an IPO source not in `ipo.sources`) are read when present, never required.
    """
    metrics_dir, dvclive_dir = Path(metrics_dir), Path(dvclive_dir)
    policies = report_policies(configured, ipo_sources, distill)
    stages = expected_inputs(policies, ipo_sources, distill)
    optional = expected_inputs(report_policies(configured), IPO_SOURCES, tuple(REPAIR))
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
    """McNemar p of policy vs the reference from compare.json."""
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
                   f"({test['n_groups']} groups). McNemar p-values are against "
                   f"`{ctx.ref}` (`report.reference`) on paired per-problem outcomes from "
                   "`compare.json`; NA = pair not in `compare.pairs`."), ""]
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
              f"OOD pass@{kx}", f"p vs {ref} (k={k1})", f"p vs {ref} (k={kx})",
              f"pass@{k1} - {ref} [95% CI]"]
    rows = [ctx.marker_row(p, [f"eval/{p}.json"], len(header)) or [
        p, _ci(ctx, p, k1), _ci(ctx, p, kx),
        *(_f(ctx.ev(p, "test", f"n{m}", f"pass@{k}")) for k in (k1, kx) for m in (3, 4)),
        _f(ctx.ev(p, "ood", f"pass@{k1}")), _f(ctx.ev(p, "ood", f"pass@{kx}")),
        _pvalue(ctx, p, k1), _pvalue(ctx, p, kx), _pass_diff(ctx, p, k1)]
        for p in ctx.inp.policies if not p.startswith("distill_")]
    return ["## Policies (S4 Table 1)", "",
            ("Unbiased pass@k on the held-out 3-4-number test split, its 3-/4-number parts "
             "and the OOD split (5-6 numbers, targets 250-1000). McNemar p uses sample 0 of "
             f"each problem; the last column is the pass@{k1} difference from every "
             "sample, with its paired bootstrap interval over problems."), "",
            *_table(header, rows), *ctx.figure("pass_at_k"), *ctx.figure("splits")]


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
              f"p vs {ctx.ref} (k=1)"]
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
    return lines + ["### RLOO, OPD and anti-collapse OPD", "",
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
            for cond, label in REPAIR.items()]
    return lines + [
        (f"{m.get('n_attempts', NA)} fixed failed attempts of the SFT policy, each repaired "
         f"under every condition ({m.get('k', NA)} sample(s) each); McNemar on the matched "
         "attempts (b = repaired by the condition only, c = by R-resample only)."), "",
        *_table(header, rows), *ctx.figure("repair")]


def _distill_cells(ctx: Context, policy: str, k: int) -> list[str]:
    """The eval half of an S0 Table 3 row: pass@1, pass@k, diagnostics, p vs reference."""
    return [_f(ctx.ev(policy, "test", "pass@1")), _f(ctx.ev(policy, "test", f"pass@{k}")),
            *(_f(ctx.ev(policy, "diagnostics", key), 4) for key in
              ("avg_score", "all_fail", "zero_informative", "reward_contrast")),
            _pvalue(ctx, policy, 1)]


def distill_table(ctx: Context) -> list[str]:
    """S0 Table 3: SFT and RLOO, then SFT self-distilled on each condition's repairs."""
    k = 8 if 8 in ctx.ks else ctx.kmax
    header = ["policy", "training signal", "examples", "pass@1", f"pass@{k}", "avg.",
              "all-fail", "zero-info", "contrast", f"p vs {ctx.ref} (k=1)"]
    n = len(header)
    rows = [ctx.marker_row("SFT", ["eval/sft.json"], n) or [
                "SFT", "SFT traces", _f(_get(ctx.data.get("sft.json"), "examples")),
                *_distill_cells(ctx, "sft", k)],
            ctx.marker_row("RLOO", ["eval/rloo.json"], n) or [
                "RLOO", f"{_get(ctx.data.get('rloo.json'), 'reward', default='?')} reward", NA,
                *_distill_cells(ctx, "rloo", k)]]
    for cond, label in REPAIR.items():
        name, rel = f"SD-{cond}", f"distill/{cond}.json"
        rows.append(ctx.marker_row(name, [rel, f"eval/distill_{cond}.json"], n) or [
            name, f"successful {label} repairs", _f(ctx.data[rel].get("examples")),
            *_distill_cells(ctx, f"distill_{cond}", k)])
    return ["## Self-distillation per condition (S0 Table 3)", "",
            ("No-feedback policies on the test split; SD-X = SFT further trained on the "
             "successful repairs of condition X (examples = distinct successful repairs)."),
            "", *_table(header, rows)]


def failures_section(ctx: Context) -> list[str]:
    return ["## Failure types", "", *ctx.figure("failures")]


def interventions_table(ctx: Context) -> list[str]:
    """S3: pass@k on the problems SFT leaves unsolved, McNemar of `int` vs each policy."""
    m = ctx.data.get("int.json")
    lines = ["## Interventions with the solver as oracle (S3)", ""]
    if m is None:
        return lines + [ctx.not_run("int.json"), ""]
    iv, k = m.get("interventions", {}), m.get("k", "K")
    rows = [[name, *(_f(_get(m, "pass_at_k", name, key))
                     for key in ("pass@1", "pass@k", "solved")),
             NA if name == "int" else _p(_get(m, "mcnemar", f"int_vs_{name}", "pvalue"))]
            for name in INT_POLICIES]
    return lines + [
        (f"{_f(m.get('unsolved'))} of {_f(m.get('n_problems'))} train problems unsolved by "
         f"the SFT policy in {k} samples; {_f(iv.get('found'))} interventions found, "
         f"{_f(iv.get('kept'))} kept by the filter. pass@{k} on those problems with a fresh "
         "sampling seed; McNemar of `int` against each policy."), "",
        *_table(["policy", "pass@1", f"pass@{k}", "solved", "p (int vs policy)"], rows)]


def significance_section(ctx: Context) -> list[str]:
    lines = ["## Significance (compare)", ""]
    if "compare.json" not in ctx.data:
        return lines + [ctx.not_run("compare.json"), ""]
    from .compare import compare_markdown  # the compare stage's own tables

    report = _test_split_in_order(ctx.data["compare.json"], ctx.inp.policies)
    body = compare_markdown(report).splitlines()[1:]  # drop its title
    return lines + ["The test split (all splits: `reports/compare.md`)."] + body + [""]


# report.md's sections, in order
SECTIONS = (header_section, policies_table, best_of_n_tables, ipo_table, training_tables,
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
                  distill=tuple(REPAIR), require_all: bool = True, reference: str = "sft",
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
