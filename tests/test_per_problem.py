"""Per-problem records (reports/details/per_problem/<split>.csv): what the compare stage's
tests are computed from, committed so that a reader refits a contrast without the evaluation
records. Built here from a small synthetic evaluation, written and read back as CSV, refitted
with scripts/refit_claim.py, and checked against what compare_replicates stores in
compare.json for the same contrast."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from countdown_rlvr.analysis.compare import (
    PER_PROBLEM_COLUMNS,
    SHARED,
    compare_replicates,
    fmt_ci,
    fmt_p,
    pair_key,
    per_problem_records,
)
from countdown_rlvr.eval.metrics import pass_at_k

ROOT = Path(__file__).resolve().parents[1]
REFIT = runpy.run_path(str(ROOT / "scripts/refit_claim.py"))  # its functions, not main
SPLITS = {"test": 30, "ood": 8}
SEEDS, N = (0, 1), 4  # two sampling seeds of four samples: n = 8 per problem
PAIRS = [["rloo", "sft"], ["sft", "base"], ["nocurr", "sft"], ["ghost", "sft"],
         ["teacher", "rloo"], ["teacher", "base"]]


def evaluation(policy: str, skill: float, offset: float, seed: int) -> pd.DataFrame:
    """Records as evaluate writes them: every problem of every split, n samples per seed."""
    rng = np.random.default_rng(seed)
    rows = []
    for split, count in SPLITS.items():
        difficulty = np.random.default_rng(len(split)).normal(size=count)  # shared by all
        for i, d in enumerate(difficulty):
            q = 1 / (1 + np.exp(-(skill + offset + 1.5 * d - (2 if split == "ood" else 0))))
            for s in SEEDS:
                for j, c in enumerate(rng.random(N) < q):
                    rows.append({"problem_id": f"{split}-{i:05d}", "split": split,
                                 "n_numbers": 3, "seed": s, "sample": j, "correct": bool(c),
                                 "failure": None if c else "WRONG_TARGET",
                                 "reward": float(c), "n_tokens": 5})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def run():
    """Shared base and teacher, SFT and RLOO over three replicates (each draw offset), a
    first-replicate-only arm, and one not trained (empty records)."""
    offsets = np.random.default_rng(7).normal(0, 0.3, size=3)
    recs = {"base": {SHARED: evaluation("base", -3.0, 0.0, 1)},
            "teacher": {SHARED: evaluation("teacher", 0.2, 0.0, 2)}}
    for p, (skill, first) in {"sft": (-1.0, 10), "rloo": (-0.4, 20)}.items():
        recs[p] = {f"r{r}": evaluation(p, skill, offsets[r - 1], first + r) for r in (1, 2, 3)}
    recs["nocurr"] = {"r1": evaluation("nocurr", -0.6, offsets[0], 31)}
    recs["ghost"] = {"r1": evaluation("ghost", 0.0, 0.0, 41).iloc[:0]}
    report = compare_replicates(recs, PAIRS, [1, 4], splits=list(SPLITS), n_boot=50)
    return recs, json.loads(json.dumps(report))  # as compare.json holds it


def written(run, dest: Path) -> Path:
    for split, frame in per_problem_records(run[0], list(SPLITS)).items():
        frame.to_csv(dest / f"{split}.csv", index=False, lineterminator="\n")
    return dest


def test_one_row_per_policy_replicate_and_problem_with_correct_of_n(run, tmp_path):
    recs, _ = run
    frame = REFIT["load"](written(run, tmp_path), "test")
    assert tuple(frame.columns) == PER_PROBLEM_COLUMNS
    runs = {(p, t) for p, r in recs.items() for t, f in r.items() if len(f)}
    assert set(zip(frame["policy"], frame["replicate"])) == runs  # ghost: not trained, no rows
    assert len(frame) == len(runs) * SPLITS["test"] and (frame["n"] == len(SEEDS) * N).all()
    one = recs["rloo"]["r2"]
    one = one[(one["split"] == "test") & (one["problem_id"] == "test-00003")]
    row = frame[(frame["policy"] == "rloo") & (frame["replicate"] == "r2")
                & (frame["problem_id"] == "test-00003")]
    assert int(row["correct"].iloc[0]) == int(one["correct"].sum())  # both seeds pooled
    # diff-friendly: rows sorted by policy, replicate seed, problem; one split per file
    key = frame["replicate"].map(lambda t: -1 if t == SHARED else int(t[1:]))
    assert frame.assign(key=key).sort_values(["policy", "key", "problem_id"]).index.equals(
        frame.index)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ood.csv", "test.csv"]


@pytest.mark.parametrize("split", list(SPLITS))
@pytest.mark.parametrize("a, b", [("rloo", "sft"), ("sft", "base"), ("teacher", "rloo")])
@pytest.mark.parametrize("k", [1, 4])
def test_a_refit_from_the_records_alone_is_compare_jsons_crossed_test(run, tmp_path, split,
                                                                       a, b, k):
    stored = run[1]["pairs"][pair_key(a, b)][split][f"k{k}"]["crossed"]
    res = REFIT["refit"](REFIT["load"](written(run, tmp_path), split), a, b, k)
    assert res.n == stored["n"] == 3 and res.n_problems == SPLITS[split]
    # to print precision (the report's), and in fact to the last bit: the same matrix
    assert fmt_ci(res.mean, res.ci_low, res.ci_high, "+.3f") == fmt_ci(
        stored["mean"], stored["ci_low"], stored["ci_high"], "+.3f")
    assert fmt_p(res.pvalue) == fmt_p(stored["pvalue"])
    assert (res.mean, res.pvalue, res.df) == pytest.approx(
        (stored["mean"], stored["pvalue"], stored["df"]), rel=1e-12)


def test_the_refit_effect_is_the_mean_pass_at_k_difference(run, tmp_path):
    """The closed form: the crossed test's effect is the mean over problems and replicates of
    pass@k(a) - pass@k(b), each from its own correct of n."""
    frame = REFIT["load"](written(run, tmp_path), "test")
    value = frame.apply(lambda r: pass_at_k(int(r["n"]), int(r["correct"]), 4), axis=1)
    mean = frame.assign(v=value).groupby("policy")["v"].mean()
    assert REFIT["refit"](frame, "rloo", "sft", 4).mean == pytest.approx(
        mean["rloo"] - mean["sft"], abs=1e-12)


def test_one_replicate_is_no_test_and_bad_requests_name_the_fix(run, tmp_path):
    frame = REFIT["load"](written(run, tmp_path), "test")
    assert REFIT["refit"](frame, "nocurr", "sft").pvalue is None  # r1 only: one draw
    assert run[1]["pairs"][pair_key("nocurr", "sft")]["test"]["k1"]["crossed"] is None
    # two policies trained once: one draw each, however many replicates the others have
    assert REFIT["refit"](frame, "teacher", "base").pvalue is None
    assert run[1]["pairs"][pair_key("teacher", "base")]["test"]["k1"]["crossed"] is None
    with pytest.raises(ValueError, match=r"no records of 'ghost'.*'base'"):
        REFIT["refit"](frame, "ghost", "sft")
    with pytest.raises(ValueError, match="k=16 is more than rloo's 8 samples"):
        REFIT["refit"](frame, "rloo", "sft", 16)
    with pytest.raises(SystemExit, match="compare stage writes it"):
        REFIT["load"](tmp_path, "nope")


def test_the_script_prints_the_refit_beside_compare_json(run, tmp_path, capsys, monkeypatch):
    written(run, tmp_path)
    (tmp_path / "compare.json").write_text(json.dumps(run[1]))
    monkeypatch.setattr(sys, "argv", ["refit_claim.py"])
    assert REFIT["main"](["rloo", "sft", "--k", "4", "--records", str(tmp_path),
                          "--compare", str(tmp_path / "compare.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    stored = run[1]["pairs"]["rloo_vs_sft"]["test"]["k4"]["crossed"]
    assert "30 problems x 3 replicate(s) (r1, r2, r3)" in out[0]
    assert out[1].startswith("refit: effect ") and out[2].startswith(f"{tmp_path}/compare.json")
    assert out[1].split(": ", 1)[1] == out[2].split(": ", 1)[1]
    assert f"p {fmt_p(stored['pvalue'])}" in out[1]


def test_the_compare_stage_writes_the_records(tmp_path, monkeypatch):
    """stages/compare.py on params.yaml's policies: reports/details/per_problem/<split>.csv
    beside compare.json, and a refit from it matches compare.json."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["compare"].update(pairs=[["rloo", "sft"], ["teacher", "sft"]], ks=[1, 4], n_boot=20)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    stage = runpy.run_path(str(ROOT / "stages/compare.py"))
    from countdown_rlvr.core.config import Replicates, from_section
    from countdown_rlvr.core.evaluate_config import Evaluate
    from countdown_rlvr.core.io import load_params

    params = load_params()
    ev = from_section(Evaluate, "compare", params, "evaluate")
    runs = stage["runs_of"](ev, from_section(Replicates, "compare", params, "replicates"))
    for i, (p, tags) in enumerate(runs.items()):
        for j, t in enumerate(tags.values()):  # the file each run reads (shared SFT: r11)
            path = tmp_path / f"data/eval/{p}/{t}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            evaluation(p, -1.0 + 0.1 * i, 0.2 * j, 100 * i + j).query("split == 'test'").to_parquet(
                path)
    stage["main"]()
    report = json.loads((tmp_path / "reports/details/compare.json").read_text())
    assert sorted(p.name for p in (tmp_path / "reports/details/per_problem").iterdir()) == [
        "test.csv"]
    frame = REFIT["load"](tmp_path / "reports/details/per_problem", "test")
    assert set(frame["policy"]) == set(runs)
    stored = report["pairs"]["rloo_vs_sft"]["test"]["k1"]["crossed"]
    res = REFIT["refit"](frame, "rloo", "sft", 1)
    assert (res.mean, res.pvalue) == pytest.approx((stored["mean"], stored["pvalue"]), rel=1e-12)
