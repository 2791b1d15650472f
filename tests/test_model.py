import os
import re

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer, Qwen2ForCausalLM

from countdown_rlvr.model.policy import (
    EOS,
    TAGS,
    TINY_PRESETS,
    ModelRef,
    build_tiny,
    build_tokenizer,
    load_model,
    merge_adapter,
    n_parameters,
    pretraining_corpus,
    tiny_config,
)

pytestmark = pytest.mark.usefixtures("one_thread")



@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny("student", tmp_path_factory.mktemp("tiny") / "base", seed=0)


# --------------------------------------------------------------------------- tokenizer
@settings(max_examples=300, deadline=None)
@given(st.lists(st.text() | st.sampled_from([*TAGS, EOS, " 12", "\n", "<thin", "k>"])))
def test_tokenizer_round_trips_any_text(tok, parts):
    text = "".join(parts)
    assert tok.decode(tok(text)["input_ids"]) == text


@pytest.mark.parametrize("number", ["7", "44", "1000", "98765"])
def test_digits_are_single_tokens(tok, number):
    ids = tok(f"Target: {number}\n")["input_ids"]
    pieces = [tok.decode([i]) for i in ids]
    assert [p for p in pieces if p.isdigit()] == list(number)


def test_tags_and_eos_are_single_tokens(tok):
    for t in [*TAGS, EOS]:
        assert len(tok(f"x{t}y 1")["input_ids"]) == len(tok("xy 1")["input_ids"]) + 1
        assert len(tok(t)["input_ids"]) == 1
    assert tok.eos_token == tok.pad_token == EOS
    assert tok.padding_side == "left"
    # tags are ordinary tokens: they survive skip_special_tokens, EOS does not
    ids = tok("<think>1 + 2 = 3</think>" + EOS)["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == "<think>1 + 2 = 3</think>"


def test_tokenizer_deterministic_and_small(tok):
    assert build_tokenizer().backend_tokenizer.to_str() == tok.backend_tokenizer.to_str()
    assert 256 < len(tok) <= 512


def test_tokenizer_save_load(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "Numbers: 44 19 35 Target: 98\n<think>44 + 19 = 63</think>\n<answer>1</answer>"
    assert loaded(text)["input_ids"] == tok(text)["input_ids"]
    assert loaded.padding_side == "left" and loaded.pad_token_id == tok.eos_token_id
    assert loaded.decode(loaded(text)["input_ids"]) == text


# --------------------------------------------------------------------------- tiny model
@pytest.mark.parametrize("preset,lo,hi", [("student", 0.8e6, 1.3e6), ("teacher", 3e6, 5e6)])
def test_preset_sizes(preset, lo, hi):
    cfg = tiny_config(**TINY_PRESETS[preset], vocab_size=len(build_tokenizer()))
    assert cfg.tie_word_embeddings
    assert lo <= n_parameters(Qwen2ForCausalLM(cfg)) <= hi


def _forward(path_or_model, tok=None):
    model, tok = load_model(str(path_or_model)) if tok is None else (path_or_model, tok)
    ids = tok(["Numbers: 44 19 35 Target: 98\n<think>44 + 19"], return_tensors="pt")
    with torch.no_grad():
        return model(**ids).logits


def test_build_and_load_round_trip(tiny_dir, tmp_path):
    model, tok = load_model(str(tiny_dir))
    assert isinstance(model, Qwen2ForCausalLM) and model.config.vocab_size == len(tok)
    model.save_pretrained(tmp_path / "again")
    tok.save_pretrained(tmp_path / "again")
    assert torch.equal(_forward(tiny_dir), _forward(tmp_path / "again"))
    # same seed -> same weights; another seed -> different weights
    assert torch.equal(_forward(build_tiny("student", tmp_path / "same", seed=0)), _forward(tiny_dir))
    assert not torch.equal(_forward(build_tiny("student", tmp_path / "s1", seed=1)),
                           _forward(tiny_dir))


def test_build_tiny_custom_dict_and_errors(tmp_path):
    path = build_tiny({"hidden_size": 32, "n_layers": 1, "intermediate_size": 64}, tmp_path / "m", 0)
    assert load_model(str(path))[0].config.hidden_size == 32
    with pytest.raises(ValueError, match="valid: student, teacher"):
        build_tiny("huge", tmp_path / "x", 0)
    with pytest.raises(ValueError, match="unknown tiny model keys"):
        build_tiny({"hidden": 3}, tmp_path / "x", 0)


def _lora(model, seed=0):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                     init_lora_weights=False)  # random B: the adapter changes the outputs
    return get_peft_model(model, cfg)


def test_adapter_load_and_merge(tiny_dir, tmp_path):
    base, tok = load_model(str(tiny_dir))
    peft_model = _lora(base)
    peft_model.save_pretrained(tmp_path / "adapter")
    expected = _forward(peft_model, tok)
    assert not torch.allclose(expected, _forward(tiny_dir))

    loaded, _ = load_model(str(tiny_dir), str(tmp_path / "adapter"))
    assert torch.allclose(_forward(loaded, tok), expected, atol=1e-5)

    merged = merge_adapter(ModelRef(str(tiny_dir), str(tmp_path / "adapter")), tmp_path / "merged")
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    assert torch.allclose(_forward(merged), expected, atol=1e-5)
    assert merge_adapter(ModelRef(str(tiny_dir)), tmp_path / "unused") == str(tiny_dir)


def test_missing_inputs_name_the_fix(tiny_dir, tmp_path):
    with pytest.raises(OSError, match="dvc repro"):
        load_model(str(tmp_path / "no-such-model"))
    with pytest.raises(FileNotFoundError, match="dvc repro"):
        load_model(str(tiny_dir), str(tmp_path / "no-such-adapter"))


def test_full_model_in_adapter_slot(tiny_dir, tmp_path):
    other = build_tiny("student", tmp_path / "full", seed=3)
    model, _ = load_model(str(tiny_dir), str(other))
    assert torch.equal(_forward(model, load_model(str(other))[1]), _forward(other))


# --------------------------------------------------------------------------- corpus
_STEP = re.compile(r"(\d+) ([-+*/]) (\d+) = (\d+)")


def test_pretraining_corpus_mix():
    assert all(d.startswith("Evaluate: ") for d in pretraining_corpus(200, seed=0))
    mixed = pretraining_corpus(400, seed=0, facts_frac=0.5)
    facts = sum(not d.startswith("Evaluate: ") for d in mixed)
    assert 150 < facts < 250


def test_pretraining_corpus():
    docs = pretraining_corpus(300, seed=0, facts_frac=0.3)
    assert docs == pretraining_corpus(300, seed=0, facts_frac=0.3)
    assert docs != pretraining_corpus(300, seed=1, facts_frac=0.3)
    assert len(docs) == 300
    text = "\n".join(docs)
    # not Countdown: no number pool / target prompt
    assert "Numbers:" not in text and "Target:" not in text
    assert "<think>" in text and "</answer>" in text and "Evaluate: " in text
    for op in "+-*/":
        assert f" {op} " in text
    ops = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "/": int.__floordiv__}
    for a, op, b, c in _STEP.findall(text):
        assert ops[op](int(a), int(b)) == int(c)
        if op == "/":
            assert int(a) % int(b) == 0
    for d in docs:
        if d.startswith("Evaluate: "):
            expr = d.split("\n")[0].removeprefix("Evaluate: ")
            answer = int(d.split("<answer>")[1].removesuffix("</answer>"))
            last = _STEP.findall(d)[-1]
            assert int(last[3]) == answer
            assert eval(expr) == answer  # our own generated text, integers only


