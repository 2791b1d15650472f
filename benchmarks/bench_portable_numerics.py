"""Portable numerics, measured (not adopted): which settings make training bit-identical
across CPU kinds, and what they cost.

Float sums round differently with other vector instructions, so the same code and params
train a different model on an AVX-512 machine than on an AVX2 one. This script runs the
`base` stage's training (params.yaml `base`, its first --steps optimizer steps) in fresh
processes under several settings and compares their per-step losses bit for bit, and their
wall time, with the default settings:

  default            what `dvc repro` does
  portable/<cap>     ATEN_CPU_CAPABILITY=<cap> (PyTorch's own kernels use that instruction
                     set), MKL_CBWR=COMPATIBLE (MKL's conditional bitwise reproducibility:
                     one code path on every CPU), ONEDNN_MAX_CPU_ISA=SSE41, and a fixed
                     thread count (OMP/MKL_NUM_THREADS=--threads)

Two portable runs with different capabilities (`default` = no vector kernels, `avx2`) that
give identical losses show the settings pin the arithmetic on this machine; the slow-down
column is what that costs.

    python benchmarks/bench_portable_numerics.py [--steps 200] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs in a fresh process (these variables are read when torch/MKL load): the base stage's
# own pre-training code on params.yaml's `base` section, cut to `steps` steps.
CHILD = r"""
import dataclasses, json, sys, time, yaml
from countdown_rlvr.core.config import Model, from_section
from countdown_rlvr.core.pretrain_config import Base
from countdown_rlvr.model.policy import new_tiny, pretraining_corpus
from countdown_rlvr.train.sft import train_sft
import torch
params = yaml.safe_load(open(sys.argv[1]))
steps = int(sys.argv[2])
model_cfg = from_section(Model, "base", params, "model")
cfg = dataclasses.replace(from_section(Base, "base", params, "base"), max_steps=steps,
                          time_budget_s=None, log_every=10**9)
model, tok = new_tiny(model_cfg.tiny_preset, model_cfg.seed)
docs = pretraining_corpus(cfg.corpus_size, seed=cfg.seed, facts_frac=cfg.facts_frac)

class Live:  # collects the per-step losses train_sft logs
    losses = []
    def log_metric(self, name, value, **_):
        if name.endswith("loss"):
            self.losses.append(float(value))
    def next_step(self): pass
    def end(self): pass

live, stats = Live(), {}
t0 = time.perf_counter()
train_sft(model, tok, [("", d) for d in docs], cfg, live=live, stats=stats)
print(json.dumps({"seconds": time.perf_counter() - t0, "losses": live.losses,
                  "threads": torch.get_num_threads(),
                  "capability": torch.backends.cpu.get_cpu_capability()}))
"""


def portable(cap: str, threads: int) -> dict[str, str]:
    return {"ATEN_CPU_CAPABILITY": cap, "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41",
            "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def run(env_extra: dict[str, str], params: str, steps: int) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(CHILD)
        proc = subprocess.run([sys.executable, str(script), params, str(steps)], cwd=tmp,
                              env={**env, **env_extra}, capture_output=True, text=True,
                              check=False)
    if proc.returncode:
        sys.exit(f"child failed ({env_extra}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2, help="the portable runs' fixed thread count")
    args = ap.parse_args()
    settings = {"default": {}, "portable/default": portable("default", args.threads),
                "portable/avx2": portable("avx2", args.threads)}
    results = {name: run(env, args.params, args.steps) for name, env in settings.items()}
    ref, base_s = results["portable/default"]["losses"], results["default"]["seconds"]
    print(f"base stage, first {args.steps} steps (params: {args.params})\n")
    header = (f"{'setting':<18} {'kernels':>8} {'threads':>7} {'loss@1':>9} "
              f"{f'loss@{args.steps}':>9} {'= portable/default':>18} {'seconds':>8} {'slow-down':>9}")
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        same = r["losses"] == ref
        first_diff = next((i + 1 for i, (a, b) in enumerate(zip(r["losses"], ref)) if a != b), None)
        verdict = "identical" if same else f"from step {first_diff}"
        print(f"{name:<18} {r['capability']:>8} {r['threads']:>7} {r['losses'][0]:>9.6f} "
              f"{r['losses'][-1]:>9.6f} {verdict:>18} {r['seconds']:>8.1f} "
              f"{r['seconds'] / base_s:>8.2f}x")


if __name__ == "__main__":
    main()
