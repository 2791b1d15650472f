"""End to end: rloo, the early arm, opd and opd_ac through the real `dvc repro`, smoke-sized (one
replicate, seed 0: stages `<stage>@...-0`); the reward variant with `dvc exp run -S rloo.reward=shaped`;
an unknown reward stops before training; a second replicate trains another draw."""

import json

import pytest

from countdown_rlvr.train.rloo import DIAGNOSTICS

pytestmark = pytest.mark.slow

RL_STAGES = ("rloo", "rloo_early", "opd", "opd_ac")
STAGE_OF = {"rloo": "rloo@rloo-0", "rloo_shaped": "rloo_shaped@0", "opd": "opd@opd-0",
            "opd_ac": "opd@opd_ac-0", "rloo_early": "rloo_early@rloo_early-0"}


def ran(proc) -> set[str]:
    return {line.split("'")[1] for line in proc.stdout.splitlines() if line.startswith("Running stage")}


def metrics(pipe, name: str, r: int = 0) -> dict:
    return json.loads(pipe.read(f"reports/details/{name}/r{r}.json"))


def commit(pipe, message: str) -> None:
    pipe.run("git", "add", "-A")
    pipe.run("git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", message)


def test_rl_stages_run_and_a_reward_variant_reruns_rloo_only(pipeline):
    first = pipeline.repro("rloo@rloo-0", "rloo_early@rloo_early-0", "opd")
    assert {"sft@0", "teacher", *(STAGE_OF[s] for s in RL_STAGES)} <= ran(first)
    for name in RL_STAGES:
        assert (pipeline.path / f"data/models/{name}/r0/config.json").exists()  # adapter: full
        m = metrics(pipeline, name)
        assert m["steps"] == 2 and m["rollouts"] == 2 * 4 * 4 and m["reward"] == "binary"
        assert {f"{k}_{w}" for k in DIAGNOSTICS for w in ("first", "final")} <= set(m)
        assert 0 <= m["zero_std_frac_final"] <= 1 and m["response_len_first"] > 0
        assert m["is_weight_mean_first"] == pytest.approx(1.0, abs=1e-3)  # on-policy
        assert json.loads(pipeline.read(f"reports/timings/{name}/r0.json"))["seconds"] > 0
        curve = pipeline.read(f"dvclive/{name}/r0/plots/metrics/train/reward_mean.tsv").decode()
        assert len(curve.strip().splitlines()) == 1 + 2  # header + one row per step
    assert metrics(pipeline, "rloo")["kl_first"] is not None  # rloo.kl_coef > 0: KL to SFT
    assert metrics(pipeline, "rloo")["forward_kl_first"] is None  # no teacher
    opd, ac = metrics(pipeline, "opd"), metrics(pipeline, "opd_ac")
    assert opd["forward_kl_first"] > 0 and ac["forward_kl_first"] > 0
    assert (opd["distill_temperature"], opd["entropy_coef"]) == (1.0, 0.001)
    assert (ac["distill_temperature"], ac["entropy_coef"]) == (1.3, 0.01)
    # both OPD arms start from the RLOO policy of their seed with the same budget: only their
    # knobs differ; the early arm from the policy the sft stage saved at sft.early_step
    assert ac["init"] == opd["init"] == "data/models/rloo/r0"
    assert (ac["steps"], ac["rollouts"]) == (opd["steps"], opd["rollouts"])
    early = metrics(pipeline, "rloo_early")
    assert early["init"] == "data/models/sft_early/r0" and early["curriculum"] is False
    assert metrics(pipeline, "rloo")["init"] == "data/models/sft/r0"
    assert (pipeline.path / "data/models/sft_early/r0/config.json").exists()

    commit(pipeline, "binary")

    # the variant: rloo re-runs and the OPD arms that start from its policy; not sft, the
    # teacher, the data stages, nor the early arm (its own section sets its reward)
    exp = pipeline.run("dvc", "exp", "run", "-S", "rloo.reward=shaped", "rloo@rloo-0",
                       "rloo_early@rloo_early-0", "opd")
    assert ran(exp) == {"check_params", "rloo@rloo-0", "opd@opd-0", "opd@opd_ac-0"}
    assert metrics(pipeline, "rloo")["reward"] == "shaped"
    assert metrics(pipeline, "opd")["reward"] == "binary"

    # two commits, two rewards: `dvc metrics diff` shows at most the rloo headline (the
    # report writes it; this target stops before) and nothing upstream, no wall times
    commit(pipeline, "shaped")
    diff = json.loads(pipeline.run("dvc", "metrics", "diff", "HEAD~1", "HEAD", "--json").stdout)
    assert set(diff) <= {"reports/metrics/eval/rloo.json"}
    params = json.loads(pipeline.run("dvc", "params", "diff", "HEAD~1", "HEAD", "--json").stdout)
    assert params["params.yaml"]["rloo.reward"] == {"old": "binary", "new": "shaped"}

    # an unknown reward stops with the valid names before any model is loaded or trained
    pipeline.set_params({"rloo": {"reward": "bogus"}})
    proc = pipeline.repro("rloo@rloo-0", check=False)
    assert proc.returncode != 0
    assert "`rloo.reward` is 'bogus'; allowed: one of binary, format, shaped" in proc.stderr
    assert "[RLOO]" not in proc.stdout  # the loop never started


