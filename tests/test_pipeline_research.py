"""End to end: diagnose, repair, distill@<condition>-<seed> and int through the real `dvc repro`,
smoke-sized (one replicate, seed 0); the distillation's training path on a successful repair,
and that nothing it trains on is a test or OOD problem; bad params stop early."""

import json

import pandas as pd
import pytest

from countdown_rlvr.data.traces import direct_trace
from countdown_rlvr.research.repair import CONDITIONS, distill_examples
from countdown_rlvr.task.generate import problem_key
from countdown_rlvr.task.prompts import solve_prompt
from countdown_rlvr.task.solve import solve
from countdown_rlvr.task.verify import verify

pytestmark = pytest.mark.slow

DISTILLED = tuple(c for c in CONDITIONS if c != "F0")  # F0 is a repair control, not distilled
# distill.conditions (R) every replicate, the others (first_replicate_conditions) the first only
STAGES = {"evaluate_sft@0", "diagnose@0", "repair@0", "int@0", "distill@R-0",
          *(f"distill_first@{c}-0" for c in DISTILLED if c != "R")}
DIAGNOSE_KEYS = {"k", "pass@1", "pass@k", "avg_score", "all_fail", "all_correct",
                 "zero_informative", "reward_contrast", "failures", "n_failed_attempts"}
REPAIR_KEYS = {"success_rate", "successes", "n", "new_error_rate", "feedback_tokens",
               "mcnemar_vs_resample"}


def ran(proc) -> set[str]:
    return {line.split("'")[1] for line in proc.stdout.splitlines() if line.startswith("Running stage")}


def metrics(pipe, name: str) -> dict:
    """Replicate 0's details of a stage."""
    return json.loads(pipe.read(f"reports/details/{name}/r0.json"))


def held_out(pipe) -> set[tuple]:
    """The problem keys every evaluation scores: the test and OOD splits."""
    rows = [json.loads(x) for split in ("test", "ood")
            for x in pipe.read(f"data/problems/{split}.jsonl").splitlines()]
    return {problem_key(r["numbers"], r["target"]) for r in rows}


def assert_distilled_not_held_out(repairs: pd.DataFrame, keys: set[tuple]) -> int:
    """No self-distillation example is a test / OOD problem, neither by its (numbers, target)
    nor by its prompt (what `distill` trains on); returns the examples checked."""
    prompts = {solve_prompt(list(k[0]), k[1], "tiny") for k in keys}
    n = 0
    for cond in DISTILLED:
        ok = repairs[(repairs["condition"] == cond) & repairs["correct"].astype(bool)]
        assert not {problem_key(list(r.numbers), r.target) for r in ok.itertuples()} & keys
        examples = distill_examples(repairs, cond, "tiny")
        assert not {prompt for prompt, _ in examples} & prompts
        n += len(examples)
    return n


