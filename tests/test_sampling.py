import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from countdown_rlvr import decode as decoding
from countdown_rlvr.decode import decode, decode_hf, pick
from countdown_rlvr.logprobs import sequence_logprobs
from countdown_rlvr.model import ModelRef, build_tiny, load_model
from countdown_rlvr.sampling import (
    SamplerParams,
    derive_seed,
    generate,
    sampler_params,
)

pytestmark = pytest.mark.usefixtures("one_thread")


PROMPTS = ["Numbers: 44 19 35 Target: 98\n", "Numbers: 3 7 Target: 21\n",
           "Numbers: 100 25 4 2 Target: 50\n"]
EVAL = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    # smaller than the student preset: the tests exercise the sampler, not the model
    micro = {"hidden_size": 64, "n_layers": 2, "intermediate_size": 128}
    return str(build_tiny(micro, tmp_path_factory.mktemp("s") / "base", seed=0))


@pytest.fixture(scope="module")
def pair(base):
    return load_model(base)


def _ids(out):
    return [[s.token_ids for s in per_prompt] for per_prompt in out]


def _gen(ref, **kw):
    args = {"n": 4, "sampler": EVAL, "seed": 0, "max_new_tokens": 12, "progress": False,
            "batch_size": 8}
    return generate(ref, PROMPTS, **{**args, **kw})


def test_shape_lengths_and_determinism(base, pair):
    out = _gen(pair)
    assert len(out) == len(PROMPTS) and all(len(s) == 4 for s in out)
    assert all(s.n_tokens == len(s.token_ids) <= 12 for per in out for s in per)
    assert all(s.finish_reason == "length" for per in out for s in per)  # random init: no EOS
    # same seed -> same samples, whatever the global RNG did in between; caller RNG untouched
    torch.manual_seed(123)
    state = torch.get_rng_state()
    again = _gen(pair)
    assert torch.equal(state, torch.get_rng_state())
    assert _ids(again) == _ids(out)
    assert _ids(_gen(base)) == _ids(out)  # loading by path == the live pair
    other = _ids(_gen(pair, seed=1))
    assert other != _ids(out)
    assert len({tuple(t) for t in _ids(out)[0]}) > 1  # the n samples differ
    assert [len(s.token_ids) for s in _gen(pair, max_new_tokens=5)[0]] == [5] * 4


def _manual_greedy(model, tok, prompt, max_new):
    ids = tok(prompt, return_tensors="pt")["input_ids"]
    new = []
    for _ in range(max_new):
        with torch.no_grad():
            nxt = int(model(ids).logits[0, -1].argmax())
        new.append(nxt)
        if nxt == tok.eos_token_id:
            break
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    return new


def test_greedy_equals_manual_argmax(pair):
    model, tok = pair
    out = _gen(pair, sampler={"temperature": 0}, n=2, seed=5, max_new_tokens=10)
    for prompt, per in zip(PROMPTS, out):  # batched with left padding vs one by one
        assert per[0].token_ids == per[1].token_ids == _manual_greedy(model, tok, prompt, 10)
    assert _ids(_gen(pair, sampler={"temperature": 0}, seed=9, max_new_tokens=10, n=2)) == _ids(out)


def test_rows_that_stop_leave_the_batch_without_disturbing_the_rest(base):
    """Rows leave the batch (and its KV cache) as they emit EOS; every surviving row's
    recorded log-probs must still equal a fresh, unbatched forward over its own tokens."""
    model, tok = load_model(base)
    with torch.no_grad():
        model.model.norm.weight.mul_(0.3)  # flatter logits: EOS turns up within 64 tokens
    out = generate((model, tok), PROMPTS, n=16, sampler={"temperature": 1.0}, seed=0,
                   max_new_tokens=64, return_logprobs=True, progress=False, batch_size=48)
    samples = [(prompt, s) for prompt, per in zip(PROMPTS, out) for s in per]
    lengths = [s.n_tokens for _, s in samples]
    assert any(s.finish_reason == "stop" for _, s in samples) and 64 in lengths
    assert len(set(lengths)) > 3
    for prompt, s in samples:
        p = tok(prompt)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([p + s.token_ids])).logits[0, len(p) - 1:-1]
        ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(s.token_ids)[:, None])
        torch.testing.assert_close(torch.tensor(s.logprobs), ref.squeeze(1), atol=1e-4, rtol=1e-4)


