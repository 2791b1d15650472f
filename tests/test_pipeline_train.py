"""End to end: `sft@<seed>` and the `ipo@<source>-<seed>` matrix stages via the real `dvc repro`,
smoke-sized (one replicate, seed 0)."""

import json

import pytest
import yaml
from test_pipeline_data import ran

from countdown_rlvr.model.policy import load_model, policy_ref

pytestmark = pytest.mark.slow

SMOKE_SOURCES = ["scripted", "base"]  # params.smoke.yaml: the smoke teacher yields no traces


def test_ipo_every_source_noop_rerun_lora_adapters_and_errors(pipeline, monkeypatch):
    first = pipeline.repro("ipo", "ipo_first")  # base: a first-replicate-only source
    assert {"sft@0", "ipo@scripted-0", "ipo_first@base-0"} <= ran(first)
    pairs = [json.loads(line) for line in pipeline.read("data/pairs/pairs.jsonl").splitlines()]
    for source in SMOKE_SOURCES:
        m = json.loads(pipeline.read(f"reports/details/ipo/{source}/r0.json"))
        assert m["source"] == source and m["replicate"] == 0 and m["pairs"] == sum(p["source"] == source for p in pairs) > 0
        assert m["steps"] == 3 and m["stopped_by"] == "max_steps", m
        # step 1 scores the SFT policy against itself: zero margin, loss (1/(2 beta))^2 + anchor
        assert m["margin_first"] == pytest.approx(0.0, abs=1e-3)
        for key in ("loss_final", "pref_acc_final", "chosen_reward_final", "rejected_reward_final"):
            assert isinstance(m[key], float), key
        # the skill check: SFT and IPO pass@1 on the 8 train problems after the pairs' 8
        assert (m["skill_problems"], m["skill_samples"], m["skill_margin"]) == (8, 2, 0.25)
        assert all(0 <= m[k] <= 1 and (16 * m[k]).is_integer() for k in ("skill_sft", "skill_ipo"))
        assert json.loads(pipeline.read(f"reports/timings/ipo/{source}/r0.json"))["seconds"] > 0
        curve = pipeline.read(f"dvclive/ipo/{source}/r0/plots/metrics/train/margin.tsv").decode()
        assert len(curve.splitlines()) == 1 + 3  # header + one row per step
        model, tok = load_model(str(pipeline.path / f"data/models/ipo_{source}/r0"))
        assert model(**tok("Numbers: 1 2 3 Target: 6\n", return_tensors="pt")).logits.shape[-1] == len(tok)
    # the same SFT policy, problems and seed in every source's run: the same SFT skill
    assert len({json.loads(pipeline.read(f"reports/details/ipo/{s}/r0.json"))["skill_sft"]
                for s in SMOKE_SOURCES}) == 1
    sft = json.loads(pipeline.read("reports/details/sft/r0.json"))
    assert sft["adapter"] == "full" and sft["val_loss"] > 0 and 0 <= sft["val_token_acc"] <= 1

    again = pipeline.repro("ipo", "ipo_first")
    assert ran(again) == set() and "Data and pipelines are up to date" in again.stdout

    # LoRA SFT, then IPO training that same adapter further: both are peft adapter dirs whose
    # recorded base is the local base dir (absolute), which evaluate.policy_ref resolves and loads
    pipeline.set_params({"sft": {"adapter": "lora"}, "ipo": {"adapter": "lora"}})
    assert ran(pipeline.repro("ipo@scripted-0")) == {"check_params", "sft@0", "ipo@scripted-0"}
    assert json.loads(pipeline.read("reports/details/sft/r0.json"))["adapter"] == "lora"
    monkeypatch.chdir(pipeline.path)
    for out in ("data/models/sft/r0", "data/models/ipo_scripted/r0"):
        ref = policy_ref(out)
        assert (ref.base, ref.adapter) == (str((pipeline.path / "data/models/base").resolve()), out)
        model, _ = load_model(ref.base, ref.adapter)
        assert type(model).__name__.startswith("Peft")

    # a source name that pairs.SOURCES does not know fails before any work, naming the fix
    pipeline.set_params({"ipo": {"sources": ["scripted", "bogus"]}})
    proc = pipeline.repro("ipo", check=False)
    assert proc.returncode != 0
    assert "unknown pair source(s) ['bogus'] in `ipo.sources`" in proc.stderr
    assert "valid: scripted, easyneg, hardneg, base" in proc.stderr
    # a known source without pairs (no teacher traces at smoke size) says how to get some
    pipeline.set_params({"ipo": {"sources": ["scripted", "easyneg"]}})
    proc = pipeline.run("python", "stages/ipo.py", "easyneg", "0", check=False)
    assert proc.returncode != 0
    assert "has no `easyneg` pairs" in proc.stderr and "remove easyneg from `ipo.sources`" in proc.stderr
    assert "teacher_traces.n_problems" in proc.stderr
    # the skill check needs train problems after the pairs': a split too short for them (or
    # pairs from all of it) stops the stage before training, naming the fix
    pipeline.set_params({"pairs": {"n_problems": 56}})  # 56 + ipo.skill_problems 8 > 60
    proc = pipeline.run("python", "stages/ipo.py", "scripted", "0", check=False)
    assert proc.returncode != 0 and "[ipo] error: the skill check needs the 8 train problems " \
        "after the first 56" in proc.stderr and "raise problems.n_train to at least 64" in proc.stderr
    params = yaml.safe_load(pipeline.read("params.yaml"))  # set_params: a null deletes the key
    params["pairs"]["n_problems"] = None
    (pipeline.path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = pipeline.run("python", "stages/ipo.py", "scripted", "0", check=False)
    assert proc.returncode != 0 and "`pairs.n_problems` is null" in proc.stderr
