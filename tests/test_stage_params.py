"""Each stage depends on exactly the params it reads after overrides are resolved, and a bad
param stops the run before DVC removes any output.

dvc.yaml lists param keys per stage by hand (DVC's convention: `train.n_est`); the table they
must match is countdown_rlvr.cli.stage_params. The end-to-end checks run real `dvc status` and
`dvc repro` in a copy of the project whose data outputs are stand-in files, committed to
dvc.lock with `dvc commit` (no stage runs but `check_params`); they are marked slow (about a
minute of CPU for the copy and its first `dvc status`).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import with_every_arm
from dvc.dependency.param import ParamsDependency
from dvc.repo import Repo
from ruamel.yaml import YAML

from countdown_rlvr.cli.stage_params import ARMS, check_all, leaves, resolved_keys
from countdown_rlvr.core import config as C
from countdown_rlvr.core import io

ROOT = Path(__file__).resolve().parents[1]


def stages(root: Path = ROOT) -> dict:
    """stage address -> the resolved DVC stage, for every stage dvc.yaml defines."""
    return {s.name: s for s in Repo(str(root)).index.stages}


def kind_and_arm(address: str) -> tuple[str, str | None]:
    """`rloo@rloo_shaped-1` -> (rloo, rloo_shaped); `rloo_nocurr@0` -> (rloo_nocurr, ...)."""
    kind, _, item = address.partition("@")
    if kind in ARMS:
        return kind, item.rsplit("-", 1)[0] if "-" in item else ARMS[kind][0]
    return kind, None


def declared_leaves(stage, params: dict) -> set[str]:
    keys = [k for d in stage.deps if isinstance(d, ParamsDependency) for k in d.params]
    return {leaf for k in keys for leaf in leaves(params, k)}


def test_every_stage_lists_exactly_the_params_it_reads():
    params = io.load_params(ROOT / "params.yaml")
    for address, stage in stages().items():
        if address == "check_params":  # reads all of params.yaml, by design
            continue
        want, got = resolved_keys(params, *kind_and_arm(address)), declared_leaves(stage, params)
        assert got == want, (f"dvc.yaml `{address}`: lists {sorted(got - want)} it does not read "
                             f"and misses {sorted(want - got)}; fix its `params:` (the keys come "
                             "from countdown_rlvr.cli.stage_params)")


def test_arm_sections_override_what_they_list():
    """The resolution itself: rloo_shaped reads its own reward, not rloo's; int reads rloo's."""
    params = io.load_params(ROOT / "params.yaml")
    shaped = resolved_keys(params, "rloo", "rloo_shaped")
    assert "rloo_shaped.reward" in shaped and "rloo.reward" not in shaped
    assert "rloo.lr" in shaped and "rloo.sampler.temperature" in shaped
    assert "rloo.reward" in resolved_keys(params, "int")
    assert "rloo.lr" not in resolved_keys(params, "int")  # int.rloo sets its own lr
    assert "rloo.reward" in resolved_keys(params, "rloo_nocurr")
    assert "opd.entropy_coef" not in resolved_keys(params, "opd", "opd_ac")
    assert "ipo.sources" not in resolved_keys(params, "ipo")  # adding a source re-runs no other


def test_an_override_set_to_null_still_overrides():
    params = {"opd": {"teacher_strategy": "direct", "lr": 1.0},
              "opd_ac": {"teacher_strategy": None}, "model": {"dtype": "x", "threads": None,
                                                           "prompt_style": "tiny"}}
    keys = resolved_keys(params, "opd", "opd_ac")
    assert "opd_ac.teacher_strategy" in keys and "opd.teacher_strategy" not in keys
    assert "opd.lr" in keys


def _problems(edit) -> list[str]:
    """The problem lines of the one error `check_all` raises on params.yaml, with every arm
    trained (conftest.with_every_arm), after `edit`."""
    params = with_every_arm(io.read_params(ROOT / "params.yaml"))
    edit(params)
    with pytest.raises(io.StageError) as err:
        check_all(params)
    head, *lines = str(err.value.code).splitlines()
    assert head.startswith("[check_params] error: params.yaml has ")
    return [line.strip() for line in lines]


def test_check_params_lists_every_problem_at_once():
    """One `dvc repro` shows all there is to fix: a bad value, a relation within a section, a
    relation across sections and a missing key, in four sections, each with key and value."""
    def edit(params):
        params["problems"]["n_train"] = -5
        params["int"]["eval_seed"] = params["int"]["seed"]
        params["diagnose"]["k"] = 3
        del params["rloo"]["steps"]

    problems = _problems(edit)
    assert "`problems.n_train` is -5; allowed: an integer >= 1" in problems
    assert any(p.startswith("int.eval_seed must differ from int.seed (both 0)") for p in problems)
    assert any(p.startswith("`diagnose.k` (3) must be one of `evaluate.ks`") for p in problems)
    # once, under the section that lacks it: not again under every arm that inherits rloo
    assert [p for p in problems if "missing" in p] == [
        "`rloo` is missing ['steps']; add them to the `rloo:` section of params.yaml (see README)"]
    assert len(problems) == 4


def test_the_int_stage_may_not_sample_more_problems_than_the_unseen_pool_holds():
    def edit(params):  # one pool for every replicate (an own pool has its own check, below)
        params["int"]["pool"] = "shared"
        params["int"]["n_problems"] = params["problems"]["n_unseen"] + 1

    n = io.read_params(ROOT / "params.yaml")["problems"]["n_unseen"]
    assert _problems(edit) == [(f"`int.n_problems` ({n + 1}) exceeds `problems.n_unseen` "
                                f"({n}), the pool the int stage samples; raise "
                                "problems.n_unseen or lower int.n_problems")]


def test_an_own_int_pool_needs_a_slice_of_unseen_problems_per_replicate():
    """int.pool own: replicate j samples the j-th int.n_problems of the pool, so the pool must
    hold one slice per seed of replicates.int; the message names the size to raise it to."""
    params = io.read_params(ROOT / "params.yaml")
    n, seeds = params["int"]["n_problems"], params["replicates"]["int"]

    def own(params):  # a pool of one slice, as `shared` needs
        params["int"]["pool"] = "own"
        params["problems"]["n_unseen"] = n

    def own_enough(params):
        own(params)
        params["problems"]["n_unseen"] = n * len(seeds)

    assert _problems(own) == [
        (f"int.pool is own: {len(seeds)} replicates of replicates.int x `int.n_problems` ({n}) "
         f"= {n * len(seeds)} problems exceed `problems.n_unseen` ({n}); raise "
         f"problems.n_unseen to {n * len(seeds)}, or set int.pool: shared")]
    ok = io.read_params(ROOT / "params.yaml")
    own_enough(ok)
    check_all(ok)  # one slice per replicate: nothing to fix


def test_an_arms_init_must_be_its_stages_and_a_policy_trained_on_its_seeds():
    """The policy an RL arm starts from is its dvc.yaml stage's input (core.arms: Arm.init):
    params that start it elsewhere would train from a model DVC does not track for it; the
    early checkpoint exists only with sft.early_step; an init trained on other seeds than
    the arm's has no policy to start from."""
    def elsewhere(params):
        params["rloo_early"]["init"] = "sft"

    assert _problems(elsewhere) == [(
        "`rloo_early.init` is 'sft' for arm rloo_early, whose dvc.yaml stage (rloo_early) "
        "starts it from sft_early (core.arms.ARMS); set it to sft_early, or change the arm's "
        "`init` there and run `python -m countdown_rlvr.cli.experiment --write`")]

    def no_early(params):
        params["sft"]["early_step"] = None

    problems = _problems(no_early)
    assert problems[0].startswith("`evaluate.policies` names 'sft_early', which no evaluate "
                                  "stage samples with these params; set `sft.early_step`")
    assert problems[1:] == [f"`{a}.init` is sft_early for arm {a}, but `sft.early_step` is null "
                            "(no early checkpoint is saved); set sft.early_step, or start the "
                            "arm from another policy" for a in ("rloo_early", "rloo_early_shaped")]

    def opd_beyond_rloo(params):  # the default's one SFT: the chains' seeds need not be SFT's
        params["replicates"]["rloo"] = [11, 12, 13, 14]
        params["replicates"]["int"] = [11, 12]
        params["replicates"]["opd"] = [11, 19]

    assert _problems(opd_beyond_rloo) == [(
        "replicates.opd has seed 19 not in replicates.rloo; add it to replicates.rloo "
        "(`opd@<seed>` reads the rloo policy of its seed) or drop it (fix the `replicates:` "
        "section of params.yaml)")]


