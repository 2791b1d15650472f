"""The report's figures (PNG), drawn from the loaded measurement files only.

    FIGURES                       name -> (draw function, caption, which inputs it needs)
    write_figures(inp, fig_dir)   -> {figure name: file name} of the figures drawn
    fig_claims_forest(rows)       -> the seed claims' forest plot (ForestRow per claim)
    forest_png(rows, dest)        -> that plot written atomically to dest (for the report stage)

Below report.py; the RL runs and their dvclive panels come from results.py, which both
read, so the two never disagree on a run or a panel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..core.arms import arms
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


# S4's chain, in training order: whose coverage S4's collapse (and anti-collapse) is about:
# SFT, RLOO, then OPD's arms (plain and anti-collapse), which start from RLOO
COVERAGE_CHAIN = ("sft", "rloo", *(a.name for a in arms("opd")))


def _pooled_test(inp: Inputs, policy: str, key: str) -> dict | None:
    """compare.json's pooled test-split `key` (coverage, pass@1) of a policy, or None."""
    block = ((inp.compare or {}).get("policies", {}).get(policy) or {}).get("test") or {}
    return block.get(key)


def coverage_policies(inp: Inputs) -> list[str]:
    """The policies of COVERAGE_CHAIN whose coverage compare.json holds (compare.json written
    before coverage: none)."""
    return [p for p in COVERAGE_CHAIN if _pooled_test(inp, p, "coverage")]


def fig_coverage(inp: Inputs) -> Figure:
    """Solution coverage (left) and pass@1 (right) along SFT -> RLOO -> OPD -> anti-collapse
    OPD: each replicate a small point, the mean over replicates a large one with its t
    interval. Collapse reads as coverage falling while pass@1 holds or rises."""
    names = coverage_policies(inp)
    fig, axes = _figure(2, size=(10.0, 4.0))
    x = np.arange(len(names))
    for ax, key, label in zip(axes, ("coverage", "pass@1"),
                              ("distinct correct solutions per problem", "pass@1")):
        blocks = [_pooled_test(inp, p, key) for p in names]
        for i, b in enumerate(blocks):
            if b is None:
                continue
            reps = list(b["per_replicate"].values())
            ax.scatter(i + np.linspace(-0.08, 0.08, len(reps)) if len(reps) > 1 else [i], reps,
                       s=14, color=_color(2 * i), alpha=0.7, lw=0, zorder=2)
            if b.get("ci_low") is not None:
                ax.plot([i, i], [b["ci_low"], b["ci_high"]], color=_color(2 * i), lw=2.2,
                        zorder=2)
            ax.scatter([i], [b["mean"]], s=60, color=_color(2 * i), edgecolors="black",
                       linewidths=0.6, zorder=3)
        means = [np.nan if b is None else b["mean"] for b in blocks]
        ax.plot(x, means, color="0.6", lw=0.8, ls="--", zorder=1)
        ax.set_xticks(x, names)
        ax.set(ylabel=f"{label} (test)", title=f"{key}: mean over replicates, 95% t interval")
        ax.margins(x=0.15)
    fig.suptitle("Solution coverage along SFT → RLOO → OPD → anti-collapse OPD "
                 "(small points: one replicate each)")
    return fig


def decision(c) -> str:
    """A claim's decision (`Claim.decision`) as one of DECISIONS, the plot's colours."""
    from .claims import Decision

    return {Decision.REPRODUCED: "reproduced", Decision.REPRODUCED_SMALLER: "reproduced",
            Decision.SMALLER: "smaller than the seed's", Decision.EQUIVALENT: "equivalent",
            Decision.CONTRADICTED: "contradicted", Decision.INCONCLUSIVE: "inconclusive",
            Decision.NOT_TESTED: "not tested", Decision.NOT_TESTABLE: "not tested",
            Decision.NOT_TESTED_PREMISE: "not tested",
            # one reading of "smaller" only: not the seed's size excluded (docs/statistics.md)
            Decision.REPRODUCED_SMALLER_RELATIVE: "reproduced",
            Decision.SMALLER_RELATIVE: "inconclusive"}[c.decision]


