import math
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from countdown_rlvr.model import decode as decoding
from countdown_rlvr.model.decode import decode, decode_hf, pick
from countdown_rlvr.model.logprobs import sequence_logprobs
from countdown_rlvr.model.policy import ModelRef, build_tiny, load_model
from countdown_rlvr.model.sampling import SamplerParams, derive_seed, generate, sampler_params

pytestmark = pytest.mark.usefixtures("one_thread")

# the benchmark's sampling code (`bench_sampling`, `baseline_decode`), for the device test
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


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


def _truncating(V, k, p):
    """Whether top-k / top-p cut a V-token distribution: then `pick` ranks the candidates."""
    return 0 < k < V or p < 1


def _inverse_cdf(logp, u, ranked):
    """Reference draw: the token whose slice of [0, 1) holds u, tokens by descending
    probability when `ranked` (ties in stable vocabulary order), else in vocabulary order;
    never one of probability 0."""
    probs, order = logp.exp().sort(descending=True, stable=True) if ranked else \
        (logp.exp(), torch.arange(len(logp)))
    cdf = probs.cumsum(0)
    j = int((cdf <= u * cdf[-1]).sum())
    return int(order[min(j, int((probs > 0).nonzero()[-1]))])


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
        assert int(tok[r]) == _inverse_cdf(ref[r], float(u[r]), _truncating(64, k, p))
    torch.testing.assert_close(logp, ref.gather(1, tok[:, None]).squeeze(1), atol=1e-5, rtol=1e-5)


def _pick_before(logits, u, sp, want_logp):
    """`pick` before untruncated draws went to vocabulary order, verbatim: every sampled draw
    ranked the candidates (a topk over the whole vocabulary without top-k)."""
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


# temperature, top_p, top_k of samplers that truncate nothing: top_k off, = VOCAB, > VOCAB
# (the vocabulary of the test model)
VOCAB = 384
UNTRUNCATED = [(0.7, 1.0, 0), (1.0, 1.0, VOCAB), (1.3, 1.0, 1000)]


@pytest.mark.parametrize("t,p,k", UNTRUNCATED)
def test_untruncated_draw_ranks_nothing(pair, t, p, k, monkeypatch):
    """Without top-k / top-p no draw sorts or ranks the vocabulary: a topk over all 151,936
    tokens of Qwen at every step made our sampler 3x slower than HF generate on a CPU."""
    def refuse(name):
        def call(*args, **kwargs):
            raise AssertionError(f"{name} called by an untruncated draw")
        return call

    for owner in (torch, torch.Tensor):
        for name in ("topk", "sort", "argsort", "msort", "kthvalue"):
            monkeypatch.setattr(owner, name, refuse(name))
    g = torch.Generator().manual_seed(0)
    tok, logp = pick(torch.randn(4, VOCAB, generator=g), torch.rand(4, generator=g),
                     SamplerParams(t, p, k, 1), True)
    assert tok.shape == logp.shape == (4,)
    # and the whole loop, prefill to the last step
    assert len(pair[1]) == VOCAB
    assert _gen(pair, sampler={"temperature": t, "top_p": p, "top_k": k}, n=2, max_new_tokens=4)


@pytest.mark.parametrize("t,p,k", UNTRUNCATED)
def test_untruncated_draw_is_the_inverse_cdf_in_vocabulary_order(t, p, k):
    """Without truncation u draws the token whose slice of [0, 1), the slices of
    softmax(logits / T) laid out in vocabulary order, holds u: the midpoint of every token's
    slice draws that token, so the draws follow softmax(logits / T) with its exact log-probs.
    At u's float edges (0, the largest float below 1) the first / last token of positive
    probability: a token of probability 0 is never drawn."""
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, VOCAB, generator=g)
    logits[:, [0, 9, VOCAB - 2, VOCAB - 1]] = -math.inf  # probability 0: first, last, between
    probs = torch.softmax(logits.double() / t, -1)
    hi = probs.cumsum(-1)
    sp = SamplerParams(t, p, k, 1)
    for r in range(3):
        tokens = (probs[r] > 1e-4).nonzero().squeeze(1)  # slices far wider than float rounding
        assert len(tokens) > VOCAB // 2
        u = ((2 * hi[r, tokens] - probs[r, tokens]) / 2).float()  # each slice's midpoint
        tok, logp = pick(logits[r].expand(len(tokens), -1), u, sp, True)
        assert tok.tolist() == tokens.tolist()
        torch.testing.assert_close(logp.double(), probs[r, tokens].log(), atol=1e-5, rtol=1e-5)
    edges = pick(logits, torch.tensor([0.0, 1 - 2 ** -24, 1 - 2 ** -24]), sp, False)[0]
    assert edges.tolist() == [1, VOCAB - 3, VOCAB - 3]


