"""The plan's teacher premise of S4's OPD rows (plan.yaml `premises.teacher`): a teacher with
less coverage than OPD's start, or too little sharpness over SFT, leaves those rows "not tested
(premise)", out of their Holm family; a teacher that meets it changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from countdown_rlvr.analysis import claims
from countdown_rlvr.analysis.claims import Decision
from countdown_rlvr.analysis.claims.premises import teacher_standing
from countdown_rlvr.analysis.plan import PlanError, TeacherPremise, load_plan, parse_plan
from countdown_rlvr.analysis.report import decision_words
from countdown_rlvr.analysis.results import load_inputs
from countdown_rlvr.stats import holm

OPD_ROWS = ("opd_beats_rloo", "opd_anti_collapse")
PREMISE = TeacherPremise(OPD_ROWS, pass_at_k_over_init=0.05, pass_at_1_over_sft=1.5)


def compare(teacher: tuple[float, float], rloo16: float, sft1: float) -> dict:
    """compare.json's pooled test pass@k: the teacher's (pass@1, pass@16), RLOO's pass@16,
    SFT's pass@1."""
    def block(**ks):
        return {"test": {f"pass@{k[1:]}": {"mean": v} for k, v in ks.items()}}
    return {"policies": {"teacher": block(k1=teacher[0], k16=teacher[1]),
                         "rloo": block(k1=0.42, k16=rloo16), "sft": block(k1=sft1, k16=0.7)}}


@pytest.mark.parametrize("teacher, rloo16, sft1, short", [
    ((0.40, 0.68), 0.628, 0.263, []),  # both bounds met (0.40 >= 1.5 x 0.263 = 0.3945)
    ((0.40, 0.67), 0.628, 0.263, ["pass@16 0.670 is +0.042"]),  # coverage short
    ((0.39, 0.70), 0.628, 0.263, ["pass@1 0.390 is 1.48x"]),  # sharpness short
    ((0.411, 0.600), 0.628, 0.263, ["pass@16 0.600 is -0.028"]),  # 08665ea's teacher
    ((0.30, 0.60), 0.628, 0.263, ["pass@16", "pass@1 0.300"]),  # both
])
def test_the_teacher_standing_names_each_bound_it_misses(teacher, rloo16, sft1, short):
    why = teacher_standing(compare(teacher, rloo16, sft1), PREMISE)
    if not short:
        assert why is None
    else:
        assert why is not None and all(s in why for s in short), why
        assert ("pass@1 " in why) == any("pass@1 " in s for s in short)


def test_without_the_numbers_the_premise_was_not_measured():
    assert "not measured" in teacher_standing({"policies": {}}, PREMISE)
    assert "not measured" in teacher_standing(None, PREMISE)


def _plan(**teacher):
    raw = yaml.safe_load(Path(load_plan().path).read_text())
    raw["premises"] = {"teacher": {"claims": list(OPD_ROWS), "pass_at_k_over_init": 0.05,
                                   "pass_at_1_over_sft": 1.5, **teacher}}
    return parse_plan(raw)


def test_the_plan_refuses_a_premise_it_cannot_apply():
    assert _plan().teacher == PREMISE
    with pytest.raises(PlanError, match="no entry under `claims:`"):
        _plan(claims=["opd_beats_teacher"])
    with pytest.raises(PlanError, match="unknown"):
        _plan(pass_at_16=0.05)
    with pytest.raises(PlanError, match="must be a number"):
        _plan(pass_at_1_over_sft="1.5x")


def test_a_premise_the_teacher_misses_leaves_the_opd_rows_untested_and_out_of_holm():
    """On the committed run, a bound no teacher meets (pass@16 a whole 1.0 over RLOO's): both
    OPD rows read "not tested (premise)" with the shortfall, their effects still shown, and
    each family's Holm is over its other rows alone; bounds every teacher meets change no row
    against a plan without the premise."""
    replicates = yaml.safe_load((ROOT / "params.yaml").read_text())["replicates"]
    inp = load_inputs(ROOT / "reports/details", ROOT / "dvclive", replicates=replicates)
    raw = yaml.safe_load(Path(load_plan().path).read_text())
    raw.pop("premises", None)
    without = {c.name: c for c in claims.evaluate(inp, parse_plan(raw))}
    found = claims.evaluate(inp, _plan(pass_at_k_over_init=1.0))
    by = {c.name: c for c in found}
    for name in OPD_ROWS:
        assert without[name].decision != Decision.NOT_TESTED_PREMISE
        assert by[name].decision == Decision.NOT_TESTED_PREMISE and not by[name].tested
        assert "over rloo's" in by[name].premise_failed
        assert "below the plan's +1" in by[name].premise_failed
        assert decision_words(by[name]).startswith("not tested (premise")
        assert by[name].effect == pytest.approx(without[name].effect)  # still shown
    for family in (claims.SEED, claims.EXPLORATORY):
        members = claims.family(found, family)
        assert {c.name for c, _ in members}.isdisjoint(OPD_ROWS)
        assert [c.adjusted for c, _ in members] == pytest.approx(holm([p for _, p in members]))
    met = {c.name: c for c in claims.evaluate(inp, _plan(pass_at_k_over_init=-1.0,
                                                          pass_at_1_over_sft=0.0))}
    assert {n: c.decision for n, c in met.items()} == {n: c.decision for n, c in without.items()}


def test_the_standing_reads_pass_at_k_beside_the_other_pooled_numbers():
    """compare.json's pooled block holds coverage beside pass@k (and may hold more): the
    premise reads the pass@k keys only (a key without "@" crashed the report once)."""
    c = compare((0.40, 0.68), 0.628, 0.263)
    c["policies"]["teacher"]["test"]["coverage"] = {"mean": 1.4}
    assert teacher_standing(c, PREMISE) is None
    short = compare((0.40, 0.60), 0.628, 0.263)
    short["policies"]["teacher"]["test"]["coverage"] = {"mean": 1.4}
    assert "pass@16 0.600" in teacher_standing(short, PREMISE)
