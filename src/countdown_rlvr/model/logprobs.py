"""Token log-probs and entropies without a full [batch, time, vocab] fp32 log-softmax.

With Qwen's 151,936-token vocabulary, `log_softmax(logits.float())` on a 1,024-token batch
allocates another ~600 MB (and autograd keeps it for backward). Here each row's log-prob
is `logit[label] - logsumexp(logits)`, computed over chunks of rows in fp32, and the
backward pass recomputes the softmax chunk by chunk (custom autograd functions), so the
peak extra memory is O(chunk x vocab) in both directions; only the gradient itself, which
autograd needs anyway, is full-size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import torch
import torch.nn.functional as F

CHUNK_ELEMENTS = 1 << 24  # default chunk: ~16M logits = 64 MB in fp32


def row_chunks(shape: torch.Size, chunk_size: int | None) -> Iterator[tuple[int, slice]]:
    """(batch index, time slice) views of a [B, T, V] tensor, at most `chunk_size` rows each.

    Chunks never cross the batch dim, so `logits[:, :-1]` (not contiguous) is read through
    views instead of being copied by a reshape.
    """
    B, T, V = shape
    rows = chunk_size or max(1, CHUNK_ELEMENTS // V)
    for b in range(B):
        for t in range(0, T, rows):
            yield b, slice(t, min(t + rows, T))


class _TokenLogprob(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, labels, chunk_size):
        out = torch.empty(labels.shape, dtype=torch.float32, device=logits.device)
        lse = torch.empty_like(out)
        for b, t in row_chunks(logits.shape, chunk_size):
            x = logits[b, t].float()
            lse[b, t] = torch.logsumexp(x, dim=-1)
            out[b, t] = x.gather(-1, labels[b, t, None]).squeeze(-1) - lse[b, t]
        ctx.save_for_backward(logits, labels, lse)  # logits are saved by reference, not copied
        ctx.chunk_size = chunk_size
        return out

    @staticmethod
    def backward(ctx, grad_out):
        logits, labels, lse = ctx.saved_tensors
        grad = torch.zeros_like(logits)
        for b, t in row_chunks(logits.shape, ctx.chunk_size):
            # d/dx [x_y - logsumexp(x)] = onehot(y) - softmax(x); one fp32 temp, in place
            g = (logits[b, t] - lse[b, t, None]).exp_().neg_()  # fp32 by type promotion
            g.scatter_add_(-1, labels[b, t, None], torch.ones_like(g[:, :1]))
            grad[b, t] = g.mul_(grad_out[b, t, None])
        return grad, None, None


class _TokenEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, chunk_size):
        out = torch.empty(logits.shape[:-1], dtype=torch.float32, device=logits.device)
        lse = torch.empty_like(out)
        for b, t in row_chunks(logits.shape, chunk_size):
            x = logits[b, t].float()
            lse[b, t] = torch.logsumexp(x, dim=-1)
            p = (x - lse[b, t, None]).exp_()
            out[b, t] = lse[b, t] - p.mul_(x).sum(-1)  # H = logsumexp(x) - E_p[x]
        ctx.save_for_backward(logits, lse, out)
        ctx.chunk_size = chunk_size
        return out

    @staticmethod
    def backward(ctx, grad_out):
        logits, lse, ent = ctx.saved_tensors
        grad = torch.zeros_like(logits)
        for b, t in row_chunks(logits.shape, ctx.chunk_size):
            # dH/dx_j = -p_j (log p_j + H)
            logp = logits[b, t] - lse[b, t, None]  # fp32 by type promotion
            g = logp.exp().neg_().mul_(logp.add_(ent[b, t, None]))
            grad[b, t] = g.mul_(grad_out[b, t, None])
        return grad, None


def _as_3d(x: torch.Tensor, lead: int) -> torch.Tensor:
    """[N, ...] -> [1, N, ...]; [B, T, ...] unchanged (only 2 or 3 leading dims are supported)."""
    if lead == 1:
        return x.unsqueeze(0)
    if lead == 2:
        return x
    raise ValueError(f"expected logits of shape [N, V] or [B, T, V], got {tuple(x.shape)}")


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor,
                   chunk_size: int | None = None) -> torch.Tensor:
    """log p(labels) under softmax(logits), fp32, shaped like `labels`; differentiable.

    logits [B, T, V] or [N, V] in any float dtype; labels the matching integer ids. Labels < 0
    (the HF ignore index -100) give 0 and no gradient. `chunk_size` = rows per chunk
    (default: as many as fit in ~16M elements).
    """
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match labels {tuple(labels.shape)}")
    ignore = labels < 0
    lead = labels.dim()
    out = _TokenLogprob.apply(_as_3d(logits, lead), _as_3d(labels.clamp_min(0), lead), chunk_size)
    return out.reshape(labels.shape).masked_fill(ignore, 0.0)


def token_entropy(logits: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
    """Entropy (nats, fp32) of softmax(logits) per position; differentiable."""
    lead = logits.dim() - 1
    return _TokenEntropy.apply(_as_3d(logits, lead), chunk_size).reshape(logits.shape[:-1])


class SeqLogprobs(NamedTuple):
    sum: torch.Tensor  # [B] summed log-prob of the completion tokens
    mean: torch.Tensor  # [B] length-normalised (sum / number of completion tokens)
    tokens: torch.Tensor  # [B, T] log p(input_ids[:, t] | input_ids[:, :t]) x completion_mask
    entropy: torch.Tensor | None  # [B, T] entropy of the distribution that predicted token t


def sequence_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      completion_mask: torch.Tensor, *, with_entropy: bool = False,
                      chunk_size: int | None = None) -> SeqLogprobs:
    """Log-probs of the completion tokens of (prompt + completion) sequences in one forward.

    `completion_mask[b, t]` is 1 where input_ids[b, t] is a completion token (EOS included).
    Works with left or right padding: position ids are derived from the attention mask, as
    `generate` does, so the numbers match the sampler's. Logits are only computed from the
    first completion position on (`logits_to_keep`), which skips long prompts.
    """
    T = input_ids.shape[1]
    cols = completion_mask.any(0).nonzero()
    first = int(cols[0]) if len(cols) else T - 1
    first = max(first, 1)  # token 0 has no prediction
    keep = T - first + 1  # logits at positions first-1 .. T-1 predict tokens first .. T
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp_min(0)
    logits = model(input_ids=input_ids, attention_mask=attention_mask,
                   position_ids=position_ids, logits_to_keep=keep).logits[:, :-1]
    mask = completion_mask[:, first:].to(torch.float32)
    lp = token_logprobs(logits, input_ids[:, first:], chunk_size) * mask
    tokens = F.pad(lp, (first, 0))
    total = tokens.sum(-1)
    mean = total / mask.sum(-1).clamp_min(1)
    entropy = None
    if with_entropy:
        entropy = F.pad(token_entropy(logits, chunk_size) * mask, (first, 0))
    return SeqLogprobs(total, mean, tokens, entropy)
