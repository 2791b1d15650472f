"""Loss functions for SFT, IPO, RLOO and on-policy distillation: small, pure, unit-tested.

Conventions (as in TRL): `logits` come straight from `model(input_ids)`, so logits[:, t]
predicts input_ids[:, t + 1]; a `completion_mask` marks the *tokens* of input_ids that are
completion (EOS included), never the logits. Per-token tensors are [B, T]; masked positions
contribute neither loss nor gradient. Large-vocabulary work never builds a full fp32
[B, T, V] log-softmax: it goes through `logprobs.token_logprobs` or, for the
distillation KL, a chunked autograd function below.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..model.logprobs import row_chunks, token_logprobs


# --------------------------------------------------------------------------- SFT
class NLL(NamedTuple):
    loss: torch.Tensor  # scalar: mean negative log-likelihood per completion token
    n_tokens: torch.Tensor  # number of completion tokens scored
    n_correct: torch.Tensor  # how many of them are the argmax of the logits (token accuracy)


def completion_nll(logits: torch.Tensor, labels: torch.Tensor,
                   completion_mask: torch.Tensor) -> NLL:
    """Masked next-token loss of S4 eq. (1), averaged over completion tokens only.

    logits [B, T, V] from `model(labels)`; labels = the input ids [B, T]; completion_mask [B, T]
    is 1 on completion tokens. Prompt and padding tokens get no loss and no gradient.
    """
    logits, targets = logits[:, :-1], labels[:, 1:]  # position t predicts token t + 1
    mask = completion_mask[:, 1:].bool()
    lp = token_logprobs(logits, targets.masked_fill(~mask, -100))  # -100 -> 0, no grad
    n = mask.sum()
    loss = -lp.sum() / n.clamp_min(1)
    with torch.no_grad():
        n_correct = ((logits.argmax(-1) == targets) & mask).sum()
    return NLL(loss, n, n_correct)


# --------------------------------------------------------------------------- IPO (S1 §3.1.3)
class IPOOut(NamedTuple):
    loss: torch.Tensor  # [B] per-pair loss (IPO term + RPO anchor)
    ipo: torch.Tensor  # [B] the squared IPO residual alone
    margin: torch.Tensor  # [B] (pi_c - pi_r) - (ref_c - ref_r); IPO drives it to 1 / (2 beta)
    chosen_reward: torch.Tensor  # [B] pi_c - ref_c (detached), the implicit reward
    rejected_reward: torch.Tensor  # [B] pi_r - ref_r (detached)


def ipo_loss(pi_chosen: torch.Tensor, pi_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float, rpo_alpha: float = 0.0) -> IPOOut:
    """IPO: ((log pi(c) - log pi(r) - log ref(c) + log ref(r)) - 1/(2 beta))^2, per pair.

    Inputs are [B] sequence log-probs; S1 uses the length-normalised ones (mean per token,
    `SeqLogprobs.mean`), which removes DPO-style length bias. With length-normalised
    inputs, -pi_chosen is exactly the per-token NLL of the chosen completion, so the RPO
    anchor (Pang et al. 2024, S1 alpha = 0.1) is `rpo_alpha * -pi_chosen`: it keeps the
    chosen likelihood from falling together with the rejected one.
    """
    if beta <= 0:
        raise ValueError(f"ipo beta must be > 0, got {beta}")
    margin = (pi_chosen - pi_rejected) - (ref_chosen - ref_rejected)
    ipo = (margin - 1.0 / (2.0 * beta)) ** 2
    loss = ipo + rpo_alpha * -pi_chosen if rpo_alpha else ipo
    return IPOOut(loss, ipo, margin, (pi_chosen - ref_chosen).detach(),
                  (pi_rejected - ref_rejected).detach())


# --------------------------------------------------------------------------- RLOO (S1 §3.1.4, S4 §3.2)
def rloo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Leave-one-out advantages A_i = r_i - mean_{j != i} r_j for rewards [B, G].

    Computed as G/(G-1) * (d_i - mean(d)) with d = r - r_0: algebraically the same, and a
    group of identical rewards gives d == 0 and hence exactly 0 (no float residue that would
    fake a gradient on a flat-lined group).
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [batch, group], got shape {tuple(rewards.shape)}")
    G = rewards.shape[1]
    if G < 2:
        raise ValueError(f"RLOO needs a group size >= 2 (leave-one-out baseline), got {G}")
    d = rewards - rewards[:, :1]
    return G / (G - 1) * (d - d.mean(dim=1, keepdim=True))


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per sampled token: e^x - x - 1, x = ref - logp.

    Unbiased for tokens sampled from pi, never negative, and 0 exactly where pi == ref.
    """
    x = ref_logp - logp
    return torch.expm1(x) - x  # expm1: exact near x = 0, where the policy starts


