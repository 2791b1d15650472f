"""Stage `problems`: the four splits are pairwise disjoint, and the `unseen` pool (the
interventions' problems) shares no problem with anything a stage trains on."""

import json
import runpy
import sys

import yaml
from conftest import ROOT

from countdown_rlvr.task import problem_key


def test_the_unseen_split_is_disjoint_from_every_trained_and_evaluated_split(tmp_path, monkeypatch):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["problems"].update(n_train=400, count_train_solutions=0, n_test=40, n_ood=10,
                              n_unseen=60)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["problems.py"])
    runpy.run_path(str(ROOT / "stages/problems.py"), run_name="__main__")
    splits = {name: [json.loads(line) for line in
                     (tmp_path / f"data/problems/{name}.jsonl").read_text().splitlines()]
              for name in ("train", "test", "ood", "unseen")}
    assert {k: len(v) for k, v in splits.items()} == {"train": 400, "test": 40, "ood": 10,
                                                     "unseen": 60}
    keys = {name: {problem_key(p["numbers"], p["target"]) for p in probs}
            for name, probs in splits.items()}
    names = list(keys)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not keys[a] & keys[b], (a, b)
    assert all(p["id"].startswith("unseen-") for p in splits["unseen"])
    # the same operand mix as the train split (what the student was trained on)
    assert {p["n_numbers"] for p in splits["unseen"]} == set(params["problems"]["n_numbers"])
