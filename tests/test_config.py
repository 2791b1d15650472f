"""Bad params stop the params check (every section at once) and a stage that reads them (as it
builds its sections), before any compute, with one message naming the key, the bad value and
what is allowed (and the closest known key for a misspelt one); names that become shell
arguments and paths are restricted; a killed stage's temporary files are cleared."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, merge
from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr.cli.overrides import STOP_FLAG
from countdown_rlvr.core.config import at, has, leaves, merged
from countdown_rlvr.core.io import (
    StageError,
    atomic_path,
    clear_stale_tmp,
    load_params,
    read_params,
)

BASE = yaml.safe_load((ROOT / "params.yaml").read_text())


def load_with(tmp_path: Path, override: dict, combine=merged):
    """params.yaml with `override` on top (`merged`: a null override value is written as null;
    conftest.merge deletes the key)."""
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(combine(BASE, override)))
    return load_params(path)


@pytest.mark.parametrize("name", ["params.smoke.yaml", "params.qwen.yaml",
                                  "params.secondary.yaml"])
def test_the_shipped_params_and_overrides_are_valid(tmp_path, name):
    params = load_with(tmp_path, yaml.safe_load((ROOT / name).read_text()), combine=merge)
    assert load_params(ROOT / "params.yaml")["rloo"]["reward"] == "binary"
    # and every stage's config builds, relations across sections included (evaluate.ks <=
    # evaluate.n, compare.ks, diagnose.k, ...), as `check_params` builds them
    from countdown_rlvr.cli.stage_params import check_all

    assert check_all(params) > 20


def test_exponent_floats_read_as_dvc_writes_them(tmp_path):
    """`dvc exp run -S rloo.lr=1e-5` writes `lr: 1e-05` (YAML 1.2: no dot needed); a YAML 1.1
    reader takes that for a string, and the lr rule would refuse a valid learning rate."""
    text = (ROOT / "params.yaml").read_text()
    head, rloo = re.split(r"^(?=rloo:)", text, maxsplit=1, flags=re.MULTILINE)
    rloo = re.sub(r"^  lr: \S+", "  lr: 1e-05", rloo, count=1, flags=re.MULTILINE)
    (tmp_path / "params.yaml").write_text(head + rloo)
    assert load_params(tmp_path / "params.yaml")["rloo"]["lr"] == 1e-5


# (override, the `key` the message must name, a fragment of what is allowed)
CASES = [
    ({"evaluate": {"ks": "1,2"}}, "evaluate.ks", "a list"),
    ({"rloo": {"grad_clip": "x"}}, "rloo.grad_clip", "null or a number > 0"),
    ({"sft": {"grad_clip": "x"}}, "sft.grad_clip", "null or a number > 0"),
    ({"model": {"prompt_style": "fancy"}}, "model.prompt_style", "one of tiny, chat"),
    ({"rloo": {"is_clip": None}}, "rloo.is_clip", "a number > 0"),
    ({"rloo": {"kl_coef": None}}, "rloo.kl_coef", "a number >= 0"),
    ({"sampler": {"temperature": None}}, "sampler.temperature", "a number > 0"),
    ({"rloo": {"sampler": {"temperature": "hot"}}}, "rloo.sampler.temperature", "a number > 0"),
    ({"sft": {"lora_r": -1}}, "sft.lora_r", "an integer >= 1"),
    ({"ipo": {"target_modules": 7}}, "ipo.target_modules", "a module name pattern"),
    ({"traces": {"per_problem": 0}}, "traces.per_problem", "an integer >= 1"),
    ({"problems": {"n_test": 2.5}}, "problems.n_test", "an integer >= 1"),
    ({"rloo": {"micro_batch": True}}, "rloo.micro_batch", "null or an integer >= 1"),
    # the policy an RL arm starts from: one a stage trains per seed
    ({"rloo": {"init": "base"}}, "rloo.init", "one of sft, sft_early, rloo"),
    ({"opd": {"init": "teacher"}}, "opd.init", "one of sft, sft_early, rloo"),
    ({"sft": {"early_step": 0}}, "sft.early_step", "null or an integer >= 1"),
    ({"problems": {"n_tset": 100}}, "problems.n_tset",
     "known in `problems`: seed, dev_seed, test_seed"),
    # every section refuses a key its class lacks, naming the keys it has
    ({"dedup": {"treshold": 0.9}}, "dedup.treshold", "known in `dedup`: sources, threshold"),
    ({"int": {"sft": {"epoch": 2}}}, "int.sft.epoch",
     "did you mean `int.sft.epochs`? (known in `int.sft`: "),
    ({"int": {"sft": {"xyz": 2}}}, "int.sft.xyz", "check the spelling (known in `int.sft`: "),
    ({"problems": {"n_numbers": 3}}, "problems.n_numbers", "a list"),
    ({"problems": {"n_numbers": [3, 7]}}, "problems.n_numbers", "<= 6"),
    ({"problems": {"ood_n_numbers": [5, 9]}}, "problems.ood_n_numbers", "<= 6"),
    ({"rloo": {"lrr": 1e-4}}, "rloo.lrr", "not a param this pipeline reads"),
    ({"int": {"rloo": {"steps": 0}}}, "int.rloo.steps", "an integer >= 1"),
    ({"model": {"dtype": "fp8"}}, "model.dtype", "float32, bfloat16, float16, auto"),
    ({"evaluate": {"policies": ["sft", "x;touch /tmp/X;#"]}}, "evaluate.policies",
     "a name of letters"),
    ({"evaluate": {"shared": ["../../../../tmp/escape"]}}, "evaluate.shared", "a name of letters"),
    ({"replicates": {"seeds": [0, -1]}}, "replicates.seeds", "a list (at least 1) of an integer"),
    ({"replicates": {"seeds": []}}, "replicates.seeds", "a list (at least 1)"),
    ({"ipo": {"sources": ["scripted", "a b"]}}, "ipo.sources", "a name of letters"),
    ({"distill": {"conditions": ["F1", "../F2"]}}, "distill.conditions", "a name of letters"),
    ({"compare": {"pairs": [["sft", "x;rm"]]}}, "compare.pairs", "pairs of policy names"),
    ({"report": {"reference": "$(id)"}}, "report.reference", "a name of letters"),
    # a repeat in a list where it is a mistake (a rotation may repeat: see below)
    ({"evaluate": {"splits": ["test", "test"]}}, "evaluate.splits", "without repeats"),
    ({"replicates": {"seeds": [0, 0]}}, "replicates.seeds", "without repeats"),
    ({"replicates": {"opd": [0, 0]}}, "replicates.opd", "without repeats"),
    ({"replicates": {"int": []}}, "replicates.int", "a list (at least 1)"),
    ({"report": {"chain_minutes": {"sft": 0}}}, "report.chain_minutes",
     "a mapping of every chain (sft, ipo, rloo, opd, repair, int) to a number > 0"),
    ({"evaluate": {"seeds": [0, 1, 0]}}, "evaluate.seeds", "without repeats"),
    ({"evaluate": {"ks": [1, 4, 4]}}, "evaluate.ks", "without repeats"),
    ({"evaluate": {"budgets": [1, 1]}}, "evaluate.budgets", "without repeats"),
    ({"evaluate": {"policies": ["sft", "sft"]}}, "evaluate.policies", "without repeats"),
    ({"compare": {"ks": [1, 1]}}, "compare.ks", "without repeats"),
    ({"compare": {"splits": ["ood", "ood"]}}, "compare.splits", "without repeats"),
    ({"dedup": {"sources": ["solver", "solver"]}}, "dedup.sources", "without repeats"),
    ({"ipo": {"sources": ["scripted", "scripted"]}}, "ipo.sources", "without repeats"),
    ({"distill": {"conditions": ["R", "R"]}}, "distill.conditions", "without repeats"),
    ({"repair": {"conditions": ["F0", "F1", "F0"]}}, "repair.conditions", "without repeats"),
    ({"compare": {"pairs": [["rloo", "sft"], ["rloo", "sft"]]}}, "compare.pairs",
     "no pair twice"),
    ({"compare": {"pairs": [["rloo", "sft"], ["sft", "rloo"]]}}, "compare.pairs",
     "no pair twice (in either order)"),
]


def refusals(tmp_path: Path, override: dict) -> dict[str, str]:
    """{who: its message} for params.yaml with `override` (one section) on top: the params
    check, which reads every section, and the stage that reads the section, which checks it
    as it builds it (`model`, `sampler` and `replicates`: as it loads params)."""
    from countdown_rlvr.cli.stage_params import check_all
    from countdown_rlvr.core.config import from_section
    from countdown_rlvr.core.sections import SECTIONS

    [section] = override
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(merged(BASE, override)))
    out = {}
    with pytest.raises(StageError) as err:
        check_all(read_params(path))
    out["check_params"] = str(err.value.code)
    with pytest.raises(StageError) as err:
        from_section(SECTIONS[section], section, load_params(path), section)
    out["stage"] = str(err.value.code)
    return out


@pytest.mark.parametrize("override,key,allowed", CASES, ids=[c[1] for c in CASES])
def test_a_bad_value_is_refused_naming_key_value_and_what_is_allowed(tmp_path, override, key,
                                                                     allowed):
    [section] = override
    found = refusals(tmp_path, override)
    assert found["check_params"].startswith("[check_params] error:")
    assert found["stage"].startswith("[params] error:" if section in ("model", "sampler",
                                     "replicates") else f"[{section}] error:")
    for message in found.values():
        line = next(ln for ln in message.splitlines() if f"`{key}`" in ln)
        assert allowed in line


def test_a_stage_checks_the_sections_it_reads_and_no_other(tmp_path):
    """A stage's code depends on the rules of the sections it reads only (so editing RLOO's
    rules re-runs no evaluation): a bad `rloo` value stops the params check and the stages
    that build `rloo`, not one that never reads it."""
    from countdown_rlvr.cli.stage_params import check_all
    from countdown_rlvr.core.config import from_section
    from countdown_rlvr.core.data_config import Problems
    from countdown_rlvr.core.rl_config import RL

    params = load_with(tmp_path, {"rloo": {"lr": -1}})  # loads: `rloo` is not a shared section
    assert from_section(Problems, "problems", params, "problems").n_test == BASE["problems"]["n_test"]
    with pytest.raises(StageError, match=r"\[rloo\] error: `rloo.lr` is -1; allowed: a number > 0"):
        from_section(RL, "rloo", params, "rloo")
    # an arm over it names the key where it is, in `rloo`
    with pytest.raises(StageError, match=r"\[rloo_shaped\] error: `rloo.lr` is -1"):
        from_section(RL, "rloo_shaped", params, "rloo_shaped", inherit="rloo")
    with pytest.raises(StageError, match="`rloo.lr` is -1"):
        check_all(params)
    with pytest.raises(StageError, match=r"\[params\] error: .*`model.threads` is 0"):
        load_with(tmp_path, {"model": {"threads": 0}})  # every model stage reads it as it starts


def test_a_repeat_message_shows_the_list_and_the_rule():
    from countdown_rlvr.core.sections import problems_in

    assert problems_in({"evaluate": {"splits": ["test", "test"]}}) == [(
        "`evaluate.splits` is ['test', 'test']; allowed: a list (at least 1) of one of test, "
        "ood, without repeats")]


# lists where a repeat is a mistake, with values their rule allows; and the rotations, where a
# repeat weights an item on purpose (traces.styles [direct, direct, direct, search] is 3:1)
UNIQUE_LISTS = {("evaluate", "splits"): ["test", "ood"], ("compare", "splits"): ["test", "ood"],
                ("replicates", "seeds"): [0, 1, 2, 7], ("evaluate", "seeds"): [0, 3],
                ("evaluate", "ks"): [1, 2, 4, 8], ("evaluate", "budgets"): [1, 2, 16],
                ("compare", "ks"): [1, 4, 16],
                ("dedup", "sources"): ["solver", "teacher", "repair"],
                ("ipo", "sources"): ["scripted", "easyneg", "base"],
                ("distill", "conditions"): ["F1", "R", "Fshuf"],
                ("repair", "conditions"): ["F0", "F4", "R"],
                ("evaluate", "policies"): ["sft", "rloo", "opd"]}
ROTATIONS = {("traces", "styles"): ["direct", "search"],
             ("teacher_traces", "strategies"): ["direct", "search"],
             ("problems", "n_numbers"): [3, 4, 5], ("problems", "ood_n_numbers"): [3, 5]}


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_list_with_a_repeat_is_refused_unless_it_is_a_rotation(data):
    from countdown_rlvr.core.sections import problems_in

    (section, key), pool = data.draw(st.sampled_from(sorted({**UNIQUE_LISTS, **ROTATIONS}.items())))
    distinct = data.draw(st.lists(st.sampled_from(pool), min_size=1, unique=True))
    repeated = distinct + data.draw(st.lists(st.sampled_from(distinct), min_size=1))
    value = data.draw(st.permutations(repeated))
    assert problems_in({section: {key: distinct}}) == []
    found = problems_in({section: {key: value}})
    if (section, key) in ROTATIONS:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(f"`{section}.{key}` is {value!r}; allowed: ")
        assert found[0].endswith(", without repeats")


def test_every_problem_is_listed_at_once():
    from countdown_rlvr.cli.stage_params import check_all

    with pytest.raises(StageError) as err:
        check_all(merged(BASE, {"rloo": {"lr": -1, "steps": 0}, "sampler": {"top_p": 2}}))
    assert all(f"`{k}`" in str(err.value.code) for k in ("rloo.lr", "rloo.steps", "sampler.top_p"))


def test_a_stage_refuses_before_loading_anything(tmp_path):
    """The real stage script: the message, and no model, data or output touched."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(merge(BASE, {"evaluate": {"ks": "1,2"}})))
    proc = subprocess.run([sys.executable, str(ROOT / "stages/evaluate.py"), "sft"],
                          check=False, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "`evaluate.ks` is '1,2'" in proc.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "reports").exists()


