"""Models: the embedded tiny Qwen2 (built locally, no downloads) and one loader for all models.

The tiny model is saved with `save_pretrained` and reloaded through `AutoModelForCausalLM`,
so every later stage uses exactly the code path it would use for `Qwen/Qwen2.5-0.5B`.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..core.config import from_section
from ..core.io import atomic_path, load_params
from ..core.replicates import for_replicate, parse_replicate
from ..task.arith import apply_op

if TYPE_CHECKING:  # annotations only; the functions import transformers when called
    from transformers import PreTrainedTokenizerFast, Qwen2Config

EOS = "<|endoftext|>"
EOS_ID = 0  # the only trainer special token, so it gets id 0
TAGS = ("<think>", "</think>", "<answer>", "</answer>")
TOKENIZER_VOCAB = 384  # 256 byte symbols + EOS + BPE merges + 4 tags

# Presets (parameter counts with the 384-token vocabulary, tied embeddings).
TINY_PRESETS: dict[str, dict[str, int]] = {
    # ~1.04M parameters: the policy of the laptop pipeline.
    "student": {"hidden_size": 128, "n_layers": 4, "n_heads": 4, "n_kv_heads": 2,
                "intermediate_size": 512, "max_positions": 512},
    # ~3.3M parameters: the teacher, trained longer.
    "teacher": {"hidden_size": 192, "n_layers": 6, "n_heads": 6, "n_kv_heads": 2,
                "intermediate_size": 768, "max_positions": 512},
}

# Words of the tiny prompt and the S0 feedback templates, so BPE learns merges for them and
# repair prompts stay short. A literal (not imported) so the tokenizer depends on this file only.
_TOKENIZER_WORDS = """Numbers: Target: Evaluate: The answer is incorrect. Try again.
The final expression is missing; put it inside the tags. The final expression is not parseable.
The equation uses the input numbers incorrectly. The equation divides by zero.
The equation is valid but does not reach the target. Your expression evaluates to , but the
target is . Your equation reuses and omits , and uses , which are not provided. none
No expression was found inside. The expression is syntactically valid and uses the allowed
numbers exactly once, but it evaluates to instead of the target. It must change the final
value by . Search for a different expression over that reaches ; do not just reformat.
Generate a fresh solution attempt. Do not copy any previous expression. Previous attempt:
Feedback: You are solving a Countdown arithmetic puzzle. Use each provided number exactly once.
You may use +, -, *, and /. Show your reasoning briefly. Put your final expression inside.
"""


# --------------------------------------------------------------------------- tokenizer
def build_tokenizer() -> PreTrainedTokenizerFast:
    """A deterministic byte-level BPE with one token per digit and the four tags as tokens.

    Byte-level means every string round-trips exactly (no unknown token, no normalizer);
    splitting digits makes the arithmetic positional, as in Qwen2's tokenizer.
    """
    # lazy: transformers costs ~3 s of imports; stages that import this module without
    # building or loading a model (e.g. traces via sampling) never pay it
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TOKENIZER_VOCAB - len(TAGS), special_tokens=[EOS], min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    # The prompt words are repeated so they beat the arithmetic text to the merge budget.
    text = [_TOKENIZER_WORDS] * 20 + pretraining_corpus(1000, seed=0, facts_frac=0.3)
    for tag in TAGS:  # tags are added afterwards as whole tokens; keep them out of the merges
        text = [t.replace(tag, "") for t in text]
    tok.train_from_iterator(text, trainer=trainer)
    # normalized=False/special=False: matched verbatim, kept by decode(skip_special_tokens=True).
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAGS])
    assert tok.token_to_id(EOS) == EOS_ID
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, pad_token=EOS,
        padding_side="left",  # decoder-only generation pads on the left
        clean_up_tokenization_spaces=False,  # otherwise " ." decodes to "." and text changes
        model_input_names=["input_ids", "attention_mask"],  # no token_type_ids for Qwen2
    )


# --------------------------------------------------------------------------- tiny model
def tiny_config(hidden_size: int, n_layers: int, n_heads: int, n_kv_heads: int,
                intermediate_size: int, max_positions: int, vocab_size: int,
                *, eos_token_id: int = EOS_ID) -> Qwen2Config:
    from transformers import Qwen2Config  # lazy: see build_tokenizer

    return Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=n_layers,
        num_attention_heads=n_heads, num_key_value_heads=n_kv_heads,
        intermediate_size=intermediate_size, max_position_embeddings=max_positions,
        tie_word_embeddings=True, rope_theta=10_000.0, rms_norm_eps=1e-6,
        use_sliding_window=False, attention_dropout=0.0,
        bos_token_id=eos_token_id, eos_token_id=eos_token_id, pad_token_id=eos_token_id,
        torch_dtype="float32",
    )


def _preset(preset_or_dict: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(preset_or_dict, str):
        if preset_or_dict not in TINY_PRESETS:
            raise ValueError(
                f"unknown tiny preset {preset_or_dict!r}; valid: {', '.join(TINY_PRESETS)} "
                "(or a dict of tiny_config arguments)")
        return dict(TINY_PRESETS[preset_or_dict])
    known = set(TINY_PRESETS["student"])
    unknown = set(preset_or_dict) - known
    if unknown:
        raise ValueError(f"unknown tiny model keys {sorted(unknown)}; valid: {sorted(known)}")
    return {**TINY_PRESETS["student"], **preset_or_dict}


def build_tiny(preset_or_dict: str | dict[str, Any], out_dir: str | Path, seed: int) -> Path:
    """Tokenizer + randomly initialised Qwen2ForCausalLM, saved together into `out_dir`."""
    from transformers import Qwen2ForCausalLM  # lazy: see build_tokenizer

    tok = build_tokenizer()
    cfg = tiny_config(**_preset(preset_or_dict), vocab_size=len(tok))
    with torch.random.fork_rng(devices=[]):  # seeded init without touching the caller's RNG
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    tok.model_max_length = cfg.max_position_embeddings
    with atomic_path(out_dir) as tmp:  # never leave a half-written model dir behind
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    return Path(out_dir)


def new_tiny(preset: str, seed: int):
    """(model, tokenizer) of a freshly initialised tiny model, saved and reloaded through
    `load_model`: the code path of every later load. Every process builds the same init."""
    if preset not in TINY_PRESETS:
        raise ValueError(f"tiny preset {preset!r} is unknown; valid: {', '.join(TINY_PRESETS)}")
    with tempfile.TemporaryDirectory() as tmp:
        return load_model(str(build_tiny(preset, Path(tmp) / "init", seed=seed)))


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights are counted once


# --------------------------------------------------------------------------- run settings
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "auto": "auto"}  # auto = the dtype the checkpoint was saved in (bf16 for Qwen2.5)
# What every stage sets from params.yaml once, with `configure(params)`: the precision of
# every model load (and so of accelerate's mixed precision and vLLM), and the evaluation
# sampler that saved policies carry as their generation_config.json.
SETTINGS: dict[str, Any] = {"dtype": "float32", "sampler": None}


def configure(params: dict[str, Any]) -> None:
    """Take `model.dtype`, `model.threads` and `sampler` from the stage's params (defaults:
    float32, torch's thread count, none)."""
    model = params.get("model") or {}
    dtype = model.get("dtype", "float32")
    if dtype not in DTYPES:
        raise ValueError(f"model.dtype {dtype!r} is unknown; valid: {', '.join(DTYPES)}")
    SETTINGS.update(dtype=dtype, sampler=params.get("sampler"))
    if model.get("threads"):  # intra-op threads: see benchmarks/bench_contention.py
        torch.set_num_threads(model["threads"])


