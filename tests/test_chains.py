"""A seed list per claim chain: policies of different chains have different replicates, and
compare, the claims and the report work with that. A pair is compared on the replicates both
policies have; a claim's replicates are its pair's; an arm is checked on its own chain's seeds;
the planning advice names the chain's list (and SFT's, which trains every new seed)."""

import runpy

import numpy as np
import pandas as pd
import pytest
from conftest import EVERY_ARM_DEFAULT, ROOT

from countdown_rlvr.analysis import claims
from countdown_rlvr.analysis.chains import chain_of, evaluation_stage, sampled, trained_arms
from countdown_rlvr.analysis.compare import compare_replicates
from countdown_rlvr.analysis.report import needed_words
from countdown_rlvr.analysis.results import Inputs
from countdown_rlvr.core.config import CHAINS, Replicates
from countdown_rlvr.stats.crossed import crossed_test


def records(skill: float, seed: int, n_problems: int = 30, n: int = 4) -> pd.DataFrame:
    """A policy's evaluation records: problem i solved with a probability set by its
    difficulty and `skill`, a draw of its own per replicate `seed`."""
    rng = np.random.default_rng(seed * 1000 + int(skill * 100))
    q = 1 / (1 + np.exp(-(skill + np.linspace(-2, 2, n_problems))))
    rows = [{"problem_id": f"p{i:02d}", "split": "test", "n_numbers": 3, "seed": 0,
             "sample": j, "correct": bool(rng.random() < q[i])}
            for i in range(n_problems) for j in range(n)]
    return pd.DataFrame(rows)


def test_a_pair_is_compared_on_the_replicates_both_policies_have():
    """sft and rloo on four seeds, ipo on two: rloo vs sft pools four replicates, ipo vs sft
    the two ipo has, and the crossed test is the one of exactly those replicates' columns."""
    runs = {"sft": {f"r{s}": records(0.0, s) for s in (0, 1, 2, 3)},
            "rloo": {f"r{s}": records(0.8, s) for s in (0, 1, 2, 3)},
            "ipo_scripted": {f"r{s}": records(0.2, s) for s in (1, 3)}}
    report = compare_replicates(runs, [["rloo", "sft"], ["ipo_scripted", "sft"],
                                       ["ipo_scripted", "rloo"]], [1, 4], n_boot=50)
    assert report["settings"]["replicates"] == ["r0", "r1", "r2", "r3"]
    for pair, tags in (("rloo_vs_sft", ["r0", "r1", "r2", "r3"]),
                       ("ipo_scripted_vs_sft", ["r1", "r3"]),
                       ("ipo_scripted_vs_rloo", ["r1", "r3"])):
        row = report["pairs"][pair]["test"]["k1"]
        assert list(row["per_replicate"]) == tags and row["pooled"]["n"] == len(tags)
        assert row["crossed"]["n"] == len(tags)
    # the crossed test of ipo vs sft: the per-problem pass@1 differences of r1 and r3 only
    d = np.column_stack([
        runs["ipo_scripted"][t].groupby("problem_id")["correct"].mean()
        - runs["sft"][t].groupby("problem_id")["correct"].mean() for t in ("r1", "r3")])
    assert report["pairs"]["ipo_scripted_vs_sft"]["test"]["k1"]["crossed"]["mean"] == \
        pytest.approx(crossed_test(d).mean)
    # each policy is pooled over its own replicates
    assert report["policies"]["ipo_scripted"]["test"]["pass@1"]["n"] == 2
    assert report["policies"]["rloo"]["test"]["pass@1"]["n"] == 4


