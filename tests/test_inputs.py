"""An input says how it was made (core.inputs): a short, long, damaged or incomplete data file,
a missing one and a full disk each stop a stage in ONE line on stderr that names the file, the
row or the counts, and the stage to re-run; no traceback (COUNTDOWN_RLVR_DEBUG=1 shows it)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, merge
from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr.core import io
from countdown_rlvr.core.errors import DEBUG, StageError
from countdown_rlvr.core.inputs import (
    INPUTS,
    PROBLEM_KEYS,
    SPLITS,
    TRACE_KEYS,
    count_keys,
    read_rows,
)
from countdown_rlvr.task.generate import Problem

TRAIN = "data/problems/train.jsonl"


def problem_rows(n: int) -> list[dict]:
    return [Problem(f"train-{i:05d}", "train", [i + 1, 2], i + 3, 2, 1, f"{i + 1} + 2").to_dict()
            for i in range(n)]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A working directory with the repo's dvc.yaml (producing_stage reads it) and a train
    file of 5 problems."""
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    monkeypatch.chdir(tmp_path)
    io.write_jsonl(TRAIN, problem_rows(5))
    return tmp_path


def refusal(stage: str, path: str, params: dict) -> str:
    with pytest.raises(StageError) as err:
        read_rows(stage, path, params)
    message = str(err.value.code)
    assert "\n" not in message
    return message


# -- the table ---------------------------------------------------------------------------------

def test_the_table_knows_every_problem_file_and_the_keys_the_generator_writes():
    assert set(PROBLEM_KEYS) == {f.name for f in fields(Problem)}
    assert {f"data/problems/{s}.jsonl" for s in SPLITS} <= set(INPUTS)
    assert count_keys(TRAIN, "data/problems/unseen.jsonl", "data/traces/solver.jsonl") == [
        "problems.n_train", "problems.n_unseen", "traces.n_problems", "traces.per_problem"]
    assert count_keys("data/traces/teacher.jsonl", "data/sft/train.jsonl") == []  # filtered


def test_the_solver_trace_keys_are_what_the_traces_stage_writes():
    import random

    from countdown_rlvr.data.traces import solver_traces

    q = problem_rows(1)[0]
    (row,) = solver_traces(q, "p", ("direct",), 1, random.Random(0), solutions="construction")
    assert set(TRACE_KEYS) == set(row)


@pytest.mark.parametrize(("n_problems", "per_problem", "rows"), [(None, 2, 10), (3, 2, 6),
                                                                  (9, 1, 5)])
def test_the_solver_traces_count_is_per_problem_times_the_problems_traced(n_problems, per_problem,
                                                                          rows):
    params = {"problems": {"n_train": 5},
              "traces": {"n_problems": n_problems, "per_problem": per_problem}}
    assert INPUTS["data/traces/solver.jsonl"].expected(params) == rows


def test_the_dedup_stage_refuses_a_cut_solver_trace_file(stage_dir):
    assert run_stage(stage_dir, ROOT / "stages/traces.py").returncode == 0
    path = stage_dir / "data/traces/solver.jsonl"
    cut_rows(path, 50)
    (stage_dir / "data/traces/teacher.jsonl").write_text("")  # as a teacher that kept none
    line = one_line(run_stage(stage_dir, ROOT / "stages/dedup.py"))
    assert line == ("[dedup] error: data/traces/solver.jsonl has 50 rows, but the params make 60 "
                    "(`problems.n_train` 60, `traces.n_problems` 60, `traces.per_problem` 1): the "
                    "file is short; re-run `dvc repro -s traces`")


def test_a_file_of_the_count_the_params_set_is_read(repo):
    assert read_rows("traces", TRAIN, {"problems": {"n_train": 5}}) == problem_rows(5)
    # no count in these params (a unit test's own): nothing to check the count against
    assert len(read_rows("traces", TRAIN, {})) == 5


@settings(max_examples=30, deadline=None)
@given(have=st.integers(0, 12), want=st.integers(1, 12))
def test_a_file_is_refused_unless_it_has_exactly_the_rows_the_params_set(tmp_path_factory, have,
                                                                          want):
    path = tmp_path_factory.mktemp("p") / "data/problems/train.jsonl"
    io.write_jsonl(path, problem_rows(have))
    params = {"problems": {"n_train": want}}
    if have == want:
        assert len(read_rows("traces", path, params)) == want
        return
    # the table keys paths relative to the repository root: chdir so `path` is one
    cwd = os.getcwd()
    os.chdir(path.parents[2])
    try:
        message = refusal("traces", TRAIN, params)
    finally:
        os.chdir(cwd)
    assert message == (f"[traces] error: {TRAIN} has {have} rows, but the params make {want} "
                       f"(`problems.n_train` {want}): the file is "
                       f"{'short' if have < want else 'long'}; re-run `dvc repro -s problems`")