def load_stage(stage: str, cls, path: str | None = None, inherit: str | None = None):
    """What every model stage does first: read and check params.yaml, apply its run settings
    to this process (`configure`), and build the stage's section (`path`, default the stage's
    name) as the dataclass `cls`, so a bad value fails before any model loads.
    Returns (params, config)."""
    params = load_params()
    configure(params)
    return params, from_section(cls, stage, params, path or stage, inherit)


def load_replicate_stage(stage: str, cls, replicate: str | None, path: str | None = None,
                         inherit: str | None = None, chain: str = "sft"):
    """`load_stage` for a stage that runs once per replicate seed: `replicate` is its last
    command-line argument, checked against its chain's seeds (`replicates.<chain>`, sft's:
    `replicates.seeds`), and the config's seeds move to that replicate's stream
    (`replicates.for_replicate`). Returns (params, config, seed)."""
    params, cfg = load_stage(stage, cls, path, inherit)
    r = parse_replicate(stage, replicate, params, chain)
    return params, for_replicate(cfg, r), r


def mixed_precision() -> str:
    """accelerate's `mixed_precision` for the configured dtype: autocast matches the weights."""
    return {"bfloat16": "bf16", "float16": "fp16"}.get(SETTINGS["dtype"], "no")


# --------------------------------------------------------------------------- chat prompts
# The system turn of the chat prompt (the R1-Zero / TinyZero Countdown convention): the
# user turn is the S0 solve prompt, and the reply starts after the generation prompt.
CHAT_SYSTEM = ("You are a helpful assistant. You first think about the reasoning process in "
               "the mind and then provide the user with the answer.")


