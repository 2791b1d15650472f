"""What a training step leaves when it has nothing to train on: its source policy, unchanged,
where the trained one would be (and, when asked, a mark that `evaluate` skips it)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..core.io import atomic_path, empty_curves, write_json

# In a policy dir: the policy is its source unchanged, so evaluating it only repeats the source
NOT_TRAINED = "NOT_TRAINED.json"


def untrained(src: str | Path, dest: str | Path, curves: str, same_as_source: bool = False,
              reason: str = "") -> None:
    """What a training step writes when it has no data to train on: the policy in `src`
    saved unchanged as `dest` (atomically), so every later stage still finds its input, and
    header-only dvclive/<curves> curves, the curve dir dvc.yaml declares as an output.
    `same_as_source`: mark `dest` (NOT_TRAINED.json, with `reason`) so that `evaluate` skips
    it instead of sampling a copy of a policy it already samples."""
    with atomic_path(dest) as tmp:
        shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(NOT_TRAINED))
        if same_as_source:
            write_json(Path(tmp) / NOT_TRAINED, {"source": Path(src).as_posix(), "reason": reason})
    empty_curves(curves)
