"""Sampling throughput at the evaluation geometry: the current sampler (`countdown_rlvr.model.decode`
as `sampling.generate` drives it) against the previous one (the loop frozen in
benchmarks/baseline_decode.py, at the previous batch size and seeding), in one run on the same
prompts.

Geometry (params.yaml): a trained policy (default data/models/sft/r11; an untrained tiny
student if that is missing, whose rows rarely stop before max_new_tokens), test prompts
(data/problems/test.jsonl, else made ones), `evaluate.n` samples each and the `sampler`
section (T 0.6, top-p 0.95, top-k 20, 256 new tokens), at the process's thread count (one per
core). Rows:

  previous, batch 256    the loop before this change as the pipeline ran it: batches of 256
                         (the old `evaluate.batch_size`), uniforms drawn per batch
  previous, batch N      the same loop at the current batch size N (`evaluate.batch_size`)
  current, batch N       what `generate` runs now: one prompt forward per distinct prompt, a
                         KV store reused across batches, uniforms drawn once per call
  hf generate            transformers' `model.generate` at batch N (--with-generate; slow)
  current, batch N,      the current loop on the policy loaded in bfloat16 (`model.dtype:
  bfloat16               bfloat16`; --with-bf16): measured, not the default (other rounding)

They run interleaved (A B C A B C ...) for --repeats rounds and the table shows medians.
Before timing, "same tokens" checks each row against the first on greedy decoding (T 0: the
same tokens whatever the batch size and seeding) and, where the uniforms are the same (the
two rows at batch N), at the evaluation temperature too.

--vocab V: the RL rollout sampler at a large vocabulary instead (V = 151,936 is Qwen2.5's):
a randomly initialised Qwen2 of the tiny student's size but V output tokens (no download;
the tiny tokenizer writes the prompts), the `rloo.sampler` section (T 0.7, no top-k, no
top-p), `rloo.group_size` samples per prompt in batches of `rloo.gen_batch_size`. Rows:

  hf generate            transformers' `model.generate`, sampling as configured: the baseline
  current, ranked draw   our loop with the previous untruncated draw: a topk over the whole
                         vocabulary (a sort of every row, every step), then the inverse CDF
  current                what `generate` runs now: the inverse CDF in vocabulary order

"same tokens" then checks greedy decoding (T 0) of each row against HF generate's.

    python benchmarks/bench_sampling.py [--model data/models/sft/r11] [--prompts 128]
        [--repeats 3] [--with-generate] [--with-bf16]
    python benchmarks/bench_sampling.py --vocab 151936 [--prompts 32] [--max-new-tokens 128]
        [--repeats 3]

tokens/s counts completion tokens up to and including EOS (a sample's n_tokens).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch
import yaml

sys.path.insert(0, str(Path(__file__).parent))
import baseline_decode

from countdown_rlvr.model import decode as decoding
from countdown_rlvr.model.decode import KVStore, decode, decoder_layers
from countdown_rlvr.model.policy import (
    TINY_PRESETS,
    build_tiny,
    build_tokenizer,
    load_model,
    render_prompts,
    tiny_config,
)
from countdown_rlvr.model.sampling import SAMPLER_KEYS, derive_seed, sampler_params
from countdown_rlvr.task.prompts import solve_prompt

PREVIOUS_BATCH = 256  # evaluate.batch_size before this change

ROOT = Path(__file__).resolve().parents[1]


def batches(pair, prompts, n, sp, batch_size, previous: bool, seed=0):
    """(input_ids, attention_mask, u) per batch, as `sampling.generate` builds them: now,
    prompts shortest first and uniforms from one generator per call, row (prompt, sample);
    before, prompts in order and one generator per batch, seeded (seed, batch index). The
    tensors go to the model's device, as `generate` puts them (the tokenizer and the seeded
    CPU generators make them on the CPU: HF generate fails on a CUDA model given those)."""
    model, tok = pair
    device = next(model.parameters()).device
    tok.padding_side = "left"
    rendered = render_prompts(tok, prompts)
    order = range(len(prompts)) if previous else sorted(
        range(len(prompts)), key=[len(x) for x in tok(rendered).input_ids].__getitem__)
    jobs = [(i, j) for i in order for j in range(n)]
    u_all = None if sp.greedy or previous else torch.rand(
        len(jobs), sp.max_new_tokens, generator=torch.Generator().manual_seed(derive_seed(seed, 0)))
    out = []
    for b, start in enumerate(range(0, len(jobs), batch_size)):
        rows = jobs[start:start + batch_size]
        enc = tok([rendered[i] for i, _ in rows], return_tensors="pt", padding=True)
        if sp.greedy:
            u = None
        elif previous:
            gen = torch.Generator().manual_seed(derive_seed(seed, b))
            u = torch.rand(len(rows), sp.max_new_tokens, generator=gen)
        else:
            u = u_all[[i * n + j for i, j in rows]]
        out.append((enc["input_ids"].to(device), enc["attention_mask"].to(device),
                    None if u is None else u.to(device)))
    return out, jobs


def in_order(news: list[torch.Tensor], jobs: list[tuple[int, int]], n: int) -> torch.Tensor:
    """The batches' new ids as one [samples, L] tensor in (prompt, sample) order."""
    flat = torch.cat(news)
    out = torch.empty_like(flat)
    out[[i * n + j for i, j in jobs]] = flat
    return out


