"""The report's figures (PNG), drawn from the loaded measurement files only.

    FIGURES                       name -> (draw function, caption, which inputs it needs)
    write_figures(inp, fig_dir)   -> {figure name: file name} of the figures drawn

Below report.py; the RL runs and their dvclive panels come from results.py, which both
read, so the two never disagree on a run or a panel.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from ..core.io import atomic_path
from ..task.prompts import REPAIR_LABELS, RESAMPLE
from .results import CURVES, RL_RUNS, Inputs


def pass_ks(block: dict) -> list[int]:
    """The k of every `pass@k` key of a metrics block, ascending."""
    return sorted(int(key[5:]) for key in block if key.startswith("pass@"))


def _figure(ncols: int = 1, nrows: int = 1, size=(7.0, 4.2)):
    # Figure without pyplot: no global state, no GUI backend, nothing kept alive afterwards
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False).ravel()


def _color(i: int):
    return colormaps["tab20"](i % 20)  # 20 distinguishable colours for up to ~17 policies


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
        ks = pass_ks(m["test"])
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
    kmax = max(max(pass_ks(m["test"])) for m in evals.values())
    for ax, k in zip(axes, (1, kmax)):
        series = {f"{m}-number": [e["test"].get(f"n{m}", {}).get(f"pass@{k}")
                                  for e in evals.values()] for m in (3, 4)}
        series["OOD"] = [e.get("ood", {}).get(f"pass@{k}") for e in evals.values()]
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
    names = [c for c in REPAIR_LABELS if c in conds]
    rates = [conds[c]["success_rate"] for c in names]
    fig, (ax,) = _figure(size=(7.0, 4.0))
    bars = ax.bar([REPAIR_LABELS[c] for c in names], rates,
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
            # every replicate's curve, one colour per run: the spread between draws is visible
            by_tag = inp.run_curves.get(run) or ({"": inp.curves[run]} if run in inp.curves else {})
            for curves in by_tag.values():
                if metric in curves:
                    (handles[run],) = ax.plot(*curves[metric], color=_color(2 * i), lw=1.0,
                                              alpha=0.8)
        ax.set(title=title, xlabel="step")
        if not ax.lines:  # e.g. KL with rloo.kl_coef = 0: no reference model, nothing logged
            ax.text(0.5, 0.5, "not logged", ha="center", transform=ax.transAxes, color="grey")
    fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=8)
    fig.suptitle("RL training curves (dvclive), one line per replicate")
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
