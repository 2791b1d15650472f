"""The seed claims' forest plot (analysis.figures.fig_claims_forest): what each row draws, in
which colour, and that the same rows give the same PNG bytes."""

import pytest
from matplotlib.colors import to_hex

from countdown_rlvr.analysis.figures import (
    DECISION_COLORS,
    DECISIONS,
    ForestRow,
    fig_claims_forest,
    forest_png,
)

LONG = "zero-signal share of prompts above one half, binary reward (share minus the 0.5 threshold)"
ROWS = (
    ForestRow("RLOO > SFT, pass@1", 0.07, (0.04, 0.10), (0.055, 0.078, 0.08), 0.12, None,
              "reproduced"),
    ForestRow("RLOO keeps pass@64", 0.004, (-0.012, 0.02), (-0.003, 0.006), 0.0, 0.03,
              "equivalent"),
    ForestRow("shaped > binary, pass@1", -0.035, (-0.06, -0.01), (-0.04, -0.02, -0.04, -0.03),
              None, None, "contradicted"),
    ForestRow(LONG, 0.21, (0.14, 0.28), (0.18, 0.24, 0.21), 0.33, None, "inconclusive"),
    ForestRow("OPD > RLOO, pass@1", None, None, (), 0.06, 0.02, "not tested"),
    ForestRow("SD-R > SFT, pass@1", 0.02, (-0.01, 0.05), (0.0, 0.04), 0.26, 0.13,
              "smaller than the seed's"),
)


def by_gid(fig, part: str) -> dict[int, object]:
    """The forest's artists of one part ("effect", "ci", ...), by row index."""
    (ax,) = fig.axes[:1]
    out = {}
    for artist in ax.get_children():
        gid = artist.get_gid() or ""
        if gid.startswith(f"forest.{part}:"):
            out[int(gid.split(":")[1])] = artist
    return out


def test_each_decision_has_its_own_colour():
    assert tuple(DECISION_COLORS) == DECISIONS
    assert len({to_hex(c) for c in DECISION_COLORS.values()}) == len(DECISIONS)


def test_each_row_draws_its_parts_in_its_decisions_colour():
    fig = fig_claims_forest(ROWS)
    ax = fig.axes[0]
    effect, ci, reps = by_gid(fig, "effect"), by_gid(fig, "ci"), by_gid(fig, "replicates")
    seed, delta, gap = by_gid(fig, "seed"), by_gid(fig, "delta"), by_gid(fig, "gap")
    for i, row in enumerate(ROWS):
        color = to_hex(DECISION_COLORS[row.decision])
        if row.effect is None:  # a labelled gap: no marker, no interval, its decision written
            assert i not in effect and i not in ci
            assert gap[i].get_text() == row.decision
        else:
            assert i not in gap
            (xy,) = effect[i].get_offsets()
            assert tuple(xy) == (row.effect, i)
            assert to_hex(effect[i].get_facecolor()[0]) == color
            assert tuple(ci[i].get_xdata()) == row.ci and to_hex(ci[i].get_color()) == color
        if row.per_replicate:
            assert [x for x, _ in reps[i].get_offsets()] == list(row.per_replicate)
            assert to_hex(reps[i].get_facecolor()[0]) == color
        else:
            assert i not in reps
        assert (i in seed) == (row.seed_effect is not None)
        if row.seed_effect is not None:
            assert tuple(seed[i].get_offsets()[0]) == (row.seed_effect, i)
        assert (i in delta) == (row.delta is not None)
        if row.delta is not None:
            xs = delta[i].get_paths()[0].vertices[:, 0]
            assert (xs.min(), xs.max()) == (-row.delta, row.delta)
    # every row labelled, top to bottom in the given order, the decision beside it
    fig.draw_without_rendering()
    ys = [t.get_text() for t in ax.get_yticklabels()]
    assert ys == [r.label for r in ROWS] and "OPD > RLOO, pass@1" in ys
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # inverted: row 0 on top
    (right,) = ax.child_axes
    assert [t.get_text() for t in right.get_yticklabels()] == [r.decision for r in ROWS]
    assert any(line.get_xdata()[0] == 0 for line in ax.get_lines()
               if list(line.get_xdata()) == [0, 0])  # the zero line
    assert ax.get_xlabel() == "effect"  # the rows' unit
    # the legend names the decisions present (all six here) and the marks
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert set(DECISIONS) <= set(texts)
    assert {"one replicate", "seed's effect (scaled)", "±δ (the plan's smallest effect)"} <= set(texts)
    # no label cut: every y tick label inside the figure
    width = fig.bbox.width
    for t in ax.get_yticklabels() + right.get_yticklabels():
        box = t.get_window_extent()
        assert 0 <= box.x0 and box.x1 <= width, t.get_text()