def claim_rows(claims) -> list[ForestRow]:
    """The forest rows of evaluated claims (`claims.evaluate`): each on its effect's scale,
    a difference from the claim's null, in the panel of its unit."""
    from .claims import SHORT

    return [ForestRow(SHORT.get(c.name, c.name), None if c.why_not else c.effect,
                      None if c.why_not else c.ci, () if c.why_not else c.replicate_effects,
                      c.seed_scaled, c.delta, decision(c), c.unit) for c in claims]


def fig_claims(inp: Inputs, found=None) -> Figure:
    from .claims import evaluate

    return fig_claims_forest(claim_rows(evaluate(inp) if found is None else found))


# name -> (draw function, caption, which inputs it needs: a metrics file or a predicate)
FIGURES = {
    "claims": (fig_claims, ("The claims: each effect over replicates, one panel per unit, "
                            "the seed's scaled effect, ±δ and the decision"), "claims"),
    "pass_at_k": (fig_pass_at_k, "pass@k per policy (test split)", "eval"),
    "splits": (fig_splits, "3-number / 4-number / OOD split per policy", "eval"),
    "best_of_n": (fig_best_of_n, "Best-of-N accuracy vs budget and vs average samples", "eval"),
    "zero_signal": (fig_zero_signal, "Zero-signal groups per policy", "eval"),
    "failures": (fig_failures, "Failure-type breakdown per policy", "eval"),
    "repair": (fig_repair, "Repair success by condition", "repair.json"),
    "rl_curves": (fig_rl_curves, "RLOO / OPD training curves", "curves"),
    "coverage": (fig_coverage, "Solution coverage and pass@1, SFT → RLOO → OPD → anti-collapse",
                 "coverage"),
}


def _has(inp: Inputs, need: str) -> bool:
    if need == "claims":  # every claim has a row, "not tested" when its inputs are absent
        return True
    if need == "eval":
        return bool(inp.evals())
    if need == "curves":
        return bool(inp.curves)
    if need == "coverage":  # compare.json written before coverage has none
        return bool(coverage_policies(inp))
    return need in inp.data


def write_figures(inp: Inputs, fig_dir: str | Path, dpi: int = 100, found=None
                  ) -> dict[str, str]:
    """Draw every figure whose inputs exist into a fresh fig_dir (atomically: no stale or
    half-written figures). PNGs carry no Software/date metadata, so reruns are byte-identical.
    found: the evaluated claims (None: claims.evaluate with the repository's plan)."""
    written = {}
    with atomic_path(fig_dir) as tmp:
        tmp.mkdir()
        for name, (draw, _, need) in FIGURES.items():
            if _has(inp, need):
                fig = draw(inp, found) if name == "claims" else draw(inp)
                fig.savefig(tmp / f"{name}.png", dpi=dpi, metadata={"Software": None})
                written[name] = f"{name}.png"
    return written


# --- the seed claims' forest plot ----------------------------------------------------------

DECISIONS = ("reproduced", "smaller than the seed's", "contradicted", "equivalent",
             "inconclusive", "not tested")
# one fixed colour per decision, from the Okabe-Ito palette (distinct under the common
# colour-vision deficiencies); the decision is also written beside each row, so the plot
# reads in greyscale too
DECISION_COLORS = {
    "reproduced": "#009e73",  # bluish green
    "smaller than the seed's": "#cc79a7",  # reddish purple
    "contradicted": "#d55e00",  # vermillion
    "equivalent": "#0072b2",  # blue
    "inconclusive": "#e69f00",  # orange
    "not tested": "#999999",  # grey
}
SEED_MARKER = "D"  # the seed's scaled effect: an open black diamond
DELTA_COLOR = "0.87"  # the +-delta equivalence band: light grey behind the row


def _finite(label: str, name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"forest row {label!r}: {name} = {x!r} is not a finite number; "
                         "pass a float, or None where there is no number.")
    return float(x)