@pytest.mark.parametrize("t,p,k", [(0.6, 0.95, 20), (0.9, 0.95, 300), (1.0, 1.0, 5), (1.0, 1.0, 1),
                                   (0.7, 0.9, 0), (1.2, 0.5, 1000), (0.3, 0.99, 399)])
def test_truncated_draw_is_unchanged(t, p, k):
    """With top-k or top-p (the evaluation sampler: T 0.6, top-k 20, top-p 0.95) the draws and
    log-probs are bit for bit those of `pick` before the untruncated path changed."""
    g = torch.Generator().manual_seed(k)
    logits, u = torch.randn(64, 400, generator=g) * 3, torch.rand(64, generator=g)
    u[:3] = torch.tensor([0.0, 1 - 2 ** -24, 0.5])
    sp = SamplerParams(t, p, k, 1)
    (tok, logp), (tok0, logp0) = pick(logits, u, sp, True), _pick_before(logits, u, sp, True)
    assert torch.equal(tok, tok0) and torch.equal(logp, logp0)


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
            ranked = _truncating(len(logp), sp.top_k, sp.top_p)
            new.append(_inverse_cdf(logp, float(u[r, t]), ranked))
            lps.append(float(logp[new[-1]]))
            if new[-1] == tok.eos_token_id:
                break
        out.append((new, lps))
    return out


@pytest.mark.parametrize("sampler", [{"temperature": 0.9, "top_k": 300, "top_p": 0.95},
                                     {"temperature": 0.9}])  # ranked draws / vocabulary order
def test_sampling_equals_a_slow_reference_sampler(base, sampler):
    model, tok = load_model(base)
    with torch.no_grad():
        model.model.norm.weight.mul_(0.1)  # flatter logits: some rows stop early
    sampler = {**sampler, "max_new_tokens": 40}
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


# --------------------------------------------------------------------------- devices
CUDA = torch.device("cuda", 0)


def _where(t) -> str | None:
    return getattr(t, "_where", None) if isinstance(t, torch.Tensor) else None


class PretendCuda(TorchFunctionMode):
    """A model "on cuda:0" on a machine without a GPU, to catch tensors built off its device.

    Every tensor stays a CPU tensor holding real values (so a whole decode loop runs) and
    carries where it would be: "cuda" for the parameters and buffers of the modules `place`d,
    for what a factory builds with device=cuda:0, for what `.to(cuda:0)` returns, and for the
    result of an op on a "cuda" tensor; "cpu" for what the caller `place`s there, for what is
    built without a device or with the CPU, and for results on those alone. "cuda" tensors
    report cuda:0 as `.device`. An op mixing the two (0-dim CPU tensors aside, which CUDA
    accepts; indices may be on the CPU) raises, as on a GPU. Tensors made where the mode
    cannot see (inside functorch's vmap, which HF's mask code uses) are not checked."""

    def place(self, *things, where: str = "cuda") -> None:
        for x in things:
            for t in [*x.parameters(), *x.buffers()] if isinstance(x, torch.nn.Module) else [x]:
                t._where = where

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func == torch.Tensor.device.__get__:
            return CUDA if _where(args[0]) == "cuda" else func(*args)
        if func == torch.Tensor.is_cuda.__get__:
            return _where(args[0]) == "cuda"
        target = self._target(func, args, kwargs)
        if target == "cuda":
            func, args, kwargs = self._on_cpu(func, args, kwargs)
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if target is None and func is not torch.Tensor.copy_:  # copies may cross devices
            self._check(func, args, tensors)
        out = func(*args, **kwargs)
        where = target or self._result(tensors)
        if where:
            if out is args[0] and where != _where(out) and func is not torch.Tensor.copy_:
                out = out.clone()  # `.to` a device returns a new tensor, not the input re-labelled
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor):
                    t._where = where
        return out

    @staticmethod
    def _device(x) -> str | None:
        """"cuda" / "cpu" for a device argument (a device, its name, a tensor), else None."""
        if isinstance(x, torch.Tensor):
            return _where(x)
        if x is None or isinstance(x, (torch.device, str)):
            try:
                return "cuda" if torch.device(x or "cpu").type == "cuda" else "cpu"
            except RuntimeError:  # a string that names no device
                return None
        return None

    def _target(self, func, args, kwargs) -> str | None:
        """Where `func` puts its result by its device argument (None: none given)."""
        if func is torch.Tensor.cpu or func is torch.Tensor.cuda:
            return "cpu" if func is torch.Tensor.cpu else "cuda"
        if "device" in kwargs:
            return self._device(kwargs["device"])
        if func is torch.Tensor.to:
            return next((d for d in map(self._device, args[1:]) if d), None)
        return None

    def _on_cpu(self, func, args, kwargs):
        """The call with its cuda:0 device argument made the CPU."""
        if func is torch.Tensor.cuda:
            return torch.Tensor.to, (args[0], "cpu"), {}
        if "device" in kwargs:
            kwargs = {**kwargs, "device": "cpu"}
        if func is torch.Tensor.to:  # .to(device, ...) or .to(other tensor, ...)
            args = args[:1] + tuple(a.dtype if isinstance(a, torch.Tensor) else
                                    "cpu" if self._device(a) == "cuda" else a for a in args[1:])
        return func, args, kwargs

    @staticmethod
    def _result(tensors) -> str | None:
        wheres = {_where(t) for t in tensors}
        return "cuda" if "cuda" in wheres else "cpu" if "cpu" in wheres or not tensors else None

    @staticmethod
    def _check(func, args, tensors) -> None:
        name = getattr(func, "__name__", str(func))
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__):
            home = _where(args[0])
            idx = [t for t in tree_flatten(args[1])[0] if isinstance(t, torch.Tensor)]
            bad = [t for t in idx if _where(t) not in (None, "cpu", home)]
            value = args[2] if func is torch.Tensor.__setitem__ else None
            if isinstance(value, torch.Tensor) and value.dim() and \
                    None not in (home, _where(value)) and _where(value) != home:
                bad.append(value)
            if home and bad:
                raise RuntimeError(f"{name}: a tensor on {home} indexed with / set from "
                                   f"{_where(bad[0])}")
            return
        wheres = {_where(t) for t in tensors if _where(t) == "cuda" or t.dim()} - {None}
        if len(wheres) > 1:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, cuda:0 and cpu! ({name})")


