"""Tests for countdown_rlvr.analysis.checks: each arm's stated check on its details' keys, per
replicate, and what a claim reads when an arm fails or was not measured."""

import json
from pathlib import Path

import pytest
import yaml

from countdown_rlvr.analysis.checks import (
    CHECKS,
    FAIL,
    NOT_MEASURED,
    PASS,
    PATCH_LIFT,
    S3_PATCH_LIFT,
    check,
    distilled,
    forward_kl_falls,
    margin_rises,
    patch_lifts,
    rollouts_rise,
    summarize,
    trained_on_signal,
)


def test_forward_kl_and_margin_checks():
    assert forward_kl_falls({"forward_kl_first": 0.5, "forward_kl_final": 0.3}) is True
    assert forward_kl_falls({"forward_kl_first": 0.3, "forward_kl_final": 0.3}) is False
    assert forward_kl_falls({"forward_kl_first": None, "forward_kl_final": None}) is None  # rloo
    # chosen answers about as likely as under SFT, pass@1 on unseen train problems kept
    kept = {"chosen_reward_final": -0.02, "skill_sft": 0.08, "skill_ipo": 0.07,
            "skill_margin": 0.25}
    assert margin_rises({"val_margin_before": 0.0, "val_margin_after": 0.4, **kept}) is True
    assert margin_rises({"val_margin_before": 0.1, "val_margin_after": -0.2, **kept}) is False
    # the margin rose by pushing the chosen answers down too (likelihood displacement)
    assert margin_rises({"val_margin_before": 0.0, "val_margin_after": 3.0, **kept,
                         "chosen_reward_final": -2.0}) is False
    assert margin_rises({"val_margin_before": 0.0, "val_margin_after": 0.4}) is None
    assert margin_rises({"margin_first": 0.0, "margin_final": 1.0}) is None  # training margin: not it


ROOT = Path(__file__).resolve().parents[1]


def int_details(patched=0.35, unpatched=0.15, start=0.13, final=0.25, plain=0.015, held=279):
    """int.json's keys the interventions' check reads (research.interventions_metrics)."""
    return {"pass_at_k": {"int_sft": {"pass@k": patched}, "sft": {"pass@k": unpatched}},
            "rloo": {"pass_rate_first": start, "pass_rate_final": final},
            "plain_rl": {"pass_rate_first": plain}, "unsolved_heldout": held}


def test_interventions_check_is_s3s_lift_and_reward_where_plain_rl_has_none():
    """S3 Table 1: its patch solves 202 of 235 hard problems, the base 98 (2.06x); the check
    asks half the gain. A patch at S3's own per-sample accuracy (7.71%) solves < 50% at K = 8
    and passes: the share solved is not the test."""
    assert S3_PATCH_LIFT == pytest.approx(2.061, abs=1e-3)
    assert PATCH_LIFT == pytest.approx(1.531, abs=1e-3)
    s3_at_8 = 1 - (1 - 0.0771) ** 8  # S3's patch at K = 8: 47%
    assert s3_at_8 < 0.5
    assert patch_lifts(int_details(patched=s3_at_8, unpatched=s3_at_8 / S3_PATCH_LIFT)) is True
    assert patch_lifts(int_details()) is True
    # lift: at the bound passes, just below it (or S3's harmful "+ suffix" 1.13x) fails
    assert patch_lifts(int_details(patched=PATCH_LIFT * 0.2, unpatched=0.2)) is True
    assert patch_lifts(int_details(patched=1.5 * 0.2, unpatched=0.2)) is False
    assert patch_lifts(int_details(patched=111 / 235, unpatched=98 / 235)) is False
    # the unpatched policy solves none: any solved problem is a lift, none is not
    assert patch_lifts(int_details(patched=0.05, unpatched=0.0)) is True
    assert patch_lifts(int_details(patched=0.0, unpatched=0.0)) is False
    # reward where plain RL has none: RL from the patch starts above plain RL's rate, and rises
    assert patch_lifts(int_details(start=0.015, plain=0.015)) is False
    assert patch_lifts(int_details(start=0.01, plain=0.015)) is False
    assert patch_lifts(int_details(final=0.13)) is False  # flat: RL learned nothing from it
    # a held-out set too small for the claim's test (the 400-problem pool's 36-42)
    assert patch_lifts(int_details(held=199)) is False
    assert patch_lifts(int_details(held=200)) is True
    # details without a quantity (a stage before the key existed): not measured
    no_plain = int_details()
    del no_plain["plain_rl"]
    assert patch_lifts(no_plain) is None
    assert patch_lifts({**int_details(), "pass_at_k": {"int_sft": {"pass@k": 0.3}}}) is None
    assert patch_lifts({"patched_solved_frac": 0.6, "unsolved_heldout": 280}) is None
    assert patch_lifts({}) is None
    assert CHECKS["int"].test is patch_lifts
    assert "S3 Table 1" in CHECKS["int"].words and "50%" not in CHECKS["int"].words


