"""The stage map: `countdown-rlvr dag` (text for a terminal, mermaid on request) and
docs/dag.md (the mermaid markdown): current, readable on a screen, and a faithful collapse."""

import argparse

import networkx as nx
import pytest
import yaml
from conftest import ROOT

from countdown_rlvr.cli import stage_map


@pytest.fixture(scope="module")
def collapsed():
    """The collapsed graph of today's dvc.yaml (DVC's load is slow: once for the module)."""
    return stage_map.collapsed_graph(ROOT)


@pytest.fixture
def printed(collapsed, monkeypatch, capsys):
    """What `countdown-rlvr dag [flags]` prints, run at the repository's root."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(stage_map, "collapsed_graph", lambda root=".": collapsed)

    def run(*flags: str) -> str:
        ap = argparse.ArgumentParser()
        stage_map.add_arguments(ap)
        assert stage_map.run(ap.parse_args(list(flags))) == 0
        return capsys.readouterr().out
    return run


def test_committed_map_is_current():
    """docs/dag.md is what `countdown-rlvr dag --write` makes from today's dvc.yaml."""
    assert (ROOT / stage_map.OUT).read_text() == stage_map.make(ROOT), \
        "docs/dag.md is stale: run `countdown-rlvr dag --write`"


def test_map_fits_a_screen(collapsed):
    text = stage_map.render(*collapsed)
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert max(map(len, text.splitlines())) <= stage_map.WIDTH
    assert len(table) <= 50  # one row per stage and arm, not one per replicate


def test_the_terminal_gets_text_and_mermaid_only_on_request(printed, collapsed):
    text = printed()
    assert "```" not in text and "flowchart" not in text and "| " not in text
    assert max(map(len, text.splitlines())) <= stage_map.WIDTH
    lines = text.splitlines()
    body = lines[next(i for i, ln in enumerate(lines) if ln.startswith("-----")) + 1:]
    graph, _ = collapsed
    rows = {ln.split()[0]: ln.replace(",", " ").split()[1:] for ln in body if ln[0] != " "}
    assert set(rows) == set(graph)  # one line per stage and arm
    assert "compare" in rows["report"] and rows["check_params"] == ["-"]  # what each waits for
    assert printed("--mermaid") == (ROOT / stage_map.OUT).read_text()


def test_the_dvc_dag_example_is_a_stage_the_defaults_make(collapsed):
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        names = {s.addressing for s in repo.index.graph.nodes}
    example = stage_map.example_stage(ROOT)
    seeds = yaml.safe_load((ROOT / "params.yaml").read_text())["replicates"]["seeds"]
    assert example == f"sft@{seeds[0]}" and example in names
    for text in (stage_map.render(*collapsed, example=example),
                 stage_map.render_text(*collapsed, example=example)):
        assert f"`dvc dag {example}`" in text


def test_replicates_merge_and_arms_stay_apart():
    assert stage_map.replicate_group("sft@2") == "sft"
    assert stage_map.replicate_group("ipo@easyneg-0") == "ipo@easyneg"
    assert stage_map.replicate_group("evaluate_distill@R-1") == "evaluate_distill@R"
    assert stage_map.replicate_group("evaluate_rloo_nocurr@0") == "evaluate_rloo_nocurr"
    assert stage_map.replicate_group("problems") == "problems"


def test_collapse_keeps_every_stage_and_no_loop(collapsed):
    from dvc.repo import Repo

    graph, counts = collapsed
    with Repo(str(ROOT)) as repo:
        names = [s.addressing for s in repo.index.graph.nodes]
    assert sum(counts.values()) == len(names)
    assert set(counts) == {stage_map.replicate_group(n) for n in names}
    assert nx.is_directed_acyclic_graph(graph)
    # a reduced graph still orders what the full one orders: sft before report
    assert nx.has_path(graph, "sft", "report") and nx.has_path(graph, "check_params", "sft")
