"""Evaluation library (records, policy refs, pairwise comparison) and the evaluate/compare
stages end to end on smoke params."""

import itertools
import json
import os
import runpy
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.stats import binomtest

from countdown_rlvr.analysis.compare import compare_markdown, compare_policies
from countdown_rlvr.eval import scoring
from countdown_rlvr.eval.metrics import (
    RECORD_COLUMNS,
    RECORDS_SCHEMA,
    read_records,
    records_frame,
    summarize,
    write_records,
)
from countdown_rlvr.eval.scoring import evaluate_policy, not_trained, score_samples, skill
from countdown_rlvr.model.policy import ModelRef, build_tiny, load_model, policy_ref
from countdown_rlvr.task.rewards import get_reward

SAMPLER = {"backend": "hf", "temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_new_tokens": 8}
PROBLEMS = [
    {"id": "test-0", "split": "test", "numbers": [3, 5, 7], "target": 22, "n_numbers": 3},
    {"id": "test-1", "split": "test", "numbers": [2, 4, 6, 8], "target": 40, "n_numbers": 4},
    {"id": "test-2", "split": "test", "numbers": [10, 20, 3], "target": 90, "n_numbers": 3},
    {"id": "ood-0", "split": "ood", "numbers": [1, 2, 3, 4, 5], "target": 300, "n_numbers": 5},
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    # very small so that sampling a few problems takes well under a second
    cfg = {"hidden_size": 32, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "intermediate_size": 64}
    return str(build_tiny(cfg, tmp_path_factory.mktemp("ev") / "base", seed=0))


def _evaluate(ref, **kw):
    args = {"n": 3, "sampler": SAMPLER, "seeds": [0, 1], "prompt_style": "tiny", "batch_size": 8,
                "progress": False}
    return evaluate_policy(ref, PROBLEMS, **{**args, **kw})


# --------------------------------------------------------------------------- library
def test_records_columns_counts_and_determinism(tiny, tmp_path):
    ref = policy_ref(tiny)
    assert ref == ModelRef(tiny)
    df = _evaluate(ref)
    assert list(df.columns) == RECORDS_SCHEMA.names
    assert list(df.columns[:len(RECORD_COLUMNS)]) == list(RECORD_COLUMNS)
    assert len(df) == len(PROBLEMS) * 3 * 2
    assert df.groupby(["problem_id", "seed"]).size().eq(3).all()
    assert set(df["split"]) == {"test", "ood"}
    assert (df["n_tokens"] <= 8).all() and df["n_tokens"].ge(1).all()
    assert (df["failure"].isna() == df["correct"]).all()
    assert df.loc[df["problem_id"] == "ood-0", "numbers"].iloc[0].tolist() == [1, 2, 3, 4, 5]
    # same policy + seed -> identical records, also loaded vs already-loaded model
    pd.testing.assert_frame_equal(df, _evaluate(ref))
    pd.testing.assert_frame_equal(df, _evaluate(load_model(tiny)))
    assert not df["completion"].equals(_evaluate(ref, seeds=[2, 3])["completion"])
    # the metrics of metrics.summarize accept the records as they are
    m = summarize(df, ks=(1, 2, 3), budgets=(1, 3))
    assert {"test", "ood", "diagnostics", "failures", "best_of_n"} <= set(m)
    assert m["test"]["n_problems"] == 3 and m["ood"]["n_problems"] == 1
    # parquet round trip keeps the schema and is byte-for-byte reproducible
    write_records(df, tmp_path / "a.parquet")
    write_records(_evaluate(ref), tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    pd.testing.assert_frame_equal(read_records(tmp_path / "a.parquet"), df)


def test_peft_adapter_policy(tiny, tmp_path):
    from peft import LoraConfig, get_peft_model

    model, _tok = load_model(tiny)
    peft = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    peft.save_pretrained(tmp_path / "adapter")
    ref = policy_ref(tmp_path / "adapter")
    assert ref == ModelRef(tiny, str(tmp_path / "adapter"))
    # fresh LoRA (B = 0) is the identity: same samples as the base with the same seed
    base = _evaluate(ModelRef(tiny), seeds=[0])
    pd.testing.assert_frame_equal(_evaluate(ref, seeds=[0]), base)


def test_policy_ref_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        policy_ref(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="neither"):
        policy_ref(tmp_path / "empty")
    ad = tmp_path / "ad"
    ad.mkdir()
    (ad / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": str(tmp_path / "gone")}))
    with pytest.raises(FileNotFoundError, match="gone"):
        policy_ref(ad)
    (ad / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "Qwen/X"}))
    assert policy_ref(ad) == ModelRef("Qwen/X", str(ad))  # hub ids pass through
    ref_dir = tmp_path / "passthrough"  # what the base stage writes for `model.base: <hub id>`
    ref_dir.mkdir()
    (ref_dir / "REF.json").write_text(json.dumps({"base": "Qwen/X"}))
    assert policy_ref(ref_dir) == ModelRef("Qwen/X")
    (ad / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(ref_dir)}))
    assert policy_ref(ad) == ModelRef("Qwen/X", str(ad))
    with pytest.raises(ValueError, match="unknown reward"):
        evaluate_policy(ModelRef("x"), PROBLEMS, 1, SAMPLER, [0], "tiny", reward="nope")


