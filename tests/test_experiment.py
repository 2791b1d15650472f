"""dvc.yaml is generated from countdown_rlvr.cli.experiment: the committed file is current, and
the generator derives code deps and params as documented."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, with_every_arm

from countdown_rlvr.cli import experiment
from countdown_rlvr.cli.experiment import STAGES, code_deps, param_keys
from countdown_rlvr.cli.stage_params import ARMS, check_all
from countdown_rlvr.core.io import read_params


def test_committed_dvc_yaml_is_generated():
    assert (ROOT / "dvc.yaml").read_text() == experiment.generate(), \
        "dvc.yaml is stale: run `python -m countdown_rlvr.cli.experiment --write`"


def test_every_stage_script_exists_and_names_are_unique():
    names = [s.name for s in STAGES]
    assert len(names) == len(set(names))
    missing = [s.name for s in STAGES if not (ROOT / "stages" / f"{s.script or s.name}.py").is_file()]
    assert not missing, f"stages with no script in stages/: {missing}"


def test_generated_yaml_lists_the_table_in_order():
    doc = yaml.safe_load(experiment.generate(with_every_arm()))
    assert list(doc["stages"]) == [s.name for s in STAGES]
    assert doc["stages"]["ipo_first"]["deps"] == doc["stages"]["ipo"]["deps"]  # an alias
    assert experiment.generate().startswith("# GENERATED from src/countdown_rlvr/cli/experiment.py")
    # comments are wrapped to WIDTH; a path (a plot file under its chain's first seed,
    # `${replicates.rloo.0}`) cannot be, and is the only thing allowed past it
    long = [ln for ln in experiment.generate().splitlines() if len(ln) > experiment.WIDTH]
    assert all("${replicates." in ln and "#" not in ln for ln in long), long


def test_an_arm_stage_depends_on_the_policy_its_arms_start_from():
    """One matrix per script and init (a matrix has one list of inputs): the early RLOO arms
    read the early SFT checkpoint, the OPD arms the RLOO policy of their seed, the other RLOO
    arms the SFT policy; each stage's evaluation follows it."""
    doc = yaml.safe_load(experiment.generate(with_every_arm()))["stages"]
    models = {name: sorted(d for d in stage["deps"] if d.startswith("data/models/"))
              for name, stage in doc.items() if name in ("rloo", "rloo_early", "opd",
                                                          "rloo_nocurr")}
    # the default run shares one SFT (replicates.shared_sft): every arm reads that seed's
    assert models == {"rloo": ["data/models/sft/r${replicates.shared_sft}"],
                      "rloo_early": ["data/models/sft_early/r${replicates.shared_sft}"],
                      "rloo_nocurr": ["data/models/sft/r${replicates.shared_sft}"],
                      "opd": ["data/models/rloo/r${item.seed}", "data/models/teacher"]}  # sorted
    # the shaped arms run on the first replicate only (core/arms.py): stages of their own
    assert doc["rloo_early"]["matrix"]["arm"] == ["rloo_early"]
    assert doc["rloo"]["matrix"]["arm"] == ["rloo"]
    assert doc["rloo_shaped"]["matrix"] == {"seed": ["${replicates.rloo.0}"]}
    assert doc["evaluate_rloo_early"]["matrix"] == doc["rloo_early"]["matrix"]
    assert "data/models/sft_early/r${item.seed}" in doc["sft"]["outs"]


