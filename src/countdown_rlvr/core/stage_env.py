"""The environment a stage sets for torch before it loads it: OpenMP's wait policy, 2 MB
pages, and a fixed thread count for MKL and OpenMP. Every stage script starts with
`os.environ.update(stage_env())`, ahead of its imports that load torch (OpenMP, MKL and
PyTorch read these once, as they load); importing this module sets nothing.

The wait policy and the pages change timing only. The thread settings are what keep the
result independent of timing: left dynamic (MKL's default), MKL may decide at run time to
run a matmul on fewer threads than it was given, and a product split over another number of
threads sums in another order (other last bits, which training amplifies). Fixed, as Intel's
conditions for run-to-run reproducibility ask, the thread count cannot follow the load or the
wait policy (docs/design.md, "The same bytes whatever the load").
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping


def shared_cores() -> bool:
    """True when another process is runnable right now: /proc/loadavg's running count
    (which includes this process) stays above 1 over ~0.1 s. Linux only; else False."""
    try:
        counts = []
        for _ in range(5):
            with open("/proc/loadavg") as f:
                counts.append(int(f.read().split()[3].split("/")[0]))
            time.sleep(0.02)
    except (OSError, ValueError, IndexError):
        return False
    return min(counts) > 1


def stage_env(environ: Mapping[str, str] = os.environ,
              shared: Callable[[], bool] = shared_cores) -> dict[str, str]:
    """The variables to set before torch loads, given the current `environ`; a value already
    there wins (an explicit OMP_WAIT_POLICY, THP_MEM_ALLOC_ENABLE, MKL_DYNAMIC or OMP_DYNAMIC
    is kept)."""
    out = {}
    # torch's OpenMP threads spin-wait for each other at every parallel region. On idle cores
    # that is the fastest choice; with a competing CPU-bound process one thread is often
    # descheduled and the rest spin a whole time slice: a stage ran 3-17x slower
    # (benchmarks/bench_contention.py). Sleeping waits (PASSIVE) cap that near 2x but cost
    # 1.2-1.9x on idle cores, so they are chosen only when the cores are shared as the stage
    # starts.
    if "OMP_WAIT_POLICY" not in environ and shared():
        out["OMP_WAIT_POLICY"] = "PASSIVE"
    # Large CPU tensors (the sampler's KV cache, training activations) in 2 MB pages: fresh
    # memory is faulted in 512x fewer times (a KV-cache compaction into new memory ran 2.4x
    # faster, an SFT step ~8%). PyTorch reads this when it loads.
    if "THP_MEM_ALLOC_ENABLE" not in environ:
        out["THP_MEM_ALLOC_ENABLE"] = "1"
    # MKL (torch's matmuls) starts with MKL_DYNAMIC on: it may use fewer threads than asked,
    # a choice made at run time, so a gemm's summation order (its last bits) could follow the
    # load. torch.set_num_threads turns it off (model.threads set, or N processes); the
    # default thread count (model.threads null) did not. Off, and OpenMP's own dynamic
    # adjustment off too: MKL's conditions for the same result run to run. Each thread count
    # stays what it was on idle cores, so the results there are unchanged.
    for name in ("MKL_DYNAMIC", "OMP_DYNAMIC"):
        if name not in environ:
            out[name] = "FALSE"
    return out
