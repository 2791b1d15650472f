"""The dvclive curves of a training stage (dvclive/<run>, in git) appear whole or not at all:
a stage that fails or is killed mid-training leaves the previous curves, never half a run."""

import csv
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from countdown_rlvr.core.io import clear_stale_tmp
from countdown_rlvr.train import runtime

RUN = "sft/r0"
CURVES = Path("dvclive") / RUN


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _log_steps(live, n: int = 3) -> None:
    for i in range(n):
        live.log_metric("train/loss", 1.0 / (i + 1))
        live.log_metric("train/token_acc", i / 10)
        live.next_step()


def _failing_train(steps: int):
    def train(live, stats):
        _log_steps(live, steps)
        raise RuntimeError("boom mid-training")
    return train


def _tsv_rows(text: str) -> list[list[str]]:
    """A dvclive TSV without its wall-clock `timestamp` column (differs run to run)."""
    rows = list(csv.DictReader(text.splitlines(), delimiter="\t"))
    return [[v for k, v in row.items() if k != "timestamp"] for row in rows]


def _logged(name: str, steps: int) -> None:
    with runtime.live_curves(name) as live:
        _log_steps(live, steps)


def test_a_failing_stage_leaves_the_previous_curves_untouched(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _logged(RUN, 5)
    before = _files(CURVES)
    assert "plots/metrics/train/loss.tsv" in before
    # the stage's own entry point: training raises after logging two steps
    with pytest.raises(RuntimeError, match="boom"):
        runtime.fit_and_save(RUN, None, "data/models/sft/r0", _failing_train(2))
    assert _files(CURVES) == before  # dvclive did not clear or half-overwrite them
    assert sorted(os.listdir(CURVES.parent)) == ["r0"]  # and its temporary dir is gone
    assert not Path("data").exists()  # nor was a model saved


def test_a_failing_first_run_leaves_no_curve_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError, match="boom"), runtime.live_curves(RUN) as live:
        _log_steps(live, 2)
        raise RuntimeError("boom")
    assert not CURVES.exists()
    assert not [p for p in Path("dvclive").rglob("*.tmp")]


def test_a_finished_stage_writes_the_same_files_as_logging_in_place(tmp_path, monkeypatch):
    from dvclive import Live

    monkeypatch.chdir(tmp_path)
    _logged(RUN, 4)
    in_place = tmp_path / "in_place" / RUN  # how the curves were written before: no temp dir
    live = Live(str(in_place), save_dvc_exp=False, dvcyaml=None)
    _log_steps(live, 4)
    live.end()
    got, want = _files(CURVES), _files(in_place)
    assert got.keys() == want.keys()
    assert {"metrics.json", "plots/metrics/train/loss.tsv",
            "plots/metrics/train/token_acc.tsv"} <= got.keys()
    for name in got:
        if name.endswith(".tsv"):
            assert _tsv_rows(got[name]) == _tsv_rows(want[name]), name
        else:
            assert got[name] == want[name], name
    assert sorted(os.listdir(CURVES.parent)) == ["r0"]
    _logged(RUN, 2)  # a rerun replaces the whole run
    assert _tsv_rows(_files(CURVES)["plots/metrics/train/loss.tsv"]) == [["0", "1.0"],
                                                                        ["1", "0.5"]]


KILLED = """
import os, signal
from countdown_rlvr.train.runtime import live_curves
with live_curves("sft/r0") as live:
    for i in range(3):
        live.log_metric("train/loss", 1.0)
        live.next_step()
    os.kill(os.getpid(), signal.SIGKILL)  # no finally, no atexit: as the OOM killer does
"""


def test_a_killed_stage_leaves_only_a_temp_dir_the_next_stage_clears(tmp_path, monkeypatch):
    previous = tmp_path / CURVES / "plots/metrics/train/loss.tsv"
    previous.parent.mkdir(parents=True)
    previous.write_text("step\tloss\n0\t2.0\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-c", KILLED], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert previous.read_text() == "step\tloss\n0\t2.0\n"  # the committed curves, as they were
    stale = [p.name for p in (tmp_path / CURVES.parent).iterdir() if p.name != "r0"]
    assert len(stale) == 1 and stale[0].startswith(".r0.") and stale[0].endswith(".tmp")
    monkeypatch.chdir(tmp_path)
    cleared = clear_stale_tmp()  # what load_params does as the next stage starts
    assert [p.name for p in cleared] == stale
    assert sorted(os.listdir(tmp_path / CURVES.parent)) == ["r0"]
