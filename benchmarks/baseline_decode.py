"""The decode loop of commit 80f3c41, frozen: the baseline `bench_sampling.py` measures the
package's current loop (`countdown_rlvr/model/decode.py`) against, in the same run. A verbatim
copy of `countdown_rlvr/sampling.py`'s `_forward`, `_take` and `_decode` at 80f3c41, with the
HF-forward fallback removed (the benchmark drives Qwen2-layout models only); the token choice
(`pick`, temperature / top-k / top-p from one uniform per row) is the package's: unchanged since
for truncated samplers (the evaluation's); untruncated ones now draw in vocabulary order, no sort.
One edit since: tensors go to the model's device (the loop built them on the device of its
inputs, the CPU in bench_sampling, and crashed beside a CUDA model).
Not imported by the package; do not edit otherwise (its point is to stay what it was).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from countdown_rlvr.model.decode import SamplerParams
from countdown_rlvr.model.decode import pick as _pick  # the same token choice in both loops

COMPACT_AT = 0.25


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
    m = model.get_base_model() if hasattr(model, "get_base_model") else model
    w = m.model.embed_tokens.weight
    dev = w.device  # the model's, whatever device the inputs come on
    input_ids, attention_mask = input_ids.to(dev), attention_mask.to(dev)
    u = None if u is None else u.to(dev)
    B, P = input_ids.shape
    L = sp.max_new_tokens
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
