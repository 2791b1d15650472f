import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from countdown_rlvr.model.logprobs import sequence_logprobs, token_entropy, token_logprobs
from countdown_rlvr.model.policy import build_tiny, load_model

pytestmark = pytest.mark.usefixtures("one_thread")



def _naive_logprobs(logits, labels):
    return torch.log_softmax(logits.float(), -1).gather(-1, labels[..., None]).squeeze(-1)


def _naive_entropy(logits):
    logp = torch.log_softmax(logits.float(), -1)
    return -(logp.exp() * logp).sum(-1)


def _data(dtype, shape=(3, 7, 50), seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(shape, generator=g) * 3).to(dtype).requires_grad_()
    labels = torch.randint(0, shape[-1], shape[:-1], generator=g)
    return logits, labels


def _grad(fn, logits, weights):
    logits.grad = None
    (fn(logits) * weights).sum().backward()
    return logits.grad.clone()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk_size", [None, 1, 3, 100])
def test_token_logprobs_match_naive(dtype, chunk_size):
    logits, labels = _data(dtype)
    w = torch.randn(labels.shape)
    ours = token_logprobs(logits, labels, chunk_size)
    assert ours.dtype == torch.float32 and ours.shape == labels.shape
    torch.testing.assert_close(ours, _naive_logprobs(logits, labels), atol=1e-5, rtol=1e-5)
    g_ours = _grad(lambda x: token_logprobs(x, labels, chunk_size), logits, w)
    g_naive = _grad(lambda x: _naive_logprobs(x, labels), logits, w)
    assert g_ours.dtype == dtype
    tol = 1e-6 if dtype == torch.float32 else 1e-2  # bf16: one rounding of the same fp32 grad
    torch.testing.assert_close(g_ours.float(), g_naive.float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk_size", [None, 2])
def test_token_entropy_matches_naive(dtype, chunk_size):
    logits, _ = _data(dtype, seed=1)
    w = torch.randn(logits.shape[:-1])
    torch.testing.assert_close(token_entropy(logits, chunk_size), _naive_entropy(logits),
                               atol=1e-5, rtol=1e-5)
    g_ours = _grad(lambda x: token_entropy(x, chunk_size), logits, w)
    g_naive = _grad(_naive_entropy, logits, w)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(g_ours.float(), g_naive.float(), atol=tol, rtol=tol)


def test_shapes_views_and_ignore_index():
    logits, labels = _data(torch.float32, shape=(2, 6, 11))
    # a non-contiguous view (the usual logits[:, :-1]) and the flat [N, V] layout
    view = logits[:, :-1]
    torch.testing.assert_close(token_logprobs(view, labels[:, 1:], 4),
                               _naive_logprobs(view, labels[:, 1:]))
    flat = logits.detach().reshape(-1, 11)
    torch.testing.assert_close(token_logprobs(flat, labels.reshape(-1), 5),
                               _naive_logprobs(flat, labels.reshape(-1)))
    torch.testing.assert_close(token_entropy(flat, 5), _naive_entropy(flat))
    # HF ignore index: 0 log-prob, no gradient
    masked = labels.clone()
    masked[0, :3] = -100
    out = token_logprobs(logits, masked)
    assert (out[0, :3] == 0).all()
    out.sum().backward()
    assert (logits.grad[0, :3] == 0).all() and logits.grad[1].abs().sum() > 0
    with pytest.raises(ValueError, match="do not match"):
        token_logprobs(logits, labels[:, 1:])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny({"hidden_size": 32, "n_layers": 2, "intermediate_size": 64},
                      tmp_path_factory.mktemp("lp") / "m", seed=0)
    return load_model(str(path))


def test_sequence_logprobs_padding_invariant(tiny):
    model, tok = tiny
    prompts = ["Numbers: 1 2 3 Target: 6\n", "Numbers: 44 19 35 Target: 98\n"]
    completions = ["<think>1 + 2 = 3, 3 + 3 = 6</think>", "<answer>44</answer>"]
    rows = [(tok(p)["input_ids"], tok(c)["input_ids"] + [tok.eos_token_id])
            for p, c in zip(prompts, completions)]
    T = max(len(p) + len(c) for p, c in rows)
    ids = torch.full((2, T), tok.pad_token_id)
    att, comp = torch.zeros(2, T, dtype=torch.long), torch.zeros(2, T, dtype=torch.long)
    for b, (p, c) in enumerate(rows):  # left padding, as produced by generate
        seq = p + c
        ids[b, T - len(seq):] = torch.tensor(seq)
        att[b, T - len(seq):] = 1
        comp[b, T - len(c):] = 1
    res = sequence_logprobs(model, ids, att, comp, with_entropy=True)
    for b, (p, c) in enumerate(rows):  # one unpadded sequence at a time, naive log-softmax
        seq = torch.tensor([p + c])
        with torch.no_grad():
            logits = model(seq).logits[0, len(p) - 1:-1]
        ref = _naive_logprobs(logits, seq[0, len(p):])
        torch.testing.assert_close(res.tokens[b, T - len(c):].detach(), ref, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(res.sum[b].detach(), ref.sum(), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(res.mean[b].detach(), ref.mean(), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(res.entropy[b, T - len(c):].detach(), _naive_entropy(logits),
                                   atol=1e-4, rtol=1e-4)
    assert (res.tokens[comp == 0] == 0).all()
    # gradients reach the weights (used in the training losses)
    model.zero_grad()
    (res.mean.sum() + res.entropy.sum()).backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0
    model.zero_grad()