def test_the_committed_interventions_pass_s3s_check():
    """The committed run (its int replicates; the previous ones' r11-r14 and r6-r9 passed too):
    the patch solves 33-51% of RL's problems, 284-325 held out. Under the former 50% share rule
    six of the seven would have failed, and the claim would not have been tested."""
    seeds = yaml.safe_load((ROOT / "params.yaml").read_text())["replicates"]["int"]
    tags = [f"r{s}" for s in seeds]
    runs = {t: json.loads((ROOT / f"reports/details/int/{t}.json").read_text()) for t in tags}
    result = check("int", runs, tags)
    assert result.per_replicate == dict.fromkeys(tags, PASS)
    assert summarize([result]) == (PASS, None)
    assert sum(m["patched_solved_frac"] < 0.5 for m in runs.values()) == 6  # the former rule


def test_the_early_arms_check_passes_a_flat_run_and_fails_one_that_could_not_learn():
    """Binary RLOO at S0's operating point is expected to flat-line: a flat pass rate with
    live groups and moved weights passes; no reward variance anywhere, or weights that never
    moved, fail; no KL logged (kl_coef 0) is not measured."""
    flat = {"pass_rate_first": 0.09, "pass_rate_final": 0.09, "groups": 480,
            "zero_std_groups": 330, "kl_first": 0.0, "kl_final": 0.004}
    assert trained_on_signal(flat) is True
    assert trained_on_signal({**flat, "zero_std_groups": 480}) is False  # no advantage ever
    assert trained_on_signal({**flat, "kl_final": 0.0}) is False  # the weights never moved
    assert trained_on_signal({**flat, "kl_final": None}) is None
    assert trained_on_signal({}) is None
    assert CHECKS["rloo_early"].test is trained_on_signal
    assert CHECKS["rloo_early_shaped"].test is trained_on_signal


def test_ipo_must_keep_sfts_skill_within_the_stated_margin():
    rises = {"val_margin_before": 0.0, "val_margin_after": 0.4, "chosen_reward_final": -0.02,
             "skill_margin": 0.25}
    assert margin_rises({**rises, "skill_sft": 0.08, "skill_ipo": 0.06}) is True  # 0.75 x 0.08
    assert margin_rises({**rises, "skill_sft": 0.08, "skill_ipo": 0.11}) is True  # gained
    # margin up and chosen answers kept, but half of SFT's skill gone: the arm fails
    assert margin_rises({**rises, "skill_sft": 0.08, "skill_ipo": 0.04}) is False
    assert margin_rises({**rises, "skill_sft": 0.08, "skill_ipo": 0.04,
                         "skill_margin": 0.5}) is True  # a looser stated margin
    assert margin_rises({**rises, "skill_sft": 0.0, "skill_ipo": 0.0}) is True  # nothing to lose
    # the margin condition still holds on its own
    assert margin_rises({**rises, "val_margin_after": -0.1, "skill_sft": 0.08,
                         "skill_ipo": 0.08}) is False
    # details without the skill numbers (a stage before the check existed): not measured
    assert margin_rises(rises) is None
    assert margin_rises({**rises, "skill_sft": 0.08}) is None
    no_margin = {k: v for k, v in rises.items() if k != "skill_margin"}
    assert margin_rises({**no_margin, "skill_sft": 0.08, "skill_ipo": 0.08}) is None
    assert margin_rises({**rises, "skill_sft": None, "skill_ipo": 0.08}) is None


TIER = {"first_tier_pass_rate_first": 0.1, "first_tier_pass_rate_final": 0.3}