# --------------------------------------------------------------------------- chat prompts
def test_chat_prompts_are_rendered_by_the_template_wherever_a_prompt_is_tokenized(hub_model):
    """Sampling, SFT/IPO encoding and RL scoring all read the prompt through the chat
    template (system + user turns, then the assistant's turn); the tiny tokenizer, which
    has no template, keeps its plain prompts."""
    from countdown_rlvr.model.policy import CHAT_SYSTEM, load_model, render_prompts
    from countdown_rlvr.model.sampling import Sample
    from countdown_rlvr.task.prompts import solve_prompt
    from countdown_rlvr.train.rloo import pack_rollouts
    from countdown_rlvr.train.sft import encode

    model, tok = load_model(str(hub_model))
    user = solve_prompt([1, 2, 3], 6, "chat")
    text = render_prompts(tok, [user])[0]
    assert text == (f"<|im_start|>system\n{CHAT_SYSTEM}<|im_end|>\n"
                    f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
    want = tok(text).input_ids
    assert want[0] == tok.convert_tokens_to_ids("<|im_start|>")
    ids, n_prompt = encode(tok, user, "<answer>1 + 2 + 3</answer>")
    assert ids[:n_prompt] == want
    sample = Sample(text="x", token_ids=[5, 6], n_tokens=2, finish_reason="stop", logprobs=[-1.0, -1.0])
    packed = pack_rollouts(tok, [user], [[sample]], "cpu")
    assert packed.input_ids[0, :packed.start].tolist()[-len(want):] == want
    assert render_prompts(build_tokenizer(), ["Numbers: 1 2 Target: 3\n"]) == \
        ["Numbers: 1 2 Target: 3\n"]
    assert tok.model_max_length == model.config.max_position_embeddings == 512


def test_model_dtype_setting_reaches_loads_and_accelerate(tiny_dir):
    from countdown_rlvr.model.policy import SETTINGS, configure, load_model, mixed_precision

    try:
        configure({"model": {"dtype": "bfloat16"}})
        model, _ = load_model(str(tiny_dir))
        assert next(model.parameters()).dtype == torch.bfloat16 and mixed_precision() == "bf16"
        with pytest.raises(ValueError, match="model.dtype 'fp8' is unknown"):
            configure({"model": {"dtype": "fp8"}})
    finally:
        configure({})
    assert SETTINGS["dtype"] == "float32" and mixed_precision() == "no"
    assert next(load_model(str(tiny_dir))[0].parameters()).dtype == torch.float32


def test_portable_base_is_the_hub_id_or_an_absolute_dir(tmp_path, tiny_dir, monkeypatch):
    """What an adapter records as its base: loadable from any working directory."""
    from countdown_rlvr.model.policy import portable_base

    (tmp_path / "ref").mkdir()
    (tmp_path / "ref/REF.json").write_text('{"base": "Qwen/Qwen2.5-0.5B"}')
    assert portable_base(tmp_path / "ref") == "Qwen/Qwen2.5-0.5B"  # pass-through hub base
    monkeypatch.chdir(tiny_dir.parent)
    assert portable_base(tiny_dir.name) == str(tiny_dir.resolve())  # relative local dir