def test_with_one_shared_sft_every_later_chain_reads_that_sft(tmp_path):
    """replicates.shared_sft: every stage outside SFT's chain that reads a replicate's SFT (or
    its early checkpoint) reads the shared seed's instead; SFT's own stages keep their seed;
    DVC expands it to the one dir for every replicate, and nothing else in dvc.yaml moves."""
    params = with_every_arm(experiment.read_params(ROOT / "params.yaml"))
    # the default run shares one SFT; `own` is the same design with each chain its own SFT
    assert params["replicates"]["shared_sft"] == params["replicates"]["seeds"][0]
    params = {**params, "replicates": {**params["replicates"], "shared_sft": None}}
    shared = {**params, "replicates": {**params["replicates"], "shared_sft": 6, "seeds": [6],
                                       "rloo": [6, 11, 12], "int": [11]}}
    own, one = (yaml.safe_load(experiment.generate(p))["stages"] for p in (params, shared))
    assert set(own) == set(one)
    moved = {name: [d for d in stage["deps"] if d not in own[name]["deps"]]
             for name, stage in one.items()
             if "deps" in stage and stage["deps"] != own[name]["deps"]}
    readers = {"ipo", "ipo_first", "rloo", "rloo_early", "rloo_shaped", "rloo_early_shaped",
               "rloo_nocurr", "repair", "distill", "distill_first", "int"}
    assert set(moved) == readers
    shared_dir = "data/models/{}/r${{replicates.shared_sft}}"
    assert all(deps == [shared_dir.format("sft_early" if "early" in name else "sft")]
               for name, deps in moved.items())
    assert all(one[n] == {**own[n], "deps": one[n]["deps"]} for n in moved)
    assert all(one[n] == own[n] for n in one if n not in moved)
    assert own["sft"] == one["sft"] and own["evaluate_sft"] == one["evaluate_sft"]
    # DVC resolves it: rloo@rloo-11 and int@11 (and repair, on its own seed) read sft r6,
    # which only sft@6 writes
    (tmp_path / "dvc.yaml").write_text(experiment.generate(shared))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(shared, sort_keys=False))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=tmp_path, check=True)
    from dvc.repo import Repo

    with Repo(str(tmp_path)) as repo:
        stages = {s.name: s for s in repo.index.stages}
        repair = f"repair@{shared['replicates']['repair'][0]}"
        for name in ("rloo@rloo-11", "rloo@rloo-12", "rloo_shaped@6", "int@11", repair):
            assert "data/models/sft/r6" in {d.def_path for d in stages[name].deps}, name
        assert "sft@11" not in stages and "sft@6" in stages


def test_the_early_checkpoint_is_an_out_and_a_policy_only_when_early_step_is_set():
    params = experiment.read_params(ROOT / "params.yaml")
    none = {**params, "sft": {**params["sft"], "early_step": None}}
    doc = yaml.safe_load(experiment.generate(none))["stages"]
    assert "evaluate_sft_early" not in doc
    assert not [o for o in doc["sft"]["outs"] if "sft_early" in str(o)]
    assert "evaluate_sft_early" in yaml.safe_load(experiment.generate(params))["stages"]


def test_code_deps_are_the_import_closure_file_by_file():
    """Never a folder: an edit re-runs only the stages that run the file."""
    problems = code_deps("problems")
    assert "src/countdown_rlvr/task/generate.py" in problems
    assert not any(Path(ROOT, d).is_dir() for d in problems)
    rloo = code_deps("rloo")
    assert "src/countdown_rlvr/train/rloo.py" in rloo and "src/countdown_rlvr/train" not in rloo
    assert "src/countdown_rlvr/analysis/compare.py" not in rloo
    assert "src/countdown_rlvr/task/generate.py" not in rloo  # task/__init__ does not import it
    check = next(s for s in STAGES if s.name == "check_params")
    assert "src/countdown_rlvr" not in [o.path for o in experiment.deps(check)]


def _params(**sections) -> dict:
    return {"model": {"dtype": "float32", "threads": 2, "prompt_style": "tiny"}, **sections}


def test_params_an_arm_matrix_lists_the_arm_and_the_keys_no_arm_overrides():
    """A nested override splits the inherited block: rloo_shaped sets sampler.temperature, so
    the template lists rloo.sampler.top_p, not rloo.sampler."""
    params = _params(rloo={"reward": "binary", "lr": 1e-5,
                           "sampler": {"temperature": 1.0, "top_p": 1.0}},
                     rloo_shaped={"reward": "shaped", "sampler": {"temperature": 0.7}})
    shaped = next(s for s in STAGES if s.name == "rloo_shaped")  # a stage of its own
    keys = [k for k, _ in param_keys(shaped, params)]
    assert keys == ["model.dtype", "model.threads", "rloo_shaped", "rloo.lr",
                    "rloo.sampler.top_p", "model.prompt_style", "problems.n_train"]
    rloo = next(s for s in STAGES if s.name == "rloo")  # the arm's matrix: its own section
    assert [k for k, _ in param_keys(rloo, params)] == [
        "model.dtype", "model.threads", "${item.arm}", "model.prompt_style", "problems.n_train"]


