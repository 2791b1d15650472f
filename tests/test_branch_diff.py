"""`python -m countdown_rlvr.branch_diff A B`: two revisions' git-tracked per-replicate results,
each headline difference with a Welch interval over replicates; works without the DVC cache."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from countdown_rlvr.branch_diff import compare, rows

FIXTURE = Path(__file__).parent / "fixtures/report/reports/details/eval"
GIT = ("git", "-c", "user.email=t@t", "-c", "user.name=t")


def commit(repo: Path, message: str) -> None:
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", message], cwd=repo, check=True)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """main: the fixture's evaluations; `better`: rloo +0.2 pass@1 in every replicate."""
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    shutil.copytree(FIXTURE, tmp_path / "reports/details/eval")
    commit(tmp_path, "main")
    subprocess.run(["git", "checkout", "-qb", "better"], cwd=tmp_path, check=True)
    for f in (tmp_path / "reports/details/eval/rloo").glob("r*.json"):
        d = json.loads(f.read_text())
        d["test"]["pass@1"] += 0.2
        f.write_text(json.dumps(d))
    commit(tmp_path, "better rloo")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_shift_larger_than_the_replicate_noise_differs_and_no_change_does_not(repo):
    found = {(r["policy"], r["metric"]): r for r in rows("main", "better")}
    up = found[("rloo", "pass@1")]
    assert up["diff"] == pytest.approx(0.2) and up["verdict"] == "differs"
    assert up["ci"][0] < 0.2 < up["ci"][1] and up["n_a"] == up["n_b"] == 3
    same = found[("sft", "pass@1")]
    assert same["diff"] == 0 and same["verdict"] == "no detectable difference"
    # one draw on a side (shared base, first-replicate-only ipo_base): no interval
    assert found[("base", "pass@1")]["ci"] is None and found[("ipo_base", "pass@16")]["ci"] is None
    assert {m for p, m in found if p == "rloo"} == {"pass@1", "pass@16", "ood_pass@16"}


def test_the_interval_includes_between_replicate_variance():
    noisy = compare([0.10, 0.30, 0.20], [0.25, 0.45, 0.35])
    tight = compare([0.19, 0.21, 0.20], [0.34, 0.36, 0.35])
    assert noisy["diff"] == pytest.approx(tight["diff"]) == pytest.approx(0.15)
    assert noisy["verdict"] == "no detectable difference" and tight["verdict"] == "differs"
    assert noisy["ci"][0] < 0 < noisy["ci"][1]


def test_the_command_prints_a_table_and_names_the_fix(repo):
    out = subprocess.run([sys.executable, "-m", "countdown_rlvr.branch_diff", "main", "better"],
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith("| policy | metric | main | better |")
    assert any(line.startswith("| rloo | pass@1 |") and "differs" in line
               for line in out.splitlines())
    bad = subprocess.run([sys.executable, "-m", "countdown_rlvr.branch_diff", "main", "nope"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode != 0 and "[branch_diff] error: git" in bad.stderr
