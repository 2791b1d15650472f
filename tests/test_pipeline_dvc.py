"""End to end, smoke-sized: the DVC views a researcher uses, from a fresh clone.

One full `dvc repro` (two replicates) is committed on `main`; a `shaped` branch re-runs RLOO
with `-S rloo.reward=shaped`. A git clone without the data cache must then show the branch
diff (`dvc metrics diff`, `dvc plots diff`, and `countdown-rlvr diff` with its
replicate-unit intervals), every plot, a `dvc metrics show` within 200 columns and one row per
policy for reports/metrics/eval, and a `dvc exp show` that fits 120 columns with
the README's recipe. Experiments queue and run with `dvc queue start`, and a local-directory
remote round-trips the models.
"""

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Pipeline, make_pipeline

pytestmark = pytest.mark.slow

GIT = ("git", "-c", "user.email=t@t", "-c", "user.name=t")


def commit(pipe: Pipeline, message: str) -> None:
    pipe.run("git", "add", "-A")
    pipe.run(*GIT, "commit", "-qm", message)


def ran(proc) -> set[str]:
    return {line.split("'")[1] for line in proc.stdout.splitlines() if line.startswith("Running stage")}


def count_values(tree) -> int:
    if isinstance(tree, dict):
        return sum(count_values(v) for v in tree.values())
    return 1


def readme_exp_show() -> list[str]:
    """The README's `dvc exp show` recipe for experiments side by side, as arguments (the
    smoke run's recipe shows one column)."""
    line = next(ln for ln in (ROOT / "README.md").read_text().splitlines()
                if ln.startswith("dvc exp show --drop") and "rloo" in ln)
    return shlex.split(line.split("  #")[0])


@pytest.fixture(scope="module")
def committed_run(tmp_path_factory) -> Pipeline:
    """The whole smoke pipeline, run once and committed on branch `main`."""
    pipe = make_pipeline(tmp_path_factory.mktemp("run") / "repo")
    # the pooled views need two draws: SFT's and RLOO's chains get a second seed, the other
    # chains keep one (each chain has its own seeds: compare and the report pair on the
    # replicates both policies have)
    pipe.set_params({"replicates": {"seeds": [0, 1], "rloo": [0, 1]}})
    pipe.run("git", "branch", "-M", "main")
    pipe.repro()
    commit(pipe, "default run")
    return pipe


def test_every_json_the_run_writes_is_strict_json(committed_run):
    """reports/ (details, timings, metrics) and dvclive's metrics.json: no NaN or Infinity,
    which Python's json writes by default and strict readers refuse (issue 57)."""
    def refuse(name: str):
        raise ValueError(f"{name} is not JSON")

    written = [*(committed_run.path / "reports").rglob("*.json"),
               *(committed_run.path / "dvclive").rglob("*.json")]
    assert any("reports/details/rloo/" in p.as_posix() for p in written)
    for path in written:
        json.loads(path.read_text(), parse_constant=refuse)


def copy_of(pipe: Pipeline, dest: Path) -> Pipeline:
    shutil.copytree(pipe.path, dest, symlinks=True)
    return Pipeline(dest)


