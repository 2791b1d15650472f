"""What a key or an edit re-runs (countdown_rlvr.cli.cost), read from DVC's view of dvc.yaml:
no training key reaches a shared stage or SFT, a file feeds only the stages that run it, and
the generated tables in the docs are current."""

from __future__ import annotations

import argparse

import pytest
import yaml
from conftest import ROOT

from countdown_rlvr.cli import cost
from countdown_rlvr.cli.imports import closure


@pytest.fixture(scope="module")
def pipe() -> cost.Pipeline:
    return cost.Pipeline.load(ROOT)


@pytest.fixture(scope="module")
def params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def _upstream(stages: set[str]) -> set[str]:
    return {s for s in stages if s in cost.UPSTREAM or s.split("@")[0] == "sft"}


def test_no_training_key_reaches_a_shared_stage_or_sft(pipe, params):
    """Every key of rloo, opd, ipo, int, distill, repair and of every arm section over them
    re-runs its own chain: no shared upstream stage, no SFT."""
    from countdown_rlvr.core.arms import ARMS
    sections = {*cost.TRAINING_SECTIONS, *(a.name for a in ARMS)}
    reached = {k: _upstream(pipe.by_key(k)) for k in cost.leaf_keys(params)
               if k.split(".")[0] in sections}
    assert len(reached) > 100  # every key, not none
    assert {k: s for k, s in reached.items() if s} == {}


def test_an_rloo_variant_leaves_the_teacher_and_s0s_arms(pipe):
    """The two inheritances that made an RLOO variant a whole run (teacher.rl over rloo) or
    changed S0's arms (the early arms over rloo) are gone; rloo_shaped still follows rloo."""
    stages = pipe.by_key("rloo.lr")
    assert "teacher" not in stages and not {s for s in stages if "rloo_early" in s}
    assert any(s.startswith("rloo@rloo_shaped") for s in stages)
    # the early arms set their own steps from the start: lr now reaches the same arms
    assert stages == pipe.by_key("rloo.steps")


def test_a_section_key_reaches_downstream_only_through_outputs(pipe):
    """sft.lr re-runs every SFT replicate and what reads them, not the data stages."""
    stages = pipe.by_key("sft.lr")
    assert {s for s in stages if s.startswith("sft@")} == \
        {s for s in pipe.params if s.startswith("sft@")}
    assert not stages & {"problems", "base", "traces", "teacher", "dedup", "pairs"}


def test_code_deps_are_the_files_each_script_runs(pipe):
    """No stage lists a file its script never imports, and none lists a folder; the
    problem generator feeds the stage that generates problems only."""
    for stage, files in pipe.files.items():
        script = next(f for f in files if f.startswith("stages/"))
        runs = {str(p) for p in closure(ROOT / script)}
        lib = {f for f in files if f.startswith("src/")}
        assert lib == runs, stage
    fed = {s for s, fs in pipe.files.items() if "src/countdown_rlvr/task/generate.py" in fs}
    assert fed == {"problems"}


def test_the_generated_tables_are_current():
    stale = [p for p, text in cost.rendered(ROOT).items() if p.read_text() != text]
    assert not stale, "run `countdown-rlvr cost --write`"


def test_the_cost_command_names_the_stages_and_the_missing_outputs(pipe, capsys, tmp_path):
    args = argparse.Namespace(overrides=["rloo.lr=5e-5"], file=[], write=False, check=False,
                              whole=False)
    assert cost.run(args, ROOT) == 0
    out = capsys.readouterr().out
    n = len(pipe.by_key("rloo.lr")) + 1  # and the params check, which re-runs on any change
    assert out.startswith(f"-S rloo.lr=5e-5: {n} of {len(pipe.params)} stages")
    assert "  rloo@rloo x" in out and "teacher" not in out.split("this workspace")[0]
    if pipe.missing(ROOT):  # a clone without the data: says what making it first costs
        assert "this workspace lacks the outputs" in out


def test_an_unchanged_value_re_runs_nothing_and_a_bad_key_is_named(params, capsys):
    lr = params["rloo"]["lr"]
    assert cost.override_keys([f"rloo.lr={lr}"], params) == []
    with pytest.raises(SystemExit, match="not a params.yaml key"):
        cost.override_keys(["rloo.lrr=1"], params)
    with pytest.raises(SystemExit, match="key=value"):
        cost.override_keys(["rloo.lr"], params)


def test_a_whole_run_is_priced_at_the_committed_run_stage_by_stage(pipe, params):
    """`cost --run`: the params as they are make the committed run's 122 stages, priced at
    its 165 min 14 s (the untimed stages' share is that run's remainder, rounded to the
    second); a design with one shared SFT drops the other SFT replicates, prices a new
    replicate at its group's mean, and adds the sampling `evaluate.n_by_policy` asks for."""
    total, groups = cost.run_estimate(params, ROOT)
    assert sum(n for n, _ in groups.values()) == len(pipe.params) == 122
    assert abs(total - 9914) < 60  # 165 min 14 s
    own = {s: pipe.seconds({s}, ROOT) for s in pipe.params}
    assert groups["sft"] == (5, pytest.approx(sum(v for s, v in own.items()
                                                    if s.startswith("sft@"))))
    lists = "{seeds: [6], rloo: [6, 11], opd: [11], int: [6], ipo: [6], repair: [6]}"
    design = cost.with_overrides(params, ["replicates.shared_sft=6", f"replicates={lists}",
                                          "evaluate.n_by_policy={opd_ac: 64}"])
    assert design["replicates"]["seeds"] == [6] and design["rloo"] == params["rloo"]
    total2, groups2 = cost.run_estimate(design, ROOT)
    assert groups2["sft"] == (1, pytest.approx(own["sft@6"]))
    rloo = [v for s, v in own.items() if s.startswith("rloo@rloo-")]
    assert groups2["rloo@rloo"] == (2, pytest.approx(own["rloo@rloo-6"] + sum(rloo) / len(rloo)))
    for arm, extra in (("opd_ac", 3 * cost.SAMPLE_S), ("opd", 0.0)):  # 48 more: 3 x 16
        evals = [v for s, v in own.items() if s.startswith(f"evaluate_opd@{arm}-")]
        assert groups2[f"evaluate_opd@{arm}"] == (1, pytest.approx(
            sum(evals) / len(evals) + extra))
    assert total2 < total


def test_a_design_the_params_check_refuses_is_not_priced(capsys):
    args = argparse.Namespace(overrides=["evaluate.n_by_policy={rloo:64}"], file=[],
                              write=False, check=False, whole=True)
    assert cost.run(args, ROOT) == 2
    err = capsys.readouterr().err
    assert "evaluate.n_by_policy" in err and "rloo:64" in err
