"""Stage `problems`: the five splits are pairwise disjoint, the `unseen` pool (the
interventions' problems) shares no problem with anything a stage trains on, `dev` is the test
split the previous run decided on (drawn again from `problems.dev_seed`), the first runs' test
split stays out of every split, and the confirmatory `test` split depends on neither the train
size nor the interventions' pool."""

import json
import runpy
import sys
from dataclasses import replace

import pytest
import yaml
from conftest import ROOT

from countdown_rlvr.core.config import from_section
from countdown_rlvr.core.data_config import Problems
from countdown_rlvr.core.errors import StageError
from countdown_rlvr.task.generate import generate_problems, problem_key

SMALL = {"n_train": 400, "count_train_solutions": 0, "n_dev": 40, "n_test": 40, "n_ood": 10,
         "n_unseen": 60}


def small_config(**changes) -> Problems:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["problems"].update(SMALL, **changes)
    return from_section(Problems, "test", params, "problems")


def make_splits(cfg: Problems) -> dict[str, list]:
    stage = runpy.run_path(str(ROOT / "stages/problems.py"), run_name="problems_stage")
    return stage["make_splits"](cfg)


def test_the_splits_are_pairwise_disjoint_and_unseen_has_trains_mix(tmp_path, monkeypatch):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["problems"].update(SMALL)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["problems.py"])
    runpy.run_path(str(ROOT / "stages/problems.py"), run_name="__main__")
    splits = {name: [json.loads(line) for line in
                     (tmp_path / f"data/problems/{name}.jsonl").read_text().splitlines()]
              for name in ("train", "dev", "test", "ood", "unseen")}
    assert {k: len(v) for k, v in splits.items()} == {"train": 400, "dev": 40, "test": 40,
                                                     "ood": 10, "unseen": 60}
    keys = {name: {problem_key(p["numbers"], p["target"]) for p in probs}
            for name, probs in splits.items()}
    names = list(keys)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not keys[a] & keys[b], (a, b)
    for name, probs in splits.items():
        assert [p["id"] for p in probs] == [f"{name}-{i:05d}" for i in range(len(probs))]
        assert {p["split"] for p in probs} == {name}
    # the same operand mix as the train split (what the student was trained on)
    assert {p["n_numbers"] for p in splits["unseen"]} == set(params["problems"]["n_numbers"])
    details = json.loads((tmp_path / "reports/details/problems.json").read_text())
    assert {name: details[name]["count"] for name in splits} == {
        k: len(v) for k, v in splits.items()}


def keys(problems) -> set:
    return {problem_key(q.numbers, q.target) for q in problems}


def test_dev_is_the_previous_runs_test_split_renamed_and_the_first_stays_out():
    cfg = small_config()
    splits = make_splits(cfg)
    mix = (tuple(cfg.n_numbers), tuple(cfg.number_range), tuple(cfg.target_range))
    first = generate_problems(cfg.n_dev, cfg.seed, "test", *mix)
    # the previous run drew its test split from dev_seed excluding the first runs' split: the
    # code of that run, as it was (make_splits before dev_seed existed)
    previous_test = generate_problems(cfg.n_dev, cfg.dev_seed, "test", *mix,
                                      exclude=keys(first))
    assert splits["dev"] == [replace(q, id=f"dev-{i:05d}", split="dev")
                             for i, q in enumerate(previous_test)]
    for name, probs in splits.items():  # pilots tuned on the first runs' test split
        assert not keys(probs) & keys(first), name
    # the confirmatory split: another stream, the same mix
    assert [q.n_numbers for q in splits["test"]] == [q.n_numbers for q in first]
    assert not keys(splits["test"]) & keys(splits["dev"])


def test_a_seed_shared_by_two_splits_is_refused():
    for a, b in (("seed", "test_seed"), ("dev_seed", "test_seed"), ("seed", "dev_seed")):
        value = small_config().__getattribute__(a)
        with pytest.raises(StageError, match=f"problems.{b} must differ from problems.{a}"):
            small_config(**{b: value})


def test_the_test_split_follows_its_seed_not_the_train_size_or_the_pool():
    base = make_splits(small_config())
    bigger = make_splits(small_config(n_train=600, n_unseen=120))
    assert bigger["test"] == base["test"] and bigger["dev"] == base["dev"]
    assert bigger["unseen"][:60] == base["unseen"]  # a larger pool extends the smaller one
    other = make_splits(small_config(test_seed=small_config().test_seed + 1))
    assert other["test"] != base["test"] and other["dev"] == base["dev"]
    moved = make_splits(small_config(dev_seed=small_config().dev_seed - 1))
    assert moved["dev"] != base["dev"]