def render_prompts(tok, prompts: list[str]) -> list[str]:
    """Prompts as the model reads them: through its chat template when the tokenizer has one.

    Every place that tokenizes a prompt (sampling, SFT/IPO encoding, RL scoring) calls this,
    so a completion is scored after exactly the text it was sampled after. The embedded
    tiny tokenizer has no template: its prompts pass through unchanged.
    """
    if not getattr(tok, "chat_template", None):
        return list(prompts)
    return [tok.apply_chat_template([{"role": "system", "content": CHAT_SYSTEM},
                                     {"role": "user", "content": p}],
                                    tokenize=False, add_generation_prompt=True)
            for p in prompts]


# --------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class ModelRef:
    """A policy = a base (local dir or hub id) plus an optional adapter dir."""
    base: str
    adapter: str | None = None


def _is_full_model(path: str) -> bool:
    p = Path(path)
    return (p / "config.json").exists() and not (p / "adapter_config.json").exists()


REF_FILE = "REF.json"  # written by the base stage when `model.base` is a hub id / local path


def resolve_base(path: str | Path) -> str:
    """The model a base dir stands for: the dir itself, or the id recorded in its REF.json.

    With `model.base: tiny` the base stage saves a real model into `data/models/base`; with
    a hub id (e.g. Qwen/Qwen2.5-0.5B) it only writes REF.json naming it, so that downstream
    stages load the hub model through the same `data/models/base` dependency.
    """
    ref = Path(path) / REF_FILE
    if ref.is_file():
        return str(json.loads(ref.read_text())["base"])
    return str(path)


def portable_base(path: str | Path) -> str:
    """The base an adapter records: a hub id as is, a local dir as an absolute path, so that
    `AutoPeftModelForCausalLM.from_pretrained(adapter)` works from any working directory."""
    base = resolve_base(path)
    return str(Path(base).resolve()) if Path(base).exists() else base


