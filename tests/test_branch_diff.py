"""`countdown-rlvr diff A [B]` (= `python -m countdown_rlvr.analysis.branch_diff A [B]`): two sides'
per-replicate results (git revisions, DVC experiments or the workspace); paired by seed when
the shared inputs' data/ hashes in dvc.lock match, Welch and a warning otherwise; Holm over the
tested rows; works without the DVC cache."""

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ttest_1samp, ttest_ind

from countdown_rlvr.analysis.branch_diff import (
    EVAL,
    NOT_A_TEST,
    SHARED_STAGES,
    _span,
    _tag_of,
    compare,
    compare_paired,
    data_outs,
    diff,
    made,
    main,
)
from countdown_rlvr.cli import main as cli

FIXTURE = Path(__file__).parent / "fixtures/report/reports/details/eval"
GIT = ("git", "-c", "user.email=t@t", "-c", "user.name=t")
SHIFT = {"r0": 0.20, "r1": 0.25, "r2": 0.15}  # `better`: rloo pass@1 up, not by the same amount
TIGHT = {"r0": 0.20, "r1": 0.21, "r2": 0.19}  # a shift a paired test finds even after Holm


def git(repo: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True)


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def lock_text(changed: tuple[str, ...] = (), details: str = "0") -> str:
    """A dvc.lock whose shared stages have fixed data/ output hashes, except those in `changed`;
    `details` fills the hashes of their reports/ and dvclive/ outputs, as in the real lock."""
    def out(path: str, digit: str, i: int) -> dict:
        return {"path": path, "hash": "md5", "md5": digit * 31 + str(i)}

    stages = {s: {"cmd": f"python stages/{s}.py",
                  "outs": [out(f"data/{s}", "f" if s in changed else "0", i),
                           out(f"dvclive/{s}", details, i),
                           out(f"reports/details/{s}.json", details, i)]}
              for i, s in enumerate(SHARED_STAGES)}
    stages["rloo"] = {"cmd": "python stages/rloo.py", "outs": [{"path": "x", "md5": "1" * 32}]}
    return yaml.safe_dump({"schema": "2.0", "stages": stages})


def params(seeds=(0, 1, 2), **chains) -> dict:
    """The params sections that say which evaluation files a run makes: every chain on
    `seeds` (or chains[chain]), and the fixture's policies."""
    return {"replicates": {"seeds": list(seeds),
                           **{c: list(chains.get(c, seeds))
                              for c in ("ipo", "rloo", "opd", "repair", "int")}},
            "evaluate": {"shared": ["base", "teacher"],
                         "int_policies": ["int", "int_sft", "int_plain_rl"],
                         # a run trains the arms its evaluate lists name
                         "policies": ["rloo", "rloo_early", "opd", "opd_ac"],
                         "first_replicate_only": ["rloo_shaped", "rloo_early_shaped",
                                                  "rloo_nocurr"]},
            "sft": {"early_step": 800},  # the sft stage also saves sft_early, as the defaults
            "ipo": {"sources": ["scripted", "easyneg", "hardneg"],
                    "first_replicate_sources": ["base"]},
            "distill": {"conditions": ["R"],
                        "first_replicate_conditions": ["F1", "F2", "F3", "F4", "Fshuf"]}}


def write_params(repo: Path, seeds=(0, 1, 2), **chains) -> None:
    (repo / "params.yaml").write_text(yaml.safe_dump(params(seeds, **chains)))


def write_lock(repo: Path, changed: tuple[str, ...] = (), details: str = "0") -> None:
    (repo / "dvc.lock").write_text(lock_text(changed, details))


def shift(repo: Path, moves: dict[str, float], policy: str = "rloo") -> None:
    """Adds moves[r<seed>] to the policy's test pass@1 in each replicate."""
    for f in (repo / f"reports/details/eval/{policy}").glob("r*.json"):
        d = json.loads(f.read_text())
        d["test"]["pass@1"] += moves[f.stem]
        f.write_text(json.dumps(d))