def test_a_row_without_a_key_is_refused_with_its_line(repo):
    rows = problem_rows(5)
    del rows[3]["target"]
    io.write_jsonl(TRAIN, rows)
    assert refusal("rloo", TRAIN, {"problems": {"n_train": 5}}) == (
        f"[rloo] error: {TRAIN}, line 4: row has no target key; the file is incomplete: re-run "
        "`dvc repro -s problems`")


def test_a_damaged_line_is_refused_with_its_line_and_column(repo):
    lines = Path(TRAIN).read_text().splitlines(keepends=True)
    lines[2] = lines[2][:-2] + "\n"  # the closing brace cut off, as by a kill mid-write
    Path(TRAIN).write_text("".join(lines))
    message = refusal("traces", TRAIN, {"problems": {"n_train": 5}})
    at_end = len(lines[2]) - 1 + 1  # the column just past the line's last character
    assert message.startswith(f"[traces] error: {TRAIN}, line 3, column {at_end}: not valid JSON")
    assert message.endswith("the file is damaged or half-written: re-run `dvc repro -s problems`")


def test_a_line_that_is_not_utf8_is_refused_with_its_line(repo):
    with open(TRAIN, "ab") as fh:
        fh.write(b'{"id": "x\xff"}\n')
    message = refusal("traces", TRAIN, {"problems": {"n_train": 6}})
    assert message.startswith(f"[traces] error: {TRAIN}, line 6, byte 10: not UTF-8 text")
    assert message.endswith("re-run `dvc repro -s problems`")


def test_a_missing_file_names_the_stage_that_makes_it(repo):
    Path(TRAIN).unlink()
    assert refusal("traces", TRAIN, {}) == (
        f"[traces] error: missing input {TRAIN}; re-run `dvc repro -s problems`, or `dvc repro "
        "traces` (which runs the stages upstream of it first)")


OBJECTS = st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4),
                          max_size=3)


@settings(max_examples=40, deadline=None)
@given(row=OBJECTS)
def test_a_line_cut_at_its_end_is_reported_at_its_last_column(tmp_path_factory, row):
    """json parses each line with its newline: an error at the line's end was reported at
    column 1 of the line after."""
    path = tmp_path_factory.mktemp("j") / "rows.jsonl"
    cut = json.dumps(row)[:-1]  # no closing brace
    path.write_text(f'{{"a": 1}}\n{cut}\n')
    with pytest.raises(ValueError, match=rf"rows.jsonl, line 2, column {len(cut) + 1}: "):
        io.read_jsonl(path)


# -- a full disk -------------------------------------------------------------------------------

def test_a_full_disk_stops_the_writing_stage_in_one_line_and_keeps_the_old_file(repo, monkeypatch):
    before = Path(TRAIN).read_bytes()

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(StageError) as err:
        io.write_jsonl(TRAIN, problem_rows(2))
    assert err.value.code == (f"[problems] error: writing {TRAIN}: no space left on device; free "
                              "space there and re-run `dvc repro -s problems`")
    assert Path(TRAIN).read_bytes() == before
    assert not [p for p in Path("data/problems").iterdir() if p.name.endswith(".tmp")]


def test_another_os_error_while_writing_is_not_called_a_full_disk(repo, monkeypatch):
    def denied(*args):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "replace", denied)
    with pytest.raises(PermissionError):
        io.write_jsonl(TRAIN, problem_rows(2))


MODEL = "data/models/sft/r1"  # a model folder, written by `sft` (dvc.yaml)


class Statvfs:
    """What os.statvfs reports: `free` bytes available."""

    def __init__(self, free: int):
        self.f_bavail, self.f_frsize = free, 1


def write_model(dest: str, error: Exception) -> None:
    """A library saving a model into io.atomic_path's folder, failing half-way with `error`."""
    with io.atomic_path(dest) as tmp:
        tmp.mkdir()
        (tmp / "model.safetensors").write_bytes(b"half")
        raise error


# what the libraries raise on a full disk (measured on a 64 KiB tmpfs): safetensors' own type,
# naming the OS error; torch.save a RuntimeError that names no cause
SAFETENSORS_FULL = "Error while serializing: I/O error: No space left on device (os error 28)"
TORCH_SAVE_FULL = "[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"


