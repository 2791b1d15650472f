"""What a key or an edit re-runs (countdown_rlvr.cli.cost), read from DVC's view of dvc.yaml:
no training key reaches a shared stage or SFT, a file feeds only the stages that run it, and
the generated tables in the docs are current."""

from __future__ import annotations

import argparse
import json

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
    changed S0's arms (the early arms over rloo) are gone; the binary arm and the int stage,
    which inherits it, follow rloo."""
    stages = pipe.by_key("rloo.lr")
    assert "teacher" not in stages and not {s for s in stages if "rloo_early" in s}
    assert any(s.startswith("rloo@rloo-") for s in stages)
    assert any(s.startswith("int@") for s in stages)
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


def _timing_out(stage: dict) -> str | None:
    return next((o["path"] for o in stage.get("outs", [])
                 if o["path"].startswith("reports/timings/")), None)


def test_prices_are_the_committed_runs_timing_files_as_dvc_lock_lists_them():
    """Every timing file dvc.lock records, at its seconds; the lock's own stages priced (with
    the extra samples its params ask for) add up to the committed run's wall time (UNTIMED_S
    is that run's remainder, rounded to the second), less what the stages re-run since took
    off their timing files (RERUN_SAVED_S); a replicate that run did not train is
    its timing group's mean, an untimed stage UNTIMED_S, a stage with no history OVERHEAD_S +
    UNTIMED_S."""
    times = cost.committed_times(ROOT)
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    timed = {t for st in lock.values() if (t := _timing_out(st))
             and "seconds" in json.loads((ROOT / t).read_text())}  # dedup's: embeddings/s
    assert set(times) == timed and "reports/timings/sft/r19.json" in times
    params = yaml.safe_load((ROOT / "params.yaml").read_text())  # the run's: its extra samples
    whole = sum(cost.stage_seconds(_timing_out(st), times) + cost.extra_samples(st["cmd"], params)
                for st in lock.values())
    assert abs(whole - (cost.COMMITTED_WALL_S - cost.RERUN_SAVED_S)) < 60
    sft = [v for p, v in times.items() if p.startswith("reports/timings/sft/r")]
    assert sft and cost.stage_seconds("reports/timings/sft/r999.json", times) == \
        pytest.approx(cost.OVERHEAD_S + sum(sft) / len(sft))
    assert cost.stage_seconds(None, times) == cost.UNTIMED_S
    assert cost.stage_seconds("reports/timings/no_such_arm/r1.json", times) == \
        cost.OVERHEAD_S + cost.UNTIMED_S


def test_a_whole_run_is_priced_stage_by_stage_with_the_samples_it_asks_for(pipe, params):
    """`cost --run`: the params as they are make dvc.yaml's stages, each at its price; more
    samples for a policy (`evaluate.n_by_policy`) add SAMPLE_S per 16 per 400 problems of every
    split it samples: the dev split too for a policy of `evaluate.dev_policies`."""
    total, groups = cost.run_estimate(params, ROOT)
    assert sum(n for n, _ in groups.values()) == len(pipe.params)
    assert total == pytest.approx(sum(sec for _, sec in groups.values()))
    n = params["evaluate"]["n"]
    assert params["evaluate"]["n_by_policy"]["opd_ac"] > n
    assert "opd" in params["evaluate"]["dev_policies"]
    assert "opd_ac" not in params["evaluate"]["dev_policies"]
    for policy, splits in (("opd_ac", 1), ("opd", 2)):  # opd: test and dev, 400 each
        more = params["evaluate"]["n_by_policy"][policy]
        fewer = cost.with_overrides(params, [f"evaluate.n_by_policy.{policy}={n}"])
        total2, _ = cost.run_estimate(fewer, ROOT)
        stages = groups[f"evaluate_opd@{policy}"][0]
        saved = stages * cost.SAMPLE_S * (more - n) / 16 * splits
        assert saved > 0
        assert total - total2 == pytest.approx(saved)


def test_an_int_stage_adds_its_claim_samples(params):
    """int.claim_samples prices phase 7 in every int stage beyond the committed run's (whose
    timings hold it): 2 arms x its held-out problems (int.n_problems x the unsolved share x
    int.heldout_frac) x the samples more, INT_SAMPLE_S each; fewer take that off."""
    cmd = "python stages/int.py 19"
    assert params["int"]["claim_samples"] == cost.COMMITTED_CLAIM_SAMPLES == 32
    assert cost.extra_samples(cmd, params) == 0
    many = cost.with_overrides(params, ["int.claim_samples=64"])
    held = params["int"]["n_problems"] * cost.UNSOLVED_SHARE * params["int"]["heldout_frac"]
    assert cost.extra_samples(cmd, many) == pytest.approx(cost.INT_SAMPLE_S * 2 * 32 * held)
    off = cost.with_overrides(params, ["int.claim_samples=0"])
    assert cost.extra_samples(cmd, off) == pytest.approx(-cost.INT_SAMPLE_S * 2 * 32 * held)
    assert 280 < held < 330  # the committed run's replicates held out 284-325
    total, groups = cost.run_estimate(params, ROOT)
    total64, _ = cost.run_estimate(many, ROOT)
    n_int = groups["int"][0]
    assert total64 - total == pytest.approx(n_int * cost.extra_samples(cmd, many))


def test_a_design_the_params_check_refuses_is_not_priced(capsys):
    args = argparse.Namespace(overrides=["evaluate.n_by_policy={rloo:64}"], file=[],
                              write=False, check=False, whole=True)
    assert cost.run(args, ROOT) == 2
    err = capsys.readouterr().err
    assert "evaluate.n_by_policy" in err and "rloo:64" in err