@pytest.mark.parametrize(("m", "ok"), [
    ({**TIER, "curriculum": True, "steps": 100, "tier_unlock_step": 40}, True),
    ({**TIER, "curriculum": True, "steps": 100,
      "tier_unlock_step": 75}, False),  # unlocked too late: 75 is not < 0.75 * 100
    ({**TIER, "curriculum": True, "steps": 100,
      "tier_unlock_step": None}, False),  # never unlocked
    # with a curriculum the first tier's rate decides: all rollouts' rate falls once the
    # 4-number tier joins (the 2,400-step student: 0.424 -> 0.382), the first tier's need not
    ({**TIER, "pass_rate_first": 0.42, "pass_rate_final": 0.38, "curriculum": True,
      "steps": 100, "tier_unlock_step": 8}, True),
    ({"first_tier_pass_rate_first": 0.42, "first_tier_pass_rate_final": 0.40,
      "pass_rate_first": 0.1, "pass_rate_final": 0.3, "curriculum": True, "steps": 100,
      "tier_unlock_step": 8}, False),
    ({"pass_rate_first": 0.1, "pass_rate_final": 0.3, "curriculum": True, "steps": 100,
      "tier_unlock_step": 8}, None),  # details from before the first tier's rate was logged
    ({"pass_rate_first": 0.3, "pass_rate_final": 0.3, "curriculum": False, "steps": 100}, False),
    ({"pass_rate_first": 0.1, "pass_rate_final": 0.3, "curriculum": False, "steps": 100}, True),
    ({**TIER, "curriculum": True, "steps": 100}, None),
    ({"pass_rate_first": 0.1, "pass_rate_final": 0.3, "steps": 100}, None),
    ({"curriculum": False}, None),
])
def test_rloo_rollouts_rise_and_the_curriculum_unlocks(m, ok):
    assert rollouts_rise(m) is ok


def test_distilled_needs_training_a_falling_loss_and_more_skill_than_sft():
    better = {"skill_sft": 0.05, "skill_distilled": 0.12}  # on its repairs' problems, no feedback
    assert distilled({"trained": True, "loss_first": 0.9, "loss_final": 0.6, **better}) is True
    assert distilled({"trained": True, "loss_first": 0.6, "loss_final": 0.9, **better}) is False
    assert distilled({"trained": False, "examples": 0}) is False  # nothing to distil
    assert distilled({"loss_first": 0.9, "loss_final": 0.6, **better}) is None
    # the loss fell but the policy solves its repairs' problems no better than SFT: fails
    fell = {"trained": True, "loss_first": 0.9, "loss_final": 0.6}
    assert distilled({**fell, "skill_sft": 0.05, "skill_distilled": 0.05}) is False
    assert distilled({**fell, "skill_sft": 0.05, "skill_distilled": 0.03}) is False
    # details without the skill numbers (a stage before the check existed): not measured
    assert distilled(fell) is None
    assert distilled({**fell, "skill_sft": 0.05}) is None


def test_an_arm_check_per_replicate_and_the_claims_reading():
    good = {"forward_kl_first": 0.5, "forward_kl_final": 0.3}
    bad = {"forward_kl_first": 0.3, "forward_kl_final": 0.4}
    runs = {"r0": good, "r1": bad, "r2": good}
    opd = check("opd", runs, ["r0", "r1", "r2"])
    assert opd.per_replicate == {"r0": PASS, "r1": FAIL, "r2": PASS} and opd.status == FAIL
    assert opd.cell() == "opd (forward KL to the teacher falls): r0 pass, r1 fail, r2 pass"
    ac = check("opd_ac", {"r0": good, "r1": good}, ["r0", "r1", "r2"])  # r2 has no file
    assert ac.status == NOT_MEASURED and ac.tags(NOT_MEASURED) == ["r2"]
    assert summarize([opd, ac]) == (
        FAIL, "opd failed its check (forward KL to the teacher falls, fails in r1)")
    assert summarize([ac]) == (
        NOT_MEASURED, "forward KL to the teacher falls not measured (opd_ac: r2)")
    ok = check("opd_ac", {"r0": good}, ["r0"])
    assert summarize([ok]) == (PASS, None) and summarize([]) == (PASS, None)


def test_every_arm_reads_its_own_stage_details():
    assert CHECKS["ipo_easyneg"].file == "ipo/easyneg.json"
    assert CHECKS["distill_R"].file == "distill/R.json"
    assert {CHECKS[a].file for a in ("rloo", "rloo_shaped", "opd", "opd_ac", "int")} == {
        "rloo.json", "rloo_shaped.json", "opd.json", "opd_ac.json", "int.json"}
