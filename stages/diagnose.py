"""Stage `diagnose` (S0 §3.2, §5.1): K samples per test prompt from the SFT policy with the
fixed evaluation sampler; how often would group-relative binary RLVR see no signal?

    python stages/diagnose.py <seed>   # replicate seed: the SFT policy data/models/sft/r<seed>

Writes data/diagnose/r<seed>/records.parquet (every sample, evaluation schema),
data/diagnose/r<seed>/failed.jsonl (the failed attempts: the input of `repair@<seed>`),
reports/{details,metrics,timings}/diagnose/r<seed>.json.
"""

import sys
import time

from countdown_rlvr import headline, io
from countdown_rlvr.config import Diagnose, eval_sampler, prompt_style
from countdown_rlvr.evaluate import evaluate_policy
from countdown_rlvr.metrics import write_records
from countdown_rlvr.model import load_replicate_stage, policy_ref
from countdown_rlvr.replicates import model_dir, run_name, tag
from countdown_rlvr.research.diagnose import diagnosis, failed_attempts

TEST = "data/problems/test.jsonl"


def main(argv: list[str]) -> None:
    params, cfg, r = load_replicate_stage("diagnose", Diagnose, argv[0] if argv else None)
    policy, name = model_dir("sft", r), run_name("diagnose", r)
    records_file, failed_file = (f"data/diagnose/{tag(r)}/{f}" for f in ("records.parquet", "failed.jsonl"))
    sampler = eval_sampler("diagnose", params)
    style = prompt_style("diagnose", params)
    io.require_inputs("diagnose", policy, TEST)
    problems = io.read_jsonl(TEST)
    t0 = time.time()
    print(f"[diagnose] {len(problems)} test problems x {cfg.k} samples from {policy}", flush=True)
    records = evaluate_policy(policy_ref(policy), problems, cfg.k, sampler, [cfg.seed], style,
                              reward=cfg.reward, backend=sampler["backend"],
                              batch_size=cfg.batch_size)
    metrics = diagnosis(records, cfg.k)
    failed = failed_attempts(records)
    write_records(records, records_file)
    io.write_jsonl(failed_file, failed)
    io.write_metrics(name, {**metrics, "replicate": r}, headline.diagnose)
    io.write_timing(name, {"seconds": round(time.time() - t0, 2)})
    print(f"[diagnose] pass@1 {metrics['pass@1']:.3f}, pass@{cfg.k} {metrics['pass@k']:.3f}, "
          f"all-fail {metrics['all_fail']:.3f}, zero-informative {metrics['zero_informative']:.3f}, "
          f"reward contrast {metrics['reward_contrast']:.3f}; {len(failed)} failed attempts")
    print(f"[diagnose] wrote {records_file}, {failed_file}, reports/metrics/{name}.json")


if __name__ == "__main__":
    main(sys.argv[1:])
