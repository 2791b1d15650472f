"""dvc.yaml never disagrees with params.yaml: a value that changes the stage graph either
leaves dvc.yaml's stages as they are, or `check_params` refuses it in one line naming
the command that makes dvc.yaml anew; a refused workspace value says how to restore it."""

from __future__ import annotations

import copy
import importlib.util
import subprocess

import pytest
import yaml
from conftest import ROOT

from countdown_rlvr.cli.experiment import generate
from countdown_rlvr.cli.stage_params import check_all
from countdown_rlvr.core.errors import StageError

spec = importlib.util.spec_from_file_location("check_params", ROOT / "stages/check_params.py")
check_params = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_params)
WRITE = "python -m countdown_rlvr.cli.experiment --write"


def _params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def _stages(params: dict) -> dict:
    return yaml.safe_load(generate(params))["stages"]


def _no_early(p: dict) -> None:
    """sft.early_step null, and what names the early checkpoint moved off it."""
    p["sft"]["early_step"] = None
    for key in ("policies", "dev_policies"):
        p["evaluate"][key] = [x for x in p["evaluate"][key] if "early" not in x]
    for arm in ("rloo_early", "rloo_early_shaped"):
        p[arm]["init"] = "sft"


# every params value dvc.yaml's stages are made from (cli.experiment: `when` gates, the dev
# split's inputs), and lists DVC interpolates (which leave the text as it is)
GRAPH_EDITS = {
    "sft.early_step=null": _no_early,
    "evaluate.dev_policies=[sft]": lambda p: p["evaluate"].update(dev_policies=["sft"]),
    "replicates.rloo": lambda p: p["replicates"].update(rloo=p["replicates"]["rloo"][:3]),
    "evaluate.policies": lambda p: p["evaluate"].update(
        policies=[x for x in p["evaluate"]["policies"] if x != "opd_ac"]),
}


@pytest.mark.parametrize("name", GRAPH_EDITS)
def test_a_graph_value_keeps_dvc_yaml_or_is_refused_naming_the_command(name, tmp_path,
                                                                       monkeypatch):
    params = _params()
    edited = copy.deepcopy(params)
    GRAPH_EDITS[name](edited)
    (tmp_path / "dvc.yaml").write_text((ROOT / "dvc.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    try:
        check_all(edited)
    except StageError as exc:  # refused by a rule of its own, naming the keys to fix
        assert "`" in str(exc.code)
        return
    if _stages(edited) == _stages(params):
        check_params.check_graph(edited)  # passes: dvc.yaml is right for both
    else:
        with pytest.raises(StageError, match=WRITE.replace(".", r"\.")) as exc:
            check_params.check_graph(edited)
        assert "\n" not in str(exc.value.code)


def test_the_graph_edits_cover_a_change_of_stages():
    """At least one edit above does change the stages (else the refusal is never tested)."""
    params = _params()
    changed = []
    for name, edit in GRAPH_EDITS.items():
        p = copy.deepcopy(params)
        edit(p)
        if _stages(p) != _stages(params):
            changed.append(name)
    assert {"sft.early_step=null", "evaluate.dev_policies=[sft]"} <= set(changed)


def test_a_refused_workspace_value_says_how_to_restore_params_yaml(tmp_path):
    """What `dvc exp run -S rloo.reward=shapd` leaves: the bad value in params.yaml. The
    refusal says so and how to restore it."""
    for name in ("params.yaml", "dvc.yaml"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    def git(*args):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
                       cwd=tmp_path, check=True, capture_output=True)
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "x")
    p = _params()
    p["rloo"]["reward"] = "shapd"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    proc = subprocess.run(["python", str(ROOT / "stages/check_params.py")], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "`rloo.reward` is 'shapd'" in proc.stderr
    assert "git checkout -- params.yaml" in proc.stderr
    assert "Traceback" not in proc.stderr
