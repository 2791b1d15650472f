"""Figures and reports/report.md, from the stages' measurement files only.

The inputs are the JSON files the other stages write under reports/details/ and the
dvclive per-step TSVs under dvclive/<run>/plots/metrics/. Nothing here loads a model or a
dataset, so the report re-renders in seconds and always agrees with `dvc metrics show`
(whose headline numbers are picked from the same files).

    expected_inputs(policies)           -> {metrics file: stage that writes it}
    load_inputs(metrics, dvclive, ...)  -> Inputs (the loaded files, curves and what is missing)
    write_figures(inputs, fig_dir)      -> {figure name: file name}
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
from matplotlib import colormaps
from matplotlib.figure import Figure

from .io import atomic_path, write_text

# The seeds' table rows. Metrics files and policy names follow the producing stages:
# ipo/<source>.json + eval/ipo_<source>.json, distill/<key>.json + eval/distill_<key>.json.
IPO_SOURCES = ("scripted", "easyneg", "hardneg", "base")  # SPEC §4 pair sources (ipo.sources)
RL_RUNS = ("rloo", "opd", "opd_ac")  # runs with per-step dvclive curves
# repair.json / distill condition key (research.repair.CONDITIONS) -> S0 Table 2 label
REPAIR = {"F1": "F1 generic", "F2": "F2 error-class", "F3": "F3 localized",
          "F4": "F4 targeted", "Fshuf": "F-shuffled", "R": "R-resample"}
RESAMPLE = "R"
INT_POLICIES = ("sft", "int_sft", "int", "int_solver_sft", "rloo")  # int.json pass_at_k rows
# dvclive metric (TSV file stem, under any sub-folder such as train/) -> panel title
CURVES = {"reward_mean": "reward mean", "zero_std_frac": "fraction of zero-std groups",
          "kl": "KL to reference (k3)", "entropy": "entropy"}
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


# --------------------------------------------------------------------------- figures

def _figure(ncols: int = 1, nrows: int = 1, size=(7.0, 4.2)):
    # Figure without pyplot: no global state, no GUI backend, nothing kept alive afterwards
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False).ravel()


def _color(i: int):
    return colormaps["tab20"](i % 20)  # 20 distinguishable colours for up to ~17 policies


def _ks(block: dict) -> list[int]:
    return sorted(int(key[5:]) for key in block if key.startswith("pass@"))


def _grouped_bars(ax, names: list[str], series: dict[str, list], ylabel: str) -> None:
    x, width = np.arange(len(names)), 0.8 / len(series)
    for j, (label, values) in enumerate(series.items()):
        vals = [np.nan if v is None else v for v in values]
        ax.bar(x + (j - (len(series) - 1) / 2) * width, vals, width, label=label)
    ax.set_xticks(x, names, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.margins(y=0.2)  # headroom for a one-row legend above the bars ("best" is slow)
    ax.legend(fontsize=8, loc="upper center", ncols=len(series))


def fig_pass_at_k(inp: Inputs) -> Figure:
    fig, (ax,) = _figure()
    all_ks = set()
    for i, (name, m) in enumerate(inp.evals().items()):
        ks = _ks(m["test"])
        all_ks.update(ks)
        ax.plot(ks, [m["test"][f"pass@{k}"] for k in ks], marker="o", color=_color(i),
                label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(all_ks), [str(k) for k in sorted(all_ks)])
    ax.set(xlabel="k (samples)", ylabel="pass@k (test)", title="pass@k per policy")
    ax.legend(fontsize=7, ncols=2, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def fig_splits(inp: Inputs) -> Figure:
    evals = inp.evals()
    fig, axes = _figure(2, size=(11.0, 4.2))
    kmax = max(max(_ks(m["test"])) for m in evals.values())
    for ax, k in zip(axes, (1, kmax)):
        series = {f"{m}-number": [_get(e, "test", f"n{m}", f"pass@{k}") for e in evals.values()]
                  for m in (3, 4)}
        series["OOD (5-6)"] = [e.get("ood", {}).get(f"pass@{k}") for e in evals.values()]
        _grouped_bars(ax, list(evals), series, f"pass@{k}")
        ax.set_title(f"pass@{k} by operand count")
    return fig


def fig_zero_signal(inp: Inputs) -> Figure:
    evals = inp.evals()
    fig, (ax,) = _figure(size=(9.0, 4.2))
    keys = {"all-fail": "all_fail", "all-correct": "all_correct",
            "zero-informative": "zero_informative"}
    _grouped_bars(ax, list(evals), {label: [e["diagnostics"][k] for e in evals.values()]
                                    for label, k in keys.items()}, "fraction of test groups")
    ax.set_title("Zero-signal groups (binary reward, n samples per prompt)")
    return fig


def fig_failures(inp: Inputs) -> Figure:
    evals = inp.evals()
    fig, (ax,) = _figure(size=(9.0, 0.8 + 0.3 * len(evals)))
    codes = list(next(iter(evals.values()))["failures"])  # stable order: FAILURES, correct
    left = np.zeros(len(evals))
    for i, code in enumerate(codes):
        frac = np.array([e["failures"].get(code, 0) / max(1, sum(e["failures"].values()))
                         for e in evals.values()])
        ax.barh(list(evals), frac, left=left, color=_color(2 * i), label=code)
        left += frac
    ax.invert_yaxis()
    ax.set(xlabel="fraction of test samples", title="Verifier outcome per sample")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def fig_best_of_n(inp: Inputs) -> Figure:
    fig, axes = _figure(2, size=(11.0, 4.2))
    for i, (name, m) in enumerate(inp.evals().items()):
        ns = sorted(int(key[1:]) for key in m["best_of_n"])  # keys "N1", "N2", ...
        budgets = [m["best_of_n"][f"N{n}"] for n in ns]
        acc = [b["expected_acc"] for b in budgets]
        axes[0].plot(ns, acc, marker="o", color=_color(i), label=name)
        axes[1].plot([b["expected_samples"] for b in budgets], acc, marker="o", color=_color(i))
    axes[0].set_xscale("log", base=2)
    axes[0].xaxis.set_major_formatter("{x:g}")
    axes[0].set(xlabel="budget N", ylabel="accuracy (verifier-guided best-of-N)")
    axes[1].set(xlabel="average samples drawn (early stopping)", ylabel="accuracy")
    axes[0].legend(fontsize=7, ncols=2, loc="upper left")
    fig.suptitle("Best-of-N accuracy vs budget and vs samples actually drawn (S4 eq. 5)")
    return fig


def fig_repair(inp: Inputs) -> Figure:
    conds = inp.data["repair.json"]["conditions"]
    names = [c for c in REPAIR if c in conds]
    rates = [conds[c]["success_rate"] for c in names]
    fig, (ax,) = _figure(size=(7.0, 4.0))
    bars = ax.bar([REPAIR[c] for c in names], rates,
                  color=[_color(6 if c == RESAMPLE else 0) for c in names])
    ax.bar_label(bars, [str(conds[c]["successes"]) for c in names], fontsize=8)
    ax.set_ylim(0, 1.25 * max(rates + [1e-3]))  # room for the labels and the legend
    if RESAMPLE in conds:
        ax.axhline(conds[RESAMPLE]["success_rate"], ls="--", color="grey",
                   label="R-resample (same-budget control)")
        ax.legend(fontsize=8, loc="upper left")
    ax.tick_params(axis="x", labelsize=8)
    ax.set(ylabel="repair success rate", title=f"Repair success by condition "
           f"({inp.data['repair.json'].get('n_attempts', '?')} failed attempts; bar label = count)")
    return fig


def fig_rl_curves(inp: Inputs) -> Figure:
    fig, axes = _figure(2, 2, size=(10.5, 6.5))
    handles = {}
    for ax, (metric, title) in zip(axes, CURVES.items()):
        for i, run in enumerate(RL_RUNS):
            if metric in inp.curves.get(run, {}):
                (handles[run],) = ax.plot(*inp.curves[run][metric], color=_color(2 * i), lw=1.2)
        ax.set(title=title, xlabel="step")
        if not ax.lines:  # e.g. KL with rloo.kl_coef = 0: no reference model, nothing logged
            ax.text(0.5, 0.5, "not logged", ha="center", transform=ax.transAxes, color="grey")
    fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=8)
    fig.suptitle("RL training curves (dvclive)")
    return fig


# name -> (draw function, caption, which inputs it needs: a metrics file or a predicate)
FIGURES = {
    "pass_at_k": (fig_pass_at_k, "pass@k per policy (test split)", "eval"),
    "splits": (fig_splits, "3-number / 4-number / OOD split per policy", "eval"),
    "best_of_n": (fig_best_of_n, "Best-of-N accuracy vs budget and vs average samples", "eval"),
    "zero_signal": (fig_zero_signal, "Zero-signal groups per policy", "eval"),
    "failures": (fig_failures, "Failure-type breakdown per policy", "eval"),
    "repair": (fig_repair, "Repair success by condition", "repair.json"),
    "rl_curves": (fig_rl_curves, "RLOO / OPD training curves", "curves"),
}


def _has(inp: Inputs, need: str) -> bool:
    if need == "eval":
        return bool(inp.evals())
    if need == "curves":
        return bool(inp.curves)
    return need in inp.data


def write_figures(inp: Inputs, fig_dir: str | Path, dpi: int = 100) -> dict[str, str]:
    """Draw every figure whose inputs exist into a fresh fig_dir (atomically: no stale or
    half-written figures). PNGs carry no Software/date metadata, so reruns are byte-identical."""
    written = {}
    with atomic_path(fig_dir) as tmp:
        tmp.mkdir()
        for name, (draw, _, need) in FIGURES.items():
            if _has(inp, need):
                draw(inp).savefig(tmp / f"{name}.png", dpi=dpi, metadata={"Software": None})
                written[name] = f"{name}.png"
    return written


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


class _Builder:
    """Sections of report.md, each a method returning markdown lines; `build_markdown` is
    the one entry point. A table row whose inputs are missing is `marker_row(...)`."""

    def __init__(self, inp: Inputs, figures: dict[str, str], fig_rel: str, reference: str,
                 bon_policy: str | None):
        self.inp, self.d, self.figures, self.fig_rel = inp, inp.data, figures, fig_rel
        self.ref = reference
        evals = inp.evals()
        self.ks = sorted({k for m in evals.values() for k in _ks(m["test"])}) or [1]
        self.kmax = self.ks[-1]
        self.bon = bon_policy or (max(evals, key=lambda p: evals[p]["test"]["pass@1"])
                                  if evals else None)

    # -- helpers
    def not_run(self, *rels: str) -> str | None:
        """The marker for the first missing file among rels, None when all are present."""
        for rel in rels:
            if rel not in self.d:
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
        return _get(self.d.get(f"eval/{policy}.json"), *path)

    def ci(self, policy: str, k: int, split: str = "test") -> str:
        v = _get(self.d.get("compare.json"), "policies", policy, split, f"pass@{k}")
        if v is None:
            return _f(self.ev(policy, split, f"pass@{k}"))
        return f"{v['value']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"

    def vs_ref(self, policy: str, k: int, split: str = "test") -> tuple[dict | None, int]:
        """The compare.json result of policy vs the reference (either pair order) and the
        sign that makes its differences read policy - reference."""
        from .compare import pair_key

        pairs = _get(self.d.get("compare.json"), "pairs", default={})
        for (a, b), sign in (((policy, self.ref), 1), ((self.ref, policy), -1)):
            r = _get(pairs, pair_key(a, b), split, f"k{k}")
            if r is not None:
                return r, sign
        return None, 1

    def pvalue(self, policy: str, k: int, split: str = "test") -> str:
        """McNemar p of policy vs the reference from compare.json."""
        if policy == self.ref:
            return "ref."
        r, _ = self.vs_ref(policy, k, split)
        return NA if r is None else _p(r["pvalue"])

    def pass_diff(self, policy: str, k: int, split: str = "test") -> str:
        """pass@k(policy) - pass@k(reference) from all samples, with its paired interval."""
        if policy == self.ref:
            return "ref."
        r, sign = self.vs_ref(policy, k, split)
        if r is None or "pass_diff" not in r:
            return NA
        lo, hi = sorted((sign * r["pass_diff_ci_low"], sign * r["pass_diff_ci_high"]))
        return f"{sign * r['pass_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]"

    # -- sections
    def header(self) -> list[str]:
        lines = ["# countdown-rlvr report", "",
                 ("Generated by `stages/report.py` from `reports/details/` and `dvclive/` "
                  "only; do not edit, re-run `dvc repro report`."), ""]
        test = next((m["test"] for m in self.inp.evals().values()), None)
        if test:
            lines += [(f"Test split: {test['n_problems']} problems, "
                       f"{test['samples_per_group']} samples per prompt and seed "
                       f"({test['n_groups']} groups). McNemar p-values are against "
                       f"`{self.ref}` (`report.reference`) on paired per-problem outcomes from "
                       "`compare.json`; NA = pair not in `compare.pairs`."), ""]
        if self.inp.missing:
            lines += ["**Incomplete run:** these inputs are missing and render as *not run*:", ""]
            lines += [f"- `{path}` (stage `{stage}`)" for path, stage in self.inp.missing.items()]
            lines.append("")
        return lines

    def policies(self) -> list[str]:
        k1, kx, ref = 1, self.kmax, self.ref
        header = ["policy", f"pass@{k1} [95% CI]", f"pass@{kx} [95% CI]", f"n3 pass@{k1}",
                  f"n4 pass@{k1}", f"n3 pass@{kx}", f"n4 pass@{kx}", f"OOD pass@{k1}",
                  f"OOD pass@{kx}", f"p vs {ref} (k={k1})", f"p vs {ref} (k={kx})",
                  f"pass@{k1} - {ref} [95% CI]"]
        rows = [self.marker_row(p, [f"eval/{p}.json"], len(header)) or [
            p, self.ci(p, k1), self.ci(p, kx),
            *(_f(self.ev(p, "test", f"n{m}", f"pass@{k}")) for k in (k1, kx) for m in (3, 4)),
            _f(self.ev(p, "ood", f"pass@{k1}")), _f(self.ev(p, "ood", f"pass@{kx}")),
            self.pvalue(p, k1), self.pvalue(p, kx), self.pass_diff(p, k1)]
            for p in self.inp.policies if not p.startswith("distill_")]
        return ["## Policies (S4 Table 1)", "",
                ("Unbiased pass@k on the held-out 3-4-number test split, its 3-/4-number parts "
                 "and the OOD split (5-6 numbers, targets 250-1000). McNemar p uses sample 0 of "
                 f"each problem; the last column is the pass@{k1} difference from every "
                 "sample, with its paired bootstrap interval over problems."), "",
                *_table(header, rows), *self.figure("pass_at_k"), *self.figure("splits")]

    def best_of_n(self) -> list[str]:
        lines = ["## Test-time best-of-N with the verifier (S4 Table 2)", ""]
        if self.bon is None or self.not_run(f"eval/{self.bon}.json"):
            return lines + [self.not_run(f"eval/{self.bon}.json") or "*not run*", ""]
        bon = self.ev(self.bon, "best_of_n")
        budgets = sorted(bon, key=lambda key: int(key[1:]))  # "N1", "N2", ...
        left = [[key[1:], _f(b["expected_acc"]), _f(b["acc"]),
                 _f(self.ev(self.bon, "test", "n4", f"pass@{key[1:]}")),
                 _f(b["expected_samples"], 2), _f(b["avg_samples"], 2)]
                for key in budgets for b in [bon[key]]]
        top = budgets[-1]
        right = [self.marker_row(p, [f"eval/{p}.json"], 5) or [
            p, _f(self.ev(p, "best_of_n", top, "expected_acc")),
            _f(self.ev(p, "best_of_n", top, "acc")),
            _f(self.ev(p, "test", "n4", f"pass@{top[1:]}")),
            _f(self.ev(p, "best_of_n", top, "expected_samples"), 2)]
            for p in self.inp.policies]
        return lines + [
            (f"Left: accuracy vs budget N for `{self.bon}` (`report.best_of_n_policy`; by "
             "default the highest test pass@1). acc = expected accuracy (pass@N, S4 eq. 5), "
             "realized = on the recorded sample order; avg n = expected samples drawn under "
             "early stopping; 4-num = pass@N on 4-number problems (NA where N is not in "
             "`evaluate.ks`)."), "",
            *_table(["N", "acc", "realized acc", "4-num", "avg n", "realized avg n"], left),
            f"Right: every policy at N = {top[1:]}.", "",
            *_table(["policy", f"best-of-{top[1:]}", "realized", "4-num", "avg n"], right),
            *self.figure("best_of_n")]

    def ipo(self) -> list[str]:
        header = ["pairs source", "pairs", "steps", "loss first → final",
                  "margin first → final", "pref. acc", *(f"p@{k}" for k in self.ks), "avg",
                  f"p vs {self.ref} (k=1)"]

        def eval_cells(p):
            vals = [self.ev(p, "test", f"pass@{k}") for k in self.ks]
            known = [v for v in vals if v is not None]
            avg = float(np.mean(known)) if known else None
            return [*map(_f, vals), _f(avg), self.pvalue(p, 1)]

        configured = [rel[4:-5] for rel in self.inp.stages if rel.startswith("ipo/")]
        rows = []
        for s in dict.fromkeys([*IPO_SOURCES, *configured]):
            m = self.d.get(f"ipo/{s}.json")
            rows.append(self.marker_row(s, [f"ipo/{s}.json", f"eval/ipo_{s}.json"], len(header))
                        or [s, _f(m.get("pairs")), _f(m.get("steps")), _arrow(m, "loss", 4),
                            _arrow(m, "margin", 4), _f(m.get("pref_acc_final")),
                            *eval_cells(f"ipo_{s}")])
        rows += [self.marker_row(f"({p}, reference)", [f"eval/{p}.json"], len(header))
                 or [f"({p}, reference)", *[NA] * 5, *eval_cells(p)] for p in ("sft", "rloo")]
        return ["## IPO by preference-pair source (S1 Table 1)", "",
                ("IPO from the SFT policy, one run per pair source; pass@k on the test split, "
                 "avg = mean over k."), "", *_table(header, rows)]

    def training(self) -> list[str]:
        sft = self.d.get("sft.json")
        lines = ["## Training", "", "### SFT", ""]
        lines += ([self.not_run("sft.json"), ""] if sft is None else _table(
            ["examples", "steps", "loss first → final", "token acc final", "val loss"],
            [[_f(sft.get("examples")), _f(sft.get("steps")), _arrow(sft, "loss", 4),
              _f(sft.get("token_acc_final")), _f(sft.get("val_loss"), 4)]]))
        header = ["run", "reward", "steps", "reward mean", "pass rate", "zero-std groups",
                  "KL", "entropy", "forward KL"]
        rows = []
        for run in RL_RUNS:
            m = self.d.get(f"{run}.json")
            rows.append(self.marker_row(run, [f"{run}.json"], len(header)) or [
                run, _f(m.get("reward")), _f(m.get("steps")), _arrow(m, "reward_mean"),
                _arrow(m, "pass_rate"), _arrow(m, "zero_std_frac"), _arrow(m, "kl", 4),
                _arrow(m, "entropy"), _arrow(m, "forward_kl", 4)])
        return lines + ["### RLOO, OPD and anti-collapse OPD", "",
                        ("Per-step diagnostics, first → final (means over the first and last "
                         "10% of the steps); NA = not logged by that run."), "",
                        *_table(header, rows), *self.figure("rl_curves")]

    def diagnose(self) -> list[str]:
        m = self.d.get("diagnose.json")
        lines = ["## Zero-signal diagnosis (S0 §5.1)", ""]
        if m is None:
            return lines + [self.not_run("diagnose.json"), "", *self.figure("zero_signal")]
        k = m.get("k")
        header = ["pass@1", f"pass@{k}", "avg score", "all-fail", "all-correct",
                  "zero-informative", "reward contrast", "failed attempts"]
        keys = ("pass@1", "pass@k", "avg_score", "all_fail", "all_correct", "zero_informative",
                "reward_contrast", "n_failed_attempts")
        return lines + [
            (f"The SFT policy, K = {k} samples per test prompt ({_f(m.get('n_problems'))} "
             "problems)."), "",
            *_table(header, [[_f(m.get(key)) for key in keys]]), *self.figure("zero_signal")]

    def repair(self) -> list[str]:
        lines = ["## Feedback repair by condition (S0 Table 2)", ""]
        m = self.d.get("repair.json")
        if m is None:
            return lines + [self.not_run("repair.json"), "", *self.figure("repair")]
        header = ["condition", "success", "count", "n", "new error", "avg. feedback tokens",
                  "McNemar vs R-resample (b / c)", "p"]
        rows = []
        for cond, label in REPAIR.items():
            c = m["conditions"].get(cond)
            if c is None:
                rows.append([label, "*not run* (condition not in `repair.conditions`)",
                             *[""] * (len(header) - 2)])
                continue
            mc = c.get("mcnemar_vs_resample")
            test = (["(reference)", NA] if cond == RESAMPLE or not mc
                    else [f"{mc['b']} / {mc['c']}", _p(mc["pvalue"])])
            rows.append([label, _f(c["success_rate"], 4), _f(c["successes"]), _f(c["n"]),
                         _f(c["new_error_rate"], 4), _f(c["feedback_tokens"], 2), *test])
        return lines + [
            (f"{m.get('n_attempts', NA)} fixed failed attempts of the SFT policy, each repaired "
             f"under every condition ({m.get('k', NA)} sample(s) each); McNemar on the matched "
             "attempts (b = repaired by the condition only, c = by R-resample only)."), "",
            *_table(header, rows), *self.figure("repair")]

    def distill(self) -> list[str]:
        k = 8 if 8 in self.ks else self.kmax
        header = ["policy", "training signal", "examples", "pass@1", f"pass@{k}", "avg.",
                  "all-fail", "zero-info", "contrast", f"p vs {self.ref} (k=1)"]

        def cells(p):
            return [_f(self.ev(p, "test", "pass@1")), _f(self.ev(p, "test", f"pass@{k}")),
                    *(_f(self.ev(p, "diagnostics", key), 4) for key in
                      ("avg_score", "all_fail", "zero_informative", "reward_contrast")),
                    self.pvalue(p, 1)]

        n = len(header)
        rows = [self.marker_row("SFT", ["eval/sft.json"], n) or [
                    "SFT", "SFT traces", _f(_get(self.d.get("sft.json"), "examples")),
                    *cells("sft")],
                self.marker_row("RLOO", ["eval/rloo.json"], n) or [
                    "RLOO", f"{_get(self.d.get('rloo.json'), 'reward', default='?')} reward", NA,
                    *cells("rloo")]]
        for cond, label in REPAIR.items():
            name, rel = f"SD-{cond}", f"distill/{cond}.json"
            rows.append(self.marker_row(name, [rel, f"eval/distill_{cond}.json"], n) or [
                name, f"successful {label} repairs", _f(self.d[rel].get("examples")),
                *cells(f"distill_{cond}")])
        return ["## Self-distillation per condition (S0 Table 3)", "",
                ("No-feedback policies on the test split; SD-X = SFT further trained on the "
                 "successful repairs of condition X (examples = distinct successful repairs)."),
                "", *_table(header, rows)]

    def failures(self) -> list[str]:
        return ["## Failure types", "", *self.figure("failures")]

    def interventions(self) -> list[str]:
        m = self.d.get("int.json")
        lines = ["## Interventions with the solver as oracle (S3)", ""]
        if m is None:
            return lines + [self.not_run("int.json"), ""]
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

    def significance(self) -> list[str]:
        lines = ["## Significance (compare)", ""]
        if "compare.json" not in self.d:
            return lines + [self.not_run("compare.json"), ""]
        from .compare import compare_markdown  # the compare stage's own tables

        report = _test_split_in_order(self.d["compare.json"], self.inp.policies)
        body = compare_markdown(report).splitlines()[1:]  # drop its title
        return lines + ["The test split (all splits: `reports/compare.md`)."] + body + [""]


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
    b = _Builder(inp, figures, fig_rel, reference, best_of_n_policy)
    sections = (b.header, b.policies, b.best_of_n, b.ipo, b.training, b.diagnose, b.repair,
                b.distill, b.failures, b.interventions, b.significance)
    return "\n".join(line for section in sections for line in section()).rstrip() + "\n"


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
