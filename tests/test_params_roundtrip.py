"""`dvc exp run -S key=value` rewrites params.yaml with DVC's own YAML writer: the experiment's
commit must show the one changed value, not a reformatted file (flow lists turned into block
lists, comments moved into other sections). params.yaml is laid out in the form that writer
keeps, and these tests apply DVC's own override function to a copy of it."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest
import yaml
from dvc.utils.hydra import apply_overrides

ROOT = Path(__file__).resolve().parents[1]


def _changed_lines(tmp_path: Path, override: str) -> tuple[list[str], list[str]]:
    """(removed, added) lines of params.yaml after DVC applies `override` to a copy."""
    path = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", path)
    before = path.read_text().splitlines()
    apply_overrides(path, [override])
    after = path.read_text().splitlines()
    diff = list(difflib.unified_diff(before, after, lineterm="", n=0))
    removed = [d[1:] for d in diff if d.startswith("-") and not d.startswith("---")]
    added = [d[1:] for d in diff if d.startswith("+") and not d.startswith("+++")]
    return removed, added


def _code(line: str) -> str:
    """The line without its comment and trailing blanks (a comment keeps its column)."""
    return line.split("#", 1)[0].rstrip()


@pytest.mark.parametrize(("override", "removed", "added"), [
    # a scalar: its own line only, comment kept
    ("rloo.reward=shaped", ["  reward: binary"], ["  reward: shaped"]),
    # a nested key
    ("int.rloo.lr=1e-4", ["    lr: 5.0e-5"], ["    lr: 0.0001"]),
    # a list: the items that change, nothing around them
    ("problems.n_numbers=[3,4,5]", [], ["  - 5"]),
    ("evaluate.ks=[1,4]", ["  - 8", "  - 16"], []),
    ("replicates.int=[19,20]", [f"  - {s}" for s in range(21, 26)], []),
    # a chain's seed list, and a mapping of scalars
    ("replicates.rloo=[19,20,21,22,23,24]", ["  - 25"], []),
    ("report.chain_minutes.int=6.0", ["    int: 5.4"], ["    int: 6.0"]),
    # a null
    ("model.threads=2", ["  threads:"], ["  threads: 2"]),
])
def test_dvc_override_changes_only_the_overridden_lines(tmp_path, override, removed, added):
    got_removed, got_added = _changed_lines(tmp_path, override)
    assert ([_code(x) for x in got_removed], [_code(x) for x in got_added]) == (removed, added)


def test_the_one_replicate_run_sets_every_chain_in_one_flag(tmp_path):
    """README's one-replicate run: one `-S` sets every list of the `replicates` section (the
    keys it does not name keep their values: the one shared SFT), and only the dropped seeds'
    lines go."""
    flag = "replicates={seeds:[19],ipo:[19],rloo:[19],opd:[19],repair:[19],int:[19]}"
    removed, added = _changed_lines(tmp_path, flag)
    more = [f"  - {s}" for s in range(20, 26)]
    assert added == [] and [_code(x) for x in removed] == more + more[:4] + more
    # rloo and int (seven each), opd (five); seeds, ipo and repair are [19] already
    assert yaml.safe_load((tmp_path / "params.yaml").read_text())["replicates"] == \
        {"shared_sft": 19, **{key: [19] for key in ["seeds", "ipo", "rloo", "opd", "repair", "int"]}}
    assert f"dvc exp run -S '{flag}'" in (ROOT / "README.md").read_text()


def test_dvc_override_keeps_every_other_value(tmp_path):
    """The layout is DVC's, the values are ours: a no-op override leaves the file unchanged."""
    assert _changed_lines(tmp_path, "rloo.reward=binary") == ([], [])
    assert yaml.safe_load((tmp_path / "params.yaml").read_text()) == \
        yaml.safe_load((ROOT / "params.yaml").read_text())