def test_score_samples_uses_the_verifier_and_reward():
    prob = {"id": "test-9", "split": "test", "numbers": [3, 5, 7], "target": 22, "n_numbers": 3}
    texts = ["<think>3 * 5 = 15, 15 + 7 = 22</think>\n<answer>3 * 5 + 7</answer>",
             "<think>3 + 5 = 9</think>\n<answer>3 + 5 + 7</answer>",
             "no tags", "<answer>3 * 5 / 0 + 7</answer>"]
    samples = [SimpleNamespace(text=t, n_tokens=10 + i, finish_reason="stop")
               for i, t in enumerate(texts)]
    df = records_frame(score_samples(prob, samples, seed=4, reward_fn=get_reward("shaped")))
    assert df["correct"].tolist() == [True, False, False, False]
    assert df["failure"].tolist() == [None, "WRONG_TARGET", "FORMAT_MISSING", "NUMBER_UNKNOWN"]
    assert df["value"].tolist() == ["22", "15", None, None]
    assert df["expression"].tolist()[:3] == ["3 * 5 + 7", "3 + 5 + 7", None]
    assert df["arithmetic_errors"].tolist() == [0, 1, 0, 0]
    assert df["reward"].iloc[0] == 1.0 and 0.1 < df["reward"].iloc[1] < 0.6
    assert df["sample"].tolist() == [0, 1, 2, 3] and set(df["seed"]) == {4}


TRAIN = [{**p, "id": f"train-{i}", "split": "train"} for i, p in enumerate(PROBLEMS)]


def test_skill_is_pass_at_1_of_the_evaluation_records_on_train_problems(tiny):
    """The arm checks' skill (ipo, distill): the share of correct samples over n per problem,
    the very records `evaluate_policy` writes with one seed; the same on every call."""
    ref = policy_ref(tiny)
    got = skill(ref, TRAIN, 3, SAMPLER, 7, "tiny", batch_size=4)
    records = evaluate_policy(ref, TRAIN, 3, SAMPLER, [7], "tiny", batch_size=4, progress=False)
    assert len(records) == len(TRAIN) * 3 and set(records["split"]) == {"train"}
    assert got == float(records["correct"].mean())
    assert skill(load_model(tiny), TRAIN, 3, SAMPLER, 7, "tiny", batch_size=4) == got
    # an arm check never samples the problems the claims are tested on
    for split in ("test", "ood"):
        with pytest.raises(ValueError, match=f"train problems only.*{split}"):
            skill(ref, [*TRAIN, {**PROBLEMS[0], "split": split}], 3, SAMPLER, 7, "tiny")


def test_skill_averages_over_every_sample_of_every_problem(monkeypatch):
    """pass@1 pools all samples (a problem solved 2 of 4 times counts 2/4), checked on canned
    completions: 3 correct of 8."""
    ok = {"train-0": "<answer>3 * 5 + 7</answer>", "train-1": "<answer>(8 - 2) * 6 + 4</answer>"}
    hits = {"train-0": 2, "train-1": 1}

    def fake_generate(ref, prompts, n, sampler, seed, **kw):
        assert seed == 11 and n == 4 and len(prompts) == 2
        return [[SimpleNamespace(text=ok[p["id"]] if j < hits[p["id"]] else "no answer",
                                 n_tokens=5, finish_reason="stop") for j in range(n)]
                for p in TRAIN[:2]]

    monkeypatch.setattr(scoring, "generate", fake_generate)
    assert skill(("model", "tok"), TRAIN[:2], 4, SAMPLER, 11, "tiny") == 3 / 8


