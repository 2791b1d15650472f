"""End to end on a hub-shaped model: `params.qwen.yaml` (the GPU recipe) applied with the
README's `dvc exp run $(python -m countdown_rlvr.cli.overrides ...)`, with a small local
Qwen2-architecture chat model in place of the hub ids and params.smoke.yaml's sizes.
Chat prompts, bfloat16 on CPU, LoRA / DoRA / full policies that load with plain
transformers / peft from another directory."""

import json
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import ROOT
from test_pipeline_data import ran
from transformers import AutoModelForCausalLM, AutoTokenizer

from countdown_rlvr.cli.overrides import leaves, set_flags
from countdown_rlvr.model.policy import CHAT_SYSTEM

pytestmark = pytest.mark.slow


def qwen_values(hub_model: Path) -> dict:
    """params.qwen.yaml with the hub ids swapped for the local model and every size that
    params.smoke.yaml also sets (steps, batches, token budgets) shrunk to the smoke value."""
    qwen = leaves(yaml.safe_load((ROOT / "params.qwen.yaml").read_text()))
    smoke = leaves(yaml.safe_load((ROOT / "params.smoke.yaml").read_text()))
    assert qwen["model.base"] == "Qwen/Qwen2.5-0.5B" and qwen["model.dtype"] == "bfloat16"
    return {**qwen, **{k: smoke[k] for k in qwen if k in smoke},
            "model.base": str(hub_model), "teacher.base": str(hub_model)}


def test_overrides_cli_prints_set_flags():
    proc = __import__("subprocess").run(
        [sys.executable, "-m", "countdown_rlvr.cli.overrides", str(ROOT / "params.qwen.yaml")],
        capture_output=True, text=True, check=True)
    flags = proc.stdout.split()
    assert flags[:2] == ["-S", "model.base=Qwen/Qwen2.5-0.5B"] and "rloo.lr=1e-05" in flags


def test_qwen_recipe_end_to_end_on_a_hub_shaped_chat_model(pipeline, hub_model, tmp_path,
                                                           monkeypatch):
    values = {**qwen_values(hub_model), "rloo.adapter": "dora"}  # sft, ipo: lora; rloo: dora
    proc = pipeline.run("dvc", "exp", "run", *set_flags(values), "evaluate_rloo@rloo-0",
                        "ipo@scripted-0")
    assert {"base", "teacher", "sft@0", "ipo@scripted-0", "rloo@rloo-0",
            "evaluate_rloo@rloo-0"} <= ran(proc)
    params = yaml.safe_load(pipeline.read("params.yaml"))
    assert params["model"]["prompt_style"] == "chat" and params["sft"]["lora_r"] == 32

    records = __import__("pandas").read_parquet(pipeline.path / "data/eval/rloo/r0.parquet")
    assert len(records) > 0 and records["reward"].notna().all()
    m = json.loads(pipeline.read("reports/details/rloo/r0.json"))
    assert m["steps"] == 2 and m["adapter"] == "dora"

    # the same IPO source once more as a full model (merged SFT adapter), still in bf16
    pipeline.set_params({"ipo": {"adapter": "full"}})
    pipeline.run("python", "stages/ipo.py", "base", "0")
    assert json.loads(pipeline.read("data/models/ipo_base/r0/config.json"))["dtype"] == "bfloat16"

    # every policy loads with plain transformers / peft from an unrelated directory
    from peft import AutoPeftModelForCausalLM

    monkeypatch.chdir(tmp_path)
    kinds = {"data/models/sft/r0": "lora", "data/models/ipo_scripted/r0": "lora",
             "data/models/rloo/r0": "dora", "data/models/ipo_base/r0": "full"}
    for rel, kind in kinds.items():
        path = pipeline.path / rel
        if kind == "full":
            model = AutoModelForCausalLM.from_pretrained(path)
        else:
            cfg = json.loads((path / "adapter_config.json").read_text())
            assert cfg["base_model_name_or_path"] == str(hub_model.resolve())
            assert cfg["use_dora"] is (kind == "dora")
            model = AutoPeftModelForCausalLM.from_pretrained(path)
        tok = AutoTokenizer.from_pretrained(path)
        assert tok.model_max_length == 512  # max_position_embeddings, not "unknown" (1e30)
        gen = json.loads((path / "generation_config.json").read_text())
        assert (gen["temperature"], gen["top_p"], gen["top_k"], gen["max_new_tokens"]) == \
            (0.6, 0.95, 20, 24)  # params.yaml `sampler`, smoke max_new_tokens
        prompt = tok.apply_chat_template(
            [{"role": "system", "content": CHAT_SYSTEM}, {"role": "user", "content": "Numbers: 1"}],
            tokenize=False, add_generation_prompt=True)
        enc = tok(prompt, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=4)  # sampling settings from the file
        assert out.shape[1] > enc.input_ids.shape[1], rel