def load_model(base: str, adapter: str | None = None, dtype: str | torch.dtype | None = None,
               is_trainable: bool = False, device: str | None = None,
               ) -> tuple[Any, PreTrainedTokenizerFast]:
    """(model, tokenizer) for a local dir or hub id, with an optional peft adapter on top.

    `adapter: full` training stages save a whole model; such a dir is accepted in the
    adapter slot too and then simply replaces the base. `dtype` defaults to the configured
    `model.dtype` (float32 unless `configure` said otherwise). `device` defaults to cuda if present.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: see build_tokenizer

    dtype = DTYPES[SETTINGS["dtype"]] if dtype is None else DTYPES.get(dtype, dtype)
    if adapter is not None and not Path(adapter).is_dir():
        raise FileNotFoundError(
            f"adapter {adapter!r} not found; run `dvc repro` for the stage that writes it.")
    if adapter is not None and _is_full_model(adapter):
        base, adapter = adapter, None
    base = resolve_base(base)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(base), dtype=dtype)
        tok = AutoTokenizer.from_pretrained(str(base))
    except (OSError, ValueError) as exc:  # ValueError: a missing path is not a valid repo id
        raise OSError(
            f"cannot load model {base!r}: not a local model dir and not loadable from the hub. "
            "If it is a pipeline output, run `dvc repro` for the stage that writes it; if it is "
            f"a hub id, check the name, the network and HF_HUB_OFFLINE. ({exc})") from exc
    if tok.pad_token is None:  # e.g. Llama-style hub tokenizers
        tok.pad_token = tok.eos_token
    if tok.model_max_length > 1e20:  # "unknown" (1e30): the real context is the model's
        tok.model_max_length = model.config.max_position_embeddings
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=is_trainable)
    model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return model, tok


def save_policy_dir(model, tok, out_dir: str | Path,
                    also: Callable[[Path], Any] | None = None) -> None:
    """save_pretrained of a model or peft adapter + tokenizer, atomically, loadable anywhere.

    Adapters record their base with `portable_base`; every policy carries the evaluation
    sampler (`configure`) as generation_config.json, so plain `generate` samples like we do.
    It is the sampler of the run that saved the policy: `sampler` is deliberately not a
    param of the training stages (an evaluation-temperature experiment must not retrain
    every model), and `evaluate` always samples with the current `sampler` params.
    `also(tmp)` writes more files into the directory before it appears (the model card).
    """
    from transformers import GenerationConfig  # lazy: see build_tokenizer

    for cfg in getattr(model, "peft_config", {}).values():
        cfg.base_model_name_or_path = portable_base(cfg.base_model_name_or_path)
    gen = getattr(model, "generation_config", None) or GenerationConfig()
    sampler = SETTINGS["sampler"]
    if sampler:
        gen.update(do_sample=True, temperature=sampler["temperature"], top_p=sampler["top_p"],
                   top_k=sampler["top_k"], max_new_tokens=sampler["max_new_tokens"])
    with atomic_path(out_dir) as tmp:  # never leave a half-written model dir behind
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        gen.save_pretrained(tmp)  # a peft adapter's save_pretrained does not write it
        if also is not None:
            also(tmp)


def merge_adapter(ref: ModelRef, out_dir: str | Path) -> str:
    """A plain model dir serving `ref` (for vLLM: merged weights are 3x faster than LoRA)."""
    if ref.adapter is None or _is_full_model(ref.adapter):
        return ref.adapter or ref.base
    model, tok = load_model(ref.base, ref.adapter)
    model = model.merge_and_unload()
    with atomic_path(out_dir) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    return str(out_dir)


# --------------------------------------------------------------------------- pre-training data
_OPS = "+-*/"


def _apply(a: int, op: str, b: int) -> int | None:
    """Integer, non-negative, moderately sized results only: the steps a base model has seen.

    No division by 0 or 1, and none that is inexact (apply_op's Fraction)."""
    if op == "/" and b == 1:
        return None
    c = apply_op(a, op, b)
    return c if c.__class__ is int and 0 <= c <= 1000 else None


def _random_expression(rng: random.Random, n_operands: int) -> tuple[str, list[str], int]:
    """A random binary tree over `n_operands` numbers: (expression, step claims, value)."""
    items = [(v, str(v), True) for v in (rng.randint(1, 100) for _ in range(n_operands))]
    steps = []
    while len(items) > 1:
        i, j = sorted(rng.sample(range(len(items)), 2))
        (a, ta, la), (b, tb, lb) = items[i], items[j]
        if rng.random() < 0.5:
            (a, ta, la), (b, tb, lb) = (b, tb, lb), (a, ta, la)
        ops = [op for op in rng.sample(_OPS, 4) if _apply(a, op, b) is not None]
        op = ops[0] if ops else "+"  # all failed (rare): allow a large sum
        c = _apply(a, op, b) if ops else a + b
        steps.append(f"{a} {op} {b} = {c}")
        text = f"{ta if la else f'({ta})'} {op} {tb if lb else f'({tb})'}"
        items = [x for k, x in enumerate(items) if k not in (i, j)] + [(c, text, False)]
    return items[0][1], steps, items[0][0]


def pretraining_corpus(n: int, seed: int, facts_frac: float = 0.0) -> list[str]:
    """`n` synthetic arithmetic documents (no EOS; the trainer appends it). Deterministic per seed.

    Not Countdown: there is no number pool and no target. Two kinds of documents teach
    digits, operators, the `<think>`/`<answer>` tags and "a op b = c" step claims:
      "Evaluate: (3 + 4) * 5\n<think>3 + 4 = 7, 7 * 5 = 35</think>\n<answer>35</answer>"
      (1 - facts_frac of them), and several plain facts, one "a op b = c" per line.
    Evaluation documents make the model copy operands out of its prompt, the skill
    Countdown traces need most; facts do not. Measured on the student preset: after 1,200
    steps on evaluation documents alone, SFT on Countdown traces reached in 200 steps the
    loss (0.44) that a 70/30 mix of the two kinds, or random init, needed 1,000+ steps for.
    """
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        if rng.random() < 1 - facts_frac:
            expr, steps, value = _random_expression(rng, rng.randint(2, 5))
            docs.append(f"Evaluate: {expr}\n<think>{', '.join(steps)}</think>\n"
                        f"<answer>{value}</answer>")
        else:
            facts, k = [], rng.randint(3, 8)
            while len(facts) < k:
                a, b, op = rng.randint(0, 100), rng.randint(1, 100), rng.choice(_OPS)
                if op == "/":  # exact quotients are rare among random pairs: build one
                    b = rng.randint(2, 20)
                    a = b * rng.randint(1, 50)
                c = _apply(a, op, b)
                if c is not None:
                    facts.append(f"{a} {op} {b} = {c}")
            docs.append("\n".join(facts))
    return docs


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def policy_ref(path: str | Path) -> ModelRef:
    """The ModelRef of a policy identified by one path.

    A dir with adapter_config.json is a peft adapter: its base is the adapter config's
    `base_model_name_or_path` (a local dir, as written by our training stages, or a hub id).
    A dir with config.json is a full model (the base, or an `adapter: full` training output).
    A dir with REF.json is a pass-through base (`model.base` a hub id or another dir): it
    stands for the model it names, see `model.resolve_base`.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"policy dir {path} does not exist")
    if (path / REF_FILE).is_file():
        return ModelRef(resolve_base(path))
    adapter_cfg = path / "adapter_config.json"
    if adapter_cfg.exists():
        try:
            base = json.loads(adapter_cfg.read_text())["base_model_name_or_path"]
        except (json.JSONDecodeError, KeyError) as exc:
            raise ValueError(f"{adapter_cfg} has no readable `base_model_name_or_path`") from exc
        if not base:
            raise ValueError(f"{adapter_cfg}: empty `base_model_name_or_path`")
        base = resolve_base(base)  # an adapter on the pass-through base dir
        # A local base that went missing would otherwise be looked up on the hub (offline
        # here) and fail obscurely. Hub ids are "name" or "org/name"; anything else is local.
        if not Path(base).exists() and not _HUB_ID.fullmatch(base):
            raise FileNotFoundError(f"adapter {path} needs its base model {base}, which is missing")
        if (Path(base) / "adapter_config.json").exists():
            raise ValueError(f"adapter {path} sits on another adapter ({base}); save the "
                             "policy merged or as an adapter on a full model")
        return ModelRef(str(base), str(path))
    if (path / "config.json").exists():
        return ModelRef(str(path))
    raise ValueError(f"{path} is neither a model dir (config.json) nor a peft adapter dir "
                     "(adapter_config.json)")