class ISWeight(NamedTuple):
    weight: torch.Tensor  # detached, min(exp(policy - sampler), clip)
    clip_frac: torch.Tensor  # fraction of (masked) entries that were clipped
    mean_raw: torch.Tensor  # mean unclipped weight (capped at 1e6 for display), off-policyness


def clipped_is_weight(logp_policy: torch.Tensor, logp_sampler: torch.Tensor, clip: float,
                      mask: torch.Tensor | None = None) -> ISWeight:
    """Truncated importance weight pi/mu (S4: w = clip(exp(log pi - log mu), 10), detached).

    Works on sequence log-probs [B] (S4's per-rollout weight) or per-token [B, T] with `mask`.
    Computed in log space, so a huge ratio is clipped instead of overflowing to inf.
    """
    if clip <= 0:
        raise ValueError(f"IS clip must be > 0, got {clip}")
    log_ratio = (logp_policy - logp_sampler).detach().float()
    weight = torch.exp(log_ratio.clamp(max=math.log(clip)))
    clipped = (log_ratio > math.log(clip)).float()
    raw = torch.exp(log_ratio.clamp(max=math.log(1e6)))
    if mask is None:
        return ISWeight(weight, clipped.mean(), raw.mean())
    m = mask.float()
    n = m.sum().clamp_min(1)
    return ISWeight(weight * m, (clipped * m).sum() / n, (raw * m).sum() / n)


LOSS_AGGREGATIONS = ("sum", "mean")


def rloo_policy_loss(logp: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor, *,
                     is_weight: torch.Tensor | None = None, ref_logp: torch.Tensor | None = None,
                     entropy: torch.Tensor | None = None, kl_coef: float = 0.0,
                     entropy_coef: float = 0.0, agg: str = "sum",
                     ) -> tuple[torch.Tensor, dict[str, float]]:
    """RLOO policy-gradient loss (S4 eq. 3) + kl_coef * k3 KL - entropy_coef * entropy.

    logp [B, T]: the policy's log-probs of the sampled tokens (with grad); mask [B, T]: response
    tokens; advantages [B] (flatten `rloo_advantages`); is_weight [B] or [B, T] (detached,
    from `clipped_is_weight`); ref_logp [B, T] (reference or sampler policy, no grad);
    entropy [B, T] (e.g. `token_entropy`, with grad).
    agg: "sum" uses the sequence log-prob sum_t log pi(y_t) as in S4 eq. 3 (longer answers
    get larger steps); "mean" normalises each sequence by its length. Either way the result
    is averaged over the B sequences. The KL and entropy terms are means over all response
    tokens, so their coefficients do not depend on lengths.
    """
    if agg not in LOSS_AGGREGATIONS:
        raise ValueError(f"unknown loss aggregation {agg!r}; valid: {', '.join(LOSS_AGGREGATIONS)}")
    m = mask.to(logp.dtype)
    lengths = m.sum(-1).clamp_min(1)
    coef = advantages.detach().to(logp.dtype)[:, None]  # [B, 1]
    if is_weight is not None:
        w = is_weight.detach().to(logp.dtype)
        coef = coef * (w[:, None] if w.dim() == 1 else w)
    per_seq = (-coef * logp * m).sum(-1)
    if agg == "mean":
        per_seq = per_seq / lengths
    pg = per_seq.mean()
    n_tok = m.sum().clamp_min(1)
    loss, stats = pg, {"pg_loss": pg.item(), "response_len": lengths.float().mean().item()}
    if ref_logp is not None:
        kl = (k3_kl(logp, ref_logp.detach()) * m).sum() / n_tok
        loss = loss + kl_coef * kl
        stats["kl"] = kl.item()
    if entropy is not None:
        ent = (entropy * m).sum() / n_tok
        loss = loss - entropy_coef * ent
        stats["entropy"] = ent.item()
    stats["advantage_std"] = advantages.float().std().item() if advantages.numel() > 1 else 0.0
    stats["loss"] = loss.item()
    return loss, stats


