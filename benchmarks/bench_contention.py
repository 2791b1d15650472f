"""How much a stage slows down when another CPU-bound process shares the machine.

A fixed training-shaped workload (forward + backward of the tiny student on 32 x 128-token
sequences, the RLOO update's geometry) and a sampling workload (the evaluation sampler) run
in a fresh process per thread setting, once on an otherwise idle machine and once next to
one competing busy-loop process (`python -c "while True: pass"`), so both are measured side
by side in one run:

    python benchmarks/bench_contention.py [--repeats 3]

The likely failure it measures: torch's OpenMP threads spin-wait at every parallel region
for the slowest thread, and with a competing process one of them is often descheduled, so
every region waits a scheduler time slice. Every stage sets its environment before torch
loads (countdown_rlvr.core.stage_env), picking sleeping waits when the cores are shared as it
starts (third row);
`model.threads` (params.yaml) is the other knob.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

WORKLOAD = r"""
import json, os, sys, tempfile, time
if os.environ.pop("BENCH_PACKAGE_FIRST", None):
    from countdown_rlvr.core.stage_env import stage_env  # as a stage starts, before torch
    os.environ.update(stage_env())
import torch
from countdown_rlvr.model.policy import build_tiny, load_model
from countdown_rlvr.model.sampling import generate
from countdown_rlvr.task.prompts import solve_prompt
threads, repeats = int(sys.argv[1]), int(sys.argv[2])
if threads:
    torch.set_num_threads(threads)
model, tok = load_model(str(build_tiny("student", tempfile.mkdtemp() + "/m", seed=0)))
x = torch.randint(0, model.config.vocab_size, (32, 128), generator=torch.Generator().manual_seed(0)).to(model.device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
prompts = [solve_prompt([3 + i % 7, 11 + i % 13, 5], 40 + i, "tiny") for i in range(16)]
def train():
    for _ in range(3):
        model(input_ids=x, labels=x).loss.backward(); opt.step(); opt.zero_grad()
def sample():
    generate((model, tok), prompts, 8, {"temperature": 0.6, "top_p": 0.95, "top_k": 20},
             seed=0, max_new_tokens=48, batch_size=128, progress=False)
out = {}
for name, fn in (("train", train), ("sample", sample)):
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter(); fn(); times.append(time.perf_counter() - t0)
    out[name] = sorted(times)[len(times) // 2]
print(json.dumps(out))
"""

SETTINGS = {  # name -> (torch threads (0 = torch's default: one per core), extra env)
    "2 threads, torch alone (spin-waits)": (0, {}),
    "2 threads, OMP_WAIT_POLICY=PASSIVE": (0, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "2 threads, as the stages run (stage_env first)": (0, {"BENCH_PACKAGE_FIRST": "1"}),
    "1 thread (model.threads: 1)": (1, {}),
}


def measure(threads: int, env: dict, repeats: int, competitor: bool) -> dict:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if competitor else None
    try:
        time.sleep(0.5 if busy else 0)
        proc = subprocess.run([sys.executable, "-c", WORKLOAD, str(threads), str(repeats)],
                              env={**os.environ, **env}, capture_output=True, text=True, check=True)
    finally:
        if busy:
            busy.kill()
            busy.wait()
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="median of N timings per cell")
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPUs; median of {args.repeats}; seconds per workload\n")
    print("| setting | workload | idle s | with 1 busy process s | slowdown |")
    print("| --- | --- | --- | --- | --- |")
    for name, (threads, env) in SETTINGS.items():
        idle = measure(threads, env, args.repeats, competitor=False)
        shared = measure(threads, env, args.repeats, competitor=True)
        for work in idle:
            print(f"| {name} | {work} | {idle[work]:.2f} | {shared[work]:.2f} | "
                  f"{shared[work] / idle[work]:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
