"""The HF backend's decode loop: sample a left-padded batch over a preallocated KV cache.

    decode(model, input_ids, attention_mask, sampler, eos, pad, u, return_logprobs)

Sampling draws one uniform u per (row, step) up front and takes the inverse CDF of the
processed distribution: with top-k / top-p truncation over the candidates in descending
probability, without it over the whole vocabulary in index order (no sort). So a row's
tokens are a function of its own u row alone: not of which rows finished or left the batch,
and a slow step-by-step reference with the same u gives the same tokens
(tests/test_sampling.py).

Why our own loop: HF's `generate` keeps finished rows in the batch, grows its cache by
concatenation every step and copies grouped kv heads; a tiny model's step is dominated by
that. The loop here writes keys/values into preallocated columns, drops finished rows in
bulk, and for a plain Qwen2/Llama layer does one matmul for q, k, v and one for gate, up
(the layer's weights concatenated once per `generate` call), with the RMS norms inlined
and decode-step attention as two batched matmuls (the fused CPU SDPA kernel costs more
than the arithmetic at a query length of one). A peft layer (LoRA/DoRA) is called as its
own module, so adapters work unmerged. Models of another layout go through HF's forward
(`decode_hf`, also the reference of the tests). benchmarks/bench_sampling.py measures it
against the previous loop (frozen in benchmarks/baseline_decode.py) in one run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

# Finished rows leave the batch (one copy of the KV cache) once this share of it has finished.
COMPACT_AT = 0.25


@dataclass(frozen=True)
class SamplerParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = no top-k truncation
    max_new_tokens: int = 128

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def truncates(sp: SamplerParams, vocab: int) -> bool:
    """Whether top-k or top-p can drop tokens of a `vocab`-token distribution."""
    return 0 < sp.top_k < vocab or sp.top_p < 1.0


def pick(logits: torch.Tensor, u: torch.Tensor | None, sp: SamplerParams,
         want_logp: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """[b, V] float logits -> ([b] token ids, [b] log-probs or None).

    Temperature, then top-k, then top-p (HF's and vLLM's order and rules, but on the k
    candidates only: no full-vocabulary mask per step; `_draw_ranked`). Without truncation
    nothing is ranked at all (`_draw_in_vocab_order`). Greedy = argmax, with log-probs of the
    untempered, untruncated model.
    """
    if sp.greedy:
        tok = logits.argmax(-1)
        logp = torch.log_softmax(logits, -1).gather(1, tok[:, None]).squeeze(1) if want_logp else None
        return tok, logp
    x = logits / sp.temperature
    if truncates(sp, logits.shape[-1]):
        return _draw_ranked(x, u, sp, want_logp)
    return _draw_in_vocab_order(x, u, want_logp)


def _draw_ranked(x: torch.Tensor, u: torch.Tensor, sp: SamplerParams, want_logp: bool,
                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Inverse CDF at u [b] of the top-k / top-p truncation of softmax(x) [b, V], the
    candidates in descending probability (top-p needs them ranked)."""
    V = x.shape[-1]
    k = sp.top_k if 0 < sp.top_k < V else V
    vals, idx = x.topk(k, -1)  # sorted, most likely first
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


