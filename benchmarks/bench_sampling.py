"""Sampling throughput at the evaluation geometry: the current decode loop
(`countdown_rlvr.decode`, what `sampling.generate` runs) against the previous one, frozen in
benchmarks/baseline_decode.py, side by side in one run on the same prompts and uniforms.

Geometry (params.yaml): a trained policy (default data/models/sft/r0; an untrained tiny
student if that is missing, whose rows rarely stop before max_new_tokens), test prompts
(data/problems/test.jsonl, else made ones), `evaluate.n` samples each, the `sampler`
section (T 0.6, top-p 0.95, top-k 20, 256 new tokens) and `evaluate.batch_size`, at the
process's thread count (one per core). Rows:

  baseline          the previous loop (module calls, SDPA per decode step), whole batch
  decode            the current loop (fused projections, inlined norms, decode attention
                    as two matmuls): what `generate` runs
  hf generate       transformers' `model.generate` (--with-generate; slow)

They run interleaved (A B C A B C ...) for --repeats rounds and the table shows medians.
Before timing, each current row is checked against the baseline on the same uniforms, at
the evaluation temperature and at temperature 0: "same tokens" must say yes.

    python benchmarks/bench_sampling.py [--model data/models/sft/r0] [--prompts 64]
        [--repeats 3] [--with-generate]

tokens/s counts completion tokens up to and including EOS (a sample's n_tokens).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).parent))
import baseline_decode

from countdown_rlvr.decode import decode, decoder_layers
from countdown_rlvr.model import build_tiny, load_model, render_prompts
from countdown_rlvr.sampling import SAMPLER_KEYS, derive_seed, sampler_params
from countdown_rlvr.task.prompts import solve_prompt

ROOT = Path(__file__).resolve().parents[1]


def batches(pair, prompts, n, sp, batch_size, seed=0):
    """(input_ids, attention_mask, u) per batch, exactly as `sampling.generate` builds them."""
    _, tok = pair
    tok.padding_side = "left"
    jobs = [p for p in prompts for _ in range(n)]
    out = []
    for b, start in enumerate(range(0, len(jobs), batch_size)):
        rows = jobs[start:start + batch_size]
        enc = tok(render_prompts(tok, rows), return_tensors="pt", padding=True)
        gen = torch.Generator().manual_seed(derive_seed(seed, b))
        u = None if sp.greedy else torch.rand(len(rows), sp.max_new_tokens, generator=gen)
        out.append((enc["input_ids"], enc["attention_mask"], u))
    return out


def run(fn, pair, work, sp):
    """[all new ids] of `fn` over the batches; fn(model, ids, mask, sp, eos, pad, u, lp, layers)."""
    model, tok = pair
    layers = decoder_layers(model)
    return [fn(model, ids, mask, sp, [tok.eos_token_id], tok.pad_token_id, u, False, layers)[0]
            for ids, mask, u in work]


IMPLEMENTATIONS = {
    "baseline": lambda m, i, a, sp, e, p, u, lp, layers: baseline_decode._decode(m, i, a, sp, e, p, u, lp),
    "decode": decode,
}


def n_tokens(news, eos: int) -> int:
    """Completion tokens up to and including the first EOS, summed over rows."""
    total = 0
    for new in news:
        ended = (new == eos).int().cumsum(1)
        total += int(((ended == 0) | ((ended == 1) & (new == eos))).sum())
    return total


@torch.no_grad()
def hf_generate(pair, work, sp) -> list[torch.Tensor]:
    """transformers' `generate` with the same sampler on the same batches (its own RNG)."""
    model, tok = pair
    torch.manual_seed(0)
    out = []
    for ids, mask, _ in work:
        g = model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                           max_new_tokens=sp.max_new_tokens, temperature=sp.temperature,
                           top_p=sp.top_p, top_k=sp.top_k, pad_token_id=tok.pad_token_id,
                           eos_token_id=tok.eos_token_id)
        out.append(g[:, ids.shape[1]:])
    return out


def load(model_arg: str | None):
    path = Path(model_arg) if model_arg else ROOT / "data/models/sft/r0"
    if path.exists():
        return load_model(str(path)), str(path)
    if model_arg:
        sys.exit(f"no model at {path}")
    tmp = tempfile.mkdtemp(prefix="bench-tiny-")
    return load_model(str(build_tiny("student", tmp, seed=0))), "untrained tiny student"


def problems(path: Path, count: int) -> list[dict]:
    if path.exists():
        return [json.loads(line) for line in path.read_text().splitlines()][:count]
    rng = random.Random(0)  # made prompts of the test split's shape
    return [{"numbers": [rng.randint(1, 99) for _ in range(3 + i % 2)],
             "target": rng.randint(10, 99)} for i in range(count)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--problems", default=str(ROOT / "data/problems/test.jsonl"))
    ap.add_argument("--prompts", type=int, default=64, help="first N test problems")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--with-generate", action="store_true", help="also time HF generate")
    args = ap.parse_args()

    params = yaml.safe_load(Path(args.params).read_text())
    sp = sampler_params({k: params["sampler"][k] for k in SAMPLER_KEYS})
    n, bs = params["evaluate"]["n"], params["evaluate"]["batch_size"]
    style = params["model"]["prompt_style"]
    prompts = [solve_prompt(p["numbers"], p["target"], style)
               for p in problems(Path(args.problems), args.prompts)]
    pair, name = load(args.model)
    pair[0].eval()
    eos = pair[1].eos_token_id
    work = batches(pair, prompts, n, sp, bs)
    greedy = sampler_params({**params["sampler"], "temperature": 0})
    work0 = batches(pair, prompts[:max(1, bs // n)], n, greedy, bs)  # one batch at T 0
    same = {}
    for impl, fn in IMPLEMENTATIONS.items():  # also the warm-up
        same[impl] = all(torch.equal(a, b) for w, s in ((work, sp), (work0, greedy))
                         for a, b in zip(run(fn, pair, w, s),
                                         run(IMPLEMENTATIONS["baseline"], pair, w, s)))
    runs = dict(IMPLEMENTATIONS)
    if args.with_generate:
        runs["hf generate"] = None
    print(f"model: {name}; {len(prompts)} prompts x n={n}, batch {bs}, sampler {sp}, "
          f"{torch.get_num_threads()} threads, {args.repeats} interleaved rounds (medians)\n")
    rates: dict[str, list[float]] = {k: [] for k in runs}
    tokens: dict[str, int] = {}
    for _ in range(args.repeats):
        for impl, fn in runs.items():
            t0 = time.perf_counter()
            news = hf_generate(pair, work, sp) if fn is None else run(fn, pair, work, sp)
            dt = time.perf_counter() - t0
            tokens[impl] = n_tokens(news, eos)
            rates[impl].append(tokens[impl] / dt)
    base = statistics.median(rates["baseline"])
    header = (f"{'implementation':<16} {'tokens':>8} {'tokens/s':>9} {'vs baseline':>11} "
              f"{'same tokens':>11}")
    print(header)
    print("-" * len(header))
    for impl in runs:
        r = statistics.median(rates[impl])
        print(f"{impl:<16} {tokens[impl]:>8} {r:>9.0f} {r / base:>10.2f}x "
              f"{('yes' if same[impl] else 'NO') if impl in same else '-':>11}"
              f"  (rounds: {', '.join(f'{x:.0f}' for x in rates[impl])})")


if __name__ == "__main__":
    main()
