"""A regeneration's design and plan agree with each other and make a graph the params check
accepts: the next one's (params.next.yaml, plan.next.yaml) while one is planned, else the
committed run's (params.yaml, plan.yaml); `scripts/regenerate.sh --prepare` applies a design to a
clone as the docs say; and the `overrides --apply` it rests on writes exactly the file's values."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from countdown_rlvr.analysis.plan import load_plan
from countdown_rlvr.cli import overrides
from countdown_rlvr.core.config import merged

NEXT = ROOT / "params.next.yaml"
PLAN = ROOT / "plan.next.yaml"
# the chain whose replicates decide each seed-family row
ROW_CHAIN = {"shaped_premise": "rloo", "rloo_sharpens": "rloo", "opd_anti_collapse": "opd",
             "interventions": "int"}



def _design() -> tuple[dict, Path]:
    """The params of the next run (params.yaml with params.next.yaml on top) and its plan, or,
    when none is planned, the committed run's."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    if NEXT.exists():
        return merged(params, yaml.safe_load(NEXT.read_text())), PLAN
    return params, ROOT / "plan.yaml"


def test_the_plan_is_the_designs():
    """The plan's `run:` is the design's replicates and samples, and each seed row is planned
    at its chain's replicate count, at or above the plan's power."""
    design, path = _design()
    run, plan = yaml.safe_load(path.read_text())["run"], load_plan(path)
    assert run["replicates"] == design["replicates"]
    assert run["samples"] == design["evaluate"]["n_by_policy"]
    assert run["int_samples"] == design["int"]["claim_samples"]
    assert run["test_problems"] == design["problems"]["n_test"]
    seed_rows = {n: c for n, c in plan.claims.items() if c.family == "seed"}
    assert set(seed_rows) == set(ROW_CHAIN)
    for name, claim in seed_rows.items():
        assert claim.replicates == len(design["replicates"][ROW_CHAIN[name]]), name
        assert claim.planned_power >= plan.power, name


def test_the_design_passes_the_params_check():
    """Every stage config builds from the design (check_params' check_all: values, and the
    relations between them: an arm left out is one no trained arm starts from, each pair
    names a trained policy, int's own pools fit problems.n_unseen)."""
    from countdown_rlvr.cli.stage_params import check_all

    assert check_all(_design()[0]) > 0


def test_apply_sets_the_values_and_keeps_the_comments(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    over = tmp_path / "o.yaml"
    over.write_text("rloo:\n  reward: shaped\nreplicates:\n  rloo: [11, 12]\n")
    assert overrides.apply(over, params) == ["rloo.reward", "replicates.rloo"]
    after = yaml.safe_load(params.read_text())
    assert after["rloo"]["reward"] == "shaped" and after["replicates"]["rloo"] == [11, 12]
    before, now = (ROOT / "params.yaml").read_text(), params.read_text()
    comments = [line.strip() for line in before.splitlines() if line.lstrip().startswith("#")]
    assert [c for c in comments if c not in now] == []  # every comment line is kept
    assert after == merged(yaml.safe_load(before), yaml.safe_load(over.read_text()))


def test_apply_refuses_a_key_params_lacks_and_leaves_the_file(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    over = tmp_path / "o.yaml"
    over.write_text("rloo:\n  rewrad: shaped\n")
    with pytest.raises(SystemExit) as exc:
        overrides.apply(over, params)
    assert exc.value.code == 2 and "rewrad" in capsys.readouterr().err
    assert params.read_text() == (ROOT / "params.yaml").read_text()


def test_apply_restores_the_file_when_the_writer_mangles_it(tmp_path, capsys, monkeypatch):
    """DVC's writer once joined two lines of a block it rewrote: a file that does not read as
    the old params with the overrides on top is put back, and the user told to edit by hand."""
    import dvc.utils.hydra

    def mangle(path, _overrides):
        Path(path).write_text(Path(path).read_text().replace("  lora_r: 64\n", "  lora_r: 64 ", 1))
    monkeypatch.setattr(dvc.utils.hydra, "apply_overrides", mangle)
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    over = tmp_path / "o.yaml"
    over.write_text("rloo:\n  reward: shaped\n")
    with pytest.raises(SystemExit):
        overrides.apply(over, params)
    assert "by hand" in capsys.readouterr().err
    assert params.read_text() == (ROOT / "params.yaml").read_text()


def _head(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.slow
def test_regenerate_prepare_applies_a_committed_design(tmp_path):
    """`bash scripts/regenerate.sh --prepare` in a clone with a design committed (here: three
    int replicates of the seven): params.yaml is the old one with params.next.yaml on top,
    plan.yaml is plan.next.yaml, dvc.yaml is made from them, neither a file nor a dvc.lock entry
    of a replicate the new graph does not run is left, and nothing is committed (main keeps the
    committed run until the new one is committed)."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(clone / "src"), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    before = yaml.safe_load((clone / "params.yaml").read_text())
    kept, dropped = before["replicates"]["int"][:3], before["replicates"]["int"][3:]
    over = {"replicates": {"int": kept}}
    (clone / "params.next.yaml").write_text(yaml.safe_dump(over))
    plan_text = (clone / "plan.yaml").read_text().replace("written_before_run", "# a test's\n"
                                                          "written_before_run", 1)
    (clone / "plan.next.yaml").write_text(plan_text)

    def git(*args):
        return subprocess.run(["git", *args], cwd=clone, env=env, capture_output=True,
                              text=True, check=True).stdout
    git("add", "params.next.yaml", "plan.next.yaml")
    git("commit", "-qm", "a design")
    head = git("rev-parse", "HEAD")
    assert (clone / "dvclive/int" / f"r{dropped[0]}").exists()
    proc = subprocess.run(["bash", "scripts/regenerate.sh", "--prepare"], cwd=clone, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]

    params = yaml.safe_load((clone / "params.yaml").read_text())
    assert params == merged(before, over)
    assert (clone / "plan.yaml").read_text() == plan_text
    assert not (clone / "plan.next.yaml").exists() and not (clone / "params.next.yaml").exists()
    from countdown_rlvr.cli.experiment import generate
    assert (clone / "dvc.yaml").read_text() == generate(params)
    assert [p for s in dropped for p in (clone / "dvclive/int").glob(f"r{s}*")] == []
    lock = set(yaml.safe_load((clone / "dvc.lock").read_text())["stages"])
    assert f"int@{kept[0]}" in lock and not {f"int@{s}" for s in dropped} & lock
    assert git("rev-parse", "HEAD") == head
