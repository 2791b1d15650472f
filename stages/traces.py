"""Stage `traces`: verified solver step traces of the train problems, in several styles,
and repair-format examples (countdown_rlvr.data.repair_data) for a share `traces.repair_frac` of
them: data/traces/repair.jsonl, a `dedup` source for the student's SFT only (the teacher
reads solver.jsonl: it is never asked to repair, and its traces should stay plain solves)."""

import os
import random
from collections import Counter

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import inputs, io
from countdown_rlvr.core.config import from_section, prompt_style
from countdown_rlvr.core.data_config import Traces
from countdown_rlvr.data.repair_data import repair_counts, repair_examples
from countdown_rlvr.data.traces import solver_traces
from countdown_rlvr.task.prompts import solve_prompt

SRC, OUT, REPAIR = "data/problems/train.jsonl", "data/traces/solver.jsonl", "data/traces/repair.jsonl"


def main() -> None:
    params = io.load_params()
    cfg = from_section(Traces, "traces", params, "traces")  # fails before any work
    style = prompt_style("traces", params)
    io.require_inputs("traces", SRC)
    problems = inputs.read_rows("traces", SRC, params)[: cfg.n_problems]
    rng = random.Random(cfg.seed)
    try:
        rows = [r for i, q in enumerate(problems) for r in solver_traces(
            q, solve_prompt(q["numbers"], q["target"], style), tuple(cfg.styles),
            cfg.per_problem, rng, offset=i * cfg.per_problem, solutions=cfg.solutions)]
    except ValueError as exc:
        raise io.StageError("traces", f"{exc} (fix `traces.styles` / `traces.solutions` in "
                                      "params.yaml)") from exc
    try:  # train problems only (this file): no test or OOD problem can reach the SFT data
        repair = repair_examples(rows, cfg.repair_frac, cfg.seed, style, cfg.repair_mix)
    except ValueError as exc:
        raise io.StageError("traces", f"{exc} (fix `traces.repair_frac` in params.yaml)") from exc
    io.write_jsonl(OUT, rows)
    io.write_jsonl(REPAIR, repair)
    lengths = [len(r["completion"]) for r in rows]
    io.write_details("traces", {
        "count": len(rows),
        "problems": len(problems),
        "by_strategy": dict(sorted(Counter(r["strategy"] for r in rows).items())),
        "by_operands": {f"n{k}": v for k, v in sorted(Counter(r["n_numbers"] for r in rows).items())},
        "mean_chars": sum(lengths) / max(1, len(lengths)),
        "repair": repair_counts(repair),
    })
    print(f"[traces] wrote {OUT} ({len(rows)} traces), {REPAIR} ({len(repair)} repair "
          f"examples) and {io.DETAILS}/traces.json")


if __name__ == "__main__":
    main()