# --------------------------------------------------------------------------- comparison
A = {"p0": [1, 0, 0, 0], "p1": [0, 0, 1, 0], "p2": [0, 0, 0, 0], "p3": [1, 1, 1, 1],
     "p4": [0, 1, 0, 0], "p5": [1, 0, 0, 0]}
B = {"p0": [0, 0, 0, 0], "p1": [1, 0, 0, 0], "p2": [0, 0, 0, 1], "p3": [1, 0, 0, 0],
     "p4": [0, 0, 0, 0], "p5": [0, 0, 0, 0]}


def _records(table, split="test", seed=0):
    return pd.DataFrame([
        {"problem_id": f"{split}-{pid}", "split": split, "n_numbers": 3, "seed": seed, "sample": j,
             "correct": bool(c), "failure": None if c else "WRONG_TARGET", "reward": float(c),
             "n_tokens": 5}
        for pid, row in table.items() for j, c in enumerate(row)])


def test_a_dev_policy_is_sampled_on_the_dev_split_too():
    """evaluate.dev_policies: those policies' stages sample `dev` after evaluate.splits; the
    others sample evaluate.splits only."""
    from helpers import config_of

    from countdown_rlvr.core.evaluate_config import Evaluate

    cfg = config_of(Evaluate, "evaluate", {"dev_policies": ["sft", "base"], "splits": ["test"]})
    assert cfg.splits_of("sft") == cfg.splits_of("base") == ["test", "dev"]
    assert cfg.splits_of("rloo") == ["test"]
    both = config_of(Evaluate, "evaluate", {"dev_policies": ["sft"], "splits": ["test", "ood"]})
    assert both.splits_of("sft") == ["test", "ood", "dev"] and both.splits_of("opd") == [
        "test", "ood"]


def test_dev_records_get_their_own_block_and_leave_the_test_metrics_and_compare_alone():
    """A dev policy's details have a "dev" block beside "test"; everything read from the test
    split (its block, diagnostics, failures, best-of-N) is as without the dev samples, and
    compare reads compare.splits only."""
    test_only = _records(A)
    with_dev = pd.concat([test_only, _records(B, split="dev")], ignore_index=True)
    alone, both = summarize(test_only, [1, 4]), summarize(with_dev, [1, 4])
    assert "dev" not in alone and both["dev"]["n_problems"] == len(B)
    assert both["dev"]["pass@1"] == pytest.approx(np.mean([np.mean(row) for row in B.values()]))
    assert {k: v for k, v in both.items() if k != "dev"} == alone
    rep = compare_policies({"a": with_dev, "b": with_dev}, [["a", "b"]], ks=[1], n_boot=20)
    assert set(rep["pairs"]["a_vs_b"]) == {"test"} and set(rep["policies"]["a"]) == {"test"}


