"""Stage `traces`: verified solver step traces of the train problems, in several styles."""

import random
from collections import Counter

from countdown_rlvr import headline
from countdown_rlvr.io import (
    StageError,
    load_params,
    read_jsonl,
    require_inputs,
    section,
    write_jsonl,
    write_metrics,
)
from countdown_rlvr.task import solve_prompt
from countdown_rlvr.traces import solver_traces

SRC, OUT = "data/problems/train.jsonl", "data/traces/solver.jsonl"


def main() -> None:
    params = load_params()
    p = section(params, "traces", required=("seed", "n_problems", "per_problem", "styles",
                                                  "solutions"))
    style = section(params, "model", required=("prompt_style",))["prompt_style"]
    require_inputs("traces", SRC)
    problems = read_jsonl(SRC)[: p["n_problems"]]
    rng = random.Random(p["seed"])
    try:
        rows = [r for i, q in enumerate(problems) for r in solver_traces(
            q, solve_prompt(q["numbers"], q["target"], style), tuple(p["styles"]),
            p["per_problem"], rng, offset=i * p["per_problem"], solutions=p["solutions"])]
    except ValueError as exc:
        raise StageError("traces", f"{exc} (fix `traces.styles` / `traces.solutions` in "
                                   "params.yaml)") from exc
    write_jsonl(OUT, rows)
    lengths = [len(r["completion"]) for r in rows]
    write_metrics("traces", {
        "count": len(rows),
        "problems": len(problems),
        "by_strategy": dict(sorted(Counter(r["strategy"] for r in rows).items())),
        "by_operands": {f"n{k}": v for k, v in sorted(Counter(r["n_numbers"] for r in rows).items())},
        "mean_chars": sum(lengths) / max(1, len(lengths)),
    }, headline.traces)
    print(f"[traces] wrote {OUT} ({len(rows)} traces) and reports/metrics/traces.json")


if __name__ == "__main__":
    main()
