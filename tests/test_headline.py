"""The headline metrics: picked from the stages' detail files without changing a number,
numbers only, one subject per file, and no metric name reused across files."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr import headline
from countdown_rlvr.io import write_metrics

DETAILS = Path(__file__).parent / "fixtures/report/reports/details"

# detail file (as the report fixture's producers write it) -> the headline function its stage uses
PRODUCERS = {
    "sft.json": headline.training, "ipo/scripted.json": headline.ipo, "rloo.json": headline.rl,
    "opd.json": headline.rl, "opd_ac.json": headline.rl, "diagnose.json": headline.diagnose,
    "repair.json": headline.repair, "int.json": headline.interventions,
    "distill/F4.json": headline.training, "eval/rloo.json": headline.evaluation,
    "eval/sft.json": headline.evaluation, "compare.json": headline.comparison,
}


def flatten(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def headlines() -> dict[str, dict]:
    return {rel: fn(rel.removesuffix(".json"), json.loads((DETAILS / rel).read_text()))
            for rel, fn in PRODUCERS.items()}


def test_every_headline_value_is_a_number_copied_from_its_detail_file():
    for rel, head in headlines().items():
        assert head, rel
        flat = dict(flatten(head))
        assert flat, f"{rel}: empty headline"
        detail_numbers = [v for _, v in flatten(json.loads((DETAILS / rel).read_text()))]
        for key, value in flat.items():
            assert isinstance(value, int | float) and not isinstance(value, bool), (rel, key)
            assert value in detail_numbers, f"{rel}: {key}={value} is not a number of the detail"


def test_metric_names_are_unique_across_files_and_name_their_subject():
    seen: dict[str, str] = {}
    for rel, head in headlines().items():
        for key, _ in flatten(head):
            assert key not in seen, f"{key} in both {seen.get(key)} and {rel}"
            seen[key] = rel
    assert seen["rloo.pass@1"] == "eval/rloo.json"  # the policy's evaluation
    assert seen["rloo.reward_mean_final"] == "rloo.json"  # the rloo stage's training
    assert seen["rloo_vs_sft.p_k1"] == "compare.json"
    assert seen["rloo.pass@1_ci_low"] == "compare.json"
    assert seen["ipo_scripted.pref_acc_final"] == "ipo/scripted.json"
    assert not any(k.startswith("int.") and ".rloo." in k and "reward" in k for k in seen)


def test_evaluation_headline_values():
    detail = json.loads((DETAILS / "eval/rloo.json").read_text())
    head = headline.evaluation("eval/rloo", detail)["rloo"]
    assert head["pass@1"] == detail["test"]["pass@1"]
    assert head["pass@16"] == detail["test"]["pass@16"]
    assert head["pass@1_n3"] == detail["test"]["n3"]["pass@1"]
    assert head["pass@1_n4"] == detail["test"]["n4"]["pass@1"]
    assert head["ood_pass@16"] == detail["ood"]["pass@16"]
    assert len(head) == 5


def test_comparison_headline_values():
    detail = json.loads((DETAILS / "compare.json").read_text())
    head = headline.comparison("compare", detail)
    k1 = detail["pairs"]["rloo_vs_sft"]["test"]["k1"]
    assert head["rloo_vs_sft"] == {
        "p_k1": k1["pass_diff_pvalue"], "mcnemar_p_k1": k1["pvalue"],
        "p_k16": detail["pairs"]["rloo_vs_sft"]["test"]["k16"]["pass_diff_pvalue"],
        "mcnemar_p_k16": detail["pairs"]["rloo_vs_sft"]["test"]["k16"]["pvalue"],
        "pass@1_diff": k1["pass_diff"], "pass@1_diff_ci_low": k1["pass_diff_ci_low"],
        "pass@1_diff_ci_high": k1["pass_diff_ci_high"]}
    ci = detail["policies"]["sft"]["test"]["pass@16"]
    assert (head["sft"]["pass@16_ci_low"], head["sft"]["pass@16_ci_high"]) == (
        ci["ci_low"], ci["ci_high"])


def test_the_whole_run_stays_a_few_hundred_values():
    """Every detail file of the fixture run, through its stage's headline: far fewer numbers
    than the details (the full run's details hold ~4,000)."""
    n_head = sum(len(dict(flatten(h))) for h in headlines().values())
    n_detail = sum(sum(1 for _ in flatten(json.loads((DETAILS / rel).read_text())))
                   for rel in PRODUCERS)
    assert n_head < n_detail / 5


@settings(deadline=None)  # timing is not the property; shared cores make it noisy
@given(st.dictionaries(st.sampled_from(["loss_final", "examples", "val_loss", "note", "x"]),
                       st.one_of(st.none(), st.booleans(), st.text(max_size=3),
                                 st.integers(-5, 5), st.floats(allow_nan=False))))
def test_pick_keeps_exactly_the_numbers(detail):
    head = headline.training("distill/F1", detail)
    assert set(head) == {"distill_F1"}
    kept = head["distill_F1"]
    wanted = {"examples", "loss_final", "token_acc_final", "val_loss", "val_token_acc"}
    assert kept == {k: v for k, v in detail.items() if k in wanted
                    and isinstance(v, int | float) and not isinstance(v, bool)}


def test_write_metrics_writes_detail_and_headline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    detail = {"reward": "binary", "reward_mean_final": 0.25, "kl_final": None, "steps": 3}
    write_metrics("rloo", detail, headline.rl)
    assert json.loads(Path("reports/details/rloo.json").read_text()) == detail
    assert json.loads(Path("reports/metrics/rloo.json").read_text()) == {
        "rloo": {"reward_mean_final": 0.25}}


@pytest.mark.parametrize("name,subject", [("ipo/hardneg", "ipo_hardneg"), ("sft", "sft"),
                                          ("distill/Fshuf", "distill_Fshuf")])
def test_subject_is_the_policy_name(name, subject):
    assert headline.subject(name) == subject