def test_a_library_that_names_a_full_disk_in_its_own_error_stops_the_stage_in_one_line(repo):
    Path(MODEL).mkdir(parents=True)
    (Path(MODEL) / "model.safetensors").write_bytes(b"old")
    with pytest.raises(StageError) as err:
        write_model(MODEL, type("SafetensorError", (Exception,), {})(SAFETENSORS_FULL))
    assert err.value.code == (f"[sft] error: writing {MODEL}: no space left on device; free "
                              "space there and re-run `dvc repro -s sft`")
    assert (Path(MODEL) / "model.safetensors").read_bytes() == b"old"
    assert [p.name for p in Path(MODEL).parent.iterdir()] == ["r1"]  # no temporary left


def test_a_writer_that_names_no_cause_is_a_full_disk_only_when_no_room_is_left(repo,
                                                                               monkeypatch):
    monkeypatch.setattr(os, "statvfs", lambda path: Statvfs(io.ROOM - 1))
    with pytest.raises(StageError, match=r"^\[sft\] error: writing .*: no space left on device"):
        write_model(MODEL, RuntimeError(TORCH_SAVE_FULL))
    monkeypatch.setattr(os, "statvfs", lambda path: Statvfs(io.ROOM))
    with pytest.raises(RuntimeError, match="unexpected pos"):  # room left: not called full
        write_model(MODEL, RuntimeError(TORCH_SAVE_FULL))
    assert not Path(MODEL).exists()


# -- a real stage script: stderr is the one line ----------------------------------------------

@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """The smoke params and dvc.yaml, and the problem files stages/problems.py makes from them."""
    root = tmp_path_factory.mktemp("made")
    shutil.copy(ROOT / "dvc.yaml", root / "dvc.yaml")
    params = merge(yaml.safe_load((ROOT / "params.yaml").read_text()),
                   yaml.safe_load((ROOT / "params.smoke.yaml").read_text()))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run_stage(root, ROOT / "stages/problems.py", check=True)
    return root


@pytest.fixture
def stage_dir(made, tmp_path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(made, dest)
    return dest


def run_stage(cwd: Path, script: Path, *args: str, check: bool = False, prelude: str = "",
              env: dict | None = None) -> subprocess.CompletedProcess:
    """`python <script> <args>` in `cwd`; with `prelude`, that Python runs first in the same
    process (a monkeypatch) and the script after it, as `__main__`."""
    cmd = [sys.executable, str(script), *args]
    if prelude:
        code = (f"import runpy, sys\nsys.argv = {[str(script), *args]!r}\n{prelude}\n"
                f"runpy.run_path({str(script)!r}, run_name='__main__')")
        cmd = [sys.executable, "-c", code]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def one_line(proc: subprocess.CompletedProcess) -> str:
    """The stage failed with exactly one line on stderr, and no traceback."""
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def cut_rows(path: Path, keep: int) -> None:
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:keep]))


def test_the_traces_stage_refuses_a_short_train_file(stage_dir):
    cut_rows(stage_dir / TRAIN, 30)  # at a line boundary: every row it has is whole
    line = one_line(run_stage(stage_dir, ROOT / "stages/traces.py"))
    assert line == (f"[traces] error: {TRAIN} has 30 rows, but the params make 60 "
                    "(`problems.n_train` 60): the file is short; re-run `dvc repro -s problems`")
    assert not (stage_dir / "data/traces/solver.jsonl").exists()


def test_the_traces_stage_refuses_a_long_train_file(stage_dir):
    path = stage_dir / TRAIN
    path.write_text(path.read_text() + path.read_text().splitlines(keepends=True)[0])
    line = one_line(run_stage(stage_dir, ROOT / "stages/traces.py"))
    assert line.startswith(f"[traces] error: {TRAIN} has 61 rows, but the params make 60 "
                           "(`problems.n_train` 60): the file is long")
    assert line.endswith("re-run `dvc repro -s problems`")


def test_the_traces_stage_refuses_a_damaged_line(stage_dir):
    path = stage_dir / TRAIN
    lines = path.read_text().splitlines(keepends=True)
    lines[6] = lines[6].rstrip("\n")[:-1] + "\n"  # the closing brace cut off
    path.write_text("".join(lines))
    end = len(lines[6])  # the column just past the line's last character
    line = one_line(run_stage(stage_dir, ROOT / "stages/traces.py"))
    assert line.startswith(f"[traces] error: {TRAIN}, line 7, column {end}: not valid JSON")
    assert line.endswith("re-run `dvc repro -s problems`")
    # the debug switch shows what lies behind the line
    debug = run_stage(stage_dir, ROOT / "stages/traces.py", env={DEBUG: "1"})
    assert "Traceback" in debug.stderr and "JSONDecodeError" in debug.stderr
    assert debug.stderr.splitlines()[-1] == line