def test_branch_diff_plots_and_metrics_in_a_clone_without_the_cache(committed_run, tmp_path):
    pipe = copy_of(committed_run, tmp_path / "repo")
    assert pipe.run("dvc", "status").stdout.strip().startswith("Data and pipelines are up to date")
    pipe.run("git", "checkout", "-qb", "shaped")
    # a timing file git does not track yet, as a stage new to the experiment writes one
    timing = "reports/timings/rloo/r0.json"
    pipe.run("git", "rm", "-q", "--cached", timing)
    pipe.run(*GIT, "commit", "-qm", "rloo@rloo-0's timing untracked")  # the file stays
    exp = pipe.run("dvc", "exp", "run", "-S", "rloo.reward=shaped")
    assert {"rloo@rloo-0", "rloo@rloo-1"} <= ran(exp) and not {"sft@0", "sft@1"} & ran(exp)
    assert "rloo_shaped@0" not in ran(exp)  # sets its own reward
    # the experiment keeps it (a stage out, so DVC commits it with the run): nothing untracked
    assert "untracked" not in exp.stdout + exp.stderr, exp.stderr[-2000:]
    name = re.search(r"Ran experiment\(s\): (\S+)", exp.stdout).group(1)
    refs = pipe.run("git", "for-each-ref", "refs/exps", "--format=%(refname) %(objectname)")
    sha = [r.split()[1] for r in refs.stdout.splitlines() if r.split()[0].endswith("/" + name)]
    assert len(sha) == 1 and pipe.run("git", "ls-tree", "--name-only", sha[0], timing).stdout
    commit(pipe, "rloo: shaped reward")

    clone = Pipeline(tmp_path / "clone")
    pipe.run("git", "clone", "-q", "-b", "main", str(pipe.path), str(clone.path))
    clone.run("git", "branch", "shaped", "origin/shaped")
    assert not (clone.path / ".dvc/cache").exists() and not (clone.path / "data").exists()

    # metrics diff: the rloo rows, nothing upstream of rloo, no wall time
    # (at smoke size both rewards may train to the same numbers: --all lists unchanged rows)
    every = json.loads(clone.run("dvc", "metrics", "diff", "main", "shaped", "--all",
                                 "--json").stdout)
    top = max(yaml.safe_load(clone.read("params.yaml"))["evaluate"]["ks"])  # smoke: n 4
    assert set(every["reports/metrics/eval/rloo.json"]) == {"pass@1", "pass@1_sd", f"pass@{top}",
                                                            f"pass@{top}_sd"}
    assert all(path.startswith(("reports/metrics/eval/", "reports/metrics/claims/"))
               for path in every)  # the headline only: no training summary, no wall time
    # a few numbers a file: a policy's pass@1 and pass@k with their SDs, a claim's decision
    # (word and code), effect and p
    assert all(len(v) <= 4 for v in every.values())
    changed = json.loads(clone.run("dvc", "metrics", "diff", "main", "shaped", "--json").stdout)
    # (the OPD arms start from the RLOO policy: downstream of the change, so not listed)
    upstream = {"sft", "sft_early", "base", "teacher", "rloo_shaped", "rloo_early",
                "ipo_scripted"}
    assert not {f"reports/metrics/eval/{u}.json" for u in upstream} & set(changed)
    text = clone.run("dvc", "metrics", "diff", "main", "shaped", "--all").stdout
    assert "reports/metrics/eval/rloo.json" in text and "seconds" not in text
    assert "timings" not in text
    params = json.loads(clone.run("dvc", "params", "diff", "main", "shaped", "--json").stdout)
    assert params["params.yaml"] == {"rloo.reward": {"old": "binary", "new": "shaped"}}

    # metrics show: headline numbers only; every policy's file has the same keys, so the
    # eval directory is one row per policy and a handful of columns
    shown = json.loads(clone.run("dvc", "metrics", "show", "--json").stdout)
    files = next(iter(shown.values()))["data"]
    assert files and all(p.startswith("reports/metrics/") for p in files)
    assert all(count_values(f["data"]) <= 4 for f in files.values())
    wide = clone.run("env", "COLUMNS=400", "dvc", "metrics", "show").stdout.splitlines()
    assert max(map(len, wide)) <= 200
    table = clone.run("dvc", "metrics", "show", "reports/metrics/eval").stdout.splitlines()
    header = table[0].split()
    assert header[0] == "Path" and len(header) <= 12
    assert sum(line.startswith("reports/metrics/eval/") for line in table) == len(table) - 1
    assert any(line.startswith("reports/metrics/eval/rloo.json") for line in table)

    # the noise-aware branch comparison, from git alone
    # (the console script, run from a subdirectory; both revisions share the upstream draws)
    out = Pipeline(clone.path / "reports").run(
        str(Path(sys.executable).with_name("countdown-rlvr")), "diff", "main", "shaped",
        "--format", "md", "--all").stdout
    assert out.startswith("test: paired t-test")
    rloo = [line for line in out.splitlines() if line.startswith("| rloo | pass@1 |")]
    assert rloo and "| 2/2 |" in rloo[0]  # the n column: replicates on each side
    assert any(w in rloo[0] for w in ("differs", "no detectable difference", "zero spread"))

    # plots: every declared plot loads from git alone, in both revisions
    for args, revisions in ((("show",), {"workspace"}), (("diff", "main", "shaped"),
                                                         {"main", "shaped"})):
        proc = clone.run("dvc", "plots", *args, "--json")
        assert "failed to load" not in proc.stderr + proc.stdout
        shown = json.loads(proc.stdout)
        assert not shown.get("errors"), shown.get("errors")
        plots = shown["data"]
        assert {"RL reward mean", "RL fraction of zero-std groups", "RL KL to the reference (k3)",
                "RL entropy", "SFT loss"} <= set(plots)
        assert any(p.startswith("reports/figures/") for p in plots)
        curve = plots["RL reward mean"][0]
        assert set(curve["revisions"]) == revisions
        assert curve["content"]["encoding"]["x"]["title"] == "optimizer step"
        steps = {v["rev"] for v in curve["content"]["data"]["values"]}
        assert steps == revisions  # both branches' curves, read from git

    # exp show with the README recipe fits a 120-column terminal
    proc = clone.run("env", "COLUMNS=400", *readme_exp_show(), "--no-pager")
    lines = proc.stdout.splitlines()
    assert lines and max(len(ln) for ln in lines) <= 120
    assert "reports/metrics/eval/rloo.json:pass@1" in proc.stdout and "rloo.reward" in proc.stdout


