"""End to end: rloo, opd and opd_ac through the real `dvc repro`, smoke-sized; the reward
variant with `dvc exp run -S rloo.reward=shaped`; an unknown reward stops before training."""

import json

import pytest

from countdown_rlvr.train.rloo import DIAGNOSTICS

pytestmark = pytest.mark.slow

RL_STAGES = ("rloo", "opd", "opd_ac")


def ran(proc) -> set[str]:
    return {line.split("'")[1] for line in proc.stdout.splitlines() if line.startswith("Running stage")}


def metrics(pipe, name: str) -> dict:
    return json.loads(pipe.read(f"reports/details/{name}.json"))


def commit(pipe, message: str) -> None:
    pipe.run("git", "add", "-A")
    pipe.run("git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", message)


def test_rl_stages_run_and_a_reward_variant_reruns_rloo_only(pipeline):
    first = pipeline.repro("rloo", "opd_ac")
    assert {"sft", "teacher", *RL_STAGES} <= ran(first)
    for name in RL_STAGES:
        assert (pipeline.path / f"data/models/{name}/config.json").exists()  # adapter: full
        m = metrics(pipeline, name)
        assert m["steps"] == 2 and m["rollouts"] == 2 * 4 * 4 and m["reward"] == "binary"
        assert {f"{k}_{w}" for k in DIAGNOSTICS for w in ("first", "final")} <= set(m)
        assert 0 <= m["zero_std_frac_final"] <= 1 and m["response_len_first"] > 0
        assert m["is_weight_mean_first"] == pytest.approx(1.0, abs=1e-3)  # on-policy
        assert json.loads(pipeline.read(f"reports/timings/{name}.json"))["seconds"] > 0
        curve = pipeline.read(f"dvclive/{name}/plots/metrics/train/reward_mean.tsv").decode()
        assert len(curve.strip().splitlines()) == 1 + 2  # header + one row per step
    assert metrics(pipeline, "rloo")["kl_first"] is not None  # rloo.kl_coef > 0: KL to SFT
    assert metrics(pipeline, "rloo")["forward_kl_first"] is None  # no teacher
    opd, ac = metrics(pipeline, "opd"), metrics(pipeline, "opd_ac")
    assert opd["forward_kl_first"] > 0 and ac["forward_kl_first"] > 0
    assert (opd["distill_temperature"], opd["entropy_coef"]) == (1.0, 0.001)
    assert (ac["distill_temperature"], ac["entropy_coef"]) == (1.3, 0.01)
    assert ac["init"] == "data/models/opd"

    commit(pipeline, "binary")

    # the variant: only rloo re-runs (not sft, the teacher, the data stages, nor opd / opd_ac)
    exp = pipeline.run("dvc", "exp", "run", "-S", "rloo.reward=shaped", "rloo", "opd_ac")
    assert ran(exp) == {"rloo"}
    assert metrics(pipeline, "rloo")["reward"] == "shaped"
    assert metrics(pipeline, "opd")["reward"] == "binary"

    # two commits, two rewards: `dvc metrics diff` shows the rloo metrics and nothing upstream
    commit(pipeline, "shaped")
    diff = json.loads(pipeline.run("dvc", "metrics", "diff", "HEAD~1", "HEAD", "--json").stdout)
    assert set(diff) <= {"reports/metrics/rloo.json"}  # nothing upstream; wall times are no metrics
    params = json.loads(pipeline.run("dvc", "params", "diff", "HEAD~1", "HEAD", "--json").stdout)
    assert params["params.yaml"]["rloo.reward"] == {"old": "binary", "new": "shaped"}

    # an unknown reward stops with the valid names before any model is loaded or trained
    pipeline.set_params({"rloo": {"reward": "bogus"}})
    proc = pipeline.repro("rloo", check=False)
    assert proc.returncode != 0
    assert "`rloo.reward` is 'bogus'; allowed: one of binary, format, shaped" in proc.stderr
    assert "[RLOO]" not in proc.stdout  # the loop never started


def test_the_shaped_arm_differs_from_rloo_in_the_reward_only(pipeline):
    """`rloo_shaped` = `rloo:` with `rloo_shaped:`'s keys over it; both write the zero-std
    counts a two-proportion test needs; `-S rloo.reward=shaped` still changes rloo itself."""
    first = pipeline.repro("rloo", "rloo_shaped")
    assert {"rloo", "rloo_shaped"} <= ran(first)
    binary, shaped = metrics(pipeline, "rloo"), metrics(pipeline, "rloo_shaped")
    assert (binary["reward"], shaped["reward"]) == ("binary", "shaped")
    assert set(binary) == set(shaped)
    for m in (binary, shaped):
        assert m["groups"] == 2 * 4 and 0 <= m["zero_std_groups"] <= m["groups"]
        assert m["tier_final"] == 0 and m["tier_unlock_step"] is None  # 2 steps < the window
    same = {k for k in ("steps", "rollouts", "group_size", "prompts_per_step", "kl_coef", "curriculum")}
    assert {k: binary[k] for k in same} == {k: shaped[k] for k in same}
    head = json.loads(pipeline.read("reports/metrics/rloo_shaped.json"))["rloo_shaped"]
    assert set(json.loads(pipeline.read("reports/metrics/rloo.json"))["rloo"]) == set(head)
    assert {"zero_std_groups", "groups", "tier_final"} <= set(head)
    tier = pipeline.read("dvclive/rloo_shaped/plots/metrics/train/tier.tsv").decode()
    rows = [line.split("\t") for line in tier.strip().splitlines()]
    assert rows[0] == ["step", "tier"] and [float(r[1]) for r in rows[1:]] == [0.0, 0.0]
    commit(pipeline, "two arms")

    exp = pipeline.run("dvc", "exp", "run", "-S", "rloo.reward=shaped", "rloo", "rloo_shaped")
    assert ran(exp) == {"rloo", "rloo_shaped"}  # the arm inherits rloo's keys: it re-runs too
    assert metrics(pipeline, "rloo")["reward"] == metrics(pipeline, "rloo_shaped")["reward"] == "shaped"

    # an arm key that rloo does not have stops before training, naming the fix
    pipeline.set_params({"rloo_shaped": {"rewards": "shaped"}})
    proc = pipeline.run("python", "stages/rloo.py", "rloo_shaped", check=False)
    assert proc.returncode != 0 and "rloo_shaped" in proc.stderr