def test_an_arm_left_out_of_the_run_takes_what_starts_from_it_along():
    """A run leaves an arm out by leaving it out of the evaluate lists (no stage trains it):
    an arm that starts from it, or the int stage (which starts from RLOO), would then have no
    policy to start from."""
    def no_rloo(params):
        params["evaluate"]["policies"].remove("rloo")
        params["compare"]["pairs"] = [p for p in params["compare"]["pairs"] if "rloo" not in p]

    assert _problems(no_rloo) == [
        *(f"arm {a} starts from the rloo policy (core.arms), which no evaluate list names, so "
          f"no stage trains it; add rloo to `evaluate.policies`, or leave {a} out of the "
          "evaluate lists too" for a in ("opd", "opd_ac")),
        ("the int stage starts from the rloo policy of its seed, which no evaluate list names, "
         "so no stage trains it; add rloo to `evaluate.policies`")]

    def no_early_arms(params):  # then the early checkpoint need not be saved for them
        off = ("rloo_early", "rloo_early_shaped")
        ev = params["evaluate"]
        ev["policies"] = [p for p in ev["policies"] if p not in (*off, "sft_early")]
        ev["first_replicate_only"] = [p for p in ev["first_replicate_only"] if p not in off]
        params["compare"]["pairs"] = [p for p in params["compare"]["pairs"]
                                      if not {*off, "sft_early"} & set(p)]
        params["sft"]["early_step"] = None

    params = with_every_arm(io.read_params(ROOT / "params.yaml"))
    no_early_arms(params)
    assert check_all(params)