def test_foreach_names_reach_the_shell_quoted():
    cmds = [s.get("do", s)["cmd"] for s in
            yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].values()]
    for cmd in cmds:
        for arg in cmd.split()[2:]:
            if "${" in arg:  # a whole argument in quotes (`'ipo_${item.source}'`)
                assert arg.startswith("'") and arg.endswith("'") and arg.count("'") == 2, cmd


def test_stale_temp_files_of_a_killed_stage_are_cleared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # a stage that fails half-way through its write
    with pytest.raises(RuntimeError), atomic_path("reports/metrics/problems.json") as tmp:
        tmp.write_text('{"half": ')
        leftover = tmp.parent
        raise RuntimeError
    assert not leftover.exists()  # atomic_path cleans up after itself when it can ...
    stale = Path("reports/metrics/.problems.json.k1ll3d.tmp")  # ... not after a SIGKILL
    stale.mkdir(parents=True)
    (stale / "problems.json").write_text('{"half": ')
    Path("data/models/.sft.k1ll3d.tmp").mkdir(parents=True)
    keep = Path("data/models/sft/model.tmpl")
    keep.parent.mkdir(parents=True)
    keep.write_text("x")
    assert sorted(map(str, clear_stale_tmp())) == ["data/models/.sft.k1ll3d.tmp",
                                                   "reports/metrics/.problems.json.k1ll3d.tmp"]
    assert not stale.exists() and keep.exists()
    assert ".*.tmp" in (ROOT / ".dvcignore").read_text()