_PICK = decoding.pick


def ranked_pick(logits, u, sp, want_logp):
    """`pick` as it was before the untruncated draw went to vocabulary order: every
    non-greedy draw through the ranked path, here a topk over the whole vocabulary."""
    if sp.greedy:
        return _PICK(logits, u, sp, want_logp)
    return decoding._draw_ranked(logits / sp.temperature, u, sp, want_logp)


def run(impl: str, pair, work, sp):
    """[new ids per batch] of one implementation over the batches."""
    model, tok = pair
    eos, pad = [tok.eos_token_id], tok.pad_token_id
    if impl == "previous":
        return [baseline_decode._decode(model, ids, mask, sp, eos, pad, u, False)[0]
                for ids, mask, u in work]
    if impl == "generate":
        return hf_generate(pair, work, sp)
    # the decode loop looks `pick` up in its module at every step: swap in the old draw there
    swap = (contextlib.nullcontext() if impl == "current"
            else mock.patch.object(decoding, "pick", ranked_pick))
    with swap:
        layers, store = decoder_layers(model), KVStore()  # as `generate`: once per call
        return [decode(model, ids, mask, sp, eos, pad, u, False, layers, store)[0]
                for ids, mask, u in work]


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
    how = ({"do_sample": False} if sp.greedy else
           {"do_sample": True, "temperature": sp.temperature, "top_p": sp.top_p, "top_k": sp.top_k})
    out = []
    for ids, mask, _ in work:
        g = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=sp.max_new_tokens,
                           pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **how)
        out.append(g[:, ids.shape[1]:])
    return out


def load(model_arg: str | None):
    path = Path(model_arg) if model_arg else ROOT / "data/models/sft/r11"
    if path.exists():
        return load_model(str(path)), str(path)
    if model_arg:
        sys.exit(f"no model at {path}")
    tmp = tempfile.mkdtemp(prefix="bench-tiny-")
    return load_model(str(build_tiny("student", tmp, seed=0))), "untrained tiny student"


def big_vocab_pair(vocab: int):
    """A randomly initialised Qwen2 of the tiny student's size with `vocab` output tokens
    (Qwen2.5's 151,936: its sampling cost without a download), and the tiny tokenizer, whose
    ids are a subset, for the prompts. On CUDA when there is one, as `load_model`."""
    from transformers import Qwen2ForCausalLM

    tok = build_tokenizer()
    cfg = tiny_config(**TINY_PRESETS["student"], vocab_size=vocab)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    return (model.to("cuda" if torch.cuda.is_available() else "cpu"), tok), \
        f"random-init tiny student, vocabulary {vocab:,}"


def problems(path: Path, count: int) -> list[dict]:
    if path.exists():
        return [json.loads(line) for line in path.read_text().splitlines()][:count]
    rng = random.Random(0)  # made prompts of the test split's shape
    return [{"numbers": [rng.randint(1, 99) for _ in range(3 + i % 2)],
             "target": rng.randint(10, 99)} for i in range(count)]


def timed_table(runs: dict, sp, eos: int, repeats: int, same: dict, base: str, ref: str) -> None:
    """Time `runs` {row: (impl, batches, (model, tok))} interleaved for `repeats` rounds and
    print the medians, each row against the first (`base`) and its checks against `ref`."""
    rates: dict[str, list[float]] = {k: [] for k in runs}
    tokens: dict[str, int] = {}
    for _ in range(repeats):
        for row, (impl, work, policy) in runs.items():
            t0 = time.perf_counter()
            news = run(impl, policy, work, sp)
            dt = time.perf_counter() - t0
            tokens[row] = n_tokens(news, eos)
            rates[row].append(tokens[row] / dt)
    first = statistics.median(rates[next(iter(runs))])
    print(f"| sampler | tokens | tokens/s | vs {base} | same tokens as {ref} |")
    print("| --- | --- | --- | --- | --- |")
    for row in runs:
        r = statistics.median(rates[row])
        check = ", ".join(f"{t}: {'yes' if ok else 'NO'}" for t, ok in same.get(row, {}).items())
        print(f"| {row} | {tokens[row]} | {r:,.0f} | {r / first:.2f}x | {check or '-'} |")


