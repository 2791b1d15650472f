"""Wall times of a stage's phases, for reports/timings/<stage>.json (not results).

    seconds = {}
    with timed(seconds, "sample"):
        ...
    with timed(seconds, "train"):
        ...
    write_timing(stage, {"seconds": round(sum(seconds.values()), 2), "phases": seconds})
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def timed(seconds: dict[str, float], name: str) -> Iterator[None]:
    """Record the block's wall time as seconds[name], in seconds rounded to 0.01 (only when
    the block completes: a failed phase leaves no entry)."""
    t0 = time.time()
    yield
    seconds[name] = round(time.time() - t0, 2)