def _draw_in_vocab_order(x: torch.Tensor, u: torch.Tensor, want_logp: bool,
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Inverse CDF of softmax(x) [b, V] at u [b], the tokens in vocabulary order.

    Any fixed order samples the same distribution, and this one needs no ranking: a
    full-vocabulary topk is a sort of every row at every step (at Qwen's 151,936 tokens on a
    CPU it cost more than a tiny model's forward), softmax + cumsum + binary search are a few
    passes over the row (benchmarks/bench_sampling.py --vocab)."""
    cdf = x.softmax(-1).cumsum_(-1)
    total = cdf[:, -1:].contiguous()  # [b, 1]; searchsorted copies a strided one (and warns)
    j = torch.searchsorted(cdf, u[:, None] * total, right=True)
    # float edge: u * total may round up to total (j = V); the first index at which the CDF
    # reaches its total is the last token of positive probability (never a zero one)
    j = torch.minimum(j, torch.searchsorted(cdf, total))
    logp = (x.gather(1, j) - x.logsumexp(-1, keepdim=True)).squeeze(1) if want_logp else None
    return j.squeeze(1), logp


# --------------------------------------------------------------------------- the model
def fast_path_model(model):
    """The Qwen2/Llama-layout model under `model` that our decode loop drives (a peft wrapper
    is looked through: its LoRA layers are called as modules), or None for anything else
    (-> the HF forward path, `decode_hf`)."""
    m = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = getattr(m, "config", None)
    if getattr(cfg, "model_type", None) not in ("qwen2", "llama") or \
            getattr(cfg, "use_sliding_window", False) or not hasattr(m, "model"):
        return None
    return m


def _rms_norm(x: torch.Tensor, norm) -> torch.Tensor:
    """Qwen2RMSNorm / LlamaRMSNorm's forward, op for op (the same floats), minus the module call."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * h.to(x.dtype)


def _fused(*mods: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """One function computing every module's output, concatenated on the last axis: one
    matmul over the stacked weights when all are plain Linear, else each module's own call."""
    if not all(type(m) is torch.nn.Linear for m in mods):
        return mods[0] if len(mods) == 1 else (lambda h: torch.cat([m(h) for m in mods], -1))
    weight = mods[0].weight if len(mods) == 1 else torch.cat([m.weight for m in mods])
    bias = None
    if any(m.bias is not None for m in mods):
        bias = torch.cat([m.bias if m.bias is not None else m.weight.new_zeros(m.out_features)
                          for m in mods])
    return lambda h: F.linear(h, weight, bias)


@dataclass
class _Layer:
    """One decoder layer as the loop calls it."""
    norm_in: torch.nn.Module
    qkv: Callable  # h -> [b, T, (n_heads + 2 n_kv) * head_dim]: q, k, v side by side
    o: Callable
    norm_post: torch.nn.Module
    gate_up: Callable  # h -> [b, T, 2 intermediate]
    down: Callable
    act: Callable
    scale: float


def decoder_layers(m) -> list[_Layer]:
    """`m`'s layers with fused projections. Build once per `generate` call: the stacked
    weights are copies (detached), so a policy updated afterwards needs a new list."""
    with torch.no_grad():
        return [_Layer(layer.input_layernorm,
                       _fused(layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj),
                       _fused(layer.self_attn.o_proj), layer.post_attention_layernorm,
                       _fused(layer.mlp.gate_proj, layer.mlp.up_proj), _fused(layer.mlp.down_proj),
                       layer.mlp.act_fn, layer.self_attn.scaling)
                for layer in m.model.layers]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _forward(m, layers: list[_Layer], ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
             cache: list, start: int, mask: torch.Tensor) -> torch.Tensor:
    """Logits of the last position of `ids` [b, T], whose keys/values go to cache columns
    start..start+T-1. `cos`/`sin` [b, T, D]; `mask` [b, 1, T, start+T] (True or 0 = may
    attend) for a prefill, [b, 1, 1, start+1] additive for a decode step (T = 1)."""
    b, T = ids.shape
    end = start + T
    x = m.model.embed_tokens(ids)
    cos, sin = cos[:, :, None], sin[:, :, None]  # broadcast over heads
    for layer, (kc, vc) in zip(layers, cache):  # cache[i] = [2, b, kv heads, columns, D]
        nkv, D = kc.shape[1], kc.shape[3]
        qkv = layer.qkv(_rms_norm(x, layer.norm_in)).view(b, T, -1, D)
        nq = qkv.shape[2] - 2 * nkv
        qk = qkv[:, :, :nq + nkv]
        qk = qk * cos + _rotate_half(qk) * sin  # rope on q and k at once
        q, k, v = qk[:, :, :nq], qk[:, :, nq:], qkv[:, :, nq + nkv:]
        kc[:, :, start:end] = k.transpose(1, 2)
        vc[:, :, start:end] = v.transpose(1, 2)
        K, V = kc[:, :, :end], vc[:, :, :end]
        if T == 1:  # decode: each kv head's query group as rows of one small matmul, no copy
            qg = q.reshape(b, nkv, -1, D)
            if q.dtype == torch.float32:
                s = torch.matmul(qg, K.transpose(-1, -2))  # [b, nkv, g, end]
                o = torch.matmul((s * layer.scale + mask).softmax(-1), V)
            else:  # half precision: SDPA's kernel accumulates in float32, as HF's forward
                o = F.scaled_dot_product_attention(qg, K, V, attn_mask=mask, scale=layer.scale)
        else:  # prefill (once per batch): plain repeat of the kv heads is fine
            g = nq // nkv
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), K.repeat_interleave(g, 1), V.repeat_interleave(g, 1),
                attn_mask=mask, scale=layer.scale).transpose(1, 2)
        x = x + layer.o(o.reshape(b, T, -1))
        gu = layer.gate_up(_rms_norm(x, layer.norm_post))
        gate, up = gu.chunk(2, dim=-1)
        x = x + layer.down(layer.act(gate) * up)
    return m.lm_head(_rms_norm(x[:, -1], m.model.norm)).float()


class KVStore:
    """The key/value cache of `decode`: per layer, keys and values of every row in one
    [2, rows, kv_heads, columns, head_dim] buffer, and a second buffer of that size that
    compaction gathers the rows still decoding into (the two then swap).

    Reused for every batch of a `generate` call (`sampling` makes one): a fresh multi-MB
    buffer is first written page by page, and those page faults cost several times the copy
    itself (a compaction into new memory took 13 ms, into touched memory 2 ms)."""

    def __init__(self):
        self.bufs: list[torch.Tensor] = []

    def take(self, n_layers: int, rows: int, nkv: int, cols: int, D: int, dtype, device):
        """Two buffers of at least this size (views [n_layers, 2, rows, nkv, cols, D])."""
        shape = (n_layers, 2, rows, nkv, cols, D)
        have = self.bufs[0] if self.bufs else None
        if have is None or (have.dtype, have.device) != (dtype, device) or \
                (have.shape[0], have.shape[3], have.shape[5]) != (n_layers, nkv, D) or \
                have.shape[2] < rows or have.shape[4] < cols:
            self.bufs = [torch.empty(shape, dtype=dtype, device=device) for _ in range(2)]
        return [b[:, :, :rows, :, :cols] for b in self.bufs]


def _compact(src: torch.Tensor, dst: torch.Tensor, keep: torch.Tensor, n: int) -> torch.Tensor:
    """Rows `keep` of cache `src` [layers, 2, rows, kv, cols, D], written columns 0..n-1 only,
    gathered into the first rows of `dst`; returns that view of `dst`."""
    out = dst[:, :, :len(keep)]
    out[..., :n, :] = src[..., :n, :].index_select(2, keep)
    return out


def _to(dev: torch.device, *tensors: torch.Tensor | None) -> list[torch.Tensor | None]:
    """The tensors on `dev` (None stays None; no copy for one already there)."""
    return [None if t is None else t.to(dev) for t in tensors]


@torch.no_grad()
def decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, sp: SamplerParams,
           eos: list[int], pad: int, u: torch.Tensor | None, return_logprobs: bool,
           layers: list[_Layer] | None = None,
           store: KVStore | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Sample up to `max_new_tokens` for a left-padded batch: [B, L] new ids (pad after EOS)
    and, optionally, [B, L] log-probs of the sampled tokens under the processed distribution.
    `u` [B, L]: the uniforms of `pick` (None when greedy). `layers`: `decoder_layers(model)`,
    built by the caller once for many batches (else here); `store`: a `KVStore` reused
    across batches (else a new one). The inputs may be on any device: the loop runs on the
    model's, and returns its tensors there.

    A preallocated KV cache (one column per step, shared by all rows since prompts are
    left-padded) replaces HF's growing DynamicCache. Rows with the same prompt (the n samples
    of one prompt sit side by side) share one prompt forward. Finished rows stop counting at
    once and leave the batch (and cache) once a quarter of it has finished: compacting costs a
    copy of the cache, so doing it at every EOS costs more than a few idle rows.
    """
    m = fast_path_model(model)
    if m is None:
        return decode_hf(model, input_ids, attention_mask, sp, eos, pad, u, return_logprobs)
    layers = layers if layers is not None else decoder_layers(m)
    w = m.model.embed_tokens.weight
    # everything below is built on the model's device, whatever device the caller's inputs are on
    dev = w.device
    input_ids, attention_mask, u = _to(dev, input_ids, attention_mask, u)
    B, P = input_ids.shape
    L = sp.max_new_tokens
    att = m.model.layers[0].self_attn
    nkv = m.config.num_key_value_heads
    cache, spare = (store or KVStore()).take(len(layers), B, nkv, P + L, att.head_dim, w.dtype, dev)
    cos_t, sin_t = m.model.rotary_emb(w, torch.arange(P + L, device=dev)[None])
    cos_t, sin_t = cos_t[0], sin_t[0]  # [positions, D]
    eos_t = torch.tensor(eos, device=dev)
    new = torch.full((B, L), pad, dtype=torch.long, device=dev)
    lps = torch.zeros((B, L), device=dev) if return_logprobs else None
    # keys a row may attend to, as an additive mask [B, 1, 1, P + L]
    bias = torch.zeros((B, 1, 1, P + L), dtype=w.dtype, device=dev)
    bias[:, 0, 0, :P].masked_fill_(attention_mask == 0, -math.inf)
    pos = (attention_mask.cumsum(-1) - 1).clamp_min(0)  # left padding: count real tokens
    # prefill, once per distinct prompt: causal over the real prompt tokens; a pad query
    # sees itself (never NaN)
    uniq, first = torch.unique_consecutive(input_ids, dim=0, return_inverse=True)
    rows_u = torch.zeros(len(uniq), dtype=torch.long, device=dev).scatter_(
        0, first.flip(0), torch.arange(B - 1, -1, -1, device=dev))  # a row of each prompt
    causal = torch.ones(P, P, dtype=torch.bool, device=dev).tril()
    mask = (causal & attention_mask[rows_u].bool()[:, None]) | torch.eye(P, dtype=torch.bool, device=dev)
    kv_u = cache[:, :, :len(uniq)]
    logits = _forward(m, layers, uniq, cos_t[pos[rows_u]], sin_t[pos[rows_u]], kv_u, 0,
                      mask[:, None])[first]
    if len(uniq) < B:  # each prompt's keys/values to its rows
        cache[..., :P, :] = kv_u[..., :P, :].index_select(2, first)
    rows = torch.arange(B, device=dev)  # original row of each row still in the batch
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    pos = pos[:, -1]
    for t in range(L):
        tok, logp = pick(logits, None if u is None else u[rows, t], sp, return_logprobs)
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
            cache, spare = _compact(cache, spare, keep, P + t), cache
        pos = pos + 1
        logits = _forward(m, layers, tok[:, None], cos_t[pos][:, None], sin_t[pos][:, None],
                          cache, P + t, bias[..., :P + t + 1])
    return new, lps


@torch.no_grad()
def decode_hf(model, input_ids, attention_mask, sp, eos, pad, u, return_logprobs):
    """`decode` through HF's model forward and DynamicCache, for models whose layout
    `_forward` does not know (and as its reference in the tests). Same draws, same tokens."""
    dev = next(model.parameters()).device
    input_ids, attention_mask, u = _to(dev, input_ids, attention_mask, u)
    B = input_ids.shape[0]
    eos_t = torch.tensor(eos, device=dev)
    new = torch.full((B, sp.max_new_tokens), pad, dtype=torch.long, device=dev)
    lps = torch.zeros((B, sp.max_new_tokens), device=dev) if return_logprobs else None
    alive = torch.arange(B, device=dev)  # original row of each row still being decoded
    mask = attention_mask
    pos = (mask.cumsum(-1) - 1).clamp_min(0)
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=pos, use_cache=True)
    cache, logits = out.past_key_values, out.logits[:, -1].float()
    for t in range(sp.max_new_tokens):
        tok, logp = pick(logits, None if u is None else u[alive, t], sp, return_logprobs)
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
