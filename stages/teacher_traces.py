"""Stage `teacher_traces`: K teacher samples per train problem with rotated strategy
prompts (S1 §3.1.1), every sample verified; the correct ones become teacher traces.

All samples (correct or not) are kept in a Parquet file: `pairs` draws the teacher's
easy and near-miss negatives from them.
"""

import os

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import inputs, io
from countdown_rlvr.core.config import prompt_style
from countdown_rlvr.core.data_config import TeacherTraces
from countdown_rlvr.data.traces import strategy_prompt
from countdown_rlvr.eval.metrics import records_frame, teacher_yield
from countdown_rlvr.eval.scoring import score_samples
from countdown_rlvr.model.policy import load_model, load_stage
from countdown_rlvr.model.sampling import generate
from countdown_rlvr.task.prompts import solve_prompt
from countdown_rlvr.task.rewards import get_reward

SRC, MODEL = "data/problems/train.jsonl", "data/models/teacher"
OUT, SAMPLES = "data/traces/teacher.jsonl", "data/traces/teacher_samples.parquet"


def main() -> None:
    params, cfg = load_stage("teacher_traces", TeacherTraces)  # fails before any work
    style = prompt_style("teacher_traces", params)
    io.require_inputs("teacher_traces", SRC, MODEL)
    problems = inputs.read_rows("teacher_traces", SRC, params)[: cfg.n_problems]
    prompts = [solve_prompt(q["numbers"], q["target"], style) for q in problems]
    policy = load_model(MODEL)
    per = cfg.k // len(cfg.strategies)
    binary = get_reward("binary")  # the gate: only verifier-correct samples become traces
    rows, traces = [], []
    for i, strategy in enumerate(cfg.strategies):  # rotation: k/len samples under each hint
        print(f"[teacher_traces] strategy {strategy}: {len(problems)} problems x {per} samples")
        out = generate(policy, [strategy_prompt(pr, strategy) for pr in prompts], per,
                       cfg.sampler.as_dict(),
                       seed=cfg.seed + i, batch_size=cfg.batch_size)
        for q, prompt, samples in zip(problems, prompts, out):
            scored = score_samples(q, samples, cfg.seed + i, binary)
            for r in scored:
                r["sample"] += i * per
                r["strategy"] = strategy
            rows.extend(scored)
            traces.extend({"problem_id": q["id"], "numbers": q["numbers"], "target": q["target"],
                           "n_numbers": q["n_numbers"], "prompt": prompt, "completion": r["completion"],
                           "strategy": strategy, "source": "teacher"} for r in scored if r["correct"])
    df = records_frame(rows)
    df["strategy"] = [r["strategy"] for r in rows]  # beyond the evaluation record schema
    with io.atomic_path(SAMPLES) as tmp:
        df.to_parquet(tmp, index=False)
    io.write_jsonl(OUT, traces)
    io.write_details("teacher_traces", teacher_yield(df))
    print(f"[teacher_traces] kept {len(traces)}/{len(df)} verified samples; wrote {OUT}, {SAMPLES}, "
          f"{io.DETAILS}/teacher_traces.json")


if __name__ == "__main__":
    main()
