"""countdown-rlvr: a DVC pipeline for RLVR research on the Countdown arithmetic task."""

import os
import time

__version__ = "0.1.0"


def _shared_cores() -> bool:
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


# torch's OpenMP threads spin-wait for each other at every parallel region. On idle cores
# that is the fastest choice; with a competing CPU-bound process one thread is often
# descheduled and the rest spin a whole time slice: a stage ran 3-17x slower
# (benchmarks/bench_contention.py). Sleeping waits (PASSIVE) cap that near 2x but cost
# 1.2-1.9x on idle cores, so they are chosen only when the cores are shared as the stage
# starts. The wait policy changes timing, never results. Set before torch loads OpenMP;
# an explicit OMP_WAIT_POLICY wins.
if "OMP_WAIT_POLICY" not in os.environ and _shared_cores():
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

# Large CPU tensors (the sampler's KV cache, training activations) in 2 MB pages: fresh
# memory is faulted in 512x fewer times (a KV-cache compaction into new memory ran 2.4x
# faster, an SFT step ~8%). PyTorch reads this when it loads; an explicit value wins.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