@dataclass(frozen=True)
class ForestRow:
    """One seed claim, expressed as a difference from the claim's null (the caller subtracts
    it: 0 = no change, or share minus threshold), so all rows share one x axis."""

    label: str  # the claim, short (e.g. "RLOO > SFT, pass@1")
    effect: float | None  # pooled effect; None: no number -> a labelled gap, no marker
    ci: tuple[float, float] | None  # interval over replicates (low, high); needs an effect
    per_replicate: tuple[float, ...]  # each replicate's effect (drawn as points)
    seed_effect: float | None  # the seed's effect scaled to this model (an open diamond)
    delta: float | None  # equivalence margin > 0: a shaded band -delta..+delta around 0
    decision: str  # one of DECISIONS; sets the marker's colour
    unit: str = "effect"  # what the effect measures: rows of one unit share a panel

    def __post_init__(self):
        label = self.label
        if self.decision not in DECISIONS:
            raise ValueError(
                f"forest row {label!r}: decision {self.decision!r} is not one of {DECISIONS}; "
                "pass the verdict's first words (e.g. 'not tested: arm failed its check' -> "
                "'not tested').")
        for name in ("effect", "seed_effect", "delta"):
            if (x := getattr(self, name)) is not None:
                object.__setattr__(self, name, _finite(label, name, x))
        if self.delta is not None and self.delta <= 0:
            raise ValueError(f"forest row {label!r}: delta = {self.delta} must be > 0; "
                             "pass the equivalence margin, or None for a claim without one.")
        object.__setattr__(self, "per_replicate", tuple(
            _finite(label, "per_replicate", x) for x in self.per_replicate))
        if self.ci is not None:
            if self.effect is None:
                raise ValueError(f"forest row {label!r}: a ci without an effect; pass the "
                                 "pooled effect too, or ci=None.")
            if len(self.ci) != 2:
                raise ValueError(f"forest row {label!r}: ci = {self.ci!r} must be a pair "
                                 "(low, high).")
            low, high = (_finite(label, "ci", x) for x in self.ci)
            if low > high:
                raise ValueError(f"forest row {label!r}: ci = {self.ci!r} has low > high; "
                                 "pass it as (low, high), low first.")
            object.__setattr__(self, "ci", (low, high))


def _panels(rows: list[ForestRow]) -> list[tuple[str, list[int]]]:
    """Row indices grouped by unit, units in order of first appearance."""
    units: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        units.setdefault(r.unit, []).append(i)
    return list(units.items())


def fig_claims_forest(rows: Sequence[ForestRow]) -> Figure:
    """The claims at a glance, one panel per unit (its own x axis, labelled with the unit:
    a share, pass@1 and pass@16 never share a scale): per row (top to bottom in the given
    order within its panel) the pooled effect as a dot in its decision's colour, its interval
    over replicates, each replicate's effect as a small point below it, the seed's scaled
    effect as an open diamond and the +-delta band shaded; the decision is written at the
    right of each row and a row without an effect shows its decision in place of a marker.
    Every artist carries a gid "forest.<part>:<row>" (part: delta, ci, effect, replicates,
    seed, gap; row: its index in `rows`)."""
    rows = list(rows)
    if not rows:
        raise ValueError("no claims to draw; skip the forest plot when there are none.")
    if bad := [r for r in rows if not isinstance(r, ForestRow)]:
        raise ValueError(f"forest rows must be ForestRow, got {type(bad[0]).__name__}; "
                         "build one ForestRow per claim.")
    panels = _panels(rows)
    longest = max(len(r.label) for r in rows)
    # width from the longest label so no label is cut, height from the rows and the panels
    fig = Figure(figsize=(max(7.5, 5.2 + 0.075 * longest),
                          1.3 + 0.42 * len(rows) + 0.55 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False,
                        gridspec_kw={"height_ratios": [len(ix) for _, ix in panels]})[:, 0]
    for ax, (unit, idx) in zip(axes, panels):
        _forest_panel(ax, rows, idx)
        ax.set_xlabel(unit, fontsize=9)
    axes[0].set_title("Claims: effect over replicates and the decision, one panel per unit")
    decisions = [Line2D([], [], ls="", marker="o", ms=8, color=DECISION_COLORS[d], mec="black",
                        mew=0.6, label=d) for d in DECISIONS if any(r.decision == d for r in rows)]
    marks = []
    if any(r.ci for r in rows):
        marks.append(Line2D([], [], color="0.3", lw=2.2, label="interval over replicates"))
    if any(r.per_replicate for r in rows):
        marks.append(Line2D([], [], ls="", marker="o", ms=4, color="0.3", alpha=0.75,
                            label="one replicate"))
    if any(r.seed_effect is not None for r in rows):
        marks.append(Line2D([], [], ls="", marker=SEED_MARKER, ms=7, mfc="none", mec="black",
                            label="seed's effect (scaled)"))
    if any(r.delta is not None for r in rows):
        marks.append(Patch(color=DELTA_COLOR, label="±δ (the plan's smallest effect)"))
    # one legend below the plot, three columns (a panel is narrow): the decisions present,
    # then the marks
    handles = decisions + marks
    fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)),
               fontsize=8, frameon=False)
    return fig