def test_rule_copies_agree_with_the_code_they_mirror():
    """The rules read no torch / task code, so they keep copies of these; they must agree."""
    from countdown_rlvr.core import sections as C  # every section's dataclass
    from countdown_rlvr.core.config import rule_of
    from countdown_rlvr.core.data_config import MAX_NUMBERS
    from countdown_rlvr.data.traces import STRATEGY_HINTS, STYLES
    from countdown_rlvr.model.policy import TINY_PRESETS
    from countdown_rlvr.task.solve import MAX_NUMBERS as SOLVER_MAX
    from countdown_rlvr.train.losses import LOSS_AGGREGATIONS

    assert MAX_NUMBERS == SOLVER_MAX
    loss_agg, strategy = rule_of(C.RL, "loss_agg"), rule_of(C.OPD, "teacher_strategy")
    assert all(loss_agg(a) is None for a in LOSS_AGGREGATIONS) and loss_agg("x")
    assert all(strategy(h) is None for h in [*STRATEGY_HINTS, None]) and strategy("x")
    from countdown_rlvr.core.data_config import FAILURE_TYPES
    from countdown_rlvr.data.repair_data import FAILURE_ORDER

    assert set(FAILURE_TYPES) == set(FAILURE_ORDER)
    mix = rule_of(C.Traces, "repair_mix")
    assert mix({"WRONG_TARGET": 0.5, "NUMBER_REUSED": 0.5}) is None
    assert mix({"WRONG_TARGET": 0.5}) and mix({"X": 1.0})
    for cls, key, names in ((C.Traces, "styles", STYLES), (C.TeacherTraces, "strategies", STYLES),
                            (C.Model, "tiny_preset", TINY_PRESETS),
                            (C.Teacher, "tiny_preset", TINY_PRESETS)):
        rule = rule_of(cls, key)
        if key != "tiny_preset":
            rule = (lambda v, r=rule: r([v]))
        assert all(rule(name) is None for name in names) and rule("x"), key
    # the reward kinds: the rule's message lists exactly the reward functions, in their order
    from countdown_rlvr.task.rewards import REWARDS

    assert rule_of(C.RL, "reward")("x") == "one of " + ", ".join(REWARDS)
    assert rule_of(C.Evaluate, "reward")("x") == "one of " + ", ".join(REWARDS)