def _processed_logprobs(model, tok, prompt, token_ids, t, k, p):
    """Reference: the HF warpers re-implemented by hand on one unpadded sequence."""
    prompt_ids = tok(prompt)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + token_ids])).logits[0, len(prompt_ids) - 1:-1]
    x = logits / t
    x = x.masked_fill(x < x.topk(k, -1).values[:, -1:], -math.inf)
    probs, order = x.softmax(-1).sort(-1, descending=True)
    drop = probs.cumsum(-1) - probs > p  # keep the smallest prefix with mass >= p
    x = x.scatter(-1, order, x.gather(-1, order).masked_fill(drop, -math.inf))
    return torch.log_softmax(x, -1).gather(-1, torch.tensor(token_ids)[:, None]).squeeze(-1)


def test_logprobs_are_those_of_the_processed_distribution(pair):
    model, tok = pair
    sampler = {"temperature": 0.7, "top_k": 20, "top_p": 0.9}
    out = _gen(pair, sampler=sampler, return_logprobs=True, n=2)
    for prompt, per in zip(PROMPTS, out):
        for s in per:
            assert len(s.logprobs) == s.n_tokens and all(math.isfinite(v) for v in s.logprobs)
            ref = _processed_logprobs(model, tok, prompt, s.token_ids, 0.7, 20, 0.9)
            torch.testing.assert_close(torch.tensor(s.logprobs), ref, atol=1e-4, rtol=1e-4)
    assert _gen(pair)[0][0].logprobs is None


def test_logprobs_match_training_forward(pair):
    """At temperature 1 the sampler's log-probs equal sequence_logprobs of the same tokens."""
    model, tok = pair
    s = _gen(pair, sampler={"temperature": 1.0}, return_logprobs=True, n=1)[0][0]
    p = tok(PROMPTS[0])["input_ids"]
    ids = torch.tensor([p + s.token_ids])
    comp = torch.tensor([[0] * len(p) + [1] * s.n_tokens])
    with torch.no_grad():
        res = sequence_logprobs(model, ids, torch.ones_like(ids), comp)
    torch.testing.assert_close(res.sum[0], torch.tensor(sum(s.logprobs)), atol=1e-3, rtol=1e-4)


def test_stops_at_eos(base):
    model, tok = load_model(base)
    with torch.no_grad():
        model.model.norm.weight.zero_()  # all logits 0: uniform over the vocabulary
    out = generate((model, tok), PROMPTS[:1], n=48, sampler={"temperature": 1.0}, seed=0,
                   max_new_tokens=64, return_logprobs=True, progress=False)[0]
    stopped = [s for s in out if s.finish_reason == "stop"]
    assert stopped and len(stopped) < len(out)
    for s in stopped:
        assert s.token_ids[-1] == tok.eos_token_id and tok.eos_token_id not in s.token_ids[:-1]
        assert s.n_tokens < 64 and tok.eos_token not in s.text
        assert s.text == tok.decode(s.token_ids[:-1])
    assert all(abs(v + math.log(len(tok))) < 1e-5 for s in out for v in s.logprobs)


def test_lora_adapter_from_disk(base, pair, tmp_path):
    from peft import LoraConfig, get_peft_model

    model, tok = load_model(base)
    torch.manual_seed(0)
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                                  init_lora_weights=False))
    peft_model.save_pretrained(tmp_path / "adapter")
    greedy = {"sampler": {"temperature": 0}, "n": 1}
    from_disk = _gen(ModelRef(base, str(tmp_path / "adapter")), **greedy)
    assert _ids(from_disk) == _ids(_gen((peft_model, tok), **greedy))
    assert _ids(from_disk) != _ids(_gen(pair, **greedy))
    peft_model.train()
    _gen((peft_model, tok), n=1)
    assert peft_model.training and tok.padding_side == "left"  # state restored


# --------------------------------------------------------------------------- fast path vs references
def _hf_warped(logits, t, k, p):
    """Reference: HF's own warpers over the whole vocabulary, in HF's order."""
    for w in ([TemperatureLogitsWarper(t)] + ([TopKLogitsWarper(k)] if k else [])
              + ([TopPLogitsWarper(p)] if p < 1 else [])):
        logits = w(None, logits)
    return torch.log_softmax(logits, -1)


