"""The arms have one home, countdown_rlvr.core.arms: adding one is a registry entry plus its params.yaml
section. The unit tests check that nothing else names an arm and that the derived lists
follow the registry; the slow one adds a toy RLOO arm to a copy of the repo that way,
regenerates dvc.yaml and docs/dag.md there with one command (the four files docs/design.md
lists change, no other) and trains and evaluates the arm through `dvc repro`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, make_pipeline

from countdown_rlvr.analysis import checks, results
from countdown_rlvr.cli import stage_params
from countdown_rlvr.core.arms import ARMS

# where an arm may be named: the registry, the claims about it (a package) and the report's
# prose
ALLOWED = {"src/countdown_rlvr/core/arms.py", "src/countdown_rlvr/analysis/report.py"}
ALLOWED_DIRS = ("src/countdown_rlvr/analysis/claims/",)


def test_no_module_outside_the_registry_names_an_arm():
    # an arm named like its script (rloo, opd) is also a stage and a params section: only the
    # arms of their own name are searched for
    names = [a.name for a in ARMS if a.name != a.script]
    assert names
    found = {}
    for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "stages").rglob("*.py")]:
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        allowed = rel in ALLOWED or rel.startswith(ALLOWED_DIRS)
        if not allowed and (hit := [n for n in names if re.search(rf"\b{n}\b", text)]):
            found[rel] = hit
    assert not found, f"arm names outside countdown_rlvr.core.arms (derive them from it): {found}"


def test_the_arm_lists_follow_the_registry():
    assert [n for names in stage_params.ARMS.values() for n in names] == [a.name for a in ARMS]
    for a in ARMS:
        assert a.name in stage_params.ARMS[a.stage]
        assert (a.stage in stage_params.SAME_AS) == (a.stage != a.script)
        assert (a.name in checks.CHECKS) == (a.check is not None)
        assert (a.name in results.RL_RUNS) == a.curves
        assert (f"{a.name}.json" in results.EXTRA_INPUTS) == (not a.curves)


TOY = '    Arm("rloo_toy", "rloo"),\n'


def _add_toy_arm(registry: Path) -> None:
    """ONE entry appended to the copy's arms.ARMS."""
    text = registry.read_text()
    end = "\n)\n\n\ndef arm(name"
    assert text.count(end) == 1
    registry.write_text(text.replace(end, "\n" + TOY.rstrip("\n") + end))


@pytest.mark.slow
def test_a_toy_arm_is_one_registry_entry_and_one_params_section(tmp_path, monkeypatch):
    pipe = make_pipeline(tmp_path / "repo")
    monkeypatch.setenv("PYTHONPATH", str(pipe.path / "src"))  # the copy's code, not this one
    (pipe.path / "docs").mkdir()  # the copy's map, made as the committed one is
    pipe.run("python", "-m", "countdown_rlvr.cli.experiment", "--write")
    pipe.repro("rloo@rloo-0")  # an arm already trained: adding another must not re-run it
    pipe.run("git", "add", "-A")
    pipe.run("git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "rloo trained")
    _add_toy_arm(pipe.path / "src/countdown_rlvr/core/arms.py")
    pipe.set_params({"rloo_toy": {"reward": "format"},
                     "evaluate": {"first_replicate_only": ["rloo_toy"]}})
    pipe.run("python", "-m", "countdown_rlvr.cli.experiment", "--write")
    changed = pipe.run("git", "status", "--short").stdout.split("\n")
    assert sorted(line[3:] for line in changed if line) == [
        "docs/dag.md", "dvc.yaml", "params.yaml", "src/countdown_rlvr/core/arms.py"]
    dvc_yaml = (pipe.path / "dvc.yaml").read_text()
    assert "arm: [rloo, rloo_toy]" in dvc_yaml  # rloo_shaped: a first-seed stage of its own

    status = pipe.run("dvc", "status", "rloo@rloo-0").stdout
    # its code, inputs and param values are as they were; but the rloo matrix held one arm
    # (the shaped arm is a first-seed stage now), and a second arm makes dvc.yaml list the
    # rloo keys it inherits one by one: DVC reads those as new params and re-runs rloo once
    changes = [ln.strip() for ln in status.splitlines()[1:] if ln.strip()]
    assert changes[:2] == ["changed deps:", "params.yaml:"], status
    assert changes[2:] and all(ln.startswith("new:") and ln.split()[1].startswith("rloo.")
                               for ln in changes[2:]), status
    pipe.repro("rloo@rloo_toy-0", "evaluate_rloo@rloo_toy-0")
    assert (pipe.path / "data/models/rloo_toy/r0").is_dir()
    details = json.loads(pipe.read("reports/details/rloo_toy/r0.json"))
    assert details["reward"] == "format"  # its own section's key over rloo's
    params = yaml.safe_load(pipe.read("params.yaml"))
    assert details["curriculum"] == params["rloo"]["curriculum"]  # and the rest as rloo's
    assert (pipe.path / "dvclive/rloo_toy/r0").is_dir()
    assert (pipe.path / "reports/details/eval/rloo_toy/r0.json").is_file()