def test_from_section_names_the_missing_key_and_inherits(tmp_path):
    from countdown_rlvr.core.config import from_section
    from countdown_rlvr.core.rl_config import OPD, RL

    params = load_params(ROOT / "params.yaml")
    rl = from_section(RL, "int", params, "int.rloo", inherit="rloo")
    assert rl.steps == params["int"]["rloo"]["steps"] and rl.reward == params["rloo"]["reward"]
    assert rl.sampler.temperature == params["rloo"]["sampler"]["temperature"]
    ac = from_section(OPD, "opd_ac", params, "opd_ac", inherit="opd")
    assert (ac.entropy_coef, ac.distill_temperature) == (0.01, 1.3) and ac.lr == params["opd"]["lr"]
    del params["rloo"]["lr"]
    with pytest.raises(StageError, match=r"\[rloo\] error: `rloo` is missing \['lr'\]; add them to "
                                         r"the `rloo:` section of params.yaml"):
        from_section(RL, "rloo", params, "rloo")
    with pytest.raises(StageError, match="no `nope:` section"):
        from_section(RL, "rloo", params, "nope")


def test_int_n_problems_must_be_a_number_where_rloo_may_be_null():
    from countdown_rlvr.core.sections import problems_in

    assert problems_in({"int": {"n_problems": None}}) == [
        "`int.n_problems` is None; allowed: an integer >= 1"]
    assert problems_in({"rloo": {"n_problems": None}}) == []
    # int.rloo overrides rloo's keys: its n_problems is rloo's, where null is allowed
    assert problems_in({"int": {"rloo": {"n_problems": None}}}) == []


def _classes(cls, seen):
    """`cls` and every dataclass its fields nest (Sampler blocks, int.sft, int.rloo)."""
    from countdown_rlvr.core.config import Block, rules

    if cls not in seen:
        seen.add(cls)
        for rule in rules(cls).values():
            if isinstance(rule, Block):
                _classes(rule.cls, seen)
    return seen