def fixture_values(policy: str, metric: str = "pass@1") -> dict[str, float]:
    return {f.stem: json.loads(f.read_text())["test"][metric]
            for f in sorted((FIXTURE / policy).glob("r*.json"))}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """main: the fixture's evaluations and a dvc.lock. Branches off main:
    better     rloo pass@1 +0.20/+0.25/+0.15 in r0/r1/r2, the same shared inputs (paired);
    constant   rloo pass@1 +0.2 in every replicate (zero spread);
    other      `better` with another teacher and other pairs in dvc.lock (Welch, warning);
    nolock     `better` without dvc.lock;
    details    `better` whose dvc.lock differs in the reports/ and dvclive/ hashes only;
    several    rloo, sft and opd pass@1 moved as in `better` (each p ~0.02), int by a tight
               +0.20/+0.21/+0.19 (p ~0.001): four tested rows;
    noresults  no reports/details/eval; badjson / nokeys: one rloo file corrupt.
    And a-long-experiment-branch-name: `other` under a name wider than a column."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q", "-b", "main")
    shutil.copytree(FIXTURE, repo / "reports/details/eval")
    write_lock(repo)
    write_params(repo)
    commit(repo, "main")

    def branch(name: str, edit, start: str = "main") -> None:
        git(repo, "checkout", "-qb", name, start)
        edit()
        commit(repo, name)

    rloo = repo / "reports/details/eval/rloo"
    branch("better", lambda: shift(repo, SHIFT))
    branch("constant", lambda: shift(repo, dict.fromkeys(SHIFT, 0.2)))
    branch("other", lambda: write_lock(repo, changed=("teacher", "pairs")), "better")
    branch("nolock", lambda: (repo / "dvc.lock").unlink(), "better")
    branch("details", lambda: write_lock(repo, details="d"), "better")
    branch("several", lambda: [shift(repo, SHIFT, p) for p in ("rloo", "sft", "opd")]
           + [shift(repo, TIGHT, "int")])
    git(repo, "branch", "a-long-experiment-branch-name", "other")
    branch("noresults", lambda: shutil.rmtree(repo / "reports"))
    branch("badjson", lambda: (rloo / "r1.json").write_text("{not json"))
    branch("nokeys", lambda: (rloo / "r2.json").write_text(json.dumps({"test": {"n": 1}})))
    git(repo, "checkout", "-q", "main")
    return repo


@pytest.fixture
def inrepo(repo, monkeypatch):
    monkeypatch.chdir(repo)
    return repo


def by_row(report: dict) -> dict[tuple[str, str], dict]:
    return {(r["policy"], r["metric"]): r for r in report["rows"]}


def test_same_shared_inputs_pair_by_seed_with_scipys_one_sample_test(inrepo):
    report = diff("main", "better", show_all=True)
    assert report["test"].startswith("paired") and not report["warnings"]
    assert "dvc.lock" in report["reason"]
    up = by_row(report)[("rloo", "pass@1")]
    a = fixture_values("rloo")
    d = [SHIFT[t] for t in sorted(a)]  # b - a per seed (up to rounding)
    ref = ttest_1samp(d, 0.0)
    assert up["paired"] and up["n_a"] == up["n_b"] == 3
    assert up["p"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert (up["ci_low"], up["ci_high"]) == pytest.approx(tuple(ref.confidence_interval(0.95)))
    assert up["diff"] == pytest.approx(0.2) and up["verdict"] == "differs"
    assert up["mean_a"] == pytest.approx(np.mean(list(a.values())))
    # one draw on a side (shared base, first-replicate-only ipo_base): no interval
    rows = by_row(report)
    assert rows[("base", "pass@1")]["ci_low"] is None and rows[("ipo_base", "pass@16")]["p"] is None
    assert {m for p, m in rows if p == "rloo"} == {"pass@1", "pass@16", "ood_pass@16"}


def test_zero_spread_gives_the_difference_and_says_why_there_is_no_test(inrepo):
    (row,) = diff("main", "constant")["rows"]
    assert row["diff"] == pytest.approx(0.2) and row["p"] is None and row["ci_low"] is None
    assert "zero spread" in row["verdict"] and "no test" in row["verdict"]


@pytest.mark.parametrize("rev_b, why", [("other", "teacher, pairs"), ("nolock", "dvc.lock")])
def test_other_shared_inputs_use_welch_warn_and_call_nothing_a_difference(inrepo, rev_b, why,
                                                                          capsys):
    report = diff("main", rev_b, show_all=True)
    assert report["test"].startswith("Welch") and why in report["reason"]
    (warning,) = report["warnings"]
    assert why in warning and "different draw of the inputs" in warning
    assert all(r["verdict"] == NOT_A_TEST and not r["paired"] for r in report["rows"])
    up = by_row(report)[("rloo", "pass@1")]
    a = list(fixture_values("rloo").values())
    b = [v + SHIFT[t] for t, v in fixture_values("rloo").items()]
    assert up["p"] == pytest.approx(ttest_ind(b, a, equal_var=False).pvalue)
    for fmt in ("text", "md"):  # the warning and the test used, in every format
        assert main(["main", rev_b, "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert out.startswith("test: Welch") and "WARNING" in out and why in out
        assert "differs" not in out and NOT_A_TEST in out


def test_unchanged_rows_are_hidden_and_counted_and_policy_filters(inrepo, capsys):
    shown = diff("main", "better")
    assert [(r["policy"], r["metric"]) for r in shown["rows"]] == [("rloo", "pass@1")]
    every = diff("main", "better", show_all=True)
    assert shown["hidden_unchanged"] == len(every["rows"]) - 1 > 0
    assert main(["main", "better"]) == 0
    assert f"{shown['hidden_unchanged']} unchanged rows hidden" in capsys.readouterr().out
    picked = diff("main", "better", policies=["sft", "rloo"], show_all=True)
    assert {r["policy"] for r in picked["rows"]} == {"sft", "rloo"}
    assert main(["main", "better", "--policy", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown policy nope" in err and "rloo" in err and "sft" in err


def test_runs_from_a_subdirectory(repo, monkeypatch, capsys):
    monkeypatch.chdir(repo / "reports/details")
    assert cli.main(["diff", "main", "better"]) == 0
    assert any(line.split()[:2] == ["rloo", "pass@1"] for line in capsys.readouterr().out
               .splitlines())


@pytest.mark.parametrize("alpha", ["0", "1", "1.5", "-0.1"])
def test_alpha_outside_0_1_is_a_clear_error(inrepo, alpha, capsys):
    assert cli.main(["diff", "main", "better", "--alpha", alpha]) == 2
    err = capsys.readouterr().err
    assert "--alpha must be between 0 and 1" in err and "Traceback" not in err


@pytest.mark.parametrize("rev, says", [
    ("nope", ["unknown revision 'nope'", "git branch -a"]),
    ("noresults", ["noresults has no evaluation results", "reports/details/eval"]),
    ("badjson", ["badjson:reports/details/eval/rloo/r1.json is corrupt", "JSONDecodeError"]),
    ("nokeys", ["nokeys:reports/details/eval/rloo/r2.json is corrupt", "KeyError"]),
])
def test_bad_revisions_are_clear_errors_naming_the_fix(inrepo, rev, says):
    proc = subprocess.run([sys.executable, "-m", "countdown_rlvr.analysis.branch_diff", "main", rev],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert all(s in proc.stderr for s in says), proc.stderr


def test_markdown_and_json_carry_the_test_and_the_rows(inrepo, capsys):
    assert main(["main", "better", "--format", "md", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("test: paired t-test")
    table = [ln.strip("|").split("|") for ln in lines if ln.startswith("|")]
    assert [c.strip() for c in table[0]] == ["policy", "metric", "main", "better", "n", "diff",
                                             "95% CI", "p", "adj. p", "verdict"]
    assert set("".join(table[1])) <= set("-") and all(len(r) == 10 for r in table)
    row = next([c.strip() for c in r] for r in table if r[:2] == [" rloo ", " pass@1 "])
    assert row[4] == "3/3" and row[5] == "+0.200" and row[9] == "differs"

    assert cli.main(["diff", "main", "better", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["test"].startswith("paired") and report["reason"] and report["warnings"] == []
    (r,) = report["rows"]
    assert set(r) == {"policy", "metric", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "p",
                      "p_adj", "n_a", "n_b", "paired", "verdict", "upstream",
                      "upstream_differs"}
    assert r["policy"] == "rloo" and r["paired"] is True and r["ci_low"] < 0.2 < r["ci_high"]
    assert report["adjust"] == "holm" and report["family"] == 1 and r["p_adj"] == r["p"]


def test_holm_controls_the_family_of_tested_rows_and_the_verdict_uses_the_adjusted_p(inrepo,
                                                                                     capsys):
    """Four tested rows: int's tight shift survives Holm (4p), the three p ~0.02 rows do not
    (3p ~0.06), though each alone is below alpha; --adjust none calls all four differences."""
    holm = by_row(diff("main", "several"))
    raw = {k: ttest_1samp([SHIFT[t] for t in sorted(SHIFT)], 0.0).pvalue for k in holm}
    raw[("int", "pass@1")] = ttest_1samp([TIGHT[t] for t in sorted(TIGHT)], 0.0).pvalue
    assert set(holm) == {(p, "pass@1") for p in ("int", "opd", "rloo", "sft")}
    for key, row in holm.items():
        assert row["p"] == pytest.approx(raw[key], rel=1e-6) and row["p"] < 0.05
    assert holm[("int", "pass@1")]["p_adj"] == pytest.approx(4 * raw[("int", "pass@1")], rel=1e-6)
    assert holm[("int", "pass@1")]["verdict"] == "differs"
    for policy in ("opd", "rloo", "sft"):
        row = holm[(policy, "pass@1")]
        assert row["p_adj"] == pytest.approx(3 * row["p"], rel=1e-6)  # Holm's second step
        assert row["p_adj"] > 0.05 and row["verdict"] == "no detectable difference"
    alone = by_row(diff("main", "several", adjust="none"))
    assert all(r["verdict"] == "differs" and r["p_adj"] == r["p"] for r in alone.values())

    assert main(["main", "several"]) == 0
    out = capsys.readouterr().out
    assert "Holm's correction over the family of 4 tested rows" in out
    assert main(["main", "several", "--adjust", "none"]) == 0
    assert "no correction (--adjust none): each of the 4 tested rows" in capsys.readouterr().out


def test_policy_filters_the_display_not_holms_family(inrepo, capsys):
    """Holm's family is every policy's tested rows: showing fewer changes no adjusted p."""
    every = by_row(diff("main", "several"))
    for picked in (["rloo"], ["int", "sft"], ["opd"]):
        report = diff("main", "several", policies=picked)
        assert report["family"] == 4 and report["family_shown"] == len(picked)
        assert {p for p, _ in by_row(report)} == set(picked)
        for key, row in by_row(report).items():
            assert (row["p_adj"], row["verdict"]) == (every[key]["p_adj"], every[key]["verdict"])
    (alone,) = diff("main", "several", policies=["rloo"])["rows"]
    assert alone["p_adj"] == pytest.approx(3 * alone["p"], rel=1e-6)  # not a family of one
    assert main(["main", "several", "--policy", "rloo"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("family of 4 tested rows (family-wise error 0.05), every policy's: --policy shows 1 "
            "of them") in out


def test_only_tested_rows_are_in_the_family(inrepo):
    """Unchanged rows (--all), one draw on a side and Welch rows do not dilute the family."""
    shown, every = diff("main", "several"), diff("main", "several", show_all=True)
    assert shown["family"] == every["family"] == 4 and len(every["rows"]) > 40
    untested = [r for r in every["rows"] if (r["policy"], r["metric"]) not in by_row(shown)]
    assert untested and all(r["p_adj"] is None for r in untested)
    assert by_row(every)[("rloo", "pass@1")]["p_adj"] == by_row(shown)[("rloo", "pass@1")]["p_adj"]
    welch = diff("main", "other", show_all=True)
    assert welch["family"] == 0 and all(r["p_adj"] is None for r in welch["rows"])
    assert any(r["p"] is not None for r in welch["rows"])  # a raw Welch p, but no verdict


def test_shared_inputs_are_the_data_outputs_only():
    """reports/, dvclive/ and `cache: false` outputs summarise a draw: they are not one."""
    same = data_outs(lock_text())
    assert data_outs(lock_text(details="d")) == same
    lock = yaml.safe_load(lock_text())
    lock["stages"]["teacher"]["outs"].append({"path": "data/teacher_log.txt", "cache": False,
                                              "md5": "e" * 32})
    assert data_outs(yaml.safe_dump(lock)) == same
    assert data_outs(lock_text(changed=("teacher",))) != same
    assert data_outs(None) is None and data_outs("stages: [") is None


def test_a_lock_that_differs_in_reports_only_still_pairs(inrepo):
    report = diff("main", "details")
    assert report["test"].startswith("paired") and not report["warnings"]
    assert by_row(report)[("rloo", "pass@1")]["verdict"] == "differs"


@pytest.mark.parametrize("args", [["main", "other", "--all"], ["main", "several", "--all"],
                                  ["main", "a-long-experiment-branch-name", "--all"],
                                  ["main", "constant", "--adjust", "none"]])
def test_every_line_of_the_text_format_fits_120_columns(inrepo, capsys, args):
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 5 and max(len(line) for line in lines) <= 120
    table = lines[lines.index("") + 1:]
    assert table[0].startswith("policy ") and any(ln.startswith("rloo ") for ln in table)
    assert not any(ln.startswith(" ") for ln in table)  # the verdicts fit: none is wrapped
    if "a-long-experiment-branch-name" in args:  # a cut column heading is named in full
        assert "columns: a-long-e… is a-long-experiment-branch-name" in lines


def test_markdown_escapes_angle_brackets_that_renderers_drop_as_html(inrepo, capsys):
    assert main(["main", "better", "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "`r<seed>`" in out
    assert not re.search(r"<\w+>", re.sub(r"`[^`]*`", "", out))  # none outside a code span


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A repository with one committed run (rloo's three replicates and a dvc.lock) on main, and
    a `dvc exp`-style experiment: a commit that only refs/exps/ab/cdef.../my-exp points at."""
    repo = tmp_path / "tiny"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    shutil.copytree(FIXTURE / "rloo", repo / "reports/details/eval/rloo")
    write_lock(repo)
    commit(repo, "main")
    git(repo, "checkout", "-q", "--detach")
    shift(repo, SHIFT)
    commit(repo, "dvc exp run")
    git(repo, "update-ref", "refs/exps/ab/cdef" + "0" * 34 + "/my-exp", "HEAD")
    git(repo, "checkout", "-q", "main")
    monkeypatch.chdir(repo)
    return repo