def test_legend_names_only_the_decisions_present():
    fig = fig_claims_forest(ROWS[:1])
    texts = {t.get_text() for t in fig.legends[0].get_texts()}
    assert "reproduced" in texts and not texts & (set(DECISIONS) - {"reproduced"})
    assert "±δ (the plan's smallest effect)" not in texts  # no row has a delta


def test_rows_of_different_units_get_their_own_panel_and_scale():
    rows = [ForestRow("share above half", -0.09, (-0.13, -0.06), (), 0.09, None,
                      "contradicted", "share − 50%"),
            ForestRow("A > B, pass@1", 0.02, (-0.01, 0.05), (), 0.26, 0.13,
                      "smaller than the seed's", "pass@1 difference"),
            ForestRow("C > D, pass@1", 0.15, (0.12, 0.17), (), None, None, "reproduced",
                      "pass@1 difference"),
            ForestRow("E > F, pass@16", -0.01, (-0.29, 0.27), (), 0.05, 0.025, "inconclusive",
                      "pass@16 difference")]
    fig = fig_claims_forest(rows)
    panels = [ax for ax in fig.axes if ax.get_yticklabels() and ax.get_xlabel()]
    fig.draw_without_rendering()
    assert [ax.get_xlabel() for ax in panels] == ["share − 50%", "pass@1 difference",
                                                  "pass@16 difference"]
    assert [[t.get_text() for t in ax.get_yticklabels()] for ax in panels] == [
        ["share above half"], ["A > B, pass@1", "C > D, pass@1"], ["E > F, pass@16"]]
    # each panel scales to its own rows: pass@16's wide interval does not squeeze pass@1's
    lo1, hi1 = panels[1].get_xlim()
    lo16, hi16 = panels[2].get_xlim()
    assert hi1 - lo1 < 0.5 < hi16 - lo16
    # gids keep the row's index in `rows`, whatever its panel
    effects = {int(a.get_gid().split(":")[1]): a for ax in panels for a in ax.get_children()
               if (a.get_gid() or "").startswith("forest.effect:")}
    assert tuple(effects[3].get_offsets()[0]) == (-0.01, 0)  # first row of its panel


def test_same_rows_give_the_same_png_bytes(tmp_path):
    forest_png(ROWS, tmp_path / "a.png")
    forest_png(list(ROWS), tmp_path / "b" / "forest.png")
    a, b = (tmp_path / "a.png").read_bytes(), (tmp_path / "b" / "forest.png").read_bytes()
    assert a[:8] == b"\x89PNG\r\n\x1a\n" and a == b
    assert b"Software" not in a
    # written atomically: nothing beside the file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b"]


def test_a_bad_decision_names_the_allowed_values():
    with pytest.raises(ValueError, match="'Reproduced' is not one of") as exc:
        ForestRow("x", 0.1, None, (), None, None, "Reproduced")
    assert all(d in str(exc.value) for d in DECISIONS)
    with pytest.raises(ValueError, match="not one of"):
        ForestRow("x", None, None, (), None, None, "not tested: arm failed its check")


def test_a_reversed_interval_says_to_pass_low_first():
    with pytest.raises(ValueError, match=r"low > high; pass it as \(low, high\)"):
        ForestRow("x", 0.1, (0.2, 0.0), (), None, None, "reproduced")


@pytest.mark.parametrize("kw, match", [
    ({"effect": float("nan")}, "not a finite number"),
    ({"per_replicate": (0.1, float("inf"))}, "not a finite number"),
    ({"delta": 0.0}, "must be > 0"),
    ({"effect": None}, "ci without an effect"),
    ({"ci": (0.1,)}, "must be a pair"),
])
def test_other_bad_rows_are_refused(kw, match):
    row = {"label": "x", "effect": 0.1, "ci": (0.0, 0.2), "per_replicate": (), "seed_effect": None,
           "delta": None, "decision": "inconclusive"} | kw
    with pytest.raises(ValueError, match=match):
        ForestRow(**row)


def test_no_rows_is_refused():
    with pytest.raises(ValueError, match="no claims"):
        fig_claims_forest([])