def test_every_field_of_every_section_carries_its_rule():
    """The field is the one description of a key: a field added without a rule fails here
    (and in every stage that reads params), not silently unchecked."""
    import dataclasses
    from dataclasses import dataclass

    from countdown_rlvr.core import config, sections
    from countdown_rlvr.core.arms import ARMS

    classes = set()
    for cls in sections.SECTIONS.values():
        _classes(cls, classes)
    assert {c.__name__ for c in classes} >= {"Sampler", "EvalSampler", "SFT", "RL", "OPD"}
    for cls in classes:
        rules = config.rules(cls)
        assert list(rules) == [f.name for f in dataclasses.fields(cls)], cls
        for key, rule in rules.items():
            if not isinstance(rule, config.Block):  # a rule: a message for a wrong value
                assert isinstance(config.rule_of(cls, key)(object()), str), (cls, key)
    # the arms' sections are their scripts' classes: SECTIONS and ARMS cover every section
    names = {s: c.__name__ for s, c in sections.SECTIONS.items()}
    names |= {a.name: names[a.script] for a in ARMS}
    assert names == {s: c for s, (c, _) in SECTION_CLASSES.items()}

    @dataclass(frozen=True)
    class Extra(sections.Report):
        note: str  # no rule

    with pytest.raises(TypeError, match="Extra.note has no rule"):
        config.rules(Extra)
    with pytest.raises(TypeError, match="RL.sampler is a block of Sampler keys"):
        config.rule_of(sections.RL, "sampler")


ARM_SECTIONS = {"rloo_shaped": "rloo", "rloo_nocurr": "rloo", "opd_ac": "opd"}


def test_every_section_refuses_a_key_its_class_lacks():
    from countdown_rlvr.core.sections import bad_values

    assert bad_values({"compare": {"alpha": 0.05, "boot_sed": 0}}) == {
        "compare.boot_sed": "`compare.boot_sed` is not a param this pipeline reads; did you "
        "mean `compare.boot_seed`? (known in `compare`: pairs, ks, seed, splits, exact, n_boot, "
        "alpha, boot_seed)"}
    # nested blocks by their own class: int.sft as SFT, int.rloo as (partial) RL with its sampler
    bad = bad_values({"int": {"sft": {"lr": 0.1, "reward": "binary"},
                              "rloo": {"steps": 0, "sampler": {"top_p": 1.0, "top": 1}}}})
    assert sorted(bad) == ["int.rloo.sampler.top", "int.rloo.steps", "int.sft.reward"]
    assert bad["int.rloo.steps"] == "`int.rloo.steps` is 0; allowed: an integer >= 1"
    assert "(known in `int.rloo.sampler`: temperature, top_p, top_k, max_new_tokens)" in \
        bad["int.rloo.sampler.top"]
    # a mapping where a value is due, and a value where a mapping is due
    assert bad_values({"rloo": {"lr": {"a": 1}, "sampler": 3}}) == {
        "rloo.lr": "`rloo.lr` is {'a': 1}; allowed: a number > 0 and <= 1",
        "rloo.sampler": "`rloo.sampler` is 3; allowed: a mapping of params"}


@pytest.mark.parametrize("typo,meant", [("lrr", "lr"), ("kl_coeff", "kl_coef"),
                                        ("groupsize", "group_size"), ("sampler", None),
                                        ("zzz", None)])
def test_a_misspelt_key_gets_the_closest_known_key(typo, meant):
    """The params check and the stage name the key a misspelt one most likely means (difflib's
    closest, if close enough), and still list every known key."""
    from countdown_rlvr.core.config import did_you_mean, from_section
    from countdown_rlvr.core.rl_config import RL
    from countdown_rlvr.core.sections import bad_values

    keys = [f for f in RL.__dataclass_fields__ if f != "sampler"]
    assert did_you_mean(typo, keys, "rloo.") == (f"did you mean `rloo.{meant}`? " if meant else "")
    if typo in RL.__dataclass_fields__:
        return  # a known key: nothing to refuse
    [found] = bad_values({"rloo": {typo: 1}}).values()
    assert (f"did you mean `rloo.{meant}`?" in found) == bool(meant)
    assert ("check the spelling" in found) != bool(meant)
    assert found.endswith(f"(known in `rloo`: {', '.join(RL.__dataclass_fields__)})")
    with pytest.raises(StageError) as err:  # the stage that builds `rloo` says the same
        from_section(RL, "rloo", merged(BASE, {"rloo": {typo: 1}}), "rloo")
    assert found in str(err.value.code)


