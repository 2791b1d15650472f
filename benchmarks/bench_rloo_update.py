"""One RLOO update (reference forward + policy forward/backward) on real rollouts, at the default
step geometry: 32 prompts x 8 rollouts at T 0.7. The whole batch in one forward, padded to the
step's longest completion (the baseline), against length-sorted micro-batches, each cut to its
own longest completion (`train.rloo.micro_batches`). Both accumulate the same gradient
(tests/test_rloo.py); the difference is the padding they compute.

    python benchmarks/bench_rloo_update.py [--model data/models/sft/r11] [--micro-batches 32,64,128]

Without --model a randomly initialised tiny student is built (it never emits EOS: every
rollout runs to max_new_tokens, so there is no length spread and nothing to gain).
"""

from __future__ import annotations

import argparse
import copy
import random
import tempfile
import time

import torch

from countdown_rlvr.core.config import from_section
from countdown_rlvr.core.io import load_params
from countdown_rlvr.core.rl_config import RL
from countdown_rlvr.model.policy import build_tiny, load_model
from countdown_rlvr.model.sampling import generate
from countdown_rlvr.task.prompts import solve_prompt
from countdown_rlvr.train.rloo import (
    _loss,
    _Sums,
    micro_batches,
    pack_rollouts,
    reference_logprobs,
    rollout_temperature,
)


def rollouts(model, tok, n_prompts: int, group: int, max_new: int):
    rng = random.Random(0)
    prompts = [solve_prompt([rng.randint(1, 99) for _ in range(3)], rng.randint(1, 99), "tiny")
               for _ in range(n_prompts)]
    samples = generate((model, tok), prompts, group, {"temperature": 0.7}, seed=0,
                       max_new_tokens=max_new, return_logprobs=True, batch_size=256,
                       progress=False)
    return pack_rollouts(tok, prompts, samples, model.device)  # on the model's device


def update_seconds(model, ref, ro, cfg, size, repeats: int) -> float:
    adv = torch.randn(ro.mask.shape[0], generator=torch.Generator().manual_seed(0)).to(ro.mask.device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        chunks = micro_batches(ro.mask.sum(-1), size)
        ref_logp = reference_logprobs(ref, ro, chunks, rollout_temperature(cfg))
        for c in chunks:
            _loss(model, ro, c, adv, ref_logp, None, cfg, _Sums()).backward()
        model.zero_grad(set_to_none=True)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="a trained model dir (default: a random tiny student)")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--micro-batches", default="32,64,128")
    ap.add_argument("--repeats", type=int, default=3, help="best of N timings per row")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    path = args.model or str(build_tiny("student", tempfile.mkdtemp() + "/m", seed=0))
    model, tok = load_model(path)
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    model.train()
    cfg = from_section(RL, "bench", load_params(), "rloo")  # the loss terms of the rloo stage
    ro = rollouts(model, tok, args.prompts, args.group, args.max_new_tokens)
    lengths = ro.mask.sum(-1)
    B = len(lengths)
    print(f"{B} rollouts, completion length mean {lengths.float().mean():.1f}, max "
          f"{int(lengths.max())}; {torch.get_num_threads()} thread(s), best of {args.repeats}")
    print("| micro-batch | completion columns computed | seconds per update | speed-up |")
    print("| --- | --- | --- | --- |")
    base = None
    for size in [None, *(int(x) for x in args.micro_batches.split(","))]:
        chunks = micro_batches(lengths, size)
        cols = sum(int(lengths[c].max()) * len(lengths[c]) for c in chunks)
        s = update_seconds(model, ref, ro, cfg, size, args.repeats)
        base = base or s
        name = "whole batch (baseline)" if size is None else str(size)
        print(f"| {name} | {cols} ({cols / int(lengths.sum()):.2f}x the tokens) | {s:.2f} | "
              f"{base / s:.2f}x |")


if __name__ == "__main__":
    main()
