"""The replicate axis: which seeds a replicate moves, how a stage reads its replicate, and that
DVC expands every replicated stage once per seed of its chain (and a one-seed list into one
stage each)."""

import dataclasses
import subprocess
import sys

import pytest
import yaml
from conftest import with_every_arm
from helpers import config_of
from hypothesis import given
from hypothesis import strategies as st

from countdown_rlvr.cli.experiment import generate
from countdown_rlvr.core import sections
from countdown_rlvr.core.int_config import Interventions
from countdown_rlvr.core.io import StageError
from countdown_rlvr.core.replicates import (
    STRIDE,
    for_replicate,
    model_dir,
    parse_replicate,
    run_name,
    seed_for,
)


def seeds_of(cfg, prefix=""):
    """Every (dotted field, value) of a config whose field is a seed, at any depth."""
    out = {}
    items = ((f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg)) \
        if dataclasses.is_dataclass(cfg) else cfg.items()
    for name, value in items:
        if dataclasses.is_dataclass(value) or isinstance(value, dict):
            out |= seeds_of(value, f"{prefix}{name}.")
        elif name == "seed" or name.endswith("_seed"):
            out[prefix + name] = value
    return out


def without_seeds(tree):
    if isinstance(tree, dict):
        return {k: without_seeds(v) for k, v in tree.items()
                if not (k == "seed" or k.endswith("_seed"))}
    return tree


@given(st.integers(0, 10**6), st.integers(0, 50))
def test_replicate_zero_is_the_params_as_written_and_others_never_collide(seed, r):
    assert seed_for(seed, 0) == seed
    # a stage adds small offsets (steps, strategy index) to its seed: replicates stay apart
    assert abs(seed_for(seed, r + 1) - seed_for(seed, r)) == STRIDE


@pytest.mark.parametrize("cls,path,inherit", [
    ("SFTStage", "sft", None), ("IPO", "ipo", None), ("RL", "rloo", None),
    ("OPD", "opd_ac", "opd"), ("Repair", "repair", None),
    ("Distill", "distill", None), ("Interventions", "int", None),
])
def test_every_seed_of_a_section_moves_and_nothing_else(cls, path, inherit):
    cfg = config_of(getattr(sections, cls), path, inherit=inherit)  # its dataclass
    moved = for_replicate(cfg, 2)
    before, after = seeds_of(cfg), seeds_of(moved)
    assert before and before.keys() == after.keys()
    assert all(after[k] == seed_for(v, 2) for k, v in before.items())
    # everything that is not a seed is untouched
    assert without_seeds(dataclasses.asdict(moved)) == without_seeds(dataclasses.asdict(cfg))
    assert for_replicate(cfg, 0) == cfg


def test_int_keeps_its_eval_seed_apart_from_its_selection_seed_in_every_replicate():
    cfg = config_of(Interventions, "int")
    for r in range(4):
        moved = for_replicate(cfg, r)
        assert moved.eval_seed != moved.seed and moved.sft.seed == seed_for(cfg.sft.seed, r)


CHAINS = ("ipo", "rloo", "opd", "repair", "int")


def lists(seeds, **chains) -> dict:
    """A `replicates` section: every chain on `seeds` unless given."""
    return {"shared_sft": chains.pop("shared_sft", None), "seeds": seeds,
            **{c: chains.get(c, seeds) for c in CHAINS}}


def test_a_stage_refuses_a_replicate_that_is_not_listed():
    params = {"replicates": lists([0, 1, 2])}
    assert parse_replicate("sft", "2", params) == 2
    for bad, says in ((None, "no replicate seed given"), ("7", "'7' is not in"),
                      ("x", "'x' is not in")):
        with pytest.raises(StageError, match=says + r".*pass one of \[0, 1, 2\]"):
            parse_replicate("sft", bad, params)


def test_a_stage_refuses_a_seed_outside_its_chain():
    """A seed SFT trains is not enough: the stage checks its own chain's list, and the error
    names that list and the fix."""
    params = {"replicates": lists([0, 1, 2, 3], ipo=[0, 1, 2], opd=[0, 1, 2],
                                  repair=[0, 1, 2], rloo=[0, 1, 2, 3], int=[0, 1])}
    assert parse_replicate("rloo", "3", params, chain="rloo") == 3
    assert parse_replicate("sft", "3", params) == 3
    for stage, chain in (("ipo", "ipo"), ("opd_ac", "opd"), ("distill", "repair"),
                         ("int", "int")):
        with pytest.raises(StageError, match=(
                rf"\[{stage}\] error: replicate '3' is not in `replicates.{chain}`; pass one of "
                rf"\[0, 1(, 2)?\] .* or add it to `replicates.{chain}`$")):
            parse_replicate(stage, "3", params, chain=chain)
    # a seed new to SFT (and to RLOO, for int) must join those lists too
    with pytest.raises(StageError, match=r"add it to `replicates.int` \(and `replicates.rloo`, "
                                         r"`replicates.seeds`\)"):
        parse_replicate("int", "7", params, chain="int")