def eval_geometry(args, params) -> None:
    """The evaluation sampler on the policy: the current loop against the previous one."""
    sp = sampler_params({k: params["sampler"][k] for k in SAMPLER_KEYS})
    n, bs = params["evaluate"]["n"], params["evaluate"]["batch_size"]
    style = params["model"]["prompt_style"]
    prompts = [solve_prompt(p["numbers"], p["target"], style)
               for p in problems(Path(args.problems), args.prompts or 128)]
    pair, name = load(args.model)
    pair[0].eval()
    rows = {f"previous, batch {PREVIOUS_BATCH}": ("previous", PREVIOUS_BATCH, True),
            f"previous, batch {bs}": ("previous", bs, False),
            f"current, batch {bs}": ("current", bs, False)}  # (loop, batch size, old batching)
    greedy = sampler_params({**params["sampler"], "temperature": 0})
    same = {}
    for row, (impl, size, per_batch) in rows.items():  # also the warm-up
        same[row] = {}
        for temp, s in (("T 0", greedy), (f"T {sp.temperature:g}", sp)):
            if temp != "T 0" and size != bs:
                continue  # other uniforms: the same distribution (tests), not the same tokens
            (work, jobs), (ref, ref_jobs) = (
                batches(pair, prompts[:max(1, 2 * bs // n)], n, s, b, p)
                for b, p in ((size, per_batch), (bs, False)))
            same[row][temp] = torch.equal(in_order(run(impl, pair, work, s), jobs, n),
                                          in_order(run("previous", pair, ref, s), ref_jobs, n))
    runs = {row: (impl, batches(pair, prompts, n, sp, size, per_batch)[0], pair)
            for row, (impl, size, per_batch) in rows.items()}
    if args.with_generate:
        runs["hf generate"] = ("generate", batches(pair, prompts, n, sp, bs, False)[0], pair)
    if args.with_bf16:
        # the policy as `model.dtype: bfloat16` loads it (the float32 weights rounded once)
        bf16 = (copy.deepcopy(pair[0]).to(torch.bfloat16), pair[1])
        runs[f"current, batch {bs}, bfloat16"] = ("current", runs[f"current, batch {bs}"][1], bf16)
    print(f"model: {name}; {len(prompts)} prompts x n={n}, sampler {sp}, "
          f"{torch.get_num_threads()} threads, {args.repeats} interleaved rounds (medians)\n")
    timed_table(runs, sp, pair[1].eos_token_id, args.repeats, same, "previous pipeline",
                "previous")


def vocab_geometry(args, params) -> None:
    """The RL rollout sampler (no truncation) at a `--vocab`-token vocabulary: our loop with
    the draw in vocabulary order and with the previous ranked draw, against HF generate."""
    rl = params["rloo"]
    sp = sampler_params({k: rl["sampler"][k] for k in SAMPLER_KEYS}, args.max_new_tokens)
    n, bs = rl["group_size"], rl["gen_batch_size"]
    pair, name = big_vocab_pair(args.vocab)
    prompts = [solve_prompt(p["numbers"], p["target"], params["model"]["prompt_style"])
               for p in problems(Path(args.problems), args.prompts or rl["prompts_per_step"])]
    rows = {"hf generate": "generate", "current, ranked draw (before)": "ranked",
            "current": "current"}
    greedy = sampler_params({**rl["sampler"], "temperature": 0}, args.max_new_tokens)
    check = batches(pair, prompts[:max(1, bs // n)], n, greedy, bs, False)[0]  # one batch
    ref = torch.cat(run("generate", pair, check, greedy))
    same = {row: {"T 0": torch.equal(torch.cat(run(impl, pair, check, greedy)), ref)}
            for row, impl in rows.items() if impl != "generate"}  # also the warm-up
    work = batches(pair, prompts, n, sp, bs, False)[0]
    runs = {f"{row}, batch {bs}": (impl, work, pair) for row, impl in rows.items()}
    same = {f"{row}, batch {bs}": v for row, v in same.items()}
    print(f"model: {name}; {len(prompts)} prompts x n={n}, sampler {sp}, "
          f"{torch.get_num_threads()} threads, {args.repeats} interleaved rounds (medians)\n")
    timed_table(runs, sp, pair[1].eos_token_id, args.repeats, same, "hf generate", "hf generate")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--problems", default=str(ROOT / "data/problems/test.jsonl"))
    ap.add_argument("--prompts", type=int, default=None,
                    help="first N test problems (default 128; with --vocab rloo.prompts_per_step)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--with-generate", action="store_true", help="also time HF generate")
    ap.add_argument("--with-bf16", action="store_true", help="also time the bfloat16 policy")
    ap.add_argument("--vocab", type=int, default=None,
                    help="the rollout sampler on a random-init model of this vocabulary size")
    ap.add_argument("--max-new-tokens", type=int, default=None,
                    help="with --vocab: instead of rloo.sampler's")
    args = ap.parse_args()
    params = yaml.safe_load(Path(args.params).read_text())
    if args.vocab:
        vocab_geometry(args, params)
    else:
        eval_geometry(args, params)


if __name__ == "__main__":
    main()