def _inverse_cdf(logp, u):
    """Reference draw: the token whose slice of [0, 1), tokens by descending probability,
    holds u (ties in stable vocabulary order)."""
    probs, order = logp.exp().sort(descending=True, stable=True)
    cdf = probs.cumsum(0)
    j = min(int((cdf <= u * cdf[-1]).sum()), int((probs > 0).sum()) - 1)
    return int(order[j])


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**6), t=st.sampled_from([0.3, 0.6, 1.0, 1.7]),
       k=st.sampled_from([0, 1, 5, 20, 64]), p=st.sampled_from([0.5, 0.9, 0.95, 1.0]))
def test_pick_is_the_hf_warped_distribution(seed, t, k, p):
    """`pick` (top-k candidates only) draws the token the full-vocabulary HF warpers'
    distribution puts at u, and reports that distribution's log-prob of it."""
    g = torch.Generator().manual_seed(seed)
    logits, u = torch.randn(6, 64, generator=g) * 3, torch.rand(6, generator=g)
    tok, logp = pick(logits, u, SamplerParams(t, p, k, 1), True)
    ref = _hf_warped(logits, t, k, p)
    for r in range(6):
        assert int(tok[r]) == _inverse_cdf(ref[r], float(u[r]))
    torch.testing.assert_close(logp, ref.gather(1, tok[:, None]).squeeze(1), atol=1e-5, rtol=1e-5)


def test_greedy_equals_hf_generate(pair):
    """Greedy (and top_k=1) decoding is token for token HF `generate`'s, batched and padded."""
    model, tok = pair
    enc = tok(PROMPTS, return_tensors="pt", padding=True)
    ref = model.generate(**enc, do_sample=False, max_new_tokens=16, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id)[:, enc["input_ids"].shape[1]:].tolist()
    for sampler in ({"temperature": 0}, {"temperature": 0.6, "top_k": 1}):
        out = _gen(pair, sampler=sampler, n=2, max_new_tokens=16)
        assert [per[0].token_ids for per in out] == [per[1].token_ids for per in out] == ref