def test_paths_of_a_replicate():
    assert model_dir("ipo_scripted", 1) == "data/models/ipo_scripted/r1"
    assert run_name("ipo/scripted", 1) == "ipo/scripted/r1"


def stage_names(tmp_path, replicates: dict):
    """The stage names `dvc stage list` expands dvc.yaml into, for a `replicates` section, with
    every RL arm trained (conftest.with_every_arm)."""
    params = with_every_arm()
    params["replicates"] = replicates
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tmp_path / "dvc.yaml").write_text(generate(params))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    dvc = [sys.executable, "-m", "dvc"]
    subprocess.run([*dvc, "init", "-q"], cwd=tmp_path, check=True)
    out = subprocess.run([*dvc, "stage", "list", "--name-only"], cwd=tmp_path, check=True,
                         capture_output=True, text=True).stdout
    return set(out.split())


def evaluation_of(policy: str, seed: int) -> str:
    """The stage that samples `policy` on `seed`: its training stage's twin, same item."""
    from countdown_rlvr.analysis.chains import evaluation_stage
    from countdown_rlvr.core.arms import ARMS

    stage = evaluation_stage(policy)
    item = policy.split("_", 1)[1] if stage in ("evaluate_ipo", "evaluate_distill") else policy
    own = {"evaluate_sft", "evaluate_sft_early"} | {
        f"evaluate_{a.name}" for a in ARMS if a.replicates == "first"}  # a seed-only matrix
    return f"{stage}@{seed}" if stage in own else f"{stage}@{item}-{seed}"


def test_dvc_runs_every_compared_policy_once_per_seed_and_secondaries_once(tmp_path):
    names = stage_names(tmp_path, lists([0, 1, 2]))
    params = with_every_arm()
    ev = params["evaluate"]
    for r in (0, 1, 2):
        assert {f"sft@{r}", f"rloo@rloo-{r}", f"rloo_early@rloo_early-{r}", f"opd@opd_ac-{r}",
                f"int@{r}", f"diagnose@{r}", f"repair@{r}", f"distill@R-{r}"} <= names
        assert {evaluation_of(p, r) for p in ev["policies"]} <= names
    assert {evaluation_of(p, 0) for p in ev["first_replicate_only"]} <= names
    assert {n for n in names if n.startswith("rloo_nocurr@")} == {"rloo_nocurr@0"}
    # the first-replicate arms (core/arms.py): a stage of their own on the first seed
    for arm in ("rloo_nocurr", "rloo_shaped", "rloo_early_shaped"):
        assert {n for n in names if n.split("@")[0] in (arm, f"evaluate_{arm}")
                or f"@{arm}-" in n} == {f"{arm}@0", f"evaluate_{arm}@0"}
    # the arms no seed claim uses are trained for the first seed only, like their evaluations
    assert {n for n in names if n.startswith(("ipo_first@", "distill_first@"))} == {
        *(f"ipo_first@{s}-0" for s in params["ipo"]["first_replicate_sources"]),
        *(f"distill_first@{c}-0" for c in params["distill"]["first_replicate_conditions"])}
    assert not any(n.startswith(("ipo@base", "distill@F")) for n in names)
    first_only = {f"ipo_{s}" for s in params["ipo"]["first_replicate_sources"]} | \
        {f"distill_{c}" for c in params["distill"]["first_replicate_conditions"]}
    assert first_only <= set(ev["first_replicate_only"])  # trained once, evaluated once
    assert not any(n.startswith("evaluate_int@") for n in names)  # opt-in: int_policies
    assert {f"evaluate_shared@{p}" for p in ev["shared"]} <= names
    # the fixed inputs are trained once, whatever the seeds
    assert {"problems", "base", "teacher", "teacher_traces", "dedup", "pairs"} <= names

    (tmp_path / "quick").mkdir()
    quick = stage_names(tmp_path / "quick", lists([5]))
    assert "sft@5" in quick and "sft@0" not in quick and "evaluate_rloo_nocurr@5" in quick


