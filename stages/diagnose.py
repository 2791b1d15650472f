"""Stage `diagnose` (S0 §3.2, §5.1): K samples per test prompt from the SFT policy with the
fixed evaluation sampler; how often would group-relative binary RLVR see no signal?

Writes data/diagnose/records.parquet (every sample, evaluation schema),
data/diagnose/failed.jsonl (the failed attempts: the input of `repair`),
reports/metrics/diagnose.json and reports/timings/diagnose.json.
"""

import time

from countdown_rlvr import headline, io
from countdown_rlvr.config import Diagnose, eval_sampler, prompt_style
from countdown_rlvr.evaluate import evaluate_policy
from countdown_rlvr.metrics import write_records
from countdown_rlvr.model import load_stage, policy_ref
from countdown_rlvr.research.diagnose import diagnosis, failed_attempts

POLICY, TEST = "data/models/sft", "data/problems/test.jsonl"
RECORDS, FAILED = "data/diagnose/records.parquet", "data/diagnose/failed.jsonl"


def main() -> None:
    params, cfg = load_stage("diagnose", Diagnose)  # fails before any work
    sampler = eval_sampler("diagnose", params)
    style = prompt_style("diagnose", params)
    io.require_inputs("diagnose", POLICY, TEST)
    problems = io.read_jsonl(TEST)
    t0 = time.time()
    print(f"[diagnose] {len(problems)} test problems x {cfg.k} samples from {POLICY}", flush=True)
    records = evaluate_policy(policy_ref(POLICY), problems, cfg.k, sampler, [cfg.seed], style,
                              reward=cfg.reward, backend=sampler["backend"],
                              batch_size=cfg.batch_size)
    metrics = diagnosis(records, cfg.k)
    failed = failed_attempts(records)
    write_records(records, RECORDS)
    io.write_jsonl(FAILED, failed)
    io.write_metrics("diagnose", metrics, headline.diagnose)
    io.write_timing("diagnose", {"seconds": round(time.time() - t0, 2)})
    print(f"[diagnose] pass@1 {metrics['pass@1']:.3f}, pass@{cfg.k} {metrics['pass@k']:.3f}, "
          f"all-fail {metrics['all_fail']:.3f}, zero-informative {metrics['zero_informative']:.3f}, "
          f"reward contrast {metrics['reward_contrast']:.3f}; {len(failed)} failed attempts")
    print(f"[diagnose] wrote {RECORDS}, {FAILED}, reports/metrics/diagnose.json")


if __name__ == "__main__":
    main()
