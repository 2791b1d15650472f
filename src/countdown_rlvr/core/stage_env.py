"""The environment a stage sets for torch before it loads it: OpenMP's wait policy and 2 MB
pages. Every stage script starts with `os.environ.update(stage_env())`, ahead of its imports
that load torch (OpenMP and PyTorch read these once, as they load); importing this module
sets nothing. Both change timing only, never a result.
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
    there wins (an explicit OMP_WAIT_POLICY or THP_MEM_ALLOC_ENABLE is kept)."""
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
    return out