def test_an_arm_section_is_checked_as_its_scripts_and_only_with_the_registry():
    """An arm's section holds only the keys it overrides: each checked against its script's
    class, none missing. Which sections are arms is the registry's (core.arms), which only the
    params check reads; a stage checks its own arm's keys when it builds them."""
    from dataclasses import fields

    from countdown_rlvr.core.config import from_section
    from countdown_rlvr.core.rl_config import OPD, RL
    from countdown_rlvr.core.sections import bad_values

    arm = {"rloo_shaped": {"reward": "dense", "distill_coef": 0.5}, "opd_ac": {"distill_coef": 1}}
    assert bad_values(arm, ARM_SECTIONS) == {
        "rloo_shaped.reward": "`rloo_shaped.reward` is 'dense'; allowed: one of binary, format, "
                              "shaped",
        "rloo_shaped.distill_coef": "`rloo_shaped.distill_coef` is not a param this pipeline "
                                    "reads; did you mean `rloo_shaped.rl_coef`? (known in "
                                    f"`rloo_shaped`: {', '.join(f.name for f in fields(RL))})"}
    assert bad_values({"rloo_nocurr": {"curriculum": False}}, ARM_SECTIONS) == {}
    found = bad_values({"rlooo": {"steps": 1}, "sft": {"lr": 0.1}}, ARM_SECTIONS)
    assert list(found) == ["rlooo"] and found["rlooo"].startswith(
        "`rlooo` is not a params section this pipeline reads; did you mean `rloo`? if not, add "
        "the arm it configures to core.arms.ARMS (known: replicates, problems, ")
    assert found["rlooo"].endswith(", report, rloo_shaped, rloo_nocurr, opd_ac)")
    assert bad_values({"xyz": {}}, ARM_SECTIONS)["xyz"].startswith(
        "`xyz` is not a params section this pipeline reads; check the spelling, or add the arm")
    assert bad_values(arm) == bad_values({"rlooo": {}}) == {}  # no registry: left to check_params
    # the stage that builds its arm refuses the arm's bad value
    params = {**BASE, "opd_ac": {**BASE["opd_ac"], "distill_temperature": 0}}
    with pytest.raises(StageError, match=r"\[opd_ac\] error: `opd_ac.distill_temperature` is 0; "
                                         r"allowed: a number > 0"):
        from_section(OPD, "opd_ac", params, "opd_ac", inherit="opd")


# every params.yaml section -> the dataclass its stage builds it as (and the section it overrides)
SECTION_CLASSES = {
    "problems": ("Problems", None), "traces": ("Traces", None), "sampler": ("EvalSampler", None),
    "evaluate": ("Evaluate", None), "compare": ("Compare", None), "dedup": ("Dedup", None),
    "model": ("Model", None), "base": ("Base", None), "teacher": ("Teacher", None),
    "teacher_traces": ("TeacherTraces", None), "pairs": ("Pairs", None),
    "sft": ("SFTStage", None), "ipo": ("IPO", None), "rloo": ("RL", None),
    "rloo_shaped": ("RL", "rloo"), "rloo_nocurr": ("RL", "rloo"), "rloo_early": ("RL", "rloo"),
    "rloo_early_shaped": ("RL", "rloo"), "replicates": ("Replicates", None),
    "opd": ("OPD", None), "opd_ac": ("OPD", "opd"), "diagnose": ("Diagnose", None),
    "repair": ("Repair", None), "distill": ("Distill", None), "int": ("Interventions", None),
    "report": ("Report", None),
}


def test_every_params_section_is_one_dataclass_built_from_params_yaml():
    from countdown_rlvr.core import config, sections

    params = load_params(ROOT / "params.yaml")
    # a new section needs its dataclass; `launcher` is no section (cli.stage_params checks it)
    assert set(params) - {"launcher"} == set(SECTION_CLASSES)
    for path, (cls_name, inherit) in SECTION_CLASSES.items():
        cfg = config.from_section(getattr(sections, cls_name), "test", params, path, inherit)
        own = {k: v for k, v in params[path].items() if not isinstance(v, dict)}
        assert {k: getattr(cfg, k) for k in own} == own  # values as params.yaml has them
    assert config.prompt_style("test", params) == params["model"]["prompt_style"]
    assert config.eval_sampler("test", params) == params["sampler"]


