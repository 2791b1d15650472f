"""Stage `pairs`: preference pairs from every source of S1 §3.1.3 and the base model's
failures, with the chosen/rejected verdicts and lengths; `ipo.sources` chooses among them.

Chosen and rejected of each pair share a style (countdown_rlvr.data.pairs), and each source is cut
to `pairs.max_per_source` pairs (a seeded choice), so the IPO runs compare sources, not sizes.
reports/details/pairs.json: pairs per source, built and kept."""

import os
import random
from collections import Counter

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

import pandas as pd

from countdown_rlvr.core import inputs, io
from countdown_rlvr.core.config import prompt_style
from countdown_rlvr.core.data_config import Pairs
from countdown_rlvr.data.pairs import (
    SOURCES,
    base_pairs,
    cap_sources,
    scripted_pairs,
    style_counts,
    teacher_pairs,
)
from countdown_rlvr.eval.metrics import none_if_missing
from countdown_rlvr.eval.scoring import evaluate_policy
from countdown_rlvr.model.policy import load_model, load_stage

PROBLEMS, SOLVER = "data/problems/train.jsonl", "data/traces/solver.jsonl"
TEACHER, BASE = "data/traces/teacher_samples.parquet", "data/models/base"
OUT = "data/pairs/pairs.jsonl"


def _samples(df: pd.DataFrame, prompts: dict[str, str]) -> list[dict]:
    """Sample records as `countdown_rlvr.data.pairs` rows: a missing failure / value is None
    (pandas may read it as NaN, which `is not None` lets through)."""
    return [{"problem_id": r.problem_id, "numbers": list(r.numbers), "target": int(r.target),
             "n_numbers": int(r.n_numbers), "prompt": prompts[r.problem_id],
             "completion": r.completion, "correct": bool(r.correct),
             "failure": none_if_missing(r.failure), "value": none_if_missing(r.value)}
            for r in df.itertuples()]


def main() -> None:
    params, cfg = load_stage("pairs", Pairs)  # fails before any work
    style = prompt_style("pairs", params)
    io.require_inputs("pairs", PROBLEMS, SOLVER, TEACHER, BASE)
    problems = inputs.read_rows("pairs", PROBLEMS, params)[: cfg.n_problems]
    ids = {q["id"] for q in problems}
    solver = [t for t in inputs.read_rows("pairs", SOLVER, params) if t["problem_id"] in ids]
    prompts = {t["problem_id"]: t["prompt"] for t in solver}
    teacher = _samples(pd.read_parquet(TEACHER).query("problem_id in @ids"), prompts)
    # the base model's own failures on these prompts: the "base-model rejected" source
    base_df = evaluate_policy(load_model(BASE), problems, cfg.base_k, cfg.base_sampler.as_dict(),
                              [cfg.seed], style, batch_size=cfg.batch_size, progress=False)
    base = _samples(base_df, prompts)
    rng = random.Random(cfg.seed)
    correct = solver + [s for s in teacher if s["correct"]]
    try:
        built = (scripted_pairs(solver, rng, cfg.per_problem)
                 + teacher_pairs(teacher, rng, cfg.per_problem)
                 + base_pairs(correct, base, rng, cfg.per_problem))
    except AssertionError as exc:
        raise io.StageError("pairs", f"{exc}; the verifier and the pair builders disagree") from exc
    pairs = cap_sources(built, cfg.max_per_source, rng)
    io.write_jsonl(OUT, pairs)
    metrics = {"max_per_source": cfg.max_per_source}
    for src in SOURCES:
        rows = [q for q in pairs if q["source"] == src]
        metrics[src] = {
            "pairs": len(rows),
            "pairs_built": sum(q["source"] == src for q in built),  # before max_per_source
            "styles": style_counts(rows),  # "<chosen>/<rejected>": same-style only
            "problems": len({q["problem_id"] for q in rows}),
            "rejected_failures": dict(sorted(Counter(q["rejected_failure"] for q in rows).items())),
            "mean_chosen_chars": sum(q["chosen_chars"] for q in rows) / len(rows) if rows else None,
            "mean_rejected_chars": sum(q["rejected_chars"] for q in rows) / len(rows) if rows else None,
        }
    metrics["base_sample_pass@1"] = float(base_df["correct"].mean())
    io.write_details("pairs", metrics)
    print(f"[pairs] wrote {OUT} ({len(pairs)} pairs: "
          + ", ".join(f"{s} {metrics[s]['pairs']}" for s in SOURCES) + f") and {io.DETAILS}/pairs.json")


if __name__ == "__main__":
    main()
