"""End to end: the data stages through `pairs` via the real `dvc repro`, smoke-sized."""

import json

import pytest

pytestmark = pytest.mark.slow

DATA_STAGES = ["problems", "base", "traces", "teacher", "teacher_traces", "dedup", "pairs"]


def lock_outs(pipe) -> dict[str, str]:
    """md5 of every output of the data stages, from dvc.lock, but their wall-time records
    (reports/timings/, outs so that experiments keep them; they differ run to run)."""
    import yaml

    lock = yaml.safe_load(pipe.read("dvc.lock"))["stages"]
    return {o["path"]: o["md5"] for s in DATA_STAGES for o in lock[s].get("outs", [])
            if not o["path"].startswith("reports/timings/")}


def pipeline_params(pipe) -> dict:
    import yaml

    return yaml.safe_load(pipe.read("params.yaml"))


def ran(proc) -> set[str]:
    return {line.split("'")[1] for line in proc.stdout.splitlines() if line.startswith("Running stage")}


def test_data_stages_run_cache_rerun_selectively_and_reproduce(pipeline, tmp_path):
    first = pipeline.repro("pairs", "dedup")
    assert ran(first) == {"check_params", *DATA_STAGES}  # the params check runs first
    pairs = [json.loads(line) for line in pipeline.read("data/pairs/pairs.jsonl").splitlines()]
    assert {p["source"] for p in pairs} >= {"scripted", "base"}
    pm = json.loads(pipeline.read("reports/details/pairs.json"))
    cap = pipeline_params(pipeline)["pairs"]["max_per_source"]  # a fixed count per source
    for s in ("scripted", "base"):
        assert pm[s]["pairs"] == min(pm[s]["pairs_built"], cap)
    assert all(set(pm[s]["styles"]) <= {"direct/direct", "search/search"} for s in ("scripted", "base"))
    for name in ("problems", "traces", "teacher_traces", "dedup", "pairs"):
        json.loads(pipeline.read(f"reports/details/{name}.json"))
    # the teacher's RL phase (teacher.rl) ran after its traces, at the smoke size
    teacher_rl = json.loads(pipeline.read("reports/details/teacher.json"))["rl"]
    assert (teacher_rl["steps"], teacher_rl["reward"]) == \
        (pipeline_params(pipeline)["teacher"]["rl"]["steps"], "binary")
    # repair-format examples: train problems only, and they reach the student's SFT data
    def rows(path):
        return [json.loads(x) for x in pipeline.read(path).splitlines()]

    def key(r):
        return tuple(sorted(r["numbers"])), r["target"]

    repair = rows("data/traces/repair.jsonl")
    held_out = {key(p) for split in ("test", "ood") for p in rows(f"data/problems/{split}.jsonl")}
    assert repair and not {key(r) for r in repair} & held_out
    assert {r["problem_id"] for r in repair} <= {p["id"] for p in rows("data/problems/train.jsonl")}
    t, d = (json.loads(pipeline.read(f"reports/details/{n}.json")) for n in ("traces", "dedup"))
    assert t["repair"]["count"] == len(repair) == d["per_source"]["repair"]["kept"]
    sft = rows("data/sft/train.jsonl") + rows("data/sft/val.jsonl")
    assert sum(r["source"] == "repair" for r in sft) == len(repair)

    assert ran(pipeline.repro("pairs", "dedup")) == set()  # nothing changed: nothing runs

    pipeline.set_params({"dedup": {"threshold": 0.9}})
    # dedup re-runs (after the params check), nothing upstream does (sft, downstream, is not in
    # these targets)
    assert ran(pipeline.repro("pairs", "dedup")) == {"check_params", "dedup"}

    # an independent second run with the same params: byte-identical data files
    from conftest import make_pipeline

    other = make_pipeline(tmp_path / "again")
    other.set_params({"dedup": {"threshold": 0.9}})
    other.repro("pairs", "dedup")
    assert lock_outs(other) == lock_outs(pipeline)


def test_bad_params_and_missing_inputs_name_the_stage_and_fix(pipeline):
    proc = pipeline.run("python", "stages/dedup.py", check=False)
    assert proc.returncode != 0
    assert "[dedup] error: missing input" in proc.stderr and "dvc repro dedup" in proc.stderr

    pipeline.set_params({"dedup": {"threshold": 2}})
    proc = pipeline.run("python", "stages/dedup.py", check=False)
    # run by hand, the stage checks the sections it reads as it builds its config
    assert "[dedup] error: `dedup.threshold` is 2; allowed: a number > 0" in proc.stderr

    pipeline.set_params({"traces": {"styles": ["direct", "poetry"]}})
    proc = pipeline.repro("traces", check=False)
    assert proc.returncode != 0 and "`traces.styles` is ['direct', 'poetry']" in proc.stderr
    assert "one of direct, search" in proc.stderr
