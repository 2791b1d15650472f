"""What a data file a stage reads must hold, and which stage makes it: one table, checked by
the readers (`read_rows`) before any work, so a short, long, damaged or incomplete input stops
the stage in one line that names the file, the row and the stage to re-run.

A row count is checked only where the producing stage's params fix it exactly: the problem
splits (`problems.n_<split>` rows each; the generator makes exactly that many or stops). A
reader that checks a count lists that param among its own (countdown_rlvr.cli.stage_params
`counts`), so dvc.yaml re-runs it when the count changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import at, has
from .errors import StageError
from .io import numbered_rows, producing_stage

# The problem splits stages/problems.py writes, and the keys of every row (task.generate's
# Problem, written whole: tests/test_inputs.py checks the two agree).
SPLITS = ("train", "dev", "test", "ood", "unseen")
PROBLEM_KEYS = ("id", "split", "numbers", "target", "n_numbers", "n_solutions", "construction")


@dataclass(frozen=True)
class Made:
    """How a data file is made: the stage that writes it, the keys each row has, and the
    producer's param that fixes its row count (None: not fixed by params)."""
    producer: str
    keys: tuple[str, ...]
    count: str | None = None

    def expected(self, params: dict) -> int | None:
        """The row count the producer's params set (None: not fixed, or not in `params`)."""
        if self.count is None or not has(params, self.count):
            return None
        n = at(params, self.count)
        return n if isinstance(n, int) and not isinstance(n, bool) else None


INPUTS: dict[str, Made] = {
    f"data/problems/{s}.jsonl": Made("problems", PROBLEM_KEYS, f"problems.n_{s}") for s in SPLITS
}


def made(path: str | Path) -> Made | None:
    """The table's entry for `path` (relative to the repository root), if any."""
    return INPUTS.get(Path(path).as_posix())


def count_keys(*paths: str) -> list[str]:
    """The params that fix the row counts of `paths`: what a stage reading them must list."""
    return [m.count for p in paths if (m := made(p)) is not None and m.count is not None]


def read_rows(stage: str, path: str | Path, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the JSON-lines input `path` of stage `stage`, checked against the table: a
    missing file, a damaged line, a row without one of the keys, or a row count other than
    the producer's params set each stop the stage with one line naming the file, the row (or
    the counts) and the stage to re-run."""
    entry = made(path)
    producer = entry.producer if entry else producing_stage(path)
    rerun = f"`dvc repro -s {producer}`" if producer else "the stage that writes it"
    if not Path(path).exists():
        raise StageError(stage, f"missing input {path}; re-run {rerun}, or `dvc repro {stage}` "
                                "(which runs the stages upstream of it first)")
    rows = []
    try:
        for number, row in numbered_rows(path, producer):
            if entry and (lack := [k for k in entry.keys if k not in row]):
                raise StageError(stage, f"{path}, line {number}: row has no {', '.join(lack)} "
                                        f"key; the file is incomplete: re-run {rerun}")
            rows.append(row)
    except ValueError as exc:  # numbered_rows' damaged line, with its file and line
        raise StageError(stage, str(exc)) from exc
    if entry and (want := entry.expected(params)) is not None and len(rows) != want:
        short = "short" if len(rows) < want else "long"
        raise StageError(stage, f"{path} has {len(rows)} rows, but `{entry.count}` is {want} "
                                f"(the file is {short}: not what the params make); re-run {rerun}")
    return rows