def test_a_seed_added_to_one_chain_adds_only_that_chains_stages(tmp_path):
    """rloo on four seeds, the other chains on three: seed 3 gets SFT (its evaluation and
    diagnose: the union) and the RLOO arms of every replicate with their evaluations, nothing
    of ipo, opd, repair or int; and the first-seed arms follow their chain's first seed."""
    base = stage_names(tmp_path, lists([0, 1, 2]))
    (tmp_path / "more").mkdir()
    more = stage_names(tmp_path / "more", lists([0, 1, 2, 3], ipo=[0, 1, 2], opd=[0, 1, 2],
                                                 repair=[0, 1, 2], int=[0, 1, 2],
                                                 rloo=[0, 1, 2, 3]))
    assert more - base == {"sft@3", "evaluate_sft@3", "evaluate_sft_early@3", "diagnose@3",
                           "rloo@rloo-3", "evaluate_rloo@rloo-3", "rloo_early@rloo_early-3",
                           "evaluate_rloo_early@rloo_early-3"}
    assert base <= more
    (tmp_path / "later").mkdir()
    later = stage_names(tmp_path / "later", lists([0, 1, 2, 3], ipo=[3, 1], rloo=[2],
                                                  opd=[2], repair=[1, 2], int=[2]))
    assert {n for n in later if n.startswith(("rloo", "evaluate_rloo"))} == {
        "rloo@rloo-2", "evaluate_rloo@rloo-2", "rloo_nocurr@2", "evaluate_rloo_nocurr@2",
        "rloo_shaped@2", "evaluate_rloo_shaped@2", "rloo_early_shaped@2",
        "evaluate_rloo_early_shaped@2", "rloo_early@rloo_early-2",
        "evaluate_rloo_early@rloo_early-2"}
    assert {n for n in later if n.startswith(("ipo@", "evaluate_ipo@"))} == {
        "ipo@scripted-3", "ipo@easyneg-3", "ipo@scripted-1", "ipo@easyneg-1",
        "evaluate_ipo@scripted-3", "evaluate_ipo@easyneg-3", "evaluate_ipo@scripted-1",
        "evaluate_ipo@easyneg-1"}
    assert {n for n in later if n.startswith(("int@", "opd@", "repair@", "distill@"))} == {
        "int@2", "opd@opd-2", "opd@opd_ac-2", "repair@1", "repair@2", "distill@R-1",
        "distill@R-2"}


@pytest.mark.parametrize("path,stage", [
    ("data/models/sft/r1", "sft"), ("data/models/ipo_scripted/r0", "ipo"),
    ("data/models/opd_ac/r2", "opd"), ("data/models/rloo_shaped/r0", "rloo_shaped"),
    ("data/models/rloo_nocurr/r0", "rloo_nocurr"), ("data/models/sft_early/r1", "sft"),
    ("data/models/rloo_early_shaped/r2", "rloo_early_shaped"), ("data/models/distill_F1/r0/config.json",
                                                   "distill"),
    ("data/repair/r0/pool.parquet", "repair"), ("data/models/base", "base"),
    ("data/eval/teacher/shared.parquet", "evaluate_shared"), ("elsewhere/model", None),
])
def test_an_error_names_the_stage_group_that_writes_a_replicate_path(path, stage, tmp_path):
    from countdown_rlvr.core.io import producing_stage

    (tmp_path / "dvc.yaml").write_text(generate(with_every_arm()))  # every arm's stages
    assert producing_stage(path, tmp_path / "dvc.yaml") == stage


seed_lists = st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True)


@given(st.integers(0, 9), seed_lists, seed_lists, seed_lists, seed_lists, seed_lists)
def test_with_one_shared_sft_every_chain_starts_from_it(shared, ipo, rloo, opd, repair, int_):
    """replicates.shared_sft: the chains' seeds need not be SFT's (only OPD's and int's must be
    RLOO's), every replicate's SFT dir is the shared one, and a stage takes any seed of its
    own chain."""
    from countdown_rlvr.core.config import Replicates
    from countdown_rlvr.core.replicates import sft_dir

    section = {"shared_sft": shared, "seeds": [shared], "ipo": ipo, "rloo": rloo, "opd": opd,
               "repair": repair, "int": int_}
    valid = set(opd) <= set(rloo) and set(int_) <= set(rloo)
    try:
        rep = Replicates(**section)
    except ValueError as exc:
        assert not valid and "not in replicates.rloo" in str(exc)
        return
    assert valid and all(rep.sft_seed(r) == shared for seeds in section.values()
                         if isinstance(seeds, list) for r in seeds)
    params = {"replicates": section}
    for chain, seeds in (("ipo", ipo), ("rloo", rloo), ("repair", repair)):
        for r in seeds:
            assert parse_replicate(chain, str(r), params, chain=chain) == r
            assert sft_dir(chain, params, r) == model_dir("sft", shared)
            assert sft_dir(chain, params, r, "sft_early") == model_dir("sft_early", shared)
    # without it, replicate r starts from SFT r
    own = {**section, "shared_sft": None, "seeds": sorted({*ipo, *rloo, *repair})}
    assert sft_dir("rloo", {"replicates": own}, rloo[0]) == model_dir("sft", rloo[0])


def test_with_a_shared_sft_a_missing_seed_names_only_its_own_chains():
    params = {"replicates": lists([3], rloo=[1, 2], opd=[1], int=[2], ipo=[], repair=[],
                                  shared_sft=3)}
    params["replicates"]["ipo"] = params["replicates"]["repair"] = [4]
    with pytest.raises(StageError, match=r"replicate '5' is not in `replicates.int`; pass one "
                       r"of \[2\] .* or add it to `replicates.int` \(and `replicates.rloo`\)$"):
        parse_replicate("int", "5", params, chain="int")
