"""Peak extra memory and time: naive log_softmax + gather vs chunked `token_logprobs`.

Qwen2.5 vocabulary (151,936) and a 1,024-token batch: the fp32 logits alone are ~622 MB.
What matters is the memory each method needs ON TOP of the logits. On a GPU this reads
torch.cuda.max_memory_allocated; on a CPU each case runs in a fresh process and compares
the peak RSS (ru_maxrss) after the logits exist with the peak after the method ran.

    python benchmarks/bench_logprobs.py [--tokens 1024] [--vocab 151936]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch

from countdown_rlvr.model.logprobs import token_entropy, token_logprobs

MB = 2**20


def naive(logits, labels):
    return torch.log_softmax(logits.float(), -1).gather(-1, labels[..., None]).squeeze(-1)


def naive_entropy(logits):
    logp = torch.log_softmax(logits.float(), -1)
    return -(logp.exp() * logp).sum(-1)


METHODS = {
    "naive log_softmax+gather": naive,
    "chunked token_logprobs": lambda x, y: token_logprobs(x, y),
    "naive entropy": lambda x, y: naive_entropy(x),
    "chunked token_entropy": lambda x, y: token_entropy(x),
}


def _peak_bytes(device) -> int:
    if device == "cuda":
        return torch.cuda.max_memory_allocated()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def worker(method: str, backward: bool, dtype: str, tokens: int, vocab: int, device: str) -> dict:
    fn = METHODS[method]
    dt = getattr(torch, dtype)
    fn(torch.randn(1, 4, vocab, dtype=dt, device=device), torch.zeros(1, 4, dtype=torch.long,
                                                                     device=device))  # warm-up
    logits = torch.randn(1, tokens, vocab, dtype=dt, device=device, requires_grad=backward)
    labels = torch.randint(0, vocab, (1, tokens), device=device)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    base = _peak_bytes(device)
    t0 = time.perf_counter()
    if backward:
        fn(logits, labels).sum().backward()
    else:
        with torch.no_grad():
            fn(logits, labels)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    extra = _peak_bytes(device) - base
    size = logits.numel() * logits.element_size() / MB
    # backward must return d loss / d logits, a logits-sized tensor whatever the method
    return {"extra_mb": extra / MB, "seconds": seconds, "logits_mb": size,
            "beyond_grad_mb": extra / MB - (size if backward else 0.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=151_936)
    ap.add_argument("--worker", nargs=3, metavar=("METHOD", "BACKWARD", "DTYPE"))
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.worker:
        method, bwd, dtype = args.worker
        print(json.dumps(worker(method, bwd == "1", dtype, args.tokens, args.vocab, device)))
        return

    how = "CUDA allocator" if device == "cuda" else "fresh process per row, ru_maxrss"
    print(f"device={device}  batch=1 x {args.tokens} tokens  vocab={args.vocab:,}  "
          f"(extra = peak memory on top of the logits tensor; {how})\n")
    header = (f"{'method':<26} {'pass':<8} {'dtype':<9} {'logits MB':>9} {'extra MB':>9} "
              f"{'excl. grad':>10} {'seconds':>8}")
    print(header)
    print("-" * len(header))
    cases = [(d, b) for d in ("float32", "bfloat16") for b in (False, True)]
    pairs = [("naive log_softmax+gather", "chunked token_logprobs"),
             ("naive entropy", "chunked token_entropy")]
    ratios = []
    for naive_name, chunked_name in pairs:
        for dtype, bwd in cases:
            res = {}
            for name in (naive_name, chunked_name):
                cmd = [sys.executable, __file__, "--tokens", str(args.tokens), "--vocab",
                       str(args.vocab), "--worker", name, str(int(bwd)), dtype]
                r = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                              text=True).stdout.strip().splitlines()[-1])
                res[name] = r
                print(f"{name:<26} {'fwd+bwd' if bwd else 'fwd':<8} {dtype:<9} "
                      f"{r['logits_mb']:>9.0f} {r['extra_mb']:>9.0f} {r['beyond_grad_mb']:>10.0f} "
                      f"{r['seconds']:>8.2f}")
            key = "beyond_grad_mb"  # == extra_mb for forward-only
            ratio = res[naive_name][key] / max(res[chunked_name][key], 1.0)
            ratios.append((naive_name.split()[-1], dtype, bwd, ratio))
            print(f"{'  -> naive / chunked (excl. grad)':<55}{ratio:>19.1f}x")
    print("\nsummary: naive / chunked extra memory, excluding the logits-sized gradient that")
    print("backward returns either way:")
    for what, dtype, bwd, ratio in ratios:
        print(f"  {what:<18} {dtype:<9} {'fwd+bwd' if bwd else 'fwd':<8} {ratio:5.1f}x")


if __name__ == "__main__":
    main()