def test_the_compare_stage_reads_each_policy_on_its_chains_seeds():
    compare = runpy.run_path(str(ROOT / "stages/compare.py"))  # its functions, not main
    from helpers import config_of

    from countdown_rlvr.core.evaluate_config import Evaluate

    ev = config_of(Evaluate, "evaluate", EVERY_ARM_DEFAULT["evaluate"])  # every arm
    rep = Replicates(seeds=[0, 1, 2, 3], ipo=[1, 3], rloo=[2, 3], opd=[2], repair=[0, 1],
                     int=[3])
    runs = compare["runs_of"](ev, rep)
    assert all(t == f for r in runs.values() for t, f in r.items())  # each its own file
    runs = {p: list(r) for p, r in runs.items()}
    assert runs["sft"] == ["r0", "r1", "r2", "r3"] and runs["base"] == ["shared"]
    assert runs["ipo_easyneg"] == ["r1", "r3"] and runs["rloo"] == ["r2", "r3"]
    # the first-replicate arms (core/arms.py): their chain's first seed
    assert runs["rloo_nocurr"] == runs["rloo_shaped"] == runs["rloo_early_shaped"] == ["r2"]
    assert runs["opd_ac"] == ["r2"] and runs["distill_R"] == ["r0", "r1"]
    assert runs["sft_early"] == runs["sft"] and runs["rloo_early"] == ["r2", "r3"]


def test_with_one_sft_for_every_replicate_its_one_draw_stands_in_each():
    """replicates.shared_sft: SFT's policies are read from the shared SFT's records, under the
    tag of a policy trained once, so every replicate of a later chain pairs with that draw."""
    compare = runpy.run_path(str(ROOT / "stages/compare.py"))
    from helpers import config_of

    from countdown_rlvr.core.evaluate_config import Evaluate

    ev = config_of(Evaluate, "evaluate", EVERY_ARM_DEFAULT["evaluate"])  # every arm
    rep = Replicates(seeds=[5], ipo=[1, 3], rloo=[1, 2, 3], opd=[2], repair=[0, 1], int=[3],
                     shared_sft=5)
    runs = compare["runs_of"](ev, rep)
    assert runs["sft"] == runs["sft_early"] == {"shared": "r5"}
    assert runs["rloo"] == {"r1": "r1", "r2": "r2", "r3": "r3"} and runs["base"] == {
        "shared": "shared"}
    assert runs["rloo_nocurr"] == {"r1": "r1"} and runs["opd_ac"] == {"r2": "r2"}
    # the report reads every chain's replicates, SFT's first, though they are not SFT's
    from countdown_rlvr.analysis.results import _tags

    every, chains = _tags(ROOT, rep.chains())
    assert every == ["r5", "r0", "r1", "r2", "r3"] and chains["rloo"] == ["r1", "r2", "r3"]
    # a split block of SFT's (the dev split an extension claim pairs OPD with): its one draw
    # stands in every replicate
    dev = {"pass@1": 0.2, "pass@16": 0.6}
    runs = {"eval/sft.json": {"r5": {"dev": dev}}, "eval/opd.json": {
        "r2": {"dev": {"pass@1": 0.3}}}}
    one = Inputs({}, {}, {}, [], runs=runs, replicates=every, chains=chains, shared_sft=True)
    assert one.split_of("sft", "dev") == dict.fromkeys(every, dev)
    assert one.split_of("opd", "dev") == {"r2": {"pass@1": 0.3}}
    own = Inputs({}, {}, {}, [], runs=runs, replicates=every, chains=chains)
    assert own.split_of("sft", "dev") == {"r5": dev}


def test_a_policys_chain_and_evaluation_follow_from_the_stage_that_trains_it():
    assert [chain_of(p) for p in ("sft", "sft_early", "ipo_base", "rloo_shaped", "rloo_nocurr",
                                  "rloo_early_shaped", "opd_ac", "distill_F2", "int_plain_rl",
                                  "base", "ghost")] == [
        "sft", "sft", "ipo", "rloo", "rloo", "rloo", "opd", "repair", "int", None, None]
    assert [evaluation_stage(p) for p in ("sft", "sft_early", "ipo_easyneg", "rloo_nocurr",
                                          "rloo_early_shaped", "opd", "distill_R", "int",
                                          "teacher")] == [
        "evaluate_sft", "evaluate_sft_early", "evaluate_ipo", "evaluate_rloo_nocurr",
        "evaluate_rloo_early_shaped", "evaluate_opd", "evaluate_distill", "evaluate_int",
        "evaluate_shared"]
    arms = ["rloo", "rloo_early", "opd", "opd_ac"]
    params = {"ipo": {"sources": ["scripted"], "first_replicate_sources": ["base"]},
              "distill": {"conditions": ["R"], "first_replicate_conditions": ["F1"]},
              "evaluate": {"int_policies": ["int"], "policies": ["sft", *arms],
                           "first_replicate_only": ["rloo_shaped", "rloo_nocurr",
                                                    "rloo_early_shaped"]}}
    assert sampled(params) == {"sft": True, "ipo_base": False, "ipo_scripted": True,
                               "rloo": True, "rloo_shaped": False, "rloo_nocurr": False,
                               "rloo_early": True, "rloo_early_shaped": False,
                               "opd": True, "opd_ac": True, "distill_F1": False,
                               "distill_R": True, "int": True}
    # the early checkpoint: sampled on every seed of sft's chain when the sft stage saves it
    assert sampled({**params, "sft": {"early_step": 800}})["sft_early"] is True