def test_the_traces_stage_refuses_a_row_without_a_target(stage_dir):
    path = stage_dir / TRAIN
    rows = io.read_jsonl(path)
    del rows[11]["target"]
    io.write_jsonl(path, rows)
    assert one_line(run_stage(stage_dir, ROOT / "stages/traces.py")) == (
        f"[traces] error: {TRAIN}, line 12: row has no target key; the file is incomplete: "
        "re-run `dvc repro -s problems`")


def test_the_traces_stage_names_a_missing_file_and_its_maker(stage_dir):
    (stage_dir / TRAIN).unlink()
    line = one_line(run_stage(stage_dir, ROOT / "stages/traces.py"))
    assert line.startswith(f"[traces] error: missing input ['{TRAIN}'] (written by `problems`)")
    assert "dvc repro traces" in line


def test_the_traces_stage_stops_in_one_line_on_a_full_disk(stage_dir):
    full = ("import errno, os; os.replace = lambda *a: (_ for _ in ()).throw("
            "OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))")
    line = one_line(run_stage(stage_dir, ROOT / "stages/traces.py", prelude=full))
    assert line == ("[traces] error: writing data/traces/solver.jsonl: no space left on device; "
                    "free space there and re-run `dvc repro -s traces`")
    assert not (stage_dir / "data/traces/solver.jsonl").exists()


# -- through dvc, on the smoke pipeline --------------------------------------------------------

@pytest.mark.slow
def test_dvc_repro_of_a_reader_stops_on_a_short_train_file_and_rloo_on_a_missing_key(pipeline):
    """The issue's case: train.jsonl cut at a line boundary to 30 of its 60 rows ran `dvc repro
    -s traces` and `-s rloo@rloo-0` to exit 0, dvc.lock recording both as made from it."""
    pipeline.repro("problems")
    path = pipeline.path / TRAIN
    whole = path.read_text()
    cut_rows(path, 30)
    proc = pipeline.repro("-s", "traces", check=False)
    assert proc.returncode != 0
    assert (f"[traces] error: {TRAIN} has 30 rows, but the params make 60 (`problems.n_train` "
            "60): the file is short; re-run `dvc repro -s problems`") in proc.stderr
    assert "traces" not in yaml.safe_load(pipeline.read("dvc.lock"))["stages"]
    # rloo (its init policy stood in for by an empty dir: the check comes before any model
    # loads) on a row without its target: the one line, no traceback, no shutdown noise
    rows = [json.loads(line) for line in whole.splitlines()]
    del rows[41]["target"]
    io.write_jsonl(path, rows)
    (pipeline.path / "data/models/sft/r0").mkdir(parents=True)
    proc = run_stage(pipeline.path, pipeline.path / "stages/rloo.py", "rloo", "0")
    assert one_line(proc) == (f"[rloo] error: {TRAIN}, line 42: row has no target key; the "
                              "file is incomplete: re-run `dvc repro -s problems`")


# -- no shutdown noise -------------------------------------------------------------------------

LIVE_THEN_RAISE = """
from countdown_rlvr.train.runtime import live_curves
with live_curves("run") as live:
    live._dvc_repo.scm.dulwich.repo.object_store.packs  # as git reads do: opens the pack files
    raise KeyError("target")
"""


def test_an_exception_inside_the_curves_block_leaves_no_shutdown_noise(tmp_path):
    """dvclive's git repo, left open, kept alive to interpreter shutdown by the traceback: each
    dulwich pack file's finalizer printed an "Exception ignored ... sys.meta_path is None"
    traceback (the issue counted 23 after one KeyError in stages/rloo.py)."""
    def git(*args):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=tmp_path,
                       check=True, capture_output=True)

    git("init", "-q")
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=tmp_path, check=True)
    git("add", "-A")
    git("commit", "-qm", "init")
    git("gc", "-q")  # objects in a pack file, as in any repository with history
    assert list((tmp_path / ".git/objects/pack").glob("*.pack"))
    proc = subprocess.run([sys.executable, "-c", LIVE_THEN_RAISE], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and proc.stderr.splitlines()[-1] == "KeyError: 'target'"
    assert "Exception ignored" not in proc.stderr