def test_the_shaped_arm_differs_from_rloo_in_the_reward_only(pipeline):
    """`rloo_shaped` = `rloo:` with `rloo_shaped:`'s keys over it; both write the zero-std
    counts a two-proportion test needs; `-S rloo.reward=shaped` changes rloo itself and re-runs
    nothing else (rloo_shaped sets its own reward)."""
    first = pipeline.repro("rloo", "rloo_shaped")  # a first-seed arm: a stage of its own
    assert {"rloo@rloo-0", "rloo_shaped@0"} <= ran(first)
    binary, shaped = metrics(pipeline, "rloo"), metrics(pipeline, "rloo_shaped")
    assert (binary["reward"], shaped["reward"]) == ("binary", "shaped")
    assert set(binary) == set(shaped)
    for m in (binary, shaped):
        assert m["groups"] == 2 * 4 and 0 <= m["zero_std_groups"] <= m["groups"]
        assert m["tier_final"] == 0 and m["tier_unlock_step"] is None  # 2 steps < the window
    same = {k for k in ("steps", "rollouts", "group_size", "prompts_per_step", "kl_coef", "curriculum")}
    assert {k: binary[k] for k in same} == {k: shaped[k] for k in same}
    assert {"zero_std_groups", "groups", "tier_final"} <= set(shaped)
    tier = pipeline.read("dvclive/rloo_shaped/r0/plots/metrics/train/tier.tsv").decode()
    rows = [line.split("\t") for line in tier.strip().splitlines()]
    assert rows[0] == ["step", "tier"] and [float(r[1]) for r in rows[1:]] == [0.0, 0.0]
    commit(pipeline, "two arms")

    exp = pipeline.run("dvc", "exp", "run", "-S", "rloo.reward=shaped", "rloo", "rloo_shaped")
    # rloo_shaped sets its own reward: its resolved config is unchanged, so it does not re-run
    assert ran(exp) == {"check_params", "rloo@rloo-0"}
    assert metrics(pipeline, "rloo")["reward"] == metrics(pipeline, "rloo_shaped")["reward"] == "shaped"

    # an arm key that rloo does not have stops before training, naming the fix
    pipeline.set_params({"rloo_shaped": {"rewards": "shaped"}})
    proc = pipeline.run("python", "stages/rloo.py", "rloo_shaped", "0", check=False)
    assert proc.returncode != 0 and "rloo_shaped" in proc.stderr


def test_a_second_replicate_is_another_draw_of_the_same_config(pipeline):
    """Seed 1 added to `replicates.seeds` and to the RLOO chain's list: sft@1 and rloo@rloo-1
    join, train on the same data with seeds moved by the replicate, and give another policy;
    replicate 0 does not re-run."""
    pipeline.repro("rloo@rloo-0")
    commit(pipeline, "one replicate")
    pipeline.set_params({"replicates": {"seeds": [0, 1], "rloo": [0, 1]}})
    proc = pipeline.repro("rloo@rloo-1")
    # the shared inputs and replicate 0 are reused (the params check runs on any change)
    assert ran(proc) == {"check_params", "sft@1", "rloo@rloo-1"}
    r0, r1 = metrics(pipeline, "rloo", 0), metrics(pipeline, "rloo", 1)
    assert r0["replicate"] == 0 and r1["replicate"] == 1
    assert (r0["steps"], r0["rollouts"]) == (r1["steps"], r1["rollouts"])
    sft0, sft1 = (pipeline.read(f"data/models/sft/r{r}/model.safetensors") for r in (0, 1))
    assert sft0 != sft1  # another data order and dropout: another draw
    proc = pipeline.run("python", "stages/rloo.py", "rloo", "2", check=False)
    assert proc.returncode != 0 and "replicate '2' is not in `replicates.rloo`" in proc.stderr
    # seed 1 is SFT's but not OPD's: opd's own list decides
    proc = pipeline.run("python", "stages/opd.py", "opd", "1", check=False)
    assert proc.returncode != 0 and "replicate '1' is not in `replicates.opd`" in proc.stderr


def test_with_one_shared_sft_a_new_replicate_trains_no_sft_of_its_own(pipeline):
    """replicates.shared_sft: seed 1 added to RLOO's list alone trains rloo@rloo-1 from SFT
    replicate 0 (no sft@1), another draw of the same config; params that change the graph
    are refused until dvc.yaml is made anew."""
    pipeline.repro("rloo@rloo-0")
    commit(pipeline, "one replicate")
    pipeline.set_params({"replicates": {"shared_sft": 0, "rloo": [0, 1]}})
    stale = pipeline.repro("rloo@rloo-1", check=False)
    assert stale.returncode != 0 and "countdown_rlvr.cli.experiment --write" in stale.stderr
    pipeline.write_dvc_yaml()
    proc = pipeline.repro("rloo@rloo-1")
    assert ran(proc) == {"check_params", "rloo@rloo-1"}  # SFT 0 and replicate 0 reused
    assert not (pipeline.path / "data/models/sft/r1").exists()
    r0, r1 = metrics(pipeline, "rloo", 0), metrics(pipeline, "rloo", 1)
    assert r0["init"] == r1["init"] == "data/models/sft/r0" and r1["replicate"] == 1
    # another draw: its first rollouts differ (the smoke model earns no reward to move on)
    assert (r0["loss_first"], r0["response_len_first"]) != (r1["loss_first"],
                                                             r1["response_len_first"])
