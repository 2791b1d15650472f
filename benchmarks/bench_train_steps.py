"""Training throughput, today's settings vs the current ones, in one run on one machine:
tokens/s of an SFT step and of an RLOO update (rollout tokens per second of the update).

    python benchmarks/bench_train_steps.py [--model data/models/sft/r11] [--rounds 3]

  sft step      `train.sft`'s step (forward, completion NLL, backward, clip, AdamW) on
                length-grouped batches of data/sft/train.jsonl (batch `sft.batch_size`)
  rloo update   `train.rloo.update` on real rollouts of the policy: `rloo.prompts_per_step` train
                problems x `rloo.group_size` at the rollout sampler, binary reward, the
                reference forward for the KL term included; several steps' rollouts, so the
                share of flat (zero-std) groups is the policy's own

Settings compared (each in fresh processes, rounds interleaved, medians):
  before   THP_MEM_ALLOC_ENABLE=0 (4 KB pages), every rollout row in the update
           (`rloo.zero_std_keep: 1`): the code before this benchmark's changes
  now      2 MB pages for large tensors (what `countdown_rlvr` sets) and params.yaml's
           `rloo.zero_std_keep` (a seeded share of the flat groups, weighted 1/keep)
  bf16     "now" with `model.dtype: bfloat16`, as a stage runs it: weights loaded in
           bfloat16, forwards under accelerate's bf16 mixed precision (autocast).
           Measured, not the default: it rounds differently (other trained numbers), and
           CPUs without AVX512-BF16/AMX emulate it
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {"before": {"THP_MEM_ALLOC_ENABLE": "0", "keep": 1.0, "dtype": "float32"},
            "now": {"THP_MEM_ALLOC_ENABLE": "1", "keep": None, "dtype": "float32"},
            "bf16": {"THP_MEM_ALLOC_ENABLE": "1", "keep": None, "dtype": "bfloat16"}}
# keep None: params.yaml's rloo.zero_std_keep


def worker(model_dir: str, keep: float | None, dtype: str, steps: int) -> dict:
    """One process: (tokens, seconds) of `steps` SFT steps and of 4 RLOO updates. The models
    go through `accelerator.prepare_model`, as in the stages: under `model.dtype: bfloat16`
    that runs their forwards under bfloat16 autocast, outputs cast back to float32."""
    import dataclasses
    import random

    import torch

    from countdown_rlvr.core.config import from_section
    from countdown_rlvr.core.io import load_params, read_jsonl
    from countdown_rlvr.core.rl_config import RL
    from countdown_rlvr.core.train_config import SFTStage
    from countdown_rlvr.model.policy import configure, load_model
    from countdown_rlvr.train import runtime
    from countdown_rlvr.train.losses import completion_nll
    from countdown_rlvr.train.rloo import _Sums, step_rollouts, update
    from countdown_rlvr.train.sft import collate, sft_rows

    params = load_params()
    configure({**params, "model": {**params["model"], "dtype": dtype}})  # as load_stage
    out = {}
    # SFT: the stage's batches (length-grouped, seeded), one optimizer step each
    sft = from_section(SFTStage, "bench", params, "sft")
    model, tok = load_model(model_dir)
    model = runtime.setup_run(sft.batch_size, sft.seed).prepare_model(model.train())
    examples = [(r["prompt"], r["completion"]) for r in read_jsonl(ROOT / "data/sft/train.jsonl")]
    rows, _ = sft_rows(tok, examples[: sft.batch_size * (steps + 2)], sft)
    order = list(runtime.SeededShuffle(len(rows), 0, [len(r[0]) for r in rows], sft.batch_size))
    batches = [collate([rows[i] for i in order[j:j + sft.batch_size]], tok.pad_token_id)
               for j in range(0, len(order) - sft.batch_size + 1, sft.batch_size)]
    opt = runtime.adamw(model, sft)
    tokens, seconds = 0, 0.0
    for n, b in enumerate(batches[:steps + 2]):
        t0 = time.perf_counter()
        nll = completion_nll(model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                                   use_cache=False).logits, b["input_ids"], b["completion_mask"])
        nll.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), float(sft.grad_clip))
        opt.step()
        opt.zero_grad(set_to_none=True)
        if n >= 2:  # the first two are warm-up
            seconds += time.perf_counter() - t0
            tokens += int(b["attention_mask"].sum())
    out["sft step"] = (tokens, seconds)
    # RLOO: the stage's update on real rollouts of the policy, from a fresh copy each step
    cfg = from_section(RL, "bench", params, "rloo")
    if keep is not None:
        cfg = dataclasses.replace(cfg, zero_std_keep=keep)
    problems = read_jsonl(ROOT / "data/problems/train.jsonl")
    policy, tok = load_model(model_dir)
    ref, _ = load_model(model_dir)
    ref.eval().requires_grad_(False)
    accelerator = runtime.setup_run(cfg.prompts_per_step, cfg.seed)
    policy = accelerator.prepare_model(policy)
    tokens, seconds, flat = 0, 0.0, 0.0
    for step in range(4):
        chosen = random.Random(step).sample(problems, cfg.prompts_per_step)
        ro, sums, adv, _ = step_rollouts(policy, tok, chosen, cfg, step, accelerator, "tiny", False)
        model = policy.train()
        opt = runtime.adamw(model, cfg)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        t0 = time.perf_counter()
        update(accelerator, model, opt, ro, adv, ref, None, cfg, _Sums())
        seconds += time.perf_counter() - t0
        tokens += int(ro.mask.sum())
        flat += sums.v["zero_std_frac"][0] / sums.v["zero_std_frac"][1] / 4
        model.load_state_dict(state)  # every step's rollouts come from the same policy
    out["rloo update"] = (tokens, seconds)
    out["flat"] = flat
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default=str(ROOT / "data/models/sft/r11"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sft-steps", type=int, default=30)
    ap.add_argument("--worker", choices=SETTINGS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        s = SETTINGS[args.worker]
        print(json.dumps(worker(args.model, s["keep"], s["dtype"], args.sft_steps)))
        return
    if not Path(args.model).exists():
        sys.exit(f"no model at {args.model}: run `dvc repro sft@19` first (or pass --model)")
    rates: dict[tuple[str, str], list[float]] = {}
    flat = []
    for _ in range(args.rounds):
        for name, s in SETTINGS.items():
            env = {**os.environ, "THP_MEM_ALLOC_ENABLE": s["THP_MEM_ALLOC_ENABLE"]}
            res = json.loads(subprocess.run(
                [sys.executable, __file__, "--worker", name, "--model", args.model,
                 "--sft-steps", str(args.sft_steps)], env=env, cwd=ROOT, check=True,
                capture_output=True, text=True).stdout.splitlines()[-1])
            flat.append(res.pop("flat"))
            for what, (tokens, seconds) in res.items():
                rates.setdefault((what, name), []).append(tokens / seconds)
    print(f"model {args.model}; {args.rounds} interleaved rounds, medians; share of flat "
          f"groups in the RLOO batches: {statistics.mean(flat):.2f}\n")
    print("| step | before tokens/s | now tokens/s | speed-up | bf16 tokens/s | bf16 vs now |")
    print("| --- | --- | --- | --- | --- | --- |")
    for what in ("sft step", "rloo update"):
        b, n, h = (statistics.median(rates[(what, k)]) for k in SETTINGS)
        print(f"| {what} | {b:,.0f} | {n:,.0f} | {n / b:.2f}x | {h:,.0f} | {h / n:.2f}x |")


if __name__ == "__main__":
    main()