def test_queued_experiments_and_a_local_remote(committed_run, tmp_path):
    pipe = copy_of(committed_run, tmp_path / "repo")
    pipe.run("dvc", "exp", "run", "--queue", "-S", "rloo.reward=shaped,format", "rloo@rloo-0")
    pipe.run("dvc", "queue", "start", "-j", "1")
    deadline = time.time() + 600
    while time.time() < deadline:
        status = pipe.run("dvc", "queue", "status").stdout
        if not re.search(r"\b(Queued|Running)\b", status):
            break
        time.sleep(3)
    assert "Failed" not in status, status
    rows = json.loads(pipe.run("dvc", "exp", "show", "--json").stdout)
    exps = [e for row in rows for e in (row.get("experiments") or [])]
    params = {e["revs"][0]["data"]["params"]["params.yaml"]["data"]["rloo"]["reward"]
              for e in exps}
    assert params == {"shaped", "format"}
    for e in exps:  # the headline is the report's: this target stops at rloo@rloo-0
        rloo = e["revs"][0]["data"]["metrics"]["reports/metrics/eval/rloo.json"]["data"]
        assert 0 <= rloo["pass@1"] <= 1

    # a local-directory remote: push the models, pull them into a clone without a cache
    remote = tmp_path / "remote"
    pipe.run("dvc", "remote", "add", "-d", "store", str(remote))
    commit(pipe, "remote")
    pipe.run("dvc", "push")
    clone = Pipeline(tmp_path / "clone")
    pipe.run("git", "clone", "-q", str(pipe.path), str(clone.path))
    clone.run("dvc", "pull")
    for rel in ("data/models/rloo/r0/config.json", "data/models/sft/r1/model.safetensors"):
        assert clone.read(rel) == pipe.read(rel)
    status = clone.run("dvc", "status").stdout  # every output back, nothing to re-run
    assert status.strip().startswith("Data and pipelines are up to date"), status
    assert subprocess.run(["git", "status", "--porcelain"], cwd=clone.path, capture_output=True,
                          text=True, check=True).stdout == ""


def test_one_sft_for_every_replicate_end_to_end(committed_run, tmp_path):
    """replicates.shared_sft on the committed run: after `experiment --write`, `dvc repro`
    trains no SFT, re-trains replicate 1's RLOO arms from SFT 0 (their dep moved) and a new
    replicate 2 from it; compare pairs every replicate with the one SFT draw, and the report
    says so."""
    pipe = copy_of(committed_run, tmp_path / "repo")
    pipe.set_params({"replicates": {"shared_sft": 0, "seeds": [0], "rloo": [0, 1, 2]}})
    pipe.write_dvc_yaml()
    proc = pipe.repro()
    stages = ran(proc)
    assert {"rloo@rloo-1", "rloo@rloo-2", "compare", "report"} <= stages
    assert "rloo_shaped@0" not in stages  # the first seed's SFT: its dep did not move
    assert not {s for s in stages if s.startswith(("sft@", "rloo@rloo-0", "teacher", "dedup"))}
    for r in (1, 2):
        rloo = json.loads(pipe.read(f"reports/details/rloo/r{r}.json"))
        assert rloo["init"] == "data/models/sft/r0"
    compare = json.loads(pipe.read("reports/details/compare.json"))
    row = compare["pairs"]["rloo_vs_sft"]["test"]["k1"]
    assert list(row["per_replicate"]) == ["r0", "r1", "r2"] and row["crossed"]["n"] == 3
    assert compare["policies"]["sft"]["test"]["pass@1"]["per_replicate"] == {
        "shared": pytest.approx(compare["replicates"]["r0"]["policies"]["sft"]["test"]["pass@1"]["value"])}
    report = pipe.read("reports/report.md").decode()
    assert "one SFT, r0, for every replicate" in " ".join(report.split())