def test_pretend_cuda_catches_what_a_gpu_would():
    """The device check of the test below, on the mistakes it is there for."""
    lin = torch.nn.Linear(4, 2)
    with PretendCuda() as mode:
        mode.place(lin)
        assert lin.weight.device == CUDA and torch.ones(3).device.type == "cpu"
        on = torch.ones(3, device=CUDA)
        assert on.device == CUDA and (on * 2).device == CUDA
        assert (on + torch.tensor(1.0)).device == CUDA  # a 0-dim CPU tensor is fine
        assert on[torch.tensor([0, 2])].device == CUDA  # CPU indices are fine
        assert torch.ones(2, 3).to(on.device).device == CUDA and on.cpu().device.type == "cpu"
        with pytest.raises(RuntimeError, match="two devices"):
            lin(torch.ones(1, 4))  # input on the CPU, weights on the GPU
        with pytest.raises(RuntimeError, match="two devices"):
            on + torch.ones(3)
        with pytest.raises(RuntimeError, match="indexed"):
            torch.ones(3)[on.long()]


def test_decode_loops_build_their_tensors_on_the_models_device(base):
    """bench_sampling crashed on CUDA: the loops built their tensors (position ids first) on the
    device of the inputs they were given, the CPU there, beside a model on cuda:0. With the
    model "on cuda:0" (`PretendCuda`) and the inputs on the CPU, each loop (ours, the HF-forward
    one, the frozen baseline of the benchmark) runs without mixing devices and returns the
    tokens and log-probs of a plain CPU run, on the model's device; the benchmark's batches
    go to the model's device."""
    import bench_sampling
    from baseline_decode import _decode as baseline_loop

    model, tok = load_model(base)  # its own copy: `place` marks the parameters
    sp = sampler_params({"temperature": 1.0, "max_new_tokens": 6})
    enc = tok(PROMPTS, return_tensors="pt", padding=True)
    u = torch.rand(3, 6, generator=torch.Generator().manual_seed(0))
    args = (enc["input_ids"], enc["attention_mask"], sp, [tok.eos_token_id], tok.pad_token_id, u,
            True)
    for loop in (decode, decode_hf, baseline_loop):
        want = loop(model, *args)
        with PretendCuda() as mode:
            mode.place(model)
            mode.place(*args[:2], u, where="cpu")
            new, lps = loop(model, *args)
            assert new.device == lps.device == CUDA, loop.__name__
        assert torch.equal(new, want[0]) and torch.equal(lps, want[1])
    with PretendCuda() as mode:
        mode.place(model)
        for previous in (False, True):
            work, _ = bench_sampling.batches((model, tok), PROMPTS, 2, sp, 4, previous)
            assert {t.device for batch in work for t in batch} == {CUDA}


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