def _forest_panel(ax, rows: list[ForestRow], idx: list[int]) -> None:
    """The rows `idx` of one unit, at y = their position in the panel."""
    ys = np.arange(len(idx), dtype=float)
    for y, i in zip(ys, idx):
        r = rows[i]
        color = DECISION_COLORS[r.decision]
        if r.delta is not None:
            ax.fill_betweenx([y - 0.4, y + 0.4], -r.delta, r.delta, color=DELTA_COLOR, lw=0,
                             zorder=0, gid=f"forest.delta:{i}")
        if r.ci is not None:
            ax.plot(r.ci, [y, y], color=color, lw=2.2, solid_capstyle="butt", zorder=2,
                    gid=f"forest.ci:{i}")
        if r.per_replicate:  # just below the row's line, so they never hide the dot
            ax.scatter(r.per_replicate, np.full(len(r.per_replicate), y + 0.22), s=14,
                       color=color, alpha=0.75, lw=0, zorder=2, gid=f"forest.replicates:{i}")
        if r.effect is not None:
            ax.scatter([r.effect], [y], s=70, color=color, edgecolors="black", linewidths=0.6,
                       zorder=3, gid=f"forest.effect:{i}")
        else:
            ax.text(0.5, y, r.decision, transform=ax.get_yaxis_transform(), ha="center",
                    va="center", style="italic", fontsize=9, color="0.35", zorder=4,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0},
                    gid=f"forest.gap:{i}")
        if r.seed_effect is not None:
            ax.scatter([r.seed_effect], [y], s=45, marker=SEED_MARKER, facecolors="none",
                       edgecolors="black", linewidths=1.1, zorder=4, gid=f"forest.seed:{i}")
    ax.axvline(0.0, color="black", lw=0.8, zorder=1)
    ax.set_yticks(ys, [rows[i].label for i in idx], fontsize=9)
    ax.set_ylim(len(idx) - 0.5, -0.5)  # first row on top
    ax.tick_params(axis="y", length=0)
    ax.margins(x=0.08)
    ax.grid(axis="x", color="0.92", lw=0.6, zorder=0)
    ax.set_axisbelow(True)
    right = ax.secondary_yaxis("right")  # the decision, in words, beside each row
    right.set_yticks(ys, [rows[i].decision for i in idx], fontsize=8)
    right.tick_params(length=0)
    right.spines["right"].set_visible(False)
    for tick, i in zip(right.get_yticklabels(), idx):
        d = rows[i].decision
        tick.set_color(DECISION_COLORS[d] if d != "not tested" else "0.35")


def forest_png(rows: Sequence[ForestRow], dest: str | Path, dpi: int = 100) -> None:
    """Write the forest plot to dest atomically; no Software/date metadata, so the same rows
    give byte-identical PNGs."""
    fig = fig_claims_forest(rows)
    with atomic_path(dest) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png", metadata={"Software": None})
