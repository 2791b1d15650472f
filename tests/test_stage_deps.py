"""dvc.yaml's code deps match what each stage runs.

For every stage, the library modules its script imports (transitively, within
countdown_rlvr, lazy imports inside functions included) must be covered by the stage's
`deps` (a file, or a directory holding it): otherwise a code change leaves a stale result
that `dvc status` calls up to date. And the reverse: a `src/` dep the stage never imports
re-runs it for nothing (e.g. training re-run by a change to the compare table's format).

dvc.yaml is generated with these deps (countdown_rlvr.cli.experiment, from the same import walk:
countdown_rlvr.cli.imports); this checks the committed file itself, whatever made it.
"""

from pathlib import Path

import pytest
import yaml

from countdown_rlvr.cli.imports import closure

ROOT = Path(__file__).resolve().parents[1]


def stages() -> dict[str, tuple[Path, list[str]]]:
    """stage name -> (script, deps) for every dvc.yaml stage (one per foreach template)."""
    out = {}
    for name, stage in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items():
        body = stage.get("do", stage)
        script = next(w for w in body["cmd"].split() if w.startswith("stages/"))
        out[name] = (ROOT / script, [str(d) for d in body.get("deps", [])])
    return out


def covered(path: Path, deps: list[str]) -> bool:
    return any(path == Path(d) or Path(d) in path.parents for d in deps)


@pytest.mark.parametrize("stage", sorted(stages()))
def test_every_module_a_stage_runs_is_a_dep(stage):
    script, deps = stages()[stage]
    assert covered(script.relative_to(ROOT), deps), f"{stage}: its script is not a dep"
    missing = sorted(str(p) for p in closure(script) if not covered(p, deps))
    assert not missing, f"dvc.yaml stage `{stage}` runs {missing}; add them to its deps"


@pytest.mark.parametrize("stage", sorted(stages()))
def test_no_stage_depends_on_library_code_it_never_runs(stage):
    script, deps = stages()[stage]
    runs = closure(script)
    unused = [d for d in deps if d.startswith("src/")
              and not any(p == Path(d) or Path(d) in p.parents for p in runs)]
    assert not unused, f"dvc.yaml stage `{stage}` depends on {unused} but never imports them"


def test_the_walk_sees_lazy_and_relative_imports():
    """The checker itself: report's lazy import of compare_markdown, train.runtime's relative
    imports and the package __init__ files are all seen; and the layering it guards: the
    report and the compare table load no model code, RL training runs no comparison code."""
    report = closure(ROOT / "stages/report.py")
    assert Path("src/countdown_rlvr/analysis/compare.py") in report  # imported inside a function
    assert not {Path("src/countdown_rlvr/model/policy.py"), Path("src/countdown_rlvr/eval/scoring.py")} & report
    assert Path("src/countdown_rlvr/analysis/compare.py") not in closure(ROOT / "stages/rloo.py")
    sft = closure(ROOT / "stages/sft.py")
    assert {Path("src/countdown_rlvr/train/runtime.py"), Path("src/countdown_rlvr/core/io.py"),
            Path("src/countdown_rlvr/__init__.py")} <= sft


def instances() -> dict[str, tuple[int, list[str]]]:
    """stage name -> (how many stages its matrix or foreach makes with params.yaml, its deps)."""
    import math
    import re

    from countdown_rlvr.core.config import at

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    out = {}
    for name, stage in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items():
        sizes = []
        loops = [*stage.get("matrix", {}).values(), *([stage["foreach"]] if "foreach" in stage else [])]
        for values in loops:
            ref = re.fullmatch(r"\$\{(.+)\}", values) if isinstance(values, str) else None
            sizes.append(len(at(params, ref.group(1))) if ref else len(values))
        out[name] = (math.prod(sizes), [str(d) for d in stage.get("do", stage).get("deps", [])])
    return out


def test_the_matrices_make_the_stages_dvc_runs():
    """The counting below, against the 64 stages the README states for the default params."""
    counts = {name: n for name, (n, _) in instances().items()}
    assert counts["check_params"] == 1 and counts["sft"] == len(
        yaml.safe_load((ROOT / "params.yaml").read_text())["replicates"]["seeds"])
    assert sum(counts.values()) == 64


def test_a_sections_rules_re_run_only_the_stages_that_read_it():
    """Editing RLOO's params rules re-runs the RL training stages the run trains and the params
    check (26 of the default 64), not the evaluations, data or SFT stages; no evaluation
    depends on the training code (a policy dir marked as untrained is read through
    countdown_rlvr.model)."""
    rules = Path("src/countdown_rlvr/core/rl_config.py")
    users = {name: n for name, (n, deps) in instances().items() if covered(rules, deps)}
    assert set(users) == {"check_params", "teacher", "rloo", "opd", "int"}, users
    assert not {"sft", "evaluate_rloo", "problems", "report"} & set(users)
    train = Path("src/countdown_rlvr/train")
    for name, (_, deps) in instances().items():
        if name.startswith("evaluate_"):
            assert not [d for d in deps if Path(d) == train or train in Path(d).parents], name
