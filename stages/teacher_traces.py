"""Stage `teacher_traces`: K teacher samples per train problem with rotated strategy
prompts (S1 §3.1.1), every sample verified; the correct ones become teacher traces.

All samples (correct or not) are kept in a Parquet file: `pairs` draws the teacher's
easy and near-miss negatives from them.
"""

from collections import Counter

from countdown_rlvr import headline
from countdown_rlvr.eval import records_frame
from countdown_rlvr.evaluate import score_samples
from countdown_rlvr.io import (
    StageError,
    atomic_path,
    load_params,
    read_jsonl,
    require_inputs,
    section,
    write_jsonl,
    write_metrics,
)
from countdown_rlvr.model import configure, load_model
from countdown_rlvr.sampling import generate
from countdown_rlvr.task import get_reward, solve_prompt
from countdown_rlvr.traces import STYLES, strategy_prompt

SRC, MODEL = "data/problems/train.jsonl", "data/models/teacher"
OUT, SAMPLES = "data/traces/teacher.jsonl", "data/traces/teacher_samples.parquet"


def main() -> None:
    params = load_params()
    configure(params)  # model.dtype for every load, sampler for saved policies
    p = section(params, "teacher_traces", required=("n_problems", "k", "strategies", "sampler", "seed", "batch_size"))
    style = section(params, "model", required=("prompt_style",))["prompt_style"]
    bad = [s for s in p["strategies"] if s not in STYLES]
    if bad or not p["strategies"] or p["k"] % len(p["strategies"]):
        raise StageError("teacher_traces", f"strategies must be a non-empty subset of {list(STYLES)} "
                                           f"and k a multiple of their count (got {p['strategies']}, k={p['k']})")
    require_inputs("teacher_traces", SRC, MODEL)
    problems = read_jsonl(SRC)[: p["n_problems"]]
    prompts = [solve_prompt(q["numbers"], q["target"], style) for q in problems]
    policy = load_model(MODEL)
    per = p["k"] // len(p["strategies"])
    binary = get_reward("binary")  # the gate: only verifier-correct samples become traces
    rows, traces = [], []
    for i, strategy in enumerate(p["strategies"]):  # rotation: k/len samples under each hint
        print(f"[teacher_traces] strategy {strategy}: {len(problems)} problems x {per} samples")
        out = generate(policy, [strategy_prompt(pr, strategy) for pr in prompts], per, p["sampler"],
                       seed=p["seed"] + i, batch_size=p["batch_size"])
        for q, prompt, samples in zip(problems, prompts, out):
            scored = score_samples(q, samples, p["seed"] + i, binary)
            for r in scored:
                r["sample"] += i * per
                r["strategy"] = strategy
            rows.extend(scored)
            traces.extend({"problem_id": q["id"], "numbers": q["numbers"], "target": q["target"],
                           "n_numbers": q["n_numbers"], "prompt": prompt, "completion": r["completion"],
                           "strategy": strategy, "source": "teacher"} for r in scored if r["correct"])
    df = records_frame(rows)
    df["strategy"] = [r["strategy"] for r in rows]  # beyond the evaluation record schema
    with atomic_path(SAMPLES) as tmp:
        df.to_parquet(tmp, index=False)
    write_jsonl(OUT, traces)
    solved = df.groupby("problem_id")["correct"].any()
    by_n = df.groupby("n_numbers")
    write_metrics("teacher_traces", {
        "samples": len(df), "kept": len(traces), "yield": float(df["correct"].mean()),
        "problems_with_a_trace": float(solved.mean()),
        "yield_by_operands": {f"n{k}": float(g["correct"].mean()) for k, g in by_n},
        "yield_by_strategy": {s: float(g["correct"].mean()) for s, g in df.groupby("strategy")},
        "failures": dict(sorted(Counter(f for f in df["failure"] if f).items())),
    }, headline.teacher_traces)
    print(f"[teacher_traces] kept {len(traces)}/{len(df)} verified samples; wrote {OUT}, {SAMPLES}, "
          "reports/metrics/teacher_traces.json")


if __name__ == "__main__":
    main()
