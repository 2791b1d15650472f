"""Sampling throughput at the evaluation geometry: our HF backend (`sampling.generate`, a
decode loop over a preallocated KV cache whose finished rows leave the batch) against
transformers' `model.generate` (the baseline), side by side in one run, on the same prompts.

Geometry (params.yaml): the trained SFT policy, test prompts (data/problems/test.jsonl,
`model.prompt_style`), `evaluate.n` samples each, the `sampler` section (T 0.6, top-p 0.95,
top-k 20, 256 new tokens) and `evaluate.batch_size`. `generate` runs at that batch size;
ours at it and at each extra --batch-sizes. The implementations run interleaved
(A B A B ...) for --repeats rounds and the table shows medians, so load from other
processes on a shared machine hits both alike.

    python benchmarks/bench_sampling.py [--model data/models/sft] [--prompts 32]
        [--problems data/problems/test.jsonl] [--repeats 3] [--batch-sizes 1024] [--threads 1]

tokens/s counts completion tokens up to and including EOS (a sample's n_tokens), for both.
vLLM (backend: vllm), when importable, runs once after the table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import yaml

from countdown_rlvr.model import ModelRef, load_model, render_prompts
from countdown_rlvr.sampling import SAMPLER_KEYS, generate
from countdown_rlvr.task.prompts import solve_prompt

ROOT = Path(__file__).resolve().parents[1]


def ours(pair, prompts, n, sampler, batch_size) -> int:
    out = generate(pair, prompts, n, sampler, seed=0, batch_size=batch_size, progress=False)
    return sum(s.n_tokens for per in out for s in per)


@torch.no_grad()
def hf_generate(pair, prompts, n, sampler, batch_size) -> int:
    """Baseline: transformers' `generate` with the same sampler, batch by batch."""
    model, tok = pair
    tok.padding_side = "left"
    rows = [p for p in render_prompts(tok, prompts) for _ in range(n)]
    torch.manual_seed(0)
    tokens = 0
    for i in range(0, len(rows), batch_size):
        enc = tok(rows[i:i + batch_size], return_tensors="pt", padding=True)
        out = model.generate(**enc, do_sample=True, max_new_tokens=sampler["max_new_tokens"],
                             temperature=sampler["temperature"], top_p=sampler["top_p"],
                             top_k=sampler["top_k"], pad_token_id=tok.pad_token_id,
                             eos_token_id=tok.eos_token_id)
        new = out[:, enc["input_ids"].shape[1]:]
        ended = (new == tok.eos_token_id).int().cumsum(1)  # tokens up to the first EOS
        tokens += int(((ended == 0) | ((ended == 1) & (new == tok.eos_token_id))).sum())
    return tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default=str(ROOT / "data/models/sft"))
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--problems", default=str(ROOT / "data/problems/test.jsonl"))
    ap.add_argument("--prompts", type=int, default=32, help="first N test problems")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-sizes", default="1024", help="extra batch sizes for ours ('' = none)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()

    params = yaml.safe_load(Path(args.params).read_text())
    sampler = {k: params["sampler"][k] for k in SAMPLER_KEYS}
    n, bs = params["evaluate"]["n"], params["evaluate"]["batch_size"]
    style = params["model"]["prompt_style"]
    problems = [json.loads(line) for line in Path(args.problems).read_text().splitlines()]
    prompts = [solve_prompt(p["numbers"], p["target"], style) for p in problems[:args.prompts]]
    torch.set_num_threads(args.threads)
    pair = load_model(args.model)
    runs = [("generate", bs, hf_generate), ("ours", bs, ours)]
    runs += [("ours", int(b), ours) for b in args.batch_sizes.split(",") if b]
    print(f"model={args.model}  {len(prompts)} prompts x n={n}, sampler={sampler}, "
          f"threads={args.threads}, {args.repeats} interleaved rounds (medians)\n")
    ours(pair, prompts[:2], 2, {**sampler, "max_new_tokens": 4}, 4)  # warm-up
    rates: dict[int, list[float]] = {i: [] for i in range(len(runs))}
    tokens: dict[int, int] = {}
    for _ in range(args.repeats):
        for i, (_, b, fn) in enumerate(runs):
            t0 = time.perf_counter()
            tokens[i] = fn(pair, prompts, n, sampler, b)
            rates[i].append(tokens[i] / (time.perf_counter() - t0))
    base = statistics.median(rates[0])
    header = f"{'implementation':<16} {'batch':>6} {'tokens':>8} {'tokens/s':>9} {'speed-up':>9}"
    print(header)
    print("-" * len(header))
    for i, (name, b, _) in enumerate(runs):
        r = statistics.median(rates[i])
        print(f"{name:<16} {b:>6} {tokens[i]:>8} {r:>9.0f} {r / base:>8.2f}x"
              f"  (rounds: {', '.join(f'{x:.0f}' for x in rates[i])})")
    try:
        import vllm  # noqa: F401
    except ImportError:
        print("vllm: not importable here (see README for its own environment)")
    else:  # one run, engine start included
        t0 = time.perf_counter()
        out = generate(ModelRef(args.model), prompts, n, sampler, seed=0, backend="vllm")
        r = sum(s.n_tokens for per in out for s in per) / (time.perf_counter() - t0)
        print(f"{'vllm':<16} {'-':>6} {'-':>8} {r:>9.0f} {r / base:>8.2f}x  (incl. engine start)")


if __name__ == "__main__":
    main()