def test_a_run_trains_the_arms_its_evaluate_lists_name():
    """Leaving an arm out of the evaluate lists leaves it out of the run: not trained, not
    sampled, in ARMS order whatever the lists' order."""
    ev = {"policies": ["sft", "opd_ac", "rloo"], "controls": [], "first_replicate_only":
          ["rloo_nocurr"]}
    assert trained_arms({"evaluate": ev}) == ("rloo", "rloo_nocurr", "opd_ac")
    assert trained_arms({}) == ()
    got = sampled({"evaluate": ev})
    assert {p for p in got if p != "sft"} == {"rloo", "rloo_nocurr", "opd_ac"}
    assert got["rloo_nocurr"] is False and got["opd_ac"] is True


def inputs_with(chains: dict[str, list[int]], runs: dict) -> Inputs:
    tags = [f"r{s}" for s in chains["sft"]]
    return Inputs({}, {}, {}, [], runs=runs, replicates=tags,
                  chains={c: [f"r{s}" for s in seeds] for c, seeds in chains.items()})


def test_an_arm_is_checked_on_its_own_chains_replicates():
    """rloo on four seeds, opd on two: opd is not 'not measured' in the replicates it never
    had, and rloo must pass in all four (a missing r3 would be 'not measured')."""
    rise = {"pass_rate_first": 0.1, "pass_rate_final": 0.3, "curriculum": False,
            "forward_kl_first": 1.0, "forward_kl_final": 0.5}
    chains = {"sft": [0, 1, 2, 3], "rloo": [0, 1, 2, 3], "opd": [0, 2]}
    inp = inputs_with(chains, {"rloo.json": {f"r{s}": rise for s in (0, 1, 2, 3)},
                               "opd.json": {f"r{s}": rise for s in (0, 2)},
                               "opd_ac.json": {f"r{s}": rise for s in (0, 2)}})
    for arms in (("rloo",), ("opd", "opd_ac")):
        c = claims.Claim("x", "y", claims.EFFECT, arms=arms)
        claims.check_arms(c, inp)
        assert c.check_status == "pass", c.check_why
        assert set(c.arm_checks[0].per_replicate) == {f"r{s}" for s in chains[chain_of(arms[0])]}
    inp.runs["rloo.json"].pop("r3")
    c = claims.Claim("x", "y", claims.EFFECT, arms=("rloo",))
    claims.check_arms(c, inp)
    assert c.check_status == "not measured" and "r3" in c.check_why