def test_int_reads_no_init():
    """int starts from the SFT policy whatever rloo.init says: changing it re-runs no int."""
    params = io.load_params(ROOT / "params.yaml")
    assert "rloo.init" not in resolved_keys(params, "int")
    assert "rloo.init" in resolved_keys(params, "rloo_nocurr")


def test_the_teacher_reads_no_rloo_key():
    """teacher.rl holds every RLOO key of its own: with or without the RL phase, the teacher
    reads no `rloo.*` key, so no `-S rloo.*` variant re-trains it; a teacher.rl missing a
    key is refused by name (nothing is inherited to fill it)."""
    params = io.load_params(ROOT / "params.yaml")
    keys = resolved_keys(params, "teacher")
    assert {"teacher.rl.reward", "teacher.rl.lr", "teacher.rl.sampler.temperature"} <= keys
    assert not {k for k in keys if k.startswith("rloo.")}
    check_all(params)
    params["teacher"]["rl"] = None
    assert not {k for k in resolved_keys(params, "teacher") if k.startswith(("rloo.", "teacher.rl."))}
    check_all(params)  # the null block builds no RL config

    def edit(p):
        del p["teacher"]["rl"]["lr"]
    assert any("`teacher.rl` is missing ['lr']" in line for line in _problems(edit))