def test_compare_counts_by_hand():
    recs = {"a": _records(A), "b": _records(B)}
    rep = compare_policies(recs, [["a", "b"]], ks=[1, 4, 8], seed=0, n_boot=200)
    k1, k4 = rep["pairs"]["a_vs_b"]["test"]["k1"], rep["pairs"]["a_vs_b"]["test"]["k4"]
    assert "k8" not in rep["pairs"]["a_vs_b"]["test"]  # k > n samples: skipped
    # sample 0: a solves p0 p3 p5, b solves p1 p3 -> a-only {p0, p5}, b-only {p1}
    assert (k1["a_only"], k1["b_only"]) == (2, 1)
    assert k1["solved_a"] == pytest.approx(3 / 6) and k1["solved_b"] == pytest.approx(2 / 6)
    assert k1["pvalue"] == pytest.approx(1.0) and k1["statistic"] == 1
    # within 4: a solves all but p2, b solves p1 p2 p3 -> a-only {p0, p4, p5}, b-only {p2}
    assert (k4["a_only"], k4["b_only"]) == (3, 1)
    assert k4["pvalue"] == pytest.approx(binomtest(1, 4, 0.5).pvalue) == pytest.approx(0.625)
    assert k4["diff"] == pytest.approx(2 / 6)
    assert k4["diff_ci_low"] <= k4["diff"] <= k4["diff_ci_high"]
    # pass@k diff uses every sample: pass@1 = c/4 per problem, a 8/24 vs b 3/24; with n = k = 4
    # pass@4 is "any of the 4", the same as the sample-based diff
    assert k1["pass_diff"] == pytest.approx(8 / 24 - 3 / 24)
    assert k1["pass_diff_ci_low"] <= k1["pass_diff"] <= k1["pass_diff_ci_high"]
    assert k4["pass_diff"] == pytest.approx(k4["diff"])
    chi = compare_policies(recs, [["a", "b"]], ks=[4], exact=False, n_boot=10)
    assert chi["pairs"]["a_vs_b"]["test"]["k4"]["statistic"] == pytest.approx((3 - 1 - 1) ** 2 / 4)
    # pass@1 of a: c = 1,1,0,4,1,1 of 4 -> mean c/4 = 1/3, with an interval around it
    pa = rep["policies"]["a"]["test"]["pass@1"]
    assert pa["value"] == pytest.approx(1 / 3) and pa["ci_low"] <= 1 / 3 <= pa["ci_high"]
    assert rep["policies"]["a"]["test"]["pass@4"]["value"] == pytest.approx(5 / 6)
    md = compare_markdown(rep)
    assert "| a | b | test | 4 | 0.833 | 0.500 | +0.333 [" in md and "| 3 | 1 | 0.625 |" in md
    assert "p (all samples)" in md and "McNemar p (S0's test)" in md
    # the all-sample test: sign flips of the per-problem pass-rate differences
    # +1/4, 0, -1/4, +3/4, +1/4, +1/4 (p1's zero drops out): 5 non-zero, so exact
    d = np.array([1, -1, 3, 1, 1]) / 4
    flips = [abs((d * sgn).sum()) >= d.sum() - 1e-12
             for sgn in itertools.product((1, -1), repeat=5)]
    assert k1["pass_diff_pvalue"] == pytest.approx(np.mean(flips))
    assert (k1["pass_a"], k1["pass_b"]) == pytest.approx((8 / 24, 3 / 24))
    assert json.loads(json.dumps(rep)) == rep  # plain JSON types
    # identical policies: all pairs concordant, p = 1
    same = compare_policies(recs, [["a", "a"]], ks=[1], n_boot=10)["pairs"]["a_vs_a"]["test"]["k1"]
    assert (same["a_only"], same["b_only"], same["pvalue"]) == (0, 0, 1.0)


def test_compare_skips_a_policy_without_records():
    """#17.7: an untrained policy's evaluate stage writes no samples; compare notes it and
    every pair naming it instead of failing or testing nothing."""
    recs = {"a": _records(A), "b": _records(B), "ghost": _records(A).iloc[:0]}
    rep = compare_policies(recs, [["a", "b"], ["ghost", "b"]], ks=[1], n_boot=10)
    assert set(rep["policies"]) == {"a", "b"} and set(rep["pairs"]) == {"a_vs_b"}
    assert "not trained" in rep["skipped"]["ghost_vs_b"] and "ghost" in rep["skipped"]
    md = compare_markdown(rep)
    assert "Not compared" in md and "`ghost_vs_b`" in md


def test_compare_errors_and_empty_pairs():
    recs = {"a": _records(A), "b": _records(B)}
    with pytest.raises(ValueError, match="evaluated policies"):
        compare_policies(recs, [["a", "zzz"]], ks=[1])
    other = _records({"q9": [1, 0, 0, 0], **{k: v for k, v in B.items() if k != "p0"}})
    with pytest.raises(ValueError, match="different problems"):
        compare_policies({"a": recs["a"], "c": other}, [["a", "c"]], ks=[1], n_boot=10)
    with pytest.raises(ValueError, match="seed"):
        compare_policies(recs, [["a", "b"]], ks=[1], seed=3, n_boot=10)
    rep = compare_policies(recs, [], ks=[1], n_boot=10)
    assert rep["pairs"] == {} and "No pairs configured" in compare_markdown(rep)