def test_research_stages_run_write_their_metrics_and_rerun_nothing(pipeline):
    # the secondary conditions (F1 .. Fshuf) are opt-in (params.secondary.yaml): switch them on
    pipeline.set_params({"distill": {"first_replicate_conditions": [c for c in DISTILLED
                                                                    if c != "R"]}})
    first = pipeline.repro("diagnose", "repair", "distill", "distill_first", "int")
    assert STAGES <= ran(first)

    # diagnose groups the SFT policy's own evaluation samples (4 per prompt) in groups of
    # diagnose.k: the same samples and groups as S0 Table 3's SFT row, nothing sampled twice
    d = metrics(pipeline, "diagnose")
    assert DIAGNOSE_KEYS <= set(d) and d["k"] == 4 and d["n_groups"] == d["n_problems"]
    records = pd.read_parquet(pipeline.path / "data/eval/sft/r0.parquet")
    records = records[records["split"] == "test"]
    assert len(records) == 4 * d["n_problems"]
    assert (~records["correct"]).sum() == d["n_failed_attempts"] == sum(d["failures"].values())
    # a measurement only: its failed test samples feed no repair (no attempts file)
    assert not (pipeline.path / "data/diagnose").exists()
    table3 = json.loads(pipeline.read("reports/details/eval/sft/r0.json"))["diagnostics_by_k"]
    assert table3["k4"]["all_fail"] == d["all_fail"] == pytest.approx(1 - d["pass@k"])

    # repair's attempt pool: its own samples of the last repair.n_problems (20) train problems
    r = metrics(pipeline, "repair")
    train = [json.loads(x) for x in pipeline.read("data/problems/train.jsonl").splitlines()]
    pool = pd.read_parquet(pipeline.path / "data/repair/r0/pool.parquet")
    assert set(pool["split"]) == {"train"} and len(pool) == 20  # repair.select_k = 1
    assert list(pool["problem_id"]) == [p["id"] for p in train[-20:]]
    failed = pool[~pool["correct"]]
    ap = r["attempt_pool"]
    assert (ap["split"], ap["n_problems"], ap["samples"]) == ("train", 20, 20)
    assert ap["failed"] == len(failed)
    assert r["n_attempts"] == min(4, len(failed)) and set(r["conditions"]) == set(CONDITIONS)
    for cond, m in r["conditions"].items():
        assert REPAIR_KEYS <= set(m) and m["n"] == r["n_attempts"]
        assert set(m["mcnemar_vs_resample"]) >= {"b", "c", "pvalue"}
        assert (m["feedback_tokens"] == 0) == (cond in ("R", "F0"))
        assert ("mcnemar_vs_F0" in m) == (cond != "F0")  # every condition vs the same prompt, no feedback
    assert sum(t["attempts"] for t in r["by_failure"].values()) == r["n_attempts"]
    assert all(set(t["successes"]) == set(CONDITIONS) for t in r["by_failure"].values())
    repairs = pd.read_parquet(pipeline.path / "data/repair/r0/repairs.parquet")
    assert len(repairs) == r["n_attempts"] * len(CONDITIONS) * 1  # repair.k = 1
    assert set(repairs["attempt_id"]) <= {f"{x.problem_id}/{x.sample}" for x in failed.itertuples()}
    keys = held_out(pipeline)
    assert not {problem_key(list(x.numbers), x.target) for x in repairs.itertuples()} & keys
    assert_distilled_not_held_out(repairs, keys)

    for cond in DISTILLED:
        m = metrics(pipeline, f"distill/{cond}")
        successes = int(repairs[repairs["condition"] == cond]["correct"].sum())
        assert m["condition"] == cond and m["trained"] == (successes > 0)
        assert (m["examples"] == 0) == (successes == 0)
        # the skill check, only where something was distilled
        assert ("skill_distilled" in m) == ("skill_sft" in m) == m["trained"]
        assert (pipeline.path / f"data/models/distill_{cond}/r0/config.json").exists()

    i = metrics(pipeline, "int")
    assert i["n_problems"] == 4 and 0 <= i["unsolved"] <= 4 and i["select_k"] == 2
    # interventions come from the `unseen` split: problems no stage trained on
    rows = [json.loads(x) for x in pipeline.read("data/int/r0/interventions.jsonl").splitlines()]
    assert all(r["problem_id"].startswith("unseen-") for r in rows)
    assert i["unsolved_train"] + i["unsolved_heldout"] == i["unsolved"]
    assert i["unsolved_heldout"] == round(0.5 * i["unsolved"])  # int.heldout_frac
    iv = i["interventions"]
    # at most one intervention per failed trace: int.select_k traces of each trained-on problem
    assert iv["kept"] <= iv["found"] <= i["select_k"] * i["unsolved_train"] and iv["filter"] is False
    arms = {"sft", "int_sft", "int", "plain_rl", "int_solver_sft", "rloo"}
    assert set(i["pass_at_k"]) == set(i["heldout_pass_at_k"]) == arms
    tests = {"int_vs_plain_rl", "int_vs_rloo", "int_vs_int_solver_sft", "int_vs_int_sft",
             "int_vs_sft"}
    if i["unsolved_train"]:
        assert i["sft"]["trained"] == (iv["found"] > 0)  # int.filter false: every intervention
        # int.replay (1.0): one SFT training example mixed in per patch / baseline example
        assert i["sft"]["replay_examples"] == iv["found"]
        assert i["sft"]["examples"] == iv["found"] + i["sft"]["replay_examples"]
        assert i["solver_sft"]["trained"] and i["solver_sft"]["replay_examples"] == i["unsolved_train"]
        assert i["solver_sft"]["examples"] == 2 * i["unsolved_train"]
        if i["sft"]["trained"]:  # the baseline gets the patch's optimizer steps
            assert i["solver_sft"]["steps"] == i["sft"]["steps"]
        for arm in ("rloo", "plain_rl"):  # InT's RL and the plain-RL arm: one config
            assert i[arm]["trained"] and i[arm]["steps"] == 2
            assert i[arm]["n_problems"] == i["unsolved_train"]
        assert all(0 <= v["pass@k"] <= 1 for v in i["pass_at_k"].values())
        assert set(i["mcnemar"]) == tests
    if i["unsolved_heldout"]:
        assert all(0 <= v["pass@k"] <= 1 for v in i["heldout_pass_at_k"].values())
        assert set(i["heldout_mcnemar"]) == tests
        # phase 7 (int.claim_samples 4 in the smoke params): the claim's two arms, 4 samples
        # per held-out problem, their counts in the held-out problems' order
        claim = i["heldout_claim"]
        assert (claim["n"], claim["k"], len(claim["problems"])) == (4, 2, i["unsolved_heldout"])
        assert set(claim["correct"]) == {"int", "plain_rl"}
        assert all(len(c) == i["unsolved_heldout"] and all(0 <= x <= 4 for x in c)
                   for c in claim["correct"].values())
        assert set(claim["pass_at_k"]["int"]) == {"pass@1", "pass@2"}
        assert "claim_eval" in json.loads(pipeline.read("reports/timings/int/r0.json"))["phases"]
    else:
        assert "heldout_claim" not in i
    for name in ("int_sft", "int", "int_plain_rl", "int_solver_sft"):
        assert (pipeline.path / f"data/models/{name}/r0/config.json").exists()
    assert json.loads(pipeline.read("reports/timings/int/r0.json"))["seconds"] > 0

    assert ran(pipeline.repro("diagnose", "repair", "distill", "int")) == set()

    # the distillation's training path: one successful R repair (a verified solver trace)
    ok = repairs[repairs["condition"] == "R"].head(1).copy()
    nums, target = [int(x) for x in ok["numbers"].iloc[0]], int(ok["target"].iloc[0])
    text = direct_trace(solve(nums, target)[0])
    assert verify(text, nums, target).correct
    ok[["completion", "correct", "failure"]] = [text, True, None]
    ok.to_parquet(pipeline.path / "data/repair/r0/repairs.parquet", index=False)
    pipeline.run("python", "stages/distill.py", "R", "0")
    m = metrics(pipeline, "distill/R")
    assert m["trained"] is True and m["examples"] == 1 and m["steps"] == 2
    # the skill check: the one problem it trained on, 2 no-feedback samples per policy
    assert (m["skill_problems"], m["skill_samples"]) == (1, 2)
    assert all(m[k] in (0.0, 0.5, 1.0) for k in ("skill_sft", "skill_distilled"))
    assert assert_distilled_not_held_out(ok, keys) == 1  # the example it trained on: train
    assert (pipeline.path / "dvclive/distill/R/r0/plots/metrics/train/loss.tsv").exists()


def test_bad_params_stop_before_any_work(pipeline):
    proc = pipeline.run("python", "stages/distill.py", "F9", "0", check=False)
    assert proc.returncode != 0 and "[distill] error: usage" in proc.stderr

    pipeline.set_params({"repair": {"conditions": ["F1", "F3"]}})
    proc = pipeline.run("python", "stages/repair.py", "0", check=False)
    assert "[repair] error: repair.conditions" in proc.stderr and "R-resample" in proc.stderr

    pipeline.set_params({"int": {"eval_seed": 0, "seed": 0}})
    proc = pipeline.run("python", "stages/int.py", "0", check=False)
    assert "[int] error: int.eval_seed must differ" in proc.stderr

    proc = pipeline.run("python", "stages/diagnose.py", "0", check=False)
    assert "[diagnose] error: missing input" in proc.stderr and "dvc repro diagnose" in proc.stderr

    proc = pipeline.run("python", "stages/diagnose.py", check=False)  # no replicate seed
    assert "[diagnose] error: no replicate seed given" in proc.stderr