def test_params_a_section_read_in_part_lists_its_keys():
    params = _params(ipo={"sources": ["a"], "first_replicate_sources": [], "beta": 0.1,
                          "lora": {"r": 8}})
    ipo = next(s for s in STAGES if s.name == "ipo")
    keys = param_keys(ipo, params)
    # then what the skill check reads outside the section (params without them: the keys)
    assert [k for k, _ in keys] == ["model.dtype", "model.threads", "ipo.beta", "ipo.lora",
                                    "pairs.n_problems", "sampler", "evaluate.batch_size",
                                    "model.prompt_style", "problems.n_train"]
    assert "but sources, first_replicate_sources" in dict(keys)["ipo.beta"]
    sft = next(s for s in STAGES if s.name == "sft")
    assert [k for k, _ in param_keys(sft, _params(sft={"lr": 1}))] == [
        "model.dtype", "model.threads", "sft"]


@pytest.mark.slow
def test_write_makes_dvc_yaml_and_its_map_and_check_names_the_stale_one(tmp_path, monkeypatch,
                                                                       capsys):
    """One command writes both files an edit of the table changes: dvc.yaml and docs/dag.md,
    the map DVC draws from it; --check names the stale one and the command that fixes it."""
    from dvc.repo import Repo

    from countdown_rlvr.cli import stage_map

    Repo.init(str(tmp_path), no_scm=True).close()
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "docs").mkdir()
    target = tmp_path / "dvc.yaml"
    target.write_text("stages: {}\n")
    monkeypatch.setattr(experiment, "OUT", target)
    assert experiment.main(["--check"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("dvc.yaml ") and "--write" in err
    assert experiment.main(["--write"]) == 0
    assert target.read_text() == experiment.generate()
    dag = tmp_path / stage_map.OUT
    assert dag.read_text() == (ROOT / stage_map.OUT).read_text()  # the committed map: current
    assert not [p for p in tmp_path.rglob("*.tmp") if ".dvc" not in p.parts]  # none left
    assert experiment.main(["--check"]) == 0
    dag.write_text(dag.read_text().replace("sft", "sfft"))
    assert experiment.main(["--check"]) == 1
    assert capsys.readouterr().err.startswith(f"{stage_map.OUT} is not")


def test_every_replicated_stage_runs_over_its_chains_seeds():
    """A stage's matrix iterates its own chain's list (`${replicates.rloo}`), its first seed
    for a first-replicate stage; a training stage's evaluation has the same matrix, so a
    policy is sampled on exactly the seeds its chain trains it on."""
    by_name = {s.name: s for s in STAGES}
    want = {"sft": "sft", "diagnose": "sft", "ipo": "ipo", "ipo_first": "ipo", "rloo": "rloo",
            "rloo_early": "rloo", "rloo_shaped": "rloo", "rloo_early_shaped": "rloo",
            "rloo_nocurr": "rloo", "opd": "opd", "repair": "repair",
            "distill": "repair", "distill_first": "repair", "int": "int"}
    for name, chain in want.items():
        stage = by_name[name]
        key = "seeds" if chain == "sft" else chain
        assert stage.chain == chain and stage.matrix["seed"] in (
            f"${{replicates.{key}}}", [f"${{replicates.{key}.0}}"]), name
        if name not in ("diagnose", "repair", "int"):  # int's own evaluation: opt-in policies
            twin = by_name[f"evaluate_{name}"]
            assert twin.matrix == stage.matrix and twin.args[1:] == (chain, "${item.seed}")
    early = by_name["evaluate_sft_early"]  # the sft stage's second policy, sampled as sft
    assert early.matrix == by_name["sft"].matrix and early.args == ("sft_early", "sft",
                                                                    "${item.seed}")
    replicated = [s for s in STAGES if s.matrix and "seed" in s.matrix]
    assert {s.name for s in replicated} == {*want, "evaluate_sft_early", *(
        f"evaluate_{n}" for n in want if n not in ("diagnose", "repair"))}


def test_the_chain_each_evaluation_is_given_is_the_chain_that_trains_its_policy():
    """analysis.chains.chain_of (what compare and the report read a policy's seeds by) agrees
    with the chain dvc.yaml passes each evaluation, for every policy the params can name."""
    from countdown_rlvr.analysis.chains import INT_POLICIES, chain_of
    from countdown_rlvr.data.pairs import SOURCES
    from countdown_rlvr.task.prompts import REPAIR_LABELS

    values = {"${ipo.sources}": SOURCES, "${ipo.first_replicate_sources}": SOURCES,
              "${distill.conditions}": REPAIR_LABELS,
              "${distill.first_replicate_conditions}": REPAIR_LABELS,
              "${evaluate.int_policies}": INT_POLICIES}
    checked = 0
    for stage in (s for s in STAGES if s.script == "evaluate" and s.chain):
        policy, chain, _ = stage.args
        items = {k: (v if isinstance(v, list) else values[v]) for k, v in stage.matrix.items()
                 if k != "seed"}
        names = [policy]
        for key, options in items.items():
            names = [n.replace(f"${{item.{key}}}", o) for n in names for o in options]
        for name in names:
            assert chain_of(name) == chain, (stage.name, name)
            checked += 1
    assert checked >= 1 + 2 * len(SOURCES) + 3 + 2 * len(REPAIR_LABELS) + len(INT_POLICIES)


def test_artifacts_and_curves_name_each_chains_first_seed():
    """The registry's models and the training curves are the first replicate's: its chain's
    first seed, interpolated by DVC (a default run need not include seed 0)."""
    doc = yaml.safe_load(experiment.generate(with_every_arm()))
    paths = {k: v["path"] for k, v in doc["artifacts"].items()}
    assert paths["sft"] == "data/models/sft/r${replicates.seeds.0}"
    assert paths["rloo_early"] == "data/models/rloo_early/r${replicates.rloo.0}"
    assert "rloo_shaped" not in paths  # a first-replicate arm (core/arms.py): no registry entry
    assert paths["distill_R"] == "data/models/distill_R/r${replicates.repair.0}"
    assert paths["opd_ac"] == "data/models/opd_ac/r${replicates.opd.0}"
    files = [f for plot in doc["plots"] if isinstance(plot, dict) for spec in plot.values()
             for f in spec["y"]]
    assert "dvclive/sft/r${replicates.seeds.0}/plots/metrics/train/loss.tsv" in files
    assert not [f for f in files if "/r0/" in f]


def test_artifacts_are_the_policies_the_params_train_every_replicate_of():
    params = {"ipo": {"sources": ["scripted"], "first_replicate_sources": ["hardneg"]},
              "distill": {"conditions": ["R", "F1"], "first_replicate_conditions": ["F2"]},
              "evaluate": {"policies": ["sft", "rloo", "opd"],
                           "first_replicate_only": ["rloo_nocurr"]}}
    names = set(experiment.artifacts(params))
    assert {"ipo_scripted", "distill_R", "distill_F1", "sft", "rloo", "opd", "int"} <= names
    # not every replicate's (the first-seed ones), or left out of the evaluate lists (opd_ac)
    assert not {"ipo_easyneg", "ipo_hardneg", "distill_F2", "rloo_nocurr", "opd_ac"} & names


def test_an_arm_left_out_of_the_evaluate_lists_leaves_dvc_yaml():
    """A run drops an arm by leaving it out of the evaluate lists (and compare.pairs): its
    training and evaluation stages, its artifact and its curves leave dvc.yaml; a matrix of
    several arms keeps the others."""
    params = with_every_arm(read_params(ROOT / "params.yaml"))
    off = {"rloo_early", "rloo_nocurr", "opd_ac"}
    ev = params["evaluate"]
    for key in ("policies", "first_replicate_only"):
        ev[key] = [p for p in ev[key] if p not in off]
    params["compare"]["pairs"] = [p for p in params["compare"]["pairs"] if not set(p) & off]
    ev["n_by_policy"] = {p: n for p, n in ev["n_by_policy"].items() if p not in off}
    assert check_all(params)  # valid as they stand
    full = yaml.safe_load(experiment.generate(with_every_arm(read_params(ROOT / "params.yaml"))))
    cut = yaml.safe_load(text := experiment.generate(params))
    gone = set(full["stages"]) - set(cut["stages"])
    assert gone == {"rloo_early", "evaluate_rloo_early", "rloo_nocurr", "evaluate_rloo_nocurr"}
    assert cut["stages"]["opd"]["matrix"]["variant"] == ["opd"]
    assert cut["stages"]["evaluate_opd"]["matrix"]["variant"] == ["opd"]
    # opd's section whole (`${item.variant}`): no other arm inherits from it now
    assert "opd.lr" in full["stages"]["opd"]["params"]
    assert cut["stages"]["opd"]["params"] == ["model.dtype", "model.threads", "${item.variant}",
                                              "model.prompt_style", "problems.n_train"]
    assert "opd_ac" not in cut["artifacts"] and "opd" in cut["artifacts"]
    assert not any(a in text for a in ("dvclive/opd_ac", "dvclive/rloo_early/",
                                       "dvclive/rloo_nocurr"))
    assert set(cut["stages"]) < set(full["stages"])


def test_every_artifact_is_a_model_some_stage_writes():
    """Each registry entry, as DVC resolves it from params.yaml, is the out of a stage
    dvc.yaml defines: `dvc artifacts get` never names a model the default run does not make."""
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        paths = {n: a.path for n, a in repo.artifacts.read()["dvc.yaml"].items()}
        outs = {o.def_path for stage in repo.index.stages for o in stage.outs}
    assert len(paths) >= 10
    assert not {n: p for n, p in paths.items() if p not in outs}, "artifacts no stage writes"


def _drives_lines(lines: list[str]) -> dict[str, str]:
    """{params.yaml section: its `# drives:` comment} (the comment block above the key, from
    the line that starts `# drives:` on)."""
    out = {}
    for i, line in enumerate(lines):
        if not (m := re.match(r"([a-z_]+):", line)):
            continue
        j = i
        while j > 0 and lines[j - 1].startswith("#"):
            j -= 1
        block = lines[j:i]
        start = next((k for k, b in enumerate(block) if b.startswith("# drives:")), None)
        if start is not None:
            out[m.group(1)] = " ".join(b.lstrip("# ") for b in block[start:])
    return out


def test_every_drives_line_names_the_stages_that_read_its_section():
    """params.yaml's `# drives:` comments are written by hand: each names every dvc.yaml stage
    that lists a key of its section (by name, or `ipo*` for every stage named ipo...), so a
    stage that starts reading a section cannot leave its comment behind."""
    params = experiment.read_params(ROOT / "params.yaml")
    drives = _drives_lines((ROOT / "params.yaml").read_text().splitlines())
    readers: dict[str, set[str]] = {}
    for stage in STAGES:
        for key, _ in ([] if stage.all_params else param_keys(stage, params)):
            sections = ARMS[stage.name] if key.startswith("${item.") else [key.split(".")[0]]
            for section in sections:
                readers.setdefault(section, set()).add(stage.name)
    sections = [s for s, v in params.items() if isinstance(v, dict)]
    assert [s for s in sections if s not in drives] == [], "sections with no `# drives:` line"
    missing = {}
    for section in sections:
        if "every stage" in drives[section]:  # model: read by every stage that loads one
            continue
        wild = re.findall(r"(\w+)\*", drives[section])
        missing[section] = sorted(
            name for name in readers.get(section, ())
            if not re.search(rf"(?<!\w){name}(?!\w)", drives[section])
            and not any(name.startswith(w) for w in wild))
    assert not {s: m for s, m in missing.items() if m}, "stages their `# drives:` line misses"


def test_the_training_stages_start_with_the_launcher_and_the_default_is_python():
    """`${launcher}` starts the training scripts; at `launcher: python` every cmd DVC resolves
    is the one dvc.lock records (nothing re-runs), and the check refuses shell code in it."""
    from dvc.repo import Repo

    from countdown_rlvr.cli.stage_params import check_all
    from countdown_rlvr.core.errors import StageError

    launched = {s.name for s in STAGES if s.launched}
    assert {"base", "sft", "ipo", "ipo_first", "rloo", "rloo_early", "rloo_shaped",
            "rloo_early_shaped", "rloo_nocurr", "opd"} == launched
    doc = yaml.safe_load(experiment.generate())["stages"]
    for name, stage in doc.items():
        cmd = (stage.get("do") or stage)["cmd"]
        assert cmd.startswith("${launcher} " if name in launched else "python "), cmd
    params = experiment.read_params(ROOT / "params.yaml")
    assert params["launcher"] == "python"
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    with Repo(str(ROOT)) as repo:
        cmds = {s.addressing: s.cmd for s in repo.index.stages}
    assert {a: c for a, c in cmds.items() if a in lock and lock[a]["cmd"] != c} == {}
    assert check_all(params) > 0
    with pytest.raises(StageError, match="`launcher` .* plain words"):
        check_all({**params, "launcher": "python; rm -rf ~"})


def test_the_evaluation_stages_of_dev_policies_depend_on_the_dev_split():
    """evaluate.dev_policies (sft, opd by default): their stages read data/problems/dev.jsonl,
    every other evaluation's do not; the list comes from the params the file is made from."""
    params = with_every_arm(experiment.read_params(ROOT / "params.yaml"))

    def with_dev(params) -> set[str]:
        doc = yaml.safe_load(experiment.generate(params))["stages"]
        return {name for name, s in doc.items()
                if experiment.DEV.path in (s.get("do", s).get("deps") or [])}

    dev = params["evaluate"]["dev_policies"]
    assert set(dev) == {"sft", "opd"}
    assert with_dev(params) == {"evaluate_sft", "evaluate_opd"}  # opd: an arm of opd's matrix
    params["evaluate"]["dev_policies"] = ["base", "rloo_nocurr", "ipo_scripted"]
    assert with_dev(params) == {"evaluate_shared", "evaluate_rloo_nocurr", "evaluate_ipo"}
    params["evaluate"]["dev_policies"] = []
    assert with_dev(params) == set()
    # the policies an evaluation samples, its matrix read from the params
    by_name = {s.name: s for s in STAGES}
    assert experiment.sampled_policies(by_name["evaluate_ipo"], params) == {
        f"ipo_{s}" for s in params["ipo"]["sources"]}
    assert experiment.sampled_policies(by_name["sft"], params) == set()


def test_every_evaluation_lists_n_by_policy_once_it_has_an_entry_and_none_when_empty():
    """An empty mapping changes no stage's params; an entry (the default run's: the OPD arms
    at 32) puts the mapping in every evaluation's (so check_params refuses a `-S` that did not
    make dvc.yaml anew)."""
    from countdown_rlvr.core.io import read_params

    params = read_params(ROOT / "params.yaml")
    evaluations = [s for s in STAGES if (s.script or s.name) == "evaluate"]
    assert params["evaluate"]["n_by_policy"] == {"opd": 32, "opd_ac": 32}
    assert all("evaluate.n_by_policy" in [k for k, _ in param_keys(s, params)]
               for s in evaluations)
    params["evaluate"]["n_by_policy"] = {}
    assert not any("n_by_policy" in k for s in evaluations for k, _ in param_keys(s, params))
    assert experiment.generate(params) != experiment.generate(read_params(ROOT / "params.yaml"))