def test_a_misspelt_teacher_rl_key_is_named():
    def edit(params):
        params["teacher"]["rl"]["stepz"] = 1
    assert any("`teacher.rl.stepz` is not a param" in line for line in _problems(edit))


def test_a_refused_value_is_listed_not_tripped_over():
    """`evaluate.n: x` would make evaluate's relations (ks <= n) raise a raw TypeError; its
    rule's message is listed instead, next to the other sections' problems."""
    def edit(params):
        params["evaluate"]["n"] = "x"
        params["rloo"]["sampler"]["temp"] = 1.0
        params["sft"]["lr"] = 0

    assert sorted(_problems(edit)) == [
        "`evaluate.n` is 'x'; allowed: an integer >= 1",
        ("`rloo.sampler.temp` is not a param this pipeline reads; check the spelling (known in "
         "`rloo.sampler`: temperature, top_p, top_k, max_new_tokens)"),
        "`sft.lr` is 0; allowed: a number > 0 and <= 1"]


def test_the_check_params_stage_shows_every_problem_and_writes_nothing(tmp_path):
    """The stage script, as `dvc repro` runs it: a bad value does not hide a bad relation."""
    text = (ROOT / "params.yaml").read_text()
    assert "  n_train: 32000" in text and "  k: 8                   # group size K" in text
    text = text.replace("  n_train: 32000", "  n_train: -5", 1)
    (tmp_path / "params.yaml").write_text(text.replace("  k: 8                   # group size K",
                                                       "  k: 3                   # group size K"))
    proc = subprocess.run([sys.executable, str(ROOT / "stages/check_params.py")], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "params.yaml has 2 problems" in proc.stderr
    assert "`problems.n_train` is -5" in proc.stderr and "`diagnose.k` (3)" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "reports").exists()


def test_lock_holds_only_stages_dvc_yaml_defines():
    lock = YAML(typ="safe").load((ROOT / "dvc.lock").read_text())["stages"]
    if extra := sorted(set(lock) - set(stages())):
        pytest.fail(f"dvc.lock has entries for stages dvc.yaml does not define: {extra}")


# --------------------------------------------------------------------------- end to end

def _stand_in(path: Path) -> None:
    """A file (a name with a suffix) or a directory holding one file."""
    if path.exists():
        return
    if path.suffix:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("stand-in\n")
    else:
        path.mkdir(parents=True, exist_ok=True)
        (path / "stand-in").write_text("stand-in\n")


