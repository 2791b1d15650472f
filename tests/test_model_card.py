"""Every saved policy carries a README.md model card: its name and replicate, its prompt
format, how to load it, the config it trained with and its training summary; the directory
still loads with plain transformers / peft."""

from pathlib import Path

import pytest
import torch
from helpers import config_of
from test_sft import TINY, TOY  # a one-layer model and its toy data: trains in a second

from countdown_rlvr.core.train_config import SFTStage
from countdown_rlvr.model.card import policy_of
from countdown_rlvr.model.policy import build_tiny, load_model
from countdown_rlvr.task.prompts import solve_prompt
from countdown_rlvr.train.runtime import apply_adapter
from countdown_rlvr.train.sft import fit_sft

CFG = {"lr": 1e-2, "batch_size": 4, "max_len": 32, "max_steps": 4, "warmup_frac": 0.0,
       "seed": 0, "log_every": 1, "weight_decay": 0.0, "time_budget_s": None,
       "early_step": None}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny(TINY, tmp_path_factory.mktemp("tiny") / "m", seed=0)


@pytest.mark.parametrize("adapter", ["full", "lora"])
def test_a_saved_policy_carries_its_card_and_still_loads(tiny_dir, tmp_path, monkeypatch, adapter):
    monkeypatch.chdir(tmp_path)  # dvclive/, reports/ and data/ of the run land here
    cfg = config_of(SFTStage, "sft", {**CFG, "adapter": adapter, "lora_r": 4, "lora_alpha": 8})
    model, tok = load_model(str(tiny_dir))
    model = apply_adapter(model, adapter, r=cfg.lora_r, alpha=cfg.lora_alpha,
                          dropout=cfg.lora_dropout, target_modules=cfg.target_modules)
    out = Path("data/models/sft/r2")
    fit_sft("sft/r2", model, tok, TOY, cfg, out)

    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: " + ("peft" if adapter == "lora" else "transformers"))
    assert "# sft, replicate r2" in card
    assert solve_prompt([3, 5, 7], 22, "tiny").rstrip("\n") in card  # the prompt format
    assert "model.prompt_style: tiny" in card and "model.prompt_style: chat" in card
    assert solve_prompt([3, 5, 7], 22, "chat").splitlines()[0] in card  # both: no params read
    assert f"lr: {cfg.lr}" in card and f"adapter: {adapter}" in card  # the params
    assert "| loss_final |" in card and "| steps | 4 |" in card  # the training summary
    assert "| seconds |" not in card and "tokens_per_s" not in card  # no wall-clock numbers
    assert "reports/details/eval/sft/r2.json" in card
    assert not list(out.parent.glob(".*.tmp"))  # no temporary dir left behind

    ids = tok(["Numbers: 1 2\n"], return_tensors="pt")
    if adapter == "full":
        from transformers import AutoModelForCausalLM

        assert "AutoModelForCausalLM.from_pretrained(\"data/models/sft/r2\")" in card
        loaded = AutoModelForCausalLM.from_pretrained(str(out))
    else:
        from peft import AutoPeftModelForCausalLM, PeftModel

        assert "AutoPeftModelForCausalLM.from_pretrained(\"data/models/sft/r2\")" in card
        loaded = AutoPeftModelForCausalLM.from_pretrained(str(out))
        assert isinstance(loaded, PeftModel)
    with torch.no_grad():
        assert torch.allclose(loaded(**ids).logits, model.to("cpu")(**ids).logits, atol=1e-5)


def test_policy_names():
    assert policy_of("data/models/ipo_scripted/r1") == ("ipo_scripted", 1)
    assert policy_of("data/models/teacher") == ("teacher", None)
