"""Every loss against numbers worked out by hand (and its gradient where it matters)."""

import math

import pytest
import torch

from countdown_rlvr.train.losses import (
    clipped_is_weight,
    completion_nll,
    forward_kl,
    ipo_loss,
    k3_kl,
    rloo_advantages,
    rloo_policy_loss,
)

ln = math.log


# --- SFT -------------------------------------------------------------------------------

def _toy_logits():
    # positions 0 and 1 predict tokens 1 and 2; position 2 predicts nothing
    return torch.tensor([[[0.0, 1.0], [ln(3), 0.0], [9.0, -9.0]]], requires_grad=True)


def test_completion_nll_hand_computed():
    logits = _toy_logits()
    labels = torch.tensor([[0, 1, 0]])
    mask = torch.tensor([[0, 1, 1]])  # token 0 is the prompt
    out = completion_nll(logits, labels, mask)
    p1 = math.e / (1 + math.e)  # p(token 1) at position 0
    expected = -(ln(p1) + ln(0.75)) / 2  # p(token 0) at position 1 = 3/4
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)
    assert out.n_tokens.item() == 2 and out.n_correct.item() == 2  # both argmaxes are right
    out.loss.backward()
    # d/dlogits of -log softmax = (softmax - onehot) / n_tokens; the unused last position: 0
    g = logits.grad[0]
    assert g[0].tolist() == pytest.approx([(1 - p1) / 2, -(1 - p1) / 2], rel=1e-5)
    assert g[1].tolist() == pytest.approx([-0.25 / 2, 0.25 / 2], rel=1e-5)
    assert g[2].abs().sum() == 0


def test_completion_nll_ignores_prompt_labels():
    logits = torch.randn(2, 6, 11, requires_grad=True)
    labels = torch.randint(0, 11, (2, 6))
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 0]])
    a = completion_nll(logits, labels, mask).loss
    other = labels.clone()
    other[:, :2] = (other[:, :2] + 5) % 11  # change tokens that are prompt in both rows
    other[1, 5] = (other[1, 5] + 1) % 11  # and a padding token
    assert completion_nll(logits, other, mask).loss.item() == a.item()
    a.backward()  # no gradient flows to logits that predict prompt tokens
    assert logits.grad[0, :2].abs().sum() == 0 and logits.grad[1, 0].abs().sum() == 0
    ref = torch.nn.functional.cross_entropy(  # the same thing the slow way
        logits[:, :-1].reshape(-1, 11), labels[:, 1:].masked_fill(mask[:, 1:] == 0, -100).reshape(-1))
    assert a.item() == pytest.approx(ref.item(), rel=1e-6)


# --- IPO -------------------------------------------------------------------------------

def test_ipo_loss_hand_computed_and_grad():
    pi_c = torch.tensor([-1.0], requires_grad=True)
    pi_r = torch.tensor([-2.0], requires_grad=True)
    ref_c, ref_r = torch.tensor([-1.5]), torch.tensor([-1.5])
    out = ipo_loss(pi_c, pi_r, ref_c, ref_r, beta=0.1)
    assert out.margin.item() == pytest.approx(1.0)  # (−1 − −2) − (−1.5 − −1.5)
    assert out.loss.item() == pytest.approx((1.0 - 5.0) ** 2)  # target margin 1/(2·0.1) = 5
    assert out.chosen_reward.item() == pytest.approx(0.5)
    assert out.rejected_reward.item() == pytest.approx(-0.5)
    out.loss.sum().backward()
    assert pi_c.grad.item() == pytest.approx(2 * (1 - 5))  # d/dpi_c (m − 5)² = 2(m − 5)
    assert pi_r.grad.item() == pytest.approx(-2 * (1 - 5))