# --------------------------------------------------------------------------- untrained
ROOT = Path(__file__).resolve().parents[1]


def test_not_trained_reads_the_marker_a_stage_leaves_in_an_unchanged_copy(tmp_path, monkeypatch):
    from countdown_rlvr.model.untrained import untrained

    src = tmp_path / "data/models/sft/r0"
    src.mkdir(parents=True)
    (src / "config.json").write_text("{}")
    (tmp_path / "dvclive").mkdir()
    monkeypatch.chdir(tmp_path)
    untrained(src, tmp_path / "data/models/distill_F1/r0", "distill/F1/r0", same_as_source=True,
              reason="no successful F1 repair")
    why = not_trained(tmp_path / "data/models/distill_F1/r0")
    assert why and "sft/r0 unchanged" in why and "no successful F1 repair" in why
    assert not_trained(src) is None  # a trained policy: no marker
    # a copy that is a new policy all the same (int's patch without RL) is not marked
    untrained(src, tmp_path / "data/models/int/r0", "int/r0/rloo")
    assert not_trained(tmp_path / "data/models/int/r0") is None
    # copying a marked policy does not carry the mark over by accident
    untrained(tmp_path / "data/models/distill_F1/r0", tmp_path / "data/models/x/r0", "x/r0")
    assert not_trained(tmp_path / "data/models/x/r0") is None