@pytest.mark.parametrize("cls,path,overrides,message", [
    ("Diagnose", "diagnose", {"k": 1}, "diagnose.k must be >= 2"),
    ("TeacherTraces", "teacher_traces", {"k": 3, "strategies": ["direct", "search"]},
     r"teacher_traces.k \(3\) must be a multiple of the number of strategies \(2\)"),
    ("Interventions", "int", {"seed": 4, "eval_seed": 4},
     "int.eval_seed must differ from int.seed"),
    ("Interventions", "int", {"k": 8, "claim_samples": 12},
     r"int.claim_samples must be 0 \(off\) or at least 2 x int.k = 16 \(got 12\)"),
    # a chain list's seeds are among SFT's (int's and opd's among RLOO's): the message names
    # the fix
    ("Replicates", "replicates", {"shared_sft": None, "seeds": [6, 7, 8, 9, 10], "ipo": [6, 11],
                                  "rloo": [6], "opd": [6], "repair": [6], "int": [6]},
     (r"replicates.ipo has seed 11 not in replicates.seeds; add it to replicates.seeds \(SFT "
     r"trains it first\) or drop it")),
    ("Replicates", "replicates", {"rloo": [1, 2], "opd": [1, 3], "int": [1]},
     (r"replicates.opd has seed 3 not in replicates.rloo; add it to replicates.rloo "
     r"\(`opd@<seed>` reads the rloo policy of its seed\) or drop it")),
    ("SFTStage", "sft", {"max_steps": 100, "early_step": 101},
     (r"sft.early_step \(101\) is past sft.max_steps \(100\): the run never reaches it; lower "
      r"it, or set it to null")),
    ("Replicates", "replicates", {"shared_sft": None, "seeds": [0, 1], "ipo": [0, 1],
                                  "rloo": [0, 1], "opd": [0, 1], "repair": [0, 1, 2, 3],
                                  "int": [0, 1]},
     (r"replicates.repair has seeds \[2, 3\] not in replicates.seeds; add them to "
     r"replicates.seeds \(SFT trains it first\) or drop them")),
    ("Replicates", "replicates", {"rloo": [1, 2], "int": [1, 3]},
     (r"replicates.int has seed 3 not in replicates.rloo; add it to replicates.rloo "
     r"\(`int@<seed>` reads the rloo policy of its seed\) or drop it")),
    # one SFT for every replicate: SFT trains that one seed only
    ("Replicates", "replicates", {"shared_sft": 6},
     (r"replicates.shared_sft is 6, but replicates.seeds is \[19\]; with one SFT "
      r"for every replicate set seeds to \[6\] \(sft@6 trains it\), or set shared_sft to null")),
    ("Replicates", "replicates", {"shared_sft": 1, "seeds": [1], "rloo": [2], "opd": [3]},
     (r"replicates.opd has seed 3 not in replicates.rloo")),
    ("Evaluate", "evaluate", {"shared": ["base", "sft"]}, r"lists \['sft'\] more than once"),
    # a dev policy no evaluate list samples would have no evaluate stage to sample it
    ("Evaluate", "evaluate", {"dev_policies": ["sft", "nobody"]},
     (r"evaluate.dev_policies names \['nobody'\], which no evaluate list \(shared, policies, "
      r"controls, first_replicate_only\) samples; add them to one of those or remove them")),
    # the confirmatory split from the seed's own "test" stream: the problems pilots read
    ("Problems", "problems", {"test_seed": 0},
     r"problems.test_seed must differ from problems.seed \(both 0\)"),
    # k / N above n: metrics.summarize would drop them, and the report would lack the column
    ("Evaluate", "evaluate", {"n": 4, "ks": [1, 4, 8, 16]},
     (r"evaluate.ks \[1, 4, 8, 16\] has \[8, 16\] > evaluate.n \(4\): pass@k needs that many "
      r"samples per prompt; remove \[8, 16\] from evaluate.ks or raise evaluate.n")),
    ("Evaluate", "evaluate", {"n": 4, "ks": [1, 4], "budgets": [1, 2, 4, 8]},
     r"evaluate.budgets \[1, 2, 4, 8\] has \[8\] > evaluate.n \(4\): best-of-N"),
])
def test_relations_between_values_are_refused_by_the_section_dataclass(cls, path, overrides,
                                                                      message):
    from helpers import config_of

    from countdown_rlvr.core import sections

    with pytest.raises(StageError, match=message + r".*\(fix the `" + path + ":` section"):
        config_of(getattr(sections, cls), path, overrides)


@pytest.mark.parametrize(("content", "says"), [
    (None, "not found; pass the path of an overrides file"),
    ("- rloo.reward: shaped\n", "holds list, not a mapping of params sections"),
    ("", "holds nothing, not a mapping of params sections"),
    ("rloo: {reward: shaped\n", "is not valid YAML (line 2, column 1: "),
])
def test_the_overrides_helper_refuses_a_bad_file_in_one_line(tmp_path, capsys, content, says):
    """`dvc exp run $(python -m countdown_rlvr.cli.overrides FILE)`: a wrong FILE is a usage error
    (exit code 2) with one line naming the fix, not a traceback."""
    from countdown_rlvr.cli.overrides import main

    path = tmp_path / "params.mine.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as err:
        main([str(path)])
    assert err.value.code == 2
    out, errors = capsys.readouterr()
    assert out == STOP_FLAG + "\n" and errors.count("\n") == 1
    assert errors.startswith(f"[overrides] error: {path} {says}")


def test_the_overrides_helper_as_the_shell_runs_it(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "countdown_rlvr.cli.overrides", "params.nope.yaml"],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout) == (2, STOP_FLAG + "\n")
    assert proc.stderr == ("[overrides] error: params.nope.yaml not found; pass the path of an "
                           "overrides file, e.g. params.qwen.yaml\n")


def test_dvc_refuses_the_flag_a_failed_helper_prints(tmp_path):
    """`$(...)` drops the helper's exit code: what it prints must stop `dvc exp run` itself,
    or the experiment would run the default params."""
    from dvc.utils.hydra import apply_overrides

    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    flag, value = STOP_FLAG.split()
    assert flag == "-S"
    with pytest.raises(Exception, match="Invalid `--set-param` value") as refused:
        apply_overrides(str(params), [value])
    assert "overrides_file_not_read" in str(refused.value.__cause__)  # what DVC prints after it
    assert params.read_text() == (ROOT / "params.yaml").read_text()


