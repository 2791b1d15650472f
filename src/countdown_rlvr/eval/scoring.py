"""Run a policy over the held-out problems: sample, verify, one record per sample.

    evaluate_policy(ref, problems, ...) -> per-sample records DataFrame (metrics.RECORDS_SCHEMA)
    skill(ref, problems, ...)           -> pass@1 on train problems (a training stage's arm check)
    score_samples(problem, samples, ...) -> the records of one problem's samples
    not_trained(model_dir)               -> why a policy need not be sampled (None: sample it)

(Loading a policy is `model.policy_ref`; comparing policies, torch-free, is `compare`.)

The records hold everything a later stage needs to re-score or pair samples without
sampling again: the problem (numbers, target), the completion text and the verdict.
Metrics are computed from them by `metrics.summarize`, never from the model directly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from ..model.policy import ModelRef, load_model
from ..model.sampling import generate
from ..model.untrained import NOT_TRAINED
from ..task.prompts import solve_prompt
from ..task.rewards import get_reward
from ..task.verify import verify
from .metrics import records_frame

# --------------------------------------------------------------------------- untrained

def not_trained(model_dir: str | Path) -> str | None:
    """Why the policy in `model_dir` is not worth sampling, or None.

    A training stage that had no examples saves its input policy unchanged, marked as such
    (`model.untrained.untrained(..., same_as_source=True)`: e.g. a distill stage of condition
    F1 without a successful repair saves data/models/distill_F1/r<seed> with a NOT_TRAINED.json). Sampling that
    copy would only reproduce its source's numbers at the cost of a full evaluation.
    """
    path = Path(model_dir) / NOT_TRAINED
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return (f"not trained: {path.as_posix()} says it is {info.get('source')} unchanged "
            f"({info.get('reason') or 'no training data'})")


# --------------------------------------------------------------------------- evaluation
def _value_str(v) -> str | None:
    return None if v is None else str(v)  # Fraction: "7" or "7/2", exact and round-trippable


def score_samples(problem: dict[str, Any], samples: Sequence, seed: int,
                  reward_fn) -> list[dict[str, Any]]:
    """One record per sample of one problem: the verifier is the only judge."""
    rows = []
    for j, s in enumerate(samples):
        v = verify(s.text, problem["numbers"], problem["target"])
        rows.append({
            "problem_id": problem["id"], "split": problem["split"],
            "n_numbers": int(problem["n_numbers"]), "seed": int(seed), "sample": j,
            "correct": bool(v.correct), "failure": v.failure,
            "reward": float(reward_fn(v, problem["target"])), "n_tokens": int(s.n_tokens),
            "numbers": [int(x) for x in problem["numbers"]], "target": int(problem["target"]),
            "completion": s.text, "finish_reason": s.finish_reason,
            "expression": v.expression, "value": _value_str(v.value),
            "arithmetic_errors": int(v.arithmetic_errors),
        })
    return rows


def evaluate_policy(ref: ModelRef | tuple, problems: Sequence[dict[str, Any]], n: int,
                    sampler: dict[str, Any], seeds: Iterable[int], prompt_style: str,
                    reward: str = "binary", backend: str = "hf", batch_size: int = 64,
                    progress: bool = True) -> pd.DataFrame:
    """Sample `n` completions per problem for each seed and verify each one.

    `ref`: a ModelRef or an already loaded (model, tokenizer) pair. `problems`: rows of the
    problem files (id, split, numbers, target, n_numbers). Deterministic for a given
    (policy, problems, sampler, seeds, batch_size): sampling seeds each batch from
    (seed, batch index). Each split is sampled in its own call so that the test samples do
    not change when the OOD set changes size.
    """
    reward_fn = get_reward(reward)  # ValueError naming the valid rewards
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("need at least one sampling seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"sampling seeds must be distinct, got {seeds}")
    if not problems:
        raise ValueError("no problems to evaluate")
    if backend == "hf" and isinstance(ref, ModelRef):
        ref = load_model(ref.base, ref.adapter)  # load once for every seed and split
    splits = list(dict.fromkeys(p["split"] for p in problems))  # first-seen order
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        for split in splits:
            part = [p for p in problems if p["split"] == split]
            prompts = [solve_prompt(p["numbers"], p["target"], prompt_style) for p in part]
            if progress:
                print(f"  sampling {split}: {len(part)} problems x {n} samples, seed {seed}",
                      flush=True)
            out = generate(ref, prompts, n, sampler, seed, backend=backend,
                           batch_size=batch_size, progress=progress)
            for p, samples in zip(tqdm(part, desc="verify", disable=not progress), out):
                rows.extend(score_samples(p, samples, seed, reward_fn))
    return records_frame(rows)


# the sampling seed of `skill`: one fixed seed for every policy, stage and replicate, so the
# policies an arm check compares draw the same uniforms (common random numbers)
SKILL_SEED = 0


def skill(ref: ModelRef | tuple, problems: Sequence[dict[str, Any]], n: int,
          sampler: dict[str, Any], seed: int, prompt_style: str, batch_size: int = 64) -> float:
    """pass@1 of a policy on TRAIN problems: the share of correct samples over `n` samples
    of each problem, drawn with `sampler` (the fixed evaluation sampler) from `seed`.

    What a training stage measures to check that its policy kept (IPO) or gained
    (self-distillation) the skill of the policy it started from, on problems it did not
    train on (IPO) or trained on (self-distillation). Refuses any problem of another split:
    an arm check never samples the test or OOD problems the claims are tested on."""
    if bad := sorted({str(p.get("split")) for p in problems} - {"train"}):
        raise ValueError(f"skill samples train problems only, got split(s) {bad}")
    records = evaluate_policy(ref, problems, n, sampler, [seed], prompt_style,
                              backend=sampler.get("backend", "hf"), batch_size=batch_size,
                              progress=False)
    return float(records["correct"].mean())


def extra_metrics(records: pd.DataFrame) -> dict[str, float]:
    """Per-sample diagnostics `metrics.summarize` does not cover, on the test split.

    `correct_with_arithmetic_error`: the share of CORRECT samples whose reasoning still holds
    a wrong "a op b = c" claim: how often a wrong step does not drive the answer (why the
    interventions patch the first unrecoverable step, not the first slip). None without a
    correct sample."""
    test = records[records["split"] == "test"]
    ok = test[test["correct"].astype(bool)]
    return {
        "truncated": float((test["finish_reason"] == "length").mean()),  # max_new_tokens hit
        "arithmetic_errors_mean": float(test["arithmetic_errors"].mean()),
        "correct_with_arithmetic_error": (float((ok["arithmetic_errors"] > 0).mean())
                                          if len(ok) else None),
        "mean_reward": float(test["reward"].mean()),
    }
