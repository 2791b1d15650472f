"""The stage map in docs/dag.md: current, readable on a screen, and a faithful collapse."""

import networkx as nx
from conftest import ROOT

from countdown_rlvr.cli import stage_map


def test_committed_map_is_current():
    """docs/dag.md is what `countdown-rlvr dag --write` makes from today's dvc.yaml."""
    assert (ROOT / stage_map.OUT).read_text() == stage_map.make(ROOT), \
        "docs/dag.md is stale: run `countdown-rlvr dag --write`"


def test_map_fits_a_screen():
    text = stage_map.make(ROOT)
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert max(map(len, text.splitlines())) <= stage_map.WIDTH
    assert len(table) <= 50  # one row per stage and arm, not one per replicate


def test_replicates_merge_and_arms_stay_apart():
    assert stage_map.replicate_group("sft@2") == "sft"
    assert stage_map.replicate_group("ipo@easyneg-0") == "ipo@easyneg"
    assert stage_map.replicate_group("evaluate_distill@R-1") == "evaluate_distill@R"
    assert stage_map.replicate_group("evaluate_rloo_nocurr@0") == "evaluate_rloo_nocurr"
    assert stage_map.replicate_group("problems") == "problems"


def test_collapse_keeps_every_stage_and_no_loop():
    from dvc.repo import Repo

    graph, counts = stage_map.collapsed_graph(ROOT)
    with Repo(str(ROOT)) as repo:
        names = [s.addressing for s in repo.index.graph.nodes]
    assert sum(counts.values()) == len(names)
    assert set(counts) == {stage_map.replicate_group(n) for n in names}
    assert nx.is_directed_acyclic_graph(graph)
    # a reduced graph still orders what the full one orders: sft before report
    assert nx.has_path(graph, "sft", "report") and nx.has_path(graph, "check_params", "sft")