def test_evaluate_stage_skips_an_untrained_policy(tmp_path, monkeypatch, capsys):
    """No sampling for a policy its training stage never trained; the declared outs still
    exist: empty records with the fixed schema and details that say why."""
    from countdown_rlvr.model.untrained import NOT_TRAINED

    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    seed = yaml.safe_load((ROOT / "params.yaml").read_text())["replicates"]["repair"][0]
    model = tmp_path / f"data/models/distill_R/r{seed}"  # an SFT copy in real runs
    model.mkdir(parents=True)
    (model / NOT_TRAINED).write_text(json.dumps({"source": f"data/models/sft/r{seed}",
                                                 "reason": "no successful R repair"}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["evaluate.py", "distill_R", "repair", str(seed)])
    runpy.run_path(str(ROOT / "stages/evaluate.py"), run_name="__main__")
    assert "not sampled" in capsys.readouterr().out
    recs = pd.read_parquet(tmp_path / f"data/eval/distill_R/r{seed}.parquet")
    assert recs.empty and list(recs.columns) == RECORDS_SCHEMA.names
    detail = json.loads((tmp_path / f"reports/details/eval/distill_R/r{seed}.json").read_text())
    assert detail["trained"] is False and "no successful R repair" in detail["not_evaluated"]


# --------------------------------------------------------------------------- stages
@pytest.mark.slow  # runs the stage scripts in a copy of the repo (~30 s of process start-ups)
def test_evaluate_stage_errors(pipeline):
    proc = pipeline.run("python", "stages/evaluate.py", "nope", check=False)
    assert proc.returncode != 0 and "policy 'nope' is not in `evaluate.shared`" in proc.stderr
    assert "'base'" in proc.stderr
    proc = pipeline.run("python", "stages/evaluate.py", "sft", "0", check=False)  # no chain
    assert proc.returncode != 0 and "arguments ['sft', '0']" in proc.stderr
    assert "<chain> <seed>" in proc.stderr
    proc = pipeline.run("python", "stages/evaluate.py", "sft", "sft", "3", check=False)
    assert proc.returncode != 0 and "replicate '3' is not in `replicates.seeds`" in proc.stderr
    proc = pipeline.run("python", "stages/evaluate.py", "sft", "nope", "0", check=False)
    assert proc.returncode != 0 and "unknown chain 'nope'" in proc.stderr
    # a seed of SFT's list but not of the chain that trains the policy
    pipeline.set_params({"replicates": {"seeds": [0, 1]}})
    proc = pipeline.run("python", "stages/evaluate.py", "rloo", "rloo", "1", check=False)
    assert proc.returncode != 0 and "replicate '1' is not in `replicates.rloo`" in proc.stderr
    proc = pipeline.run("python", "stages/evaluate.py", "ghost", "sft", "0", check=False)
    assert proc.returncode != 0 and "data/models/ghost/r0" in proc.stderr
    pipeline.set_params({"evaluate": {"reward": "nope"}})
    proc = pipeline.run("python", "stages/evaluate.py", "ghost", "sft", "0", check=False)
    assert proc.returncode != 0 and "evaluate.reward" in proc.stderr
    pipeline.set_params({"evaluate": {"reward": "binary"}, "compare": {"pairs": [["ghost", "zzz"]]}})
    proc = pipeline.run("python", "stages/compare.py", check=False)
    assert proc.returncode != 0 and "zzz" in proc.stderr


@pytest.mark.slow
def test_evaluate_a_shared_policy_end_to_end_and_reproducibly(pipeline):
    # problems -> base -> evaluate_shared@base through DVC on smoke params (the trained
    # policies have end-to-end tests of their own)
    pipeline.repro("evaluate_shared@base")
    params = yaml.safe_load(pipeline.read("params.yaml"))
    ev = params["evaluate"]
    recs = pd.read_parquet(pipeline.path / "data/eval/base/shared.parquet")
    assert list(recs.columns) == RECORDS_SCHEMA.names
    sizes = {"test": params["problems"]["n_test"], "ood": params["problems"]["n_ood"]}
    n_problems = sum(sizes[split] for split in ev["splits"])  # the OOD split is opt-in
    assert set(recs["split"]) == set(ev["splits"])
    assert len(recs) == n_problems * ev["n"] * len(ev["seeds"])
    assert recs["n_tokens"].max() <= params["sampler"]["max_new_tokens"]
    metrics = json.loads(pipeline.read("reports/details/eval/base/shared.json"))
    assert {*ev["splits"], "diagnostics", "failures", "best_of_n", "samples"} <= set(metrics)
    assert metrics["test"]["n_problems"] == params["problems"]["n_test"]
    assert metrics["test"]["samples_per_group"] == ev["n"]
    assert sum(metrics["failures"].values()) == params["problems"]["n_test"] * ev["n"]
    assert np.isfinite(metrics["diagnostics"]["avg_score"])
    # determinism: forcing the stage again reproduces the records and details byte for byte
    files = ("data/eval/base/shared.parquet", "reports/details/eval/base/shared.json")
    before = [pipeline.read(f) for f in files]
    pipeline.run("dvc", "repro", "-f", "-s", "evaluate_shared@base")
    assert [pipeline.read(f) for f in files] == before


def test_a_policy_of_n_by_policy_is_sampled_its_own_n_the_others_evaluate_n(tiny, tmp_path,
                                                                            monkeypatch):
    """The mechanism behind more samples for the arms of pass@k claims: the stage samples a
    policy of `evaluate.n_by_policy` that many times per prompt, every other policy `n`."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    seed = params["replicates"]["opd"][0]
    ev = params["evaluate"]
    ev.update(n=2, ks=[1, 2], budgets=[1, 2], seeds=[0], splits=["test"], dev_policies=[],
              n_by_policy={"opd": 4})
    params["problems"]["n_test"] = 3
    params["sampler"]["max_new_tokens"] = 8
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "data/problems").mkdir(parents=True)
    (tmp_path / "data/problems/test.jsonl").write_text(
        "".join(json.dumps({**p, "n_solutions": None, "construction": None}) + "\n"
                for p in PROBLEMS if p["split"] == "test"))
    for policy in ("opd", "opd_ac"):
        shutil.copytree(tiny, tmp_path / f"data/models/{policy}/r{seed}")
    monkeypatch.chdir(tmp_path)
    for policy, n in (("opd", 4), ("opd_ac", 2)):
        monkeypatch.setattr(sys, "argv", ["evaluate.py", policy, "opd", str(seed)])
        runpy.run_path(str(ROOT / "stages/evaluate.py"), run_name="__main__")
        recs = pd.read_parquet(tmp_path / f"data/eval/{policy}/r{seed}.parquet")
        assert recs.groupby("problem_id").size().tolist() == [n] * 3
        detail = json.loads((tmp_path / f"reports/details/eval/{policy}/r{seed}.json").read_text())
        assert detail["test"]["samples_per_group"] == n
