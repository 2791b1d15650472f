"""Stage `diagnose` (S0 §3.2, §5.1): K samples per test prompt from the SFT policy with the
fixed evaluation sampler; how often would group-relative binary RLVR see no signal?

Writes data/diagnose/records.parquet (every sample, evaluation schema),
data/diagnose/failed.jsonl (the failed attempts: the input of `repair`),
reports/metrics/diagnose.json and reports/timings/diagnose.json.
"""

import time

from countdown_rlvr import headline
from countdown_rlvr.config import EvalSampler, keys
from countdown_rlvr.eval import write_records
from countdown_rlvr.evaluate import evaluate_policy
from countdown_rlvr.io import (
    StageError,
    load_params,
    read_jsonl,
    require_inputs,
    section,
    write_jsonl,
    write_metrics,
    write_timing,
)
from countdown_rlvr.model import configure, policy_ref
from countdown_rlvr.research.diagnose import diagnosis, failed_attempts
from countdown_rlvr.task import REWARDS

POLICY, TEST = "data/models/sft", "data/problems/test.jsonl"
RECORDS, FAILED = "data/diagnose/records.parquet", "data/diagnose/failed.jsonl"


def main() -> None:
    params = load_params()
    configure(params)  # model.dtype for every load, sampler for saved policies
    d = section(params, "diagnose", required=("k", "seed", "reward", "batch_size"))
    sampler = section(params, "sampler", required=keys(EvalSampler))
    style = section(params, "model", required=("prompt_style",))["prompt_style"]
    if not (isinstance(d["k"], int) and d["k"] >= 2):
        raise StageError("diagnose", f"diagnose.k must be an integer >= 2 (a group needs two "
                                     f"samples for any contrast), got {d['k']!r}")
    if d["reward"] not in REWARDS:
        raise StageError("diagnose", f"unknown diagnose.reward {d['reward']!r}; valid: "
                                     f"{', '.join(sorted(REWARDS))}")
    require_inputs("diagnose", POLICY, TEST)
    problems = read_jsonl(TEST)
    t0 = time.time()
    print(f"[diagnose] {len(problems)} test problems x {d['k']} samples from {POLICY}", flush=True)
    records = evaluate_policy(policy_ref(POLICY), problems, d["k"], sampler, [d["seed"]], style,
                              reward=d["reward"], backend=sampler["backend"],
                              batch_size=d["batch_size"])
    metrics = diagnosis(records, d["k"])
    failed = failed_attempts(records)
    write_records(records, RECORDS)
    write_jsonl(FAILED, failed)
    write_metrics("diagnose", metrics, headline.diagnose)
    write_timing("diagnose", {"seconds": round(time.time() - t0, 2)})
    print(f"[diagnose] pass@1 {metrics['pass@1']:.3f}, pass@{d['k']} {metrics['pass@k']:.3f}, "
          f"all-fail {metrics['all_fail']:.3f}, zero-informative {metrics['zero_informative']:.3f}, "
          f"reward contrast {metrics['reward_contrast']:.3f}; {len(failed)} failed attempts")
    print(f"[diagnose] wrote {RECORDS}, {FAILED}, reports/metrics/diagnose.json")


if __name__ == "__main__":
    main()
