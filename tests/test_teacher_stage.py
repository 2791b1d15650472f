"""Stage `teacher` with `init: pretrain`: the teacher preset gets its own pre-training (the base
section's corpus and loop), then the trace training, without the student's base."""

import json
import random
import runpy
import sys

import pytest
import yaml
from conftest import ROOT, merge

from countdown_rlvr.core.config import from_section
from countdown_rlvr.core.io import StageError
from countdown_rlvr.core.teacher_config import Teacher
from countdown_rlvr.data.traces import solver_traces
from countdown_rlvr.model.policy import load_model, n_parameters, new_tiny
from countdown_rlvr.task.generate import generate_problems
from countdown_rlvr.task.prompts import solve_prompt

# a few steps of each phase at tiny sizes: seconds on one core
TINY_BASE = {"corpus_size": 200, "max_steps": 8, "batch_size": 4, "max_len": 64, "log_every": 4}
TINY_TEACHER = {"init": "pretrain", "max_steps": 2, "batch_size": 4, "log_every": 1, "rl": None}


def _params() -> dict:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["base"].update(TINY_BASE)
    params["teacher"].update(TINY_TEACHER)
    # the 8 train problems and their solver traces the tests write (the stage checks the
    # files' row counts against these: core.inputs)
    params["problems"]["n_train"] = params["traces"]["n_problems"] = 8
    params["traces"]["per_problem"] = 1
    return params


def _solver_traces(n: int) -> list[dict]:
    rng = random.Random(0)
    return [r for i, p in enumerate(generate_problems(n, 0, "train"))
            for r in solver_traces(p.to_dict(), solve_prompt(p.numbers, p.target, "tiny"),
                                   ("direct", "search"), 1, rng, offset=i)]


def test_init_pretrain_trains_the_teacher_preset_on_the_base_corpus_first(tmp_path, monkeypatch):
    params = _params()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    traces = tmp_path / "data/traces/solver.jsonl"
    traces.parent.mkdir(parents=True)
    traces.write_text("".join(json.dumps(r) + "\n" for r in _solver_traces(8)))
    monkeypatch.chdir(tmp_path)  # no data/models/base: init: pretrain builds its own
    monkeypatch.setattr(sys, "argv", ["teacher.py"])
    runpy.run_path(str(ROOT / "stages/teacher.py"), run_name="__main__")

    model, _ = load_model(str(tmp_path / "data/models/teacher"))
    teacher_size = n_parameters(new_tiny("teacher", 0)[0])
    assert n_parameters(model) == teacher_size != n_parameters(new_tiny("student", 0)[0])
    details = json.loads((tmp_path / "reports/details/teacher.json").read_text())
    assert (details["init"], details["tiny_preset"], details["n_params"]) == \
        ("pretrain", "teacher", teacher_size)
    pre = details["pretrain"]
    assert (pre["corpus_docs"], pre["steps"], pre["stopped_by"]) == (200, 8, "max_steps")
    assert pre["loss_final"] < pre["loss_first"]  # the pre-training learnt from its corpus
    assert details["steps"] == 2  # then the trace training, as before
    timing = json.loads((tmp_path / "reports/timings/teacher.json").read_text())
    assert set(timing["phases"]) == {"pretrain", "train"}
    assert timing["seconds"] == pytest.approx(sum(timing["phases"].values()), abs=0.02)
    assert timing["phases"]["pretrain"] > 0


def test_a_bad_init_names_the_choices():
    params = _params()
    params["teacher"]["init"] = "pretrained"
    with pytest.raises(StageError, match=r"`teacher.init` is 'pretrained'; allowed: one of "
                                         r"pretrain, base, scratch"):
        from_section(Teacher, "teacher", params, "teacher")


def test_teacher_rl_trains_the_teacher_further_by_rloo_after_its_traces(tmp_path, monkeypatch):
    """teacher.rl: the trace training, then RLOO on the train problems; one curve dir with the
    RL phase's curves named rl/<name> after the trace steps, its summary in the details and
    its time a phase of the stage's."""
    params = _params()
    full_rl = yaml.safe_load((ROOT / "params.yaml").read_text())["teacher"]["rl"]
    params["teacher"].update(init="scratch", rl=merge(full_rl, {
        "steps": 2, "prompts_per_step": 2, "group_size": 2, "curriculum": False,
        "n_problems": 8, "gen_batch_size": 4, "micro_batch": 4, "log_every": 1,
        "sampler": {"max_new_tokens": 8}}))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    traces = tmp_path / "data/traces/solver.jsonl"
    traces.parent.mkdir(parents=True)
    traces.write_text("".join(json.dumps(r) + "\n" for r in _solver_traces(8)))
    train = tmp_path / "data/problems/train.jsonl"
    train.parent.mkdir(parents=True)
    train.write_text("".join(json.dumps(p.to_dict()) + "\n"
                             for p in generate_problems(8, 0, "train")))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["teacher.py"])
    runpy.run_path(str(ROOT / "stages/teacher.py"), run_name="__main__")

    details = json.loads((tmp_path / "reports/details/teacher.json").read_text())
    assert details["steps"] == 2  # the trace training's
    assert (details["rl"]["reward"], details["rl"]["steps"], details["rl"]["rollouts"]) == \
        (params["teacher"]["rl"]["reward"], 2, 2 * 2 * 2)
    curves = tmp_path / "dvclive/teacher/plots/metrics"
    sft_steps = [line.split("\t")[0] for line in
                 (curves / "train/loss.tsv").read_text().splitlines()[1:]]
    rl_steps = [line.split("\t")[0] for line in
                (curves / "rl/pass_rate.tsv").read_text().splitlines()[1:]]
    assert (sft_steps, rl_steps) == (["0", "1"], ["2", "3"])  # the RL phase counts on
    timing = json.loads((tmp_path / "reports/timings/teacher.json").read_text())
    assert set(timing["phases"]) == {"train", "rl"} and timing["phases"]["rl"] > 0
    assert load_model(str(tmp_path / "data/models/teacher"))[0] is not None
