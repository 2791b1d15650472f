"""The process settings a stage wants before torch loads (OpenMP's wait policy, 2 MB pages)
are set by every stage script as it starts, not by importing the package."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from countdown_rlvr.core.stage_env import stage_env

ROOT = Path(__file__).resolve().parents[1]
STAGES = sorted((ROOT / "stages").glob("*.py"))


def test_importing_the_package_sets_and_reads_nothing():
    """A library import leaves the caller's environment as it was and opens no file outside
    the package (it used to read /proc/loadavg and set two variables)."""
    code = """
import builtins, io, json, os, sys
opened = []
real_open, real_io_open = builtins.open, io.open
def spy(f, *a, **k):
    opened.append(str(f))
    return real_open(f, *a, **k)
builtins.open = io.open = spy
before = dict(os.environ)
import countdown_rlvr, countdown_rlvr.core, countdown_rlvr.core.stage_env
builtins.open, io.open = real_open, real_io_open
print(json.dumps({"changed": sorted(set(os.environ.items()) ^ set(before.items())),
                  "opened": opened}))
"""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")}  # neither variable set
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True)
    out = json.loads(proc.stdout)
    assert out == {"changed": [], "opened": []}


@pytest.mark.parametrize("shared", [False, True])
def test_stage_env_sets_what_is_unset_and_keeps_an_explicit_value(shared):
    assert stage_env({}, lambda: shared) == {
        "THP_MEM_ALLOC_ENABLE": "1", "MKL_DYNAMIC": "FALSE", "OMP_DYNAMIC": "FALSE",
        **({"OMP_WAIT_POLICY": "PASSIVE"} if shared else {})}
    explicit = {"OMP_WAIT_POLICY": "ACTIVE", "THP_MEM_ALLOC_ENABLE": "0", "MKL_DYNAMIC": "TRUE",
                "OMP_DYNAMIC": "TRUE"}
    assert stage_env(explicit, lambda: shared) == {}


def test_the_cores_are_probed_only_when_the_wait_policy_is_unset():
    probes = []
    stage_env({"OMP_WAIT_POLICY": "PASSIVE"}, lambda: probes.append(1) or True)
    assert probes == []


def _setup_line(tree: ast.Module) -> int | None:
    """The line of the script's top-level `os.environ.update(stage_env())`, if any."""
    for node in tree.body:
        if isinstance(node, ast.Expr) and ast.unparse(node) == "os.environ.update(stage_env())":
            return node.lineno
    return None


@pytest.mark.parametrize("script", STAGES, ids=[p.stem for p in STAGES])
def test_every_stage_sets_its_environment_before_any_import_that_may_load_torch(script):
    """Only the standard library and the stage_env module may be imported above the call:
    OpenMP and PyTorch read these variables once, when torch loads."""
    tree = ast.parse(script.read_text())
    line = _setup_line(tree)
    assert line is not None, f"{script.name} does not call os.environ.update(stage_env())"
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) and node.lineno < line:
            names = [node.module] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names]
            for name in names:
                assert name == "countdown_rlvr.core.stage_env" or \
                    name.split(".")[0] in sys.stdlib_module_names, (script.name, name)
