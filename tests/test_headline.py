"""The headline metrics: picked from the stages' detail files without changing a number,
numbers only, and the same keys in every file of one kind (the path names the subject), so
`dvc metrics show reports/metrics/eval` is one row per policy and a few columns."""

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr import headline
from countdown_rlvr.io import write_metrics

DETAILS = Path(__file__).parent / "fixtures/report/reports/details"
TAGS = ("r0", "r1", "r2")
# detail file kind (as the report fixture's producers write it) -> its stage's headline function
PRODUCERS = {
    "sft": headline.training, "ipo/scripted": headline.ipo, "rloo": headline.rl,
    "opd": headline.rl, "opd_ac": headline.rl, "diagnose": headline.diagnose,
    "repair": headline.repair, "int": headline.interventions, "distill/F4": headline.training,
}


def flatten(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def detail(rel: str) -> dict:
    return json.loads((DETAILS / rel).read_text())


def test_every_headline_value_is_a_number_copied_from_its_detail_file():
    for kind, fn in PRODUCERS.items():
        for tag in TAGS:
            d = detail(f"{kind}/{tag}.json")
            flat = dict(flatten(fn(f"{kind}/{tag}", d)))
            assert flat, f"{kind}/{tag}: empty headline"
            numbers = [v for _, v in flatten(d)]
            for key, value in flat.items():
                assert isinstance(value, int | float) and not isinstance(value, bool), key
                assert value in numbers, f"{kind}/{tag}: {key}={value} is not in the detail"


def test_files_of_one_kind_share_their_keys_so_dvc_tabulates_them_as_rows():
    for kind, fn in PRODUCERS.items():
        keys = {tag: set(dict(flatten(fn(f"{kind}/{tag}", detail(f"{kind}/{tag}.json")))))
                for tag in TAGS}
        assert len({frozenset(k) for k in keys.values()}) == 1, (kind, keys)
    compare = detail("compare.json")
    policies = {p: headline.policy(v) for p, v in compare["policies"].items() if v}
    replicated = {p: h for p, h in policies.items() if h["replicates"] == 3}
    assert len({frozenset(h) for h in replicated.values()}) == 1
    assert set(next(iter(replicated.values()))) == {
        "pass@1", "pass@1_sd", "pass@16", "pass@16_sd", "ood_pass@16", "ood_pass@16_sd",
        "replicates"}  # <= 10 columns in `dvc metrics show reports/metrics/eval`
    # one draw (shared, or the first replicate only): the means, no spread to report
    assert set(policies["base"]) == set(policies["ipo_base"]) == {
        "pass@1", "pass@16", "ood_pass@16", "replicates"}


def test_policy_headline_is_the_mean_and_spread_over_replicates():
    pooled = detail("compare.json")["policies"]["rloo"]
    head = headline.policy(pooled)
    one = pooled["test"]["pass@1"]
    assert head["pass@1"] == one["mean"] and head["pass@1_sd"] == one["sd"]
    per = [detail(f"eval/rloo/{t}.json")["test"]["pass@1"] for t in TAGS]
    assert abs(head["pass@1"] - sum(per) / 3) < 1e-12
    assert head["ood_pass@16"] == pooled["ood"]["pass@16"]["mean"] and head["replicates"] == 3


def test_comparison_headline_is_the_pooled_effect_and_p():
    d = detail("compare.json")
    head = headline.comparison("compare", d)
    k1 = d["pairs"]["rloo_vs_sft"]["test"]["k1"]["pooled"]
    k16 = d["pairs"]["rloo_vs_sft"]["test"]["k16"]["pooled"]
    assert head["rloo_vs_sft"] == {"pass@1_diff": k1["mean"], "p_k1": k1["pvalue"],
                                   "pass@16_diff": k16["mean"], "p_k16": k16["pvalue"]}
    # a pair with one replicate (a secondary policy): its difference, no p
    assert head["ipo_base_vs_sft"].keys() == {"pass@1_diff", "pass@16_diff"}


def test_the_whole_run_stays_a_few_hundred_values():
    n_head = sum(len(dict(flatten(fn(k, detail(f"{k}/{t}.json")))))
                 for k, fn in PRODUCERS.items() for t in TAGS)
    n_head += len(dict(flatten(headline.comparison("compare", detail("compare.json")))))
    assert n_head < 600


@settings(deadline=None)  # timing is not the property; shared cores make it noisy
@given(st.dictionaries(st.sampled_from(["loss_final", "examples", "val_loss", "note", "x"]),
                       st.one_of(st.none(), st.booleans(), st.text(max_size=3),
                                 st.integers(-5, 5), st.floats(allow_nan=False))))
def test_pick_keeps_exactly_the_numbers(d):
    kept = headline.training("distill/F1/r0", d)
    wanted = {"examples", "loss_final", "token_acc_final", "val_loss", "val_token_acc"}
    assert kept == {k: v for k, v in d.items() if k in wanted
                    and isinstance(v, int | float) and not isinstance(v, bool)}


def test_write_metrics_writes_detail_and_headline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d = {"reward": "binary", "reward_mean_final": 0.25, "kl_final": None, "steps": 3}
    write_metrics("rloo/r1", d, headline.rl)
    assert json.loads(Path("reports/details/rloo/r1.json").read_text()) == d
    assert json.loads(Path("reports/metrics/rloo/r1.json").read_text()) == {
        "reward_mean_final": 0.25}