def test_ipo_rpo_anchor_and_zero_at_target_margin():
    pi_c = torch.tensor([-1.0, -0.5], requires_grad=True)
    out = ipo_loss(pi_c, torch.tensor([-2.0, -5.5]), torch.tensor([-1.5, -1.0]),
                   torch.tensor([-1.5, -1.0]), beta=0.1, rpo_alpha=0.1)
    # pair 2 sits exactly at the target margin 5: only the anchor 0.1·NLL = 0.1·0.5 remains
    assert out.ipo.tolist() == pytest.approx([16.0, 0.0])
    assert out.loss.tolist() == pytest.approx([16.0 + 0.1 * 1.0, 0.05])
    out.loss.sum().backward()
    assert pi_c.grad.tolist() == pytest.approx([-8.0 - 0.1, -0.1])
    with pytest.raises(ValueError, match="beta"):
        ipo_loss(pi_c, pi_c, pi_c, pi_c, beta=0.0)


# --- RLOO ------------------------------------------------------------------------------

def test_rloo_advantages_hand_computed():
    a = rloo_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 2.0]]))
    assert a[0].tolist() == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])
    # r_i − mean of the other three: 1 − 7/3, 2 − 2, 3 − 5/3, 2 − 2
    assert a[1].tolist() == pytest.approx([-4 / 3, 0.0, 4 / 3, 0.0])
    assert a.sum(1).abs().max() < 1e-6  # LOO advantages sum to zero per group


def test_rloo_advantages_flat_group_is_exactly_zero():
    for v in (0.1, 0.0, 1.0, 0.35, 1 / 3):
        a = rloo_advantages(torch.full((3, 8), v))
        assert torch.equal(a, torch.zeros(3, 8))
    with pytest.raises(ValueError, match="group size >= 2"):
        rloo_advantages(torch.ones(4, 1))
    with pytest.raises(ValueError, match="batch, group"):
        rloo_advantages(torch.ones(4))


def test_k3_kl_hand_computed_grad_and_unbiased():
    logp = torch.tensor([ln(0.5), ln(0.3)], requires_grad=True)
    ref = torch.tensor([ln(0.25), ln(0.3)])
    k = k3_kl(logp, ref)
    # x = ref − logp = ln 0.5: e^x − x − 1 = 0.5 + ln 2 − 1; equal log-probs → exactly 0
    assert k.tolist() == pytest.approx([ln(2) - 0.5, 0.0])
    k.sum().backward()
    assert logp.grad.tolist() == pytest.approx([1 - 0.5, 0.0])  # d/dlogp = 1 − e^x
    assert (k3_kl(torch.randn(1000), torch.randn(1000)) >= 0).all()
    # E_{y~pi}[k3] = KL(pi || ref) exactly, for any two distributions
    pi, rf = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.2, 0.6])
    est = (pi * k3_kl(pi.log(), rf.log())).sum()
    assert est.item() == pytest.approx((pi * (pi / rf).log()).sum().item(), rel=1e-5)


def test_clipped_is_weight():
    pol = torch.tensor([0.0, ln(20), ln(0.5), 1000.0], requires_grad=True)
    out = clipped_is_weight(pol, torch.zeros(4), clip=10)
    assert out.weight.tolist() == pytest.approx([1.0, 10.0, 0.5, 10.0])  # huge ratio: no inf
    assert not out.weight.requires_grad
    assert out.clip_frac.item() == pytest.approx(0.5)
    masked = clipped_is_weight(pol, torch.zeros(4), clip=10, mask=torch.tensor([1, 1, 1, 0]))
    assert masked.weight.tolist() == pytest.approx([1.0, 10.0, 0.5, 0.0])
    assert masked.clip_frac.item() == pytest.approx(1 / 3)
    assert masked.mean_raw.item() == pytest.approx((1 + 20 + 0.5) / 3, rel=1e-5)