def test_a_claim_is_planned_on_its_chain_with_a_command_that_works():
    """The seeds to add go into the chain's list and into every list upstream that lacks them
    (SFT's; RLOO's too for int, which compares with RLOO's policy of its seed), seeds SFT
    already trained first; the cost is each list's minutes per seed it trains."""
    rep = {"sft": [0, 1, 2, 3, 4], "ipo": [0, 1, 2], "rloo": [0, 1, 2, 3], "opd": [0, 1, 2],
           "repair": [0, 1, 2, 3, 4], "int": [0, 1, 2]}
    minutes = {"sft": 3.6, "ipo": 2.6, "rloo": 7.7, "opd": 5.9, "repair": 1.8, "int": 5.6}
    lists, added = claims.grown(rep, "int", 3)
    assert added == [3, 4, 5]  # rloo's 3 first, then SFT's 4, then a new seed
    assert lists == {"seeds": [0, 1, 2, 3, 4, 5], "rloo": [0, 1, 2, 3, 4, 5],
                     "int": [0, 1, 2, 3, 4, 5]}
    assert claims.added_cost(rep, "int", added, minutes) == pytest.approx(
        3 * 5.6 + 2 * 7.7 + 3.6)
    assert claims.grown(rep, "repair", 2) == ({"seeds": [0, 1, 2, 3, 4, 5, 6],
                                               "repair": [0, 1, 2, 3, 4, 5, 6]}, [5, 6])
    assert claims.grown(rep, "sft", 1) == ({"seeds": [0, 1, 2, 3, 4, 5]}, [5])
    # one SFT for every replicate: an added seed trains the chain (and RLOO's for int), no SFT
    shared = {**rep, "sft": [0]}
    lists, added = claims.grown(shared, "int", 3, shared_sft=True)
    assert added == [3, 5, 6] and lists == {"rloo": [0, 1, 2, 3, 5, 6], "int": [0, 1, 2, 3, 5, 6]}
    assert claims.added_cost(shared, "int", added, minutes, shared_sft=True) == pytest.approx(
        3 * 5.6 + 2 * 7.7)
    assert claims.grown(shared, "repair", 2, shared_sft=True) == (
        {"repair": [0, 1, 2, 3, 4, 5, 6]}, [5, 6])
    # a new seed comes after every listed one, never below them: the defaults start at 1
    # because pilots tuned on 0, and the advice must not hand that seed back
    from_one = {c: [s + 1 for s in seeds] for c, seeds in rep.items()}
    assert claims.grown(from_one, "opd", 3)[1] == [4, 5, 6]
    assert claims.grown(from_one, "sft", 1) == ({"seeds": [1, 2, 3, 4, 5, 6]}, [6])
    # the advice applied: a valid `replicates` section
    for chain in CHAINS:
        lists, _ = claims.grown(rep, chain, 4)
        Replicates(**{**{"seeds" if c == "sft" else c: s for c, s in rep.items()}, **lists})


def test_a_claims_replicates_are_its_pairs_and_its_chain_is_the_pairs():
    assert claims.pair_chain("rloo_shaped", "rloo") == "rloo"
    assert claims.pair_chain("distill_R", "sft") == "repair"
    assert claims.pair_chain("opd_ac", "opd") == "opd"
    c = claims.Claim("x", "y", claims.EFFECT, chain="ipo",
                     plans=[claims.Plan("a − b", 0.02, 0.03, 0.02, n=2)])
    c.adjusted = 0.5  # inconclusive
    text = needed_words(c, {"sft": [0, 1, 2, 3], "ipo": [1, 3], "rloo": [0, 1, 2, 3],
                            "opd": [0], "repair": [0], "int": [0]},
                        {c: 1.0 for c in CHAINS})
    n = int(text.split(" ")[0])
    assert n > 2 and f"{n - 2} more replicates of the ipo chain" in text  # from its 2, not 4
    assert "-S 'replicates.ipo=[1,3,0,2" in text


def test_check_params_refuses_evaluate_lists_no_stage_samples():
    from countdown_rlvr.cli.stage_params import check_all
    from countdown_rlvr.core import io

    params = io.read_params(ROOT / "params.yaml")
    params["evaluate"]["policies"] = [*params["evaluate"]["policies"], "int", "ipo_base"]
    params["evaluate"]["int_policies"] = ["int", "int_solver_sft", "nope"]
    with pytest.raises(io.StageError) as err:
        check_all(params)
    text = str(err.value.code)
    assert "`evaluate.policies` names 'ipo_base', which no evaluate stage samples with these " \
        "params; add its source to `ipo.sources`" in text
    assert "`evaluate.int_policies` has ['nope'], which the int stage does not train" in text
    assert "`evaluate.int_policies` samples ['int_solver_sft'], which no evaluate list " \
        "reports" in text
    assert "names 'int'" not in text  # int_policies samples it
    params = io.read_params(ROOT / "params.yaml")
    params["evaluate"]["policies"] = [*params["evaluate"]["policies"], "rloo_nocurr"]
    params["evaluate"]["first_replicate_only"] = []
    with pytest.raises(io.StageError, match=r"'rloo_nocurr', which is trained and sampled on "
                                            r"the first seed of replicates.rloo only"):
        check_all(params)
