"""The text a user reads names only paths and stages that exist.

Docs, docstrings, comments and printed messages go stale without failing anything: a metrics
file that moved to reports/details/, a stage of seed 0 after the default seeds started at 1.
These tests read the shipped text (README, docs, benchmarks, stages, the package, dvc.yaml's
and the params files' comments) and check two kinds of name against what DVC itself makes of
dvc.yaml + params.yaml:

- a `reports/metrics/...` path must be a metrics output dvc.yaml declares, lie under one, or
  be a folder above one (those are the files `dvc metrics show` reads);
- a stage name with an item, `name@item` (`sft@1`, `rloo@rloo_shaped-2`), must be a stage the
  default params make, or the merged name of its replicates (`ipo@easyneg`, as docs/dag.md
  draws them).
"""

from __future__ import annotations

import re
import shutil
from functools import cache
from pathlib import Path, PurePosixPath

import pytest
import yaml
from conftest import ROOT, merge

# Stages of the opt-in arms (params.secondary.yaml): text that describes them may name them.
SECONDARY = "params.secondary.yaml"
# Where text may also name the smoke run's stages (params.smoke.yaml, whose one replicate is
# seed 0), and why. Nowhere else: `sft@0` in general text is the stale name this guards.
SMOKE_TEXT = {
    "docs/gpu.md": "gpu_check's table: it runs the smoke params' first stages (evaluate_sft@0)",
    "benchmarks/gpu_check.py": "it runs the smoke params, whose stages are <stage>@0",
}

METRICS_PATH = re.compile(r"reports/metrics(?:/[\w.<>{}*-]+)*/?")
BRACES = re.compile(r"reports/\{([\w,]+)\}")  # reports/{details,metrics}/x: one path per name
# `name@item`: a stage name, not an e-mail address, decorator or `<stage>@<seed>` template
STAGE_NAME = re.compile(r"(?<![\w.@/-])([a-z][a-z0-9_]*)@([A-Za-z0-9][\w-]*)")


def _shipped_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted(p for p in (ROOT / "benchmarks").iterdir() if p.is_file()),
             *sorted((ROOT / "stages").glob("*.py")),
             *sorted((ROOT / "src").rglob("*.py"))]
    return [p for p in files if "__pycache__" not in p.parts]


def _comments(path: Path) -> str:
    """A YAML file's comments only (its values are checked by DVC and the params check)."""
    return "\n".join(line.split("#", 1)[1] if "#" in line else ""
                     for line in path.read_text().splitlines())


@cache
def shipped_text() -> dict[str, str]:
    """{repo-relative path: text}, one entry per file a user reads."""
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8", errors="replace")
             for p in _shipped_files()}
    for name in ("dvc.yaml", "params.yaml", "params.smoke.yaml", SECONDARY, "params.qwen.yaml"):
        if (ROOT / name).exists():
            texts[name] = _comments(ROOT / name)
    return texts