def test_the_workspace_is_a_side_and_the_default_one(tiny, capsys):
    shift(tiny, SHIFT)  # uncommitted, as after `dvc exp run` without a commit
    for report in (diff("main"), diff("main", "workspace")):
        assert report["rev_b"] == "workspace" and report["test"].startswith("paired")
        (row,) = report["rows"]
        assert (row["policy"], row["metric"], row["verdict"]) == ("rloo", "pass@1", "differs")
        assert row["diff"] == pytest.approx(0.2)
    assert cli.main(["diff", "main"]) == 0
    heading = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("policy"))
    assert heading.split()[2:4] == ["main", "workspace"]
    write_lock(tiny, changed=("pairs",))  # dvc.lock is read from disk too
    report = diff("main")
    assert report["test"].startswith("Welch") and "pairs" in report["reason"]


def test_the_workspace_without_results_is_a_clear_error(tiny, capsys):
    shutil.rmtree(tiny / "reports")
    assert cli.main(["diff", "main"]) == 2
    assert "the workspace has no evaluation results" in capsys.readouterr().err


def test_a_dvc_experiment_is_named_by_its_name(tiny, capsys):
    report = diff("main", "my-exp")
    assert report["rev_b"] == "my-exp" and report["test"].startswith("paired")
    (row,) = report["rows"]
    assert row["verdict"] == "differs" and row["diff"] == pytest.approx(0.2)
    assert cli.main(["diff", "my-exp", "main", "--format", "md"]) == 0
    assert "| policy | metric | my-exp | main |" in capsys.readouterr().out

    assert cli.main(["diff", "main", "no-such-exp"]) == 2
    err = capsys.readouterr().err
    assert "unknown revision 'no-such-exp'" in err and "dvc exp list" in err
    git(tiny, "update-ref", "refs/exps/12/3456" + "0" * 34 + "/my-exp", "main")
    assert cli.main(["diff", "main", "my-exp"]) == 2
    err = capsys.readouterr().err
    assert "'my-exp' is ambiguous" in err and "dvc exp list" in err and "Traceback" not in err


