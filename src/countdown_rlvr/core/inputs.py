"""What a data file a stage reads must hold, and which stage makes it: one table, checked by
the readers (`read_rows`) before any work, so a short, long, damaged or incomplete input stops
the stage in one line that names the file, the row and the stage to re-run.

A row count is checked only where the producing stage's params fix it exactly: the problem
splits (`problems.n_<split>` rows each; the generator makes exactly that many or stops) and the
solver traces (`traces.per_problem` verified traces of each of the first `traces.n_problems`
train problems, or the stage stops). Not the files a stage filters (the teacher's traces, the
deduplicated SFT data, the pairs): their counts depend on what was kept. A reader that checks a
count lists the params it comes from among its own (countdown_rlvr.cli.stage_params `rows`),
so dvc.yaml re-runs it when they change.
"""

from __future__ import annotations

from collections.abc import Callable
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
# a solver trace's keys (data.traces.solver_traces: tests/test_inputs.py checks them)
TRACE_KEYS = ("problem_id", "numbers", "target", "n_numbers", "prompt", "completion", "strategy",
              "source")


@dataclass(frozen=True)
class Made:
    """How a data file is made: the stage that writes it, the keys each row has, and the
    producer's params that fix its row count with the count they give (none: not fixed)."""
    producer: str
    keys: tuple[str, ...]
    count: tuple[str, ...] = ()  # dotted param keys
    rows: Callable[..., int | None] | None = None  # their values, in order -> the row count

    def expected(self, params: dict) -> int | None:
        """The row count the producer's params set (None: not fixed, or not in `params`)."""
        if self.rows is None or not all(has(params, k) for k in self.count):
            return None
        values = [at(params, k) for k in self.count]
        if any(isinstance(v, bool) or not isinstance(v, int | None) for v in values):
            return None  # a bad value: the params check names it
        return self.rows(*values)

    def params(self, params: dict) -> str:
        """The count's params and their values, for a message."""
        return ", ".join(f"`{k}` {at(params, k)}" for k in self.count)


def _split(n: int | None) -> int | None:
    return n


def _traces(n_train: int | None, n_problems: int | None, per_problem: int | None) -> int | None:
    """stages/traces.py: `per_problem` traces of each of the first `n_problems` (null: all)."""
    if n_train is None or per_problem is None:
        return None  # a bad value: the params check names it
    return min(n_train, n_train if n_problems is None else n_problems) * per_problem


INPUTS: dict[str, Made] = {
    **{f"data/problems/{s}.jsonl": Made("problems", PROBLEM_KEYS, (f"problems.n_{s}",), _split)
       for s in SPLITS},
    "data/traces/solver.jsonl": Made("traces", TRACE_KEYS, (
        "problems.n_train", "traces.n_problems", "traces.per_problem"), _traces),
}


def made(path: str | Path) -> Made | None:
    """The table's entry for `path` (relative to the repository root), if any."""
    return INPUTS.get(Path(path).as_posix())


def count_keys(*paths: str) -> list[str]:
    """The params that fix the row counts of `paths`: what a stage reading them must list."""
    return list(dict.fromkeys(k for p in paths if (m := made(p)) is not None for k in m.count))


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
        raise StageError(stage, f"{path} has {len(rows)} rows, but the params make {want} "
                                f"({entry.params(params)}): the file is {short}; re-run {rerun}")
    return rows