def test_rloo_policy_loss_hand_computed():
    logp = torch.tensor([[ln(0.5), ln(0.25)], [ln(0.8), -3.0]], requires_grad=True)
    mask = torch.tensor([[1, 1], [1, 0]])
    adv = torch.tensor([1.0, -1.0])
    loss, stats = rloo_policy_loss(logp, mask, adv)  # agg="sum": sequence log-prob (S4 eq. 3)
    expected = (-(ln(0.5) + ln(0.25)) + ln(0.8)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert stats["response_len"] == pytest.approx(1.5)
    loss.backward()
    assert logp.grad.flatten().tolist() == pytest.approx([-0.5, -0.5, 0.5, 0.0])  # −A/B; pad: 0

    # per-sequence length normalisation, IS weights, KL and entropy terms
    logp.grad = None
    ref = torch.tensor([[ln(0.25), ln(0.25)], [ln(0.8), 0.0]])
    ent = torch.tensor([[1.0, 2.0], [3.0, 100.0]])
    loss, stats = rloo_policy_loss(logp, mask, adv, is_weight=torch.tensor([2.0, 0.5]),
                                   ref_logp=ref, entropy=ent, kl_coef=0.1, entropy_coef=0.01,
                                   agg="mean")
    pg = (2 * -(ln(0.5) + ln(0.25)) / 2 + 0.5 * ln(0.8)) / 2
    kl = (ln(2) - 0.5) / 3  # only token (0, 0) differs from the reference; 3 response tokens
    assert stats["pg_loss"] == pytest.approx(pg, rel=1e-6)
    assert stats["kl"] == pytest.approx(kl, rel=1e-5)
    assert stats["entropy"] == pytest.approx(2.0)  # (1 + 2 + 3) / 3, padding ignored
    assert loss.item() == pytest.approx(pg + 0.1 * kl - 0.01 * 2.0, rel=1e-6)
    with pytest.raises(ValueError, match="sum, mean"):
        rloo_policy_loss(logp, mask, adv, agg="tokens")


# --- on-policy distillation -------------------------------------------------------------

def _reference_kl(zt, zs, T):
    lt, ls = torch.log_softmax(zt / T, -1), torch.log_softmax(zs / T, -1)
    return (lt.exp() * (lt - ls)).sum(-1)


def test_forward_kl_hand_computed():
    teacher = torch.zeros(1, 1, 2)  # uniform
    student = torch.tensor([[[ln(3), 0.0]]], requires_grad=True)  # (3/4, 1/4)
    kl = forward_kl(teacher, student, torch.ones(1, 1))
    assert kl.item() == pytest.approx(0.5 * ln(0.5 / 0.75) + 0.5 * ln(0.5 / 0.25), rel=1e-6)
    kl.sum().backward()
    assert student.grad[0, 0].tolist() == pytest.approx([0.25, -0.25], rel=1e-5)  # p_s − p_t
    # T = 2 halves the student logits: p_s = (√3, 1) / (1 + √3); gradient (p_s − p_t) / T
    student.grad = None
    kl = forward_kl(teacher, student, torch.ones(1, 1), temperature=2.0)
    ps = math.sqrt(3) / (1 + math.sqrt(3))
    assert kl.item() == pytest.approx(0.5 * ln(0.5 / ps) + 0.5 * ln(0.5 / (1 - ps)), rel=1e-6)
    kl.sum().backward()
    assert student.grad[0, 0].tolist() == pytest.approx([(ps - 0.5) / 2, -(ps - 0.5) / 2],
                                                        rel=1e-5)


def test_forward_kl_matches_autograd_chunked_masked_and_shared_vocab():
    torch.manual_seed(0)
    zt = torch.randn(2, 5, 9)  # teacher has 2 extra (padding) vocabulary rows
    zs = torch.randn(2, 5, 7, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]])
    kl = forward_kl(zt, zs, mask, temperature=1.3, chunk_size=2)
    ref = _reference_kl(zt[..., :7], zs, 1.3) * mask
    assert torch.allclose(kl, ref, atol=1e-6)
    w = torch.randn(2, 5)
    (kl * w).sum().backward()
    g = zs.grad.clone()
    zs.grad = None
    (ref * w).sum().backward()
    assert torch.allclose(g, zs.grad, atol=1e-6)
    assert g[0, 3:].abs().sum() == 0 and g[1, 0].abs().sum() == 0  # masked: no gradient
    assert (forward_kl(zt, zs, torch.ones(2, 5)) >= -1e-6).all()
    assert forward_kl(zs.detach(), zs, torch.ones(2, 5)).abs().max() < 1e-6  # KL(p || p) = 0