def _reference_samples(model, tok, prompts, n, sp: SamplerParams, seed):
    """A slow step-by-step sampler: one row at a time, no cache, no padding, HF warpers over
    the full vocabulary, drawing with the uniforms `generate` documents (one batch)."""
    u = torch.rand(len(prompts) * n, sp.max_new_tokens,
                   generator=torch.Generator().manual_seed(derive_seed(seed, 0)))
    out = []
    for r in range(len(prompts) * n):
        ids, new, lps = tok(prompts[r // n])["input_ids"], [], []
        for t in range(sp.max_new_tokens):
            with torch.no_grad():
                logits = model(torch.tensor([ids + new])).logits[0, -1:].float()
            logp = _hf_warped(logits, sp.temperature, sp.top_k, sp.top_p)[0]
            new.append(_inverse_cdf(logp, float(u[r, t])))
            lps.append(float(logp[new[-1]]))
            if new[-1] == tok.eos_token_id:
                break
        out.append((new, lps))
    return out


def test_sampling_equals_a_slow_reference_sampler(base):
    model, tok = load_model(base)
    with torch.no_grad():
        model.model.norm.weight.mul_(0.1)  # flatter logits: some rows stop early
    sampler = {"temperature": 0.9, "top_k": 300, "top_p": 0.95, "max_new_tokens": 40}
    out = generate((model, tok), PROMPTS, n=8, sampler=sampler, seed=3, return_logprobs=True,
                   batch_size=24, progress=False)
    got = [s for per in out for s in per]
    ref = _reference_samples(model, tok, PROMPTS, 8, sampler_params(sampler), seed=3)
    assert any(s.finish_reason == "stop" for s in got) and any(s.n_tokens == 40 for s in got)
    assert [s.token_ids for s in got] == [ids for ids, _ in ref]
    for s, (_, lps) in zip(got, ref):
        torch.testing.assert_close(torch.tensor(s.logprobs), torch.tensor(lps), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("compact_at", [0.0, 0.25, 1.0])  # at every EOS, in bulk, never
@pytest.mark.parametrize("sampler", [{"temperature": 1.0}, {"temperature": 0},
                                     {"temperature": 0.9, "top_k": 200, "top_p": 0.95}])
def test_static_cache_path_equals_hf_forward_path(base, sampler, compact_at, monkeypatch):
    """The own forward over the preallocated cache and HF's forward over its DynamicCache
    (rows leaving one by one) give the same tokens from the same u, however often the
    finished rows are compacted away."""
    monkeypatch.setattr(decoding, "COMPACT_AT", compact_at)
    model, tok = load_model(base)
    with torch.no_grad():
        model.model.norm.weight.mul_(0.1)  # flatter logits: some rows stop early
    sp = sampler_params({**sampler, "max_new_tokens": 48})
    enc = tok([p for p in PROMPTS for _ in range(16)], return_tensors="pt", padding=True)
    u = None if sp.greedy else torch.rand(48, 48, generator=torch.Generator().manual_seed(0))
    args = (enc["input_ids"], enc["attention_mask"], sp, [tok.eos_token_id], tok.pad_token_id, u,
            True)
    fast, slow = decode(model, *args), decode_hf(model, *args)
    assert torch.equal(fast[0], slow[0])
    assert sp.greedy or (fast[0] == tok.eos_token_id).any()  # rows did leave early
    torch.testing.assert_close(fast[1], slow[1], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_static_cache_path_runs_peft_layers_and_bf16(base, dtype):
    """A live peft policy (DoRA: the layer type with the most own forward code) in either
    precision: the fast path calls its adapted layers and matches the HF forward path."""
    from peft import LoraConfig, get_peft_model

    model, tok = load_model(base, dtype=dtype)
    torch.manual_seed(0)
    model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj", "up_proj"],
                                             use_dora=True, init_lora_weights=False))
    model.to(getattr(torch, dtype)).eval()
    sp = sampler_params({**EVAL, "max_new_tokens": 24})
    enc = tok([p for p in PROMPTS for _ in range(4)], return_tensors="pt", padding=True)
    u = torch.rand(12, 24, generator=torch.Generator().manual_seed(0))
    args = (enc["input_ids"], enc["attention_mask"], sp, [tok.eos_token_id], tok.pad_token_id, u,
            True)
    assert decoding.fast_path_model(model) is not None  # not silently the fallback
    fast, slow = decode(model, *args), decode_hf(model, *args)
    assert torch.equal(fast[0], slow[0])
    torch.testing.assert_close(fast[1], slow[1], atol=1e-4, rtol=1e-4)


def test_bad_arguments(pair):
    with pytest.raises(ValueError, match="valid: hf, vllm"):
        _gen(pair, backend="tgi")
    with pytest.raises(ValueError, match="unknown sampler keys"):
        _gen(pair, sampler={"temprature": 0.5})
    with pytest.raises(ValueError, match="temperature"):
        _gen(pair, sampler={"temperature": -1})
    with pytest.raises(ValueError, match="top_p"):
        _gen(pair, sampler={"top_p": 0})
    assert _gen(pair, sampler={**EVAL, "backend": "hf", "n": 16, "seeds": [0]}, n=1)


def test_vllm_missing_names_the_fix(base):
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"\[vllm\]"):
            _gen(ModelRef(base), backend="vllm")
    else:
        pytest.skip("vllm is installed")


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    # the real student preset: vLLM's CPU attention kernels need head_dim >= 32
    return str(build_tiny("student", tmp_path_factory.mktemp("v") / "student", seed=0))


@pytest.mark.vllm
def test_vllm_greedy_parity_with_hf(student):
    pytest.importorskip("vllm")
    base = student
    kw = {"sampler": {"temperature": 0}, "n": 2, "max_new_tokens": 24}
    hf = _gen(ModelRef(base), **kw)
    vl = _gen(ModelRef(base), backend="vllm", **kw)
    assert _ids(vl) == _ids(hf)
    assert [[s.text for s in p] for p in vl] == [[s.text for s in p] for p in hf]
    # same seed -> same samples within the backend
    assert _ids(_gen(ModelRef(base), backend="vllm")) == _ids(_gen(ModelRef(base), backend="vllm"))