# --------------------------------------------------------------------------- OPD (S4 §3.3)
class _ForwardKL(torch.autograd.Function):
    """Per-token KL(softmax(zt/T) || softmax(zs/T)), O(chunk x V) extra memory both ways.

    Autograd over a plain chunk loop would keep every chunk's fp32 softmax for backward, i.e.
    the full [B, T, V] again; here backward recomputes it chunk by chunk, using
    d KL / d zs = (p_s - p_t) / T. The teacher is frozen: it gets no gradient.
    """

    @staticmethod
    def forward(ctx, teacher, student, temperature, chunk_size):
        out = torch.empty(student.shape[:-1], dtype=torch.float32, device=student.device)
        for b, t in row_chunks(student.shape, chunk_size):
            lt = torch.log_softmax(teacher[b, t].float() / temperature, dim=-1)
            ls = torch.log_softmax(student[b, t].float() / temperature, dim=-1)
            out[b, t] = (lt.exp() * (lt - ls)).sum(-1)
        ctx.save_for_backward(teacher, student)  # by reference, no copy
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        return out

    @staticmethod
    def backward(ctx, grad_out):
        teacher, student = ctx.saved_tensors
        T = ctx.temperature
        grad = torch.zeros_like(student)
        for b, t in row_chunks(student.shape, ctx.chunk_size):
            pt = torch.softmax(teacher[b, t].float() / T, dim=-1)
            ps = torch.softmax(student[b, t].float() / T, dim=-1)
            grad[b, t] = ((ps - pt) * (grad_out[b, t, None] / T)).to(grad.dtype)
        return None, grad, None, None


def forward_kl(teacher_logits: torch.Tensor, student_logits: torch.Tensor, mask: torch.Tensor,
               temperature: float = 1.0, chunk_size: int | None = None) -> torch.Tensor:
    """Per-token forward KL(p_T^(1/T) || p_S^(1/T)) [B, T] (S4 eq. 4), 0 where mask == 0.

    Logits [B, T, V_t] and [B, T, V_s] at the same positions; only the shared vocabulary
    min(V_t, V_s) is compared (Qwen checkpoints pad their embedding matrices to different
    sizes: S4 §6). No T^2 rescaling (as in S4), so a higher T also shrinks the gradient.
    Average with `(kl * mask).sum() / mask.sum()`.
    """
    if temperature <= 0:
        raise ValueError(f"distillation temperature must be > 0, got {temperature}")
    if teacher_logits.shape[:-1] != student_logits.shape[:-1]:
        raise ValueError(f"teacher {tuple(teacher_logits.shape)} and student "
                         f"{tuple(student_logits.shape)} logits are not aligned")
    V = min(teacher_logits.shape[-1], student_logits.shape[-1])
    kl = _ForwardKL.apply(teacher_logits[..., :V].detach(), student_logits[..., :V],
                          float(temperature), chunk_size)
    return kl * mask.to(kl.dtype)