def _dvc(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    bin_dir = Path(sys.executable).parent  # the stages run `python ...`: this interpreter
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([str(bin_dir / "dvc"), *args], cwd=repo, env=env, capture_output=True,
                          text=True, check=False)
    if check and proc.returncode:
        raise AssertionError(f"dvc {' '.join(args)}: {proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def lock_template(tmp_path_factory) -> Path:
    """The project's dvc.yaml, params.yaml and code, every other dep and out a stand-in, all
    recorded in dvc.lock: `dvc status` reports nothing until something changes."""
    repo = tmp_path_factory.mktemp("lock") / "repo"
    repo.mkdir()
    for name in ("dvc.yaml", "params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, repo / name)
    for name in ("stages", "src"):
        shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    _dvc(repo, "init", "--no-scm", "-q")
    for stage in stages(repo).values():
        for entry in [*stage.outs, *(d for d in stage.deps if not isinstance(d, ParamsDependency))]:
            _stand_in(repo / str(entry.def_path))
    _dvc(repo, "commit", "--force", "-q")
    assert _dvc(repo, "status", "--json").stdout.strip() in ("{}", "")
    return repo


@pytest.fixture
def committed(lock_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the committed stand-in project, for one test to change."""
    return Path(shutil.copytree(lock_template, tmp_path / "repo", symlinks=True))


def _set(repo: Path, key: str, value) -> dict:
    yaml = YAML()  # round-trip: comments stay, as `dvc exp run -S` leaves them
    params = yaml.load((repo / "params.yaml").read_text())
    section, _, name = key.partition(".")
    params[section][name] = value
    with open(repo / "params.yaml", "w") as fh:
        yaml.dump(params, fh)
    return io.load_params(repo / "params.yaml")


@pytest.mark.slow
def test_changing_rloo_reward_marks_exactly_the_stages_whose_config_changes(committed):
    before = io.load_params(committed / "params.yaml")
    after = _set(committed, "rloo.reward", "shaped")

    def resolved(params: dict, address: str) -> dict:
        return {k: str(leaf_value(params, k))
                for k in resolved_keys(params, *kind_and_arm(address))}

    expected = {a for a in stages(committed) if a != "check_params"
                and resolved(before, a) != resolved(after, a)}
    reported = set(YAML(typ="safe").load(_dvc(committed, "status", "--json").stdout))
    assert reported == expected | {"check_params"}
    # what that is, spelled out: the binary arm and the stages that inherit its reward
    # (the OPD arms start from the RLOO policy: they re-run when it changes, not on this key)
    assert expected == reward_stages(before)


def reward_stages(params: dict) -> set[str]:
    """The stages that read `rloo.reward`: the binary arm per seed of the rloo chain, the
    interventions per seed of the int chain, and the no-curriculum arm (the first rloo seed)
    when the run trains it."""
    from countdown_rlvr.analysis.chains import trained_arms

    replicates = params["replicates"]
    nocurr = {f"rloo_nocurr@{replicates['rloo'][0]}"} if "rloo_nocurr" in trained_arms(params) \
        else set()
    return {*(f"rloo@rloo-{s}" for s in replicates["rloo"]),
            *(f"int@{s}" for s in replicates["int"]), *nocurr}


def leaf_value(params: dict, key: str):
    value = params
    for part in key.split("."):
        value = value[part]
    return value


@pytest.mark.slow
def test_a_bad_param_leaves_every_previous_output_in_place(committed):
    """`problems.n_train: -5` (the case on record: DVC had removed data/problems/ and the
    git-tracked reports/details/problems.json before the stage refused the value)."""
    outputs = {p: p.read_bytes() for p in committed.rglob("*") if p.is_file()
               and p.relative_to(committed).parts[0] in ("data", "reports", "dvclive")}
    assert any("problems" in str(p) for p in outputs)
    text = (committed / "params.yaml").read_text()
    assert "  n_train: 32000" in text
    (committed / "params.yaml").write_text(text.replace("  n_train: 32000", "  n_train: -5", 1))
    proc = _dvc(committed, "repro", "traces", check=False)
    assert proc.returncode != 0
    assert "`problems.n_train` is -5" in proc.stdout + proc.stderr
    assert "Running stage 'problems'" not in proc.stdout
    assert {p: p.read_bytes() for p in outputs if p.exists()} == outputs, \
        "a failed params check removed or changed outputs"


# The README's filter of `dvc status` for a clone without the DVC cache: every output there is
# "not in cache" and every data dep "deleted"; what is left is what changed in code or params.
STATUS_FILTER = ("dvc status | awk '/^[^ \\t]/ {stage = $0; next} "
                 "/deleted:|not in cache:|changed (deps|outs):/ {next} "
                 "{if (stage) print stage; stage = \"\"; print}'")


@pytest.mark.slow
def test_in_a_clone_without_the_cache_the_status_filter_shows_code_and_params_changes(committed):
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}

    def filtered() -> str:
        return subprocess.run(STATUS_FILTER, shell=True, cwd=committed, env=env, check=True,
                              capture_output=True, text=True).stdout

    # a clone: the data and the cache are on the machine that made the run
    shutil.rmtree(committed / "data")
    shutil.rmtree(committed / ".dvc" / "cache")
    assert "not in cache:" in _dvc(committed, "status").stdout
    assert filtered() == ""
    # and a dry run there, told that missing data is no change, has nothing to run
    dry = _dvc(committed, "repro", "--dry", "--allow-missing").stdout
    assert "Data and pipelines are up to date." in dry
    _set(committed, "rloo.reward", "shaped")
    with open(committed / "stages" / "report.py", "a") as fh:
        fh.write("# a code change\n")
    out = filtered()
    assert {line[:-1] for line in out.splitlines() if not line.startswith("\t")} == {
        "check_params", *reward_stages(io.load_params(ROOT / "params.yaml")),
        "report"}
    assert "modified:           stages/report.py" in out and "rloo.reward" in out
    assert "deleted" not in out and "not in cache" not in out


def test_a_learning_rate_above_1_is_refused_in_every_section_that_has_one():
    """`sft.lr: 1e9` (a typo of 1e-9) passed the check and trained to nan (issue 57): every lr
    key params.yaml has, the arms' and the nested blocks' included, is now bounded by 1."""
    params = io.read_params(ROOT / "params.yaml")
    params["teacher"]["rl"]["lr"] = 1e-3  # the nested blocks' overrides, set to be checked
    params["int"]["rloo"]["lr"] = 1e-3
    keys = [k for k in C.leaves(params) if k.rsplit(".", 1)[-1] == "lr"]
    assert {"sft.lr", "rloo.lr", "opd.lr", "ipo.lr", "base.lr", "teacher.lr", "distill.lr",
            "int.sft.lr", "int.rloo.lr", "teacher.rl.lr"} <= set(keys)

    def edit(p):
        for key in keys:
            *parents, last = key.split(".")
            block = p
            for part in parents:
                block = block[part]
            block[last] = 1e9
    edit(params)
    with pytest.raises(io.StageError) as err:
        check_all(params)
    for key in keys:
        assert f"`{key}` is 1000000000.0; allowed: a number > 0 and <= 1" in str(err.value.code)
    params["sft"]["lr"] = 1.0  # the bound itself is allowed
    assert "`sft.lr`" not in str(pytest.raises(io.StageError, check_all, params).value.code)


def test_rloo_prompts_per_step_may_not_exceed_the_problems_it_draws_from():
    n = io.read_params(ROOT / "params.yaml")["problems"]["n_train"]
    assert _problems(lambda p: p["rloo"].update(prompts_per_step=100000)) == [
        (f"`rloo.prompts_per_step` (100000) exceeds the {n} problems its steps draw from "
        "(`problems.n_train`): a step would repeat problems; lower rloo.prompts_per_step to "
        f"at most {n}, or raise problems.n_train")]
    # an arm's own value is named as the arm's; a pool cut by n_problems is the bound
    problems = _problems(lambda p: p["rloo_shaped"].update(n_problems=50, prompts_per_step=64))
    assert problems == [
        ("`rloo_shaped.prompts_per_step` (64) exceeds the 50 problems its steps draw from "
        "(`rloo_shaped.n_problems`): a step would repeat problems; lower "
        "rloo_shaped.prompts_per_step to at most 50, or raise rloo_shaped.n_problems")]
    assert _problems(lambda p: p["opd"].update(n_problems=n + 1)) == [
        (f"`opd.n_problems` ({n + 1}) exceeds `problems.n_train` ({n}), the problems it takes "
        "the first N of; lower opd.n_problems or raise problems.n_train")]


def test_int_and_teacher_rl_prompts_are_bounded_by_their_own_pools():
    def edit(params):
        params["int"]["rloo"]["prompts_per_step"] = params["int"]["n_problems"] + 1
        params["teacher"]["rl"]["prompts_per_step"] = 100000

    problems = _problems(edit)
    assert len(problems) == 2
    assert problems[0].startswith("`teacher.rl.prompts_per_step` (100000) exceeds the ")
    assert problems[1].startswith("`int.rloo.prompts_per_step` (")
    assert "(`int.n_problems`): a step would repeat problems" in problems[1]