def test_the_console_script_is_installed_and_dispatches_to_diff(repo):
    script = Path(sys.executable).parent / "countdown-rlvr"
    if not script.exists():
        pytest.skip("package not installed with its scripts (pip install -e .)")
    proc = subprocess.run([str(script), "diff", "main", "other", "--format", "json"], cwd=repo,
                          capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout)["test"].startswith("Welch")


def evaluation_outs(root: Path) -> dict[str, set[str]]:
    """policy -> the tags of the evaluation files the resolved dvc.yaml's stages write."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        paths = [str(o.def_path) for stage in repo.index.stages for o in stage.outs]
    out: dict[str, set[str]] = {}
    for path in paths:
        if path.startswith(f"{EVAL}/") and path.endswith(".json"):
            policy, tag = _tag_of(path)
            out.setdefault(policy, set()).add(tag)
    return out


@pytest.mark.parametrize("params_of", ["default", "smoke"])
def test_the_files_a_run_makes_are_those_its_stages_write(params_of, pipeline):
    """made(params), what the diff reads of a side, is the evaluation outputs of the stages DVC
    resolves from dvc.yaml and those params: at the defaults and at the smoke sizes."""
    root = ROOT if params_of == "default" else pipeline.path
    params = yaml.safe_load((root / "params.yaml").read_text())
    assert {p: set(tags) for p, tags in made(params).items()} == evaluation_outs(root)


def test_replicate_lists_are_short_ranges():
    assert _span(["r3", "r1", "r2", "r5", "r10", "shared"]) == "r1-r3,r5,r10,shared"
    assert _span(["r2", "r1"]) == "r1,r2" and _span(["r0"]) == "r0"


def test_the_welch_interval_includes_between_replicate_variance():
    noisy = compare([0.10, 0.30, 0.20], [0.25, 0.45, 0.35])
    tight = compare([0.19, 0.21, 0.20], [0.34, 0.36, 0.35])
    assert noisy["diff"] == pytest.approx(tight["diff"]) == pytest.approx(0.15)
    assert noisy["verdict"] == "no detectable difference" and tight["verdict"] == "differs"
    assert noisy["ci_low"] < 0 < noisy["ci_high"]


rate = st.integers(0, 1000).map(lambda x: x / 1000)  # a pass rate on 1000 problems


@settings(deadline=None, max_examples=60)
@given(st.lists(st.tuples(rate, rate, rate), min_size=2, max_size=8),
       st.floats(0.01, 0.5))
def test_pairing_cancels_the_seeds_effect_and_its_interval_holds_the_mean(draws, alpha):
    """Adding a per-seed effect to both sides changes nothing; the CI holds the mean diff."""
    a = [x for x, _, _ in draws]
    b = [y for _, y, _ in draws]
    plain = compare_paired([y - x for x, y in zip(a, b)], alpha)
    seeded = compare_paired([(y + s) - (x + s) for x, y, s in draws], alpha)
    assert seeded["diff"] == pytest.approx(plain["diff"], abs=1e-9)
    if plain["p"] is None:
        assert "zero spread" in plain["verdict"]
        return
    assert plain["ci_low"] <= plain["diff"] <= plain["ci_high"]
    assert seeded["p"] == pytest.approx(plain["p"], rel=1e-6, abs=1e-12)
    assert (plain["p"] < alpha) == (plain["verdict"] == "differs")


@pytest.fixture
def smoke(tmp_path, monkeypatch):
    """main: the fixture's run on seeds 0-2 (params.yaml and dvc.lock). `smoke`: a `dvc exp run
    --temp` of one-seed params (every `replicates` list [0], smaller inputs) whose commit holds
    its own r0 files, nothing solved (pass@1 0), beside main's r1 and r2, as DVC leaves them."""
    repo = tmp_path / "smoke"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    shutil.copytree(FIXTURE, repo / "reports/details/eval")
    write_lock(repo)
    write_params(repo)
    commit(repo, "main")
    git(repo, "checkout", "-q", "--detach")
    write_params(repo, seeds=(0,))
    write_lock(repo, changed=("problems", "teacher", "pairs"))  # smoke-sized inputs
    for f in (repo / "reports/details/eval").glob("*/r0.json"):
        d = json.loads(f.read_text())
        if "test" in d:  # (an untrained policy's details have none)
            d["test"]["pass@1"] = 0.0
            f.write_text(json.dumps(d))
    commit(repo, "dvc exp run --temp")
    git(repo, "update-ref", "refs/exps/ab/cdef" + "0" * 34 + "/smoke", "HEAD")
    git(repo, "checkout", "-q", "main")
    monkeypatch.chdir(repo)
    return repo


def test_an_experiment_is_compared_on_its_own_replicates_not_files_left_beside_it(smoke, capsys):
    report = diff("main", "smoke", show_all=True)
    sft = by_row(report)[("sft", "pass@1")]
    assert (sft["n_a"], sft["n_b"], sft["mean_b"]) == (3, 1, 0.0)  # not r1 and r2 of main
    assert sft["mean_a"] == pytest.approx(np.mean(list(fixture_values("sft").values())))
    assert all(r["n_b"] == 1 for r in report["rows"])  # every policy: the smoke's one draw
    assert report["replicates"]["a"]["sft"] == ["r0", "r1", "r2"]
    assert report["replicates"]["b"]["sft"] == ["r0"]
    # the report fixture trains the shaped arms on every replicate; their arms.py entries, the
    # first seed only: main's r1 and r2 of them are named too, and not read
    main_note, note = report["notes"]
    assert main_note.startswith("note: main holds 4") and "rloo_shaped r1,r2" in main_note
    assert note.startswith("note: smoke holds") and "sft r1,r2" in note and "rloo r1,r2" in note
    assert "base" not in note and "not read" in note
    assert [w for w in report["warnings"] if "different draw of the inputs" not in w] == []
    assert main(["main", "smoke"]) == 0
    assert "left over from another run" in " ".join(capsys.readouterr().out.split())
    git(smoke, "checkout", "-q", "refs/exps/ab/cdef" + "0" * 34 + "/smoke")  # as the workspace
    assert diff("main")["replicates"]["b"] == report["replicates"]["b"]


def test_a_file_the_params_make_that_is_not_there_is_named(smoke):
    (smoke / "reports/details/eval/sft/r2.json").unlink()
    report = diff("main", show_all=True)
    (warning,) = [w for w in report["warnings"] if "lacks" in w]
    assert "workspace lacks 1 evaluation file" in warning and "(sft r2)" in warning
    assert "evaluate_sft" in warning and "dvc repro" in warning
    assert by_row(report)[("sft", "pass@1")]["n_b"] == 2


def test_a_file_unlike_its_dvc_lock_record_is_left_out(smoke):
    """dvc.lock records each evaluation file's md5: a file that differs is not that run's."""
    path = "reports/details/eval/rloo/r1.json"
    lock = yaml.safe_load(lock_text())
    lock["stages"]["evaluate_rloo@rloo-1"] = {"cmd": "x", "outs": [
        {"path": path, "md5": hashlib.md5((smoke / path).read_bytes()).hexdigest()}]}
    (smoke / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert not diff("main", show_all=True)["warnings"]  # as recorded: read
    shift(smoke, SHIFT)  # edited after the run
    report = diff("main", show_all=True)
    (warning,) = [w for w in report["warnings"] if w.startswith("WARNING")]
    assert path in warning and "dvc.lock" in warning and "dvc status" in warning
    up = by_row(report)[("rloo", "pass@1")]
    assert up["n_b"] == 2 and report["replicates"]["b"]["rloo"] == ["r0", "r2"]


def test_without_params_every_file_is_read_and_the_output_says_so(tiny):
    report = diff("main", "my-exp")
    assert len(report["warnings"]) == 2  # one per side
    assert all("no params.yaml with `replicates.seeds`" in w for w in report["warnings"])
    assert by_row(report)[("rloo", "pass@1")]["n_b"] == 3


def _lock(sft_md5: str, teacher_md5: str = "t" * 32) -> str:
    """A dvc.lock whose rloo and opd replicates read SFT (rloo) and RLOO + the teacher (opd)."""
    def stage(out, *reads):
        return {"cmd": "x", "deps": [{"path": p, "md5": m} for p, m in reads],
                "outs": [{"path": out, "md5": "o" * 32}]}
    return yaml.safe_dump({"schema": "2.0", "stages": {
        "sft@0": stage("data/models/sft/r0", ("data/models/base", "b" * 32)),
        "rloo@rloo-0": stage("data/models/rloo/r0", ("data/models/sft/r0", sft_md5)),
        "opd@opd-0": stage("data/models/opd/r0", ("data/models/rloo/r0", "o" * 32),
                           ("data/models/teacher", teacher_md5))}})


def test_upstream_policies_name_what_each_policy_was_trained_from_and_what_differs():
    from countdown_rlvr.analysis.branch_diff import upstream, upstream_of

    a, same, other = upstream(_lock("s" * 32)), upstream(_lock("s" * 32)), upstream(_lock("z" * 32))
    assert upstream_of("rloo", {"r0"}, a, same) == (["sft"], [])
    assert upstream_of("rloo", {"r0"}, a, other) == (["sft"], ["sft"])
    names, differ = upstream_of("opd", {"r0"}, a, upstream(_lock("s" * 32, "u" * 32)))
    assert sorted(names) == ["rloo", "teacher"] and differ == ["teacher"]
    assert upstream(None) == {}


def test_a_confounded_row_is_marked_and_the_header_says_so():
    from countdown_rlvr.analysis.branch_diff import render

    row = {"policy": "rloo", "metric": "pass@1", "mean_a": 0.4, "mean_b": 0.5, "diff": 0.1,
           "ci_low": 0.0, "ci_high": 0.2, "p": 0.04, "p_adj": 0.04, "n_a": 3, "n_b": 3,
           "paired": True, "verdict": "differs", "upstream": ["sft"],
           "upstream_differs": ["sft"]}
    report = {"rev_a": "main", "rev_b": "lr", "alpha": 0.05, "test": "paired t-test",
              "reason": "shared inputs", "adjust": "holm", "family": 1, "family_shown": 1,
              "policies": None, "notes": [], "rows": [row], "hidden_unchanged": 0,
              "upstream": "differ: rloo from another sft",
              "warnings": ["CONFOUNDED: rloo was trained from a different sft"]}
    out = render(report)
    assert "upstream: differ: rloo from another sft" in out and "CONFOUNDED" in out
    assert any(line.startswith("rloo*") for line in out.splitlines())


def test_an_init_the_variant_changed_is_its_chain_and_another_sft_is_a_confound():
    from countdown_rlvr.analysis.branch_diff import (
        FOUNDATION,
        _upstream_line,
        upstream,
        upstream_of,
    )

    a = upstream(_lock("s" * 32))
    b = yaml.safe_load(_lock("s" * 32))
    b["stages"]["rloo@rloo-0"]["outs"][0]["md5"] = "n" * 32  # the variant changed rloo
    b["stages"]["opd@opd-0"]["deps"][0]["md5"] = "n" * 32  # so OPD starts from another rloo
    _, differ = upstream_of("opd", {"r0"}, a, upstream(yaml.safe_dump(b)))
    assert differ == ["rloo"] and "rloo" not in FOUNDATION
    line = _upstream_line({}, {"opd": ["rloo"]}, True)
    assert line.startswith("the same base, teacher and SFT") and "the variant's own chain" in line
    assert _upstream_line({"rloo": ["sft"]}, {}, True) == "differ: rloo from another sft"