def _stages(root: Path) -> tuple[set[str], set[str]]:
    """Stage names DVC makes of root's dvc.yaml + params.yaml, and the metrics paths they
    declare (DVC's own loader, as `dvc repro` and cli/stage_map.py read them)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        stages = list(repo.index.stages)
        names = {s.name for s in stages}
        metrics = {o.def_path.rstrip("/") for s in stages for o in s.outs if o.metric}
    return names, metrics


def _stages_with(overrides: str, tmp: Path) -> set[str]:
    """Stage names under params.yaml with an overrides file merged in (a scratch DVC repo)."""
    from dvc.repo import Repo

    shutil.copy(ROOT / "dvc.yaml", tmp / "dvc.yaml")
    params = merge(yaml.safe_load((ROOT / "params.yaml").read_text()),
                   yaml.safe_load((ROOT / overrides).read_text()))
    (tmp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    Repo.init(str(tmp), no_scm=True)
    return _stages(tmp)[0]


@pytest.fixture(scope="module")
def dvc_names(tmp_path_factory) -> dict[str, set[str]]:
    default, metrics = _stages(ROOT)
    return {"default": default, "metrics": metrics,
            "secondary": _stages_with(SECONDARY, tmp_path_factory.mktemp("secondary")),
            "smoke": _stages_with("params.smoke.yaml", tmp_path_factory.mktemp("smoke"))}


def replicate_group(stage: str) -> str:
    """`sft@1` -> `sft`, `ipo@easyneg-2` -> `ipo@easyneg` (the merged name docs/dag.md draws)."""
    return re.sub(r"@\d+$|-\d+$", "", stage)


def metrics_path_ok(path: str, declared: set[str]) -> bool:
    """A declared metrics path, a file under one (`<policy>.json` placeholders included), or
    a folder above one."""
    p = PurePosixPath(path.rstrip("/."))
    return any(p == PurePosixPath(d) or PurePosixPath(d) in p.parents
               or p in PurePosixPath(d).parents for d in declared)


def metrics_mentions(text: str) -> list[tuple[int, str]]:
    """(offset, path) of every reports/metrics path in text, brace lists expanded."""
    out = [(m.start(), m.group(0)) for m in METRICS_PATH.finditer(text)]
    for m in BRACES.finditer(text):
        if "metrics" in m.group(1).split(","):
            rest = re.match(r"[\w./<>{}*-]*", text[m.end():]).group(0)
            out.append((m.start(), f"reports/metrics{rest}"))
    return out


def stage_mentions(text: str, groups: set[str]) -> list[str]:
    """Every `name@item` in text whose name is a stage of dvc.yaml (other `x@y` are not
    stage names: addresses, `git@host`)."""
    return [(m.start(), m.group(0)) for m in STAGE_NAME.finditer(text)
            if m.group(1) in groups and not _template(m, text)]


def _template(m: re.Match, text: str) -> bool:
    """`rloo@rloo-<seed>`, `rloo@rloo-*`, `sft@s` (s: a seed): a pattern, not a name."""
    return text[m.end():m.end() + 1] in ("<", "*", "{", "$") or \
        re.fullmatch(r"[a-z]", re.split(r"-", m.group(2))[-1]) is not None


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def test_metrics_paths_are_declared(dvc_names):
    declared = dvc_names["metrics"]
    assert declared, "dvc.yaml declares no metrics: the check below would pass vacuously"
    stale = [f"{name}:{_line(text, at)}: {path}" for name, text in shipped_text().items()
             for at, path in metrics_mentions(text) if not metrics_path_ok(path, declared)]
    assert not stale, ("paths under reports/metrics/ that dvc.yaml declares no metrics for "
                       f"(declared: {sorted(declared)}; per-stage details are in "
                       "reports/details/):\n" + "\n".join(stale))


def test_stage_names_are_made_by_the_default_params(dvc_names):
    default = dvc_names["default"] | dvc_names["secondary"]
    groups = {n.split("@")[0] for n in dvc_names["default"] | dvc_names["secondary"]}
    known = default | {replicate_group(n) for n in default}
    smoke = dvc_names["smoke"] | {replicate_group(n) for n in dvc_names["smoke"]}
    stale = [f"{name}:{_line(text, at)}: {token}" for name, text in shipped_text().items()
             for at, token in stage_mentions(text, groups)
             if token not in known and not (name in SMOKE_TEXT and token in smoke)]
    assert not stale, ("stage names that params.yaml (or the opt-in params.secondary.yaml) "
                       "does not make: `dvc dag NAME` / `dvc repro NAME` would fail (the "
                       "seeds are in params.yaml's `replicates`):\n" + "\n".join(stale))


def test_the_checks_catch_what_they_guard():
    """The two rules on made-up text: they are not vacuous."""
    declared = {"reports/metrics/eval", "reports/metrics/claims"}
    assert metrics_path_ok("reports/metrics/eval/<policy>.json", declared)
    assert metrics_path_ok("reports/metrics/", declared)
    assert not metrics_path_ok("reports/metrics/pairs.json", declared)
    assert not metrics_path_ok("reports/metrics/rloo/r<seed>.json", declared)
    text = ("run `dvc dag sft@0`, then rloo@rloo_shaped-2; mail a@b.org; @pytest.mark; sft@<seed>"
            ", rloo@rloo-*, sft@s")
    assert [t for _, t in stage_mentions(text, {"sft", "rloo"})] == ["sft@0", "rloo@rloo_shaped-2"]
    braces = "writes reports/{details,metrics,timings}/int/r<seed>.json; reports/{details,timings}/x"
    assert [p for _, p in metrics_mentions(braces)] == ["reports/metrics/int/r<seed>.json"]
    assert replicate_group("evaluate_distill@R-1") == "evaluate_distill@R"
