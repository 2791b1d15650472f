"""Generation throughput at the evaluation geometry: 32 prompts x n=16, temperature 0.6,
top-p 0.95, top-k 20, 64 new tokens. Our HF backend (a KV-cached decode loop that drops
finished rows) against HF `model.generate` on the same batches (the baseline), and vLLM when
importable. Pass a trained model (--model data/models/sft) to see the effect of rows
finishing at different lengths; a random init never emits EOS.

    python benchmarks/bench_sampling.py [--model DIR] [--batch-sizes 64,256] [--threads 1,2]

Without --model a randomly initialised tiny student is built in a temp dir (it never emits
EOS, so every sample runs the full 64 tokens: a worst case for the token budget).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time

import torch

from countdown_rlvr.model import ModelRef, build_tiny, load_model
from countdown_rlvr.sampling import generate
from countdown_rlvr.task.prompts import solve_prompt

SAMPLER = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}


def prompts(k: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [solve_prompt([rng.randint(1, 99) for _ in range(rng.choice((3, 4)))],
                         rng.randint(1, 99), style="tiny") for _ in range(k)]


def run(ref, ps, n, max_new, backend, batch_size) -> tuple[int, float]:
    t0 = time.perf_counter()
    out = generate(ref, ps, n, SAMPLER, seed=0, backend=backend, max_new_tokens=max_new,
                   batch_size=batch_size, progress=False)
    seconds = time.perf_counter() - t0
    return sum(s.n_tokens for per in out for s in per), seconds


@torch.no_grad()
def run_hf_generate(pair, ps, n, max_new, batch_size) -> tuple[int, float]:
    """Baseline: transformers' `generate` with the same sampler, batch by batch."""
    model, tok = pair
    tok.padding_side = "left"
    rows = [p for p in ps for _ in range(n)]
    tokens, t0 = 0, time.perf_counter()
    for i in range(0, len(rows), batch_size):
        enc = tok(rows[i:i + batch_size], return_tensors="pt", padding=True)
        out = model.generate(**enc, do_sample=True, max_new_tokens=max_new,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                             **SAMPLER)
        new = out[:, enc["input_ids"].shape[1]:]
        ended = (new == tok.eos_token_id).int().cumsum(1)
        tokens += int(((ended == 0) | ((ended == 1) & (new == tok.eos_token_id))).sum())
    return tokens, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", help="model dir (default: a fresh tiny student)")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--batch-sizes", default="64,256")
    ap.add_argument("--threads", default=str(torch.get_num_threads()))
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory()
    path = args.model or str(build_tiny("student", f"{tmp.name}/student", seed=0))
    ps = prompts(args.prompts)
    pair = load_model(path)
    print(f"model={args.model or 'tiny student (random init)'}  {args.prompts} prompts x "
          f"n={args.n}, {args.max_new_tokens} new tokens, sampler={SAMPLER}\n")
    header = f"{'backend':<8} {'threads':>7} {'batch':>6} {'tokens':>8} {'seconds':>8} {'tokens/s':>9}"
    print(header)
    print("-" * len(header))
    run(pair, ps[:2], 2, 4, "hf", 4)  # warm-up
    for threads in map(int, args.threads.split(",")):
        torch.set_num_threads(threads)
        for bs in map(int, args.batch_sizes.split(",")):
            tokens, sec = run(pair, ps, args.n, args.max_new_tokens, "hf", bs)
            print(f"{'hf':<8} {threads:>7} {bs:>6} {tokens:>8} {sec:>8.1f} {tokens / sec:>9.0f}")
            tokens, sec = run_hf_generate(pair, ps, args.n, args.max_new_tokens, bs)
            print(f"{'generate':<8} {threads:>7} {bs:>6} {tokens:>8} {sec:>8.1f} {tokens / sec:>9.0f}"
                  "  (baseline: transformers generate)")
    try:
        import vllm  # noqa: F401
    except ImportError:
        print("vllm     (not importable here; see README for its own environment)")
    else:
        tokens, sec = run(ModelRef(path), ps, args.n, args.max_new_tokens, "vllm", 0)
        print(f"{'vllm':<8} {'-':>7} {'-':>6} {tokens:>8} {sec:>8.1f} {tokens / sec:>9.0f}"
              "  (incl. engine start)")
    tmp.cleanup()


if __name__ == "__main__":
    main()
