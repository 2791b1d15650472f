"""MiniLM embedding throughput and greedy-dedup time: batched FAISS vs one-at-a-time loops.

Traces are realistic: solver traces (direct and search-with-backtracking styles, the tiny
prompt prepended) of `--n / 4` problems, four per problem so there are near-duplicates.
The dedup timings run on those real embeddings and on `--synthetic` random unit vectors
of which half are noisy copies of earlier ones. All dedup methods must agree. Timings
are wall-clock on whatever else the machine is running; BLAS-threaded small matvecs (the
numpy loop) suffer most from a busy machine.
Run: python benchmarks/bench_dedup.py [--n 2000] [--synthetic 20000]
"""

from __future__ import annotations

import argparse
import random
import time

import faiss
import numpy as np
import torch

from countdown_rlvr.data.dedup import EMBED_DIM, embed, greedy_dedup, load_encoder
from countdown_rlvr.data.traces import direct_trace, search_trace
from countdown_rlvr.task.generate import generate_problems
from countdown_rlvr.task.prompts import solve_prompt


def realistic_traces(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for p in generate_problems((n + 3) // 4, seed, "bench"):
        head = solve_prompt(p.numbers, p.target, "tiny")
        for k in range(4):
            trace = direct_trace(p.construction) if k % 2 == 0 else \
                search_trace(p.construction, p.target, rng)
            out.append(head + trace)
    return out[:n]


def faiss_one_at_a_time(x: np.ndarray, threshold: float) -> np.ndarray:
    index, keep, thr = faiss.IndexFlatIP(x.shape[1]), np.zeros(len(x), bool), np.float32(threshold)
    for i in range(len(x)):
        row = x[i:i + 1]
        if index.ntotal == 0 or index.search(row, 1)[0][0, 0] < thr:
            keep[i] = True
            index.add(row)
    return keep


def numpy_one_at_a_time(x: np.ndarray, threshold: float) -> np.ndarray:
    kept, m, keep, thr = np.empty_like(x), 0, np.zeros(len(x), bool), np.float32(threshold)
    for i in range(len(x)):
        if m == 0 or (kept[:m] @ x[i]).max() < thr:
            keep[i] = True
            kept[m] = x[i]
            m += 1
    return keep


def numpy_full_gram(x: np.ndarray, threshold: float) -> np.ndarray:
    # one block holding everything: greedy_dedup never touches FAISS, all n x n in numpy
    return greedy_dedup(x, threshold, batch_size=max(1, len(x)))


def synthetic(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, EMBED_DIM)).astype(np.float32)
    copies = np.flatnonzero(rng.random(n) < 0.5)[1:]
    sources = (rng.random(len(copies)) * copies).astype(int)  # an earlier row
    x[copies] = x[sources] + 0.2 * rng.standard_normal((len(copies), EMBED_DIM))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000, help="real traces to embed")
    ap.add_argument("--synthetic", type=int, default=20000, help="random vectors to dedup")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threshold", type=float, default=0.95)
    args = ap.parse_args()

    texts = realistic_traces(args.n)
    _, load_s = timed(load_encoder)
    embed(texts[:32], progress=False)  # warm-up: first-call allocations
    emb, embed_s = timed(embed, texts, args.batch_size, False)
    n_tok = np.mean([len(t) for t in load_encoder().tokenizer(texts)["input_ids"]])
    print(f"MiniLM: {len(texts)} traces, mean {n_tok:.0f} tokens, batch {args.batch_size}, "
          f"{torch.get_num_threads()} torch threads, load {load_s:.1f} s")
    print(f"  embed {embed_s:.1f} s = {len(texts) / embed_s:.1f} embeddings/s\n")

    print(f"greedy dedup at cosine >= {args.threshold}")
    print(f"{'data':<22}{'method':<26}{'seconds':>9}{'items/s':>12}{'kept':>8}")
    methods = [("faiss batched (ours)", greedy_dedup), ("faiss one at a time", faiss_one_at_a_time),
               ("numpy one at a time", numpy_one_at_a_time),
               ("numpy full n x n Gram", numpy_full_gram)]
    for name, x in ((f"{len(emb)} real traces", emb),
                    (f"{args.synthetic} synthetic", synthetic(args.synthetic))):
        masks = []
        for method, fn in methods:
            mask, s = timed(fn, x, args.threshold)
            masks.append(mask)
            print(f"{name:<22}{method:<26}{s:>9.3f}{len(x) / s:>12,.0f}{int(mask.sum()):>8}")
        assert all(np.array_equal(masks[0], m) for m in masks[1:]), "methods disagree"


if __name__ == "__main__":
    main()