# --------------------------------------------------------------------------- nested mappings
# config's one walk of nested params (`leaves`, `at`, `has`, `merged`) against the copies it
# replaced. Keys from a small alphabet, so that base and override share keys; none has a "."
# (a dotted key is a path: a key holding "." could not be told from two keys).
KEYS = st.text("ab", min_size=1, max_size=2)
SCALARS = st.none() | st.booleans() | st.integers(-2, 2) | st.text("xy", max_size=1) | \
    st.lists(st.integers(0, 2), max_size=2)
TREES = st.dictionaries(KEYS, st.recursive(
    SCALARS, lambda inner: st.dictionaries(KEYS, inner, max_size=3), max_leaves=10), max_size=4)
PATHS = st.lists(KEYS, min_size=1, max_size=3).map(".".join)


def old_merge(base: dict, override: dict) -> dict:
    """tests/conftest.py's merge before config.merged(null_deletes=True) replaced it."""
    out = dict(base)
    for k, v in override.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = old_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) \
                else v
    return out


def old_merged(base: dict, over: dict) -> dict:
    """config.merged before it took null_deletes."""
    return {**base, **{k: old_merged(base[k], v) if isinstance(v, dict)
                       and isinstance(base.get(k), dict) else v for k, v in over.items()}}


def old_stage_leaves(params: dict, key: str):
    """stage_params.leaves before it used config.leaves: each key looked up again by path."""
    value = at(params, key)
    if isinstance(value, dict):
        for k in value:
            yield from old_stage_leaves(params, f"{key}.{k}")
    else:
        yield key


def rebuilt(flat: dict) -> dict:
    out: dict = {}
    for dotted, value in flat.items():
        *parents, last = dotted.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def pruned(tree: dict) -> dict:
    """`tree` without its empty mappings (at any depth): they hold no leaf."""
    out = {}
    for k, v in tree.items():
        if not isinstance(v, dict):
            out[k] = v
        elif p := pruned(v):
            out[k] = p
    return out


@settings(deadline=None)
@given(TREES)
def test_the_leaves_of_a_mapping_rebuild_it(tree):
    flat = leaves(tree)
    assert rebuilt(flat) == pruned(tree)
    assert repr(rebuilt(flat)) == repr(pruned(tree))  # key order too: depth first, as written
    assert leaves(tree, "p.") == {f"p.{k}": v for k, v in flat.items()}


@settings(deadline=None)
@given(TREES, PATHS)
def test_at_and_has_agree_with_the_leaves(tree, path):
    flat = leaves(tree)
    for dotted, value in flat.items():
        assert at(tree, dotted) == value and has(tree, dotted)  # a null is there too
    under = {k: v for k, v in flat.items() if k.startswith(path + ".")}
    value = at(tree, path)
    if path in flat:
        assert value == flat[path] and has(tree, path)
    elif under:  # a mapping on the way to some leaves
        assert isinstance(value, dict) and has(tree, path) and leaves(value, path + ".") == under
    else:  # missing, or a mapping without leaves
        assert value is None or (isinstance(value, dict) and not leaves(value))
        assert has(tree, path) == isinstance(value, dict)
    from countdown_rlvr.cli.stage_params import leaves as stage_leaves

    assert list(stage_leaves(tree, path)) == list(old_stage_leaves(tree, path))


@settings(deadline=None)
@given(TREES, TREES)
def test_merged_is_the_merges_it_replaced(base, over):
    import copy

    before = copy.deepcopy((base, over))
    deleting, keeping = merged(base, over, null_deletes=True), merged(base, over)
    assert repr(deleting) == repr(old_merge(base, over))  # values and key order
    assert repr(keeping) == repr(old_merged(base, over))
    assert (base, over) == before  # the inputs are left as they were
    # an override's null: written as null, or the key gone
    for k, v in over.items():
        assert v is not None or (keeping[k] is None and k not in deleting)


def test_n_by_policy_raises_an_evaluated_policys_samples_and_nothing_else():
    import copy

    from countdown_rlvr.core.config import from_section
    from countdown_rlvr.core.errors import StageError
    from countdown_rlvr.core.evaluate_config import Evaluate
    from countdown_rlvr.core.io import read_params

    params = read_params(ROOT / "params.yaml")
    ev = from_section(Evaluate, "t", params, "evaluate")
    assert ev.n_by_policy == {"opd": 32, "opd_ac": 32}  # the default run: S4's anti-collapse
    assert (ev.n_of("opd"), ev.n_of("rloo")) == (32, ev.n)
    for value, why in (({"opd": 64}, None), ({"ghost": 64}, "no evaluate list samples"),
                       ({"opd": 8}, "fewer samples than"), ({"opd": 0}, "integers >= 1"),
                       ([64], "a mapping of policy names")):
        p = copy.deepcopy(params)
        p["evaluate"]["n_by_policy"] = value
        if why is None:
            cfg = from_section(Evaluate, "t", p, "evaluate")
            assert (cfg.n_of("opd"), cfg.n_of("rloo")) == (64, ev.n)
        else:
            with pytest.raises(StageError, match=why):
                from_section(Evaluate, "t", p, "evaluate")
