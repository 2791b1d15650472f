"""Stage `dedup`: MiniLM + FAISS near-duplicate removal of the verified traces
(S1 §3.2.1), then the seeded train / validation split used by `sft`.

Source `repair` (repair-format examples from `traces`) shares its completions with the
solver traces of the same problems, under another prompt: traces are compared only within
one (problem, prompt), so a repair example is never a duplicate of its plain solve."""

import os
from collections import Counter

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import inputs, io
from countdown_rlvr.core.config import from_section
from countdown_rlvr.core.data_config import Dedup
from countdown_rlvr.data.dedup import dedup_records, train_val_split

OUT = "data/sft"


def main() -> None:
    params = io.load_params()
    cfg = from_section(Dedup, "dedup", params, "dedup")
    paths = [f"data/traces/{s}.jsonl" for s in cfg.sources]
    io.require_inputs("dedup", *paths)
    records = [r for path in paths for r in inputs.read_rows("dedup", path, params)]
    # the S1 setting compares across problems; MiniLM barely reads numbers, so by default
    # only traces of the same problem are compared (see countdown_rlvr.data.dedup)
    kept, metrics = dedup_records(records, threshold=cfg.threshold,
                                  group_key=("problem_id", "prompt") if cfg.per_problem else None)
    train, val = train_val_split(kept, val_frac=cfg.val_frac, seed=cfg.seed)
    io.write_jsonl(f"{OUT}/train.jsonl", train)
    io.write_jsonl(f"{OUT}/val.jsonl", val)
    metrics["split"] = {"train": len(train), "val": len(val)}
    repair = [r for r in train if r["source"] == "repair"]  # what `sft` trains on
    metrics["repair_train"] = {
        "count": len(repair), "frac": round(len(repair) / max(1, len(train)), 4),
        "by_condition": dict(sorted(Counter(r["condition"] for r in repair).items())),
        "by_failure": dict(sorted(Counter(r["failure"] for r in repair).items()))}
    # embeddings/s is a timing, not a result: it lives outside the versioned metrics
    timing = {"embeddings_per_s": metrics.pop("embeddings_per_s")}
    io.write_details("dedup", metrics)
    io.write_timing("dedup", timing)
    print(f"[dedup] kept {metrics['kept']}/{metrics['total']} traces; wrote {OUT}/train.jsonl "
          f"({len(train)}), {OUT}/val.jsonl ({len(val)}), {io.DETAILS}/dedup.json")


if __name__ == "__main__":
    main()
