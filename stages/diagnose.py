"""Stage `diagnose@<seed>` (S0 §3.2, §5.1): how often would group-relative binary RLVR see no
signal from the SFT policy? Reads replicate <seed>'s own evaluation records of the SFT policy
(data/eval/sft/r<seed>.parquet: the fixed sampler, the test split) and cuts each prompt's
samples into groups of K = `diagnose.k`, the same groups as S0 Table 3's SFT row, so the
report has one all-fail number per policy and K. Samples nothing itself.

    python stages/diagnose.py <seed>

A measurement only: its failed test samples are counted, never repaired (`repair@<seed>`
samples its attempts on train problems, so self-distillation never trains on a test problem).
Writes reports/{details,timings}/diagnose/r<seed>.json.
"""

import os
import sys
import time

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import io
from countdown_rlvr.core.config import from_section
from countdown_rlvr.core.evaluate_config import Evaluate
from countdown_rlvr.core.replicates import parse_replicate, run_name, tag
from countdown_rlvr.core.research_config import Diagnose
from countdown_rlvr.eval.metrics import read_records
from countdown_rlvr.research.diagnose import diagnosis


def main(argv: list[str]) -> None:
    params = io.load_params()
    cfg = from_section(Diagnose, "diagnose", params, "diagnose")  # fails before any work
    ev = from_section(Evaluate, "diagnose", params, "evaluate")
    r = parse_replicate("diagnose", argv[0] if argv else None, params)
    if cfg.k > ev.n or cfg.k not in ev.ks:
        raise io.StageError("diagnose", f"diagnose.k ({cfg.k}) must be one of evaluate.ks "
                            f"{ev.ks} and at most evaluate.n ({ev.n}): the report's S0 Table 3 "
                            "shows every policy at that K, from the same groups; change one")
    name, records_file = run_name("diagnose", r), f"data/eval/sft/{tag(r)}.parquet"
    io.require_inputs("diagnose", records_file)
    t0 = time.time()
    records = read_records(records_file)
    records = records[(records["split"] == "test") & (records["seed"] == ev.seeds[0])]
    metrics = diagnosis(records, cfg.k)
    io.write_details(name, {**metrics, "replicate": r})
    io.write_timing(name, {"seconds": round(time.time() - t0, 2)})
    print(f"[diagnose] {metrics['n_groups']} groups of {cfg.k} from {records_file}: pass@1 "
          f"{metrics['pass@1']:.3f}, pass@{cfg.k} {metrics['pass@k']:.3f}, all-fail "
          f"{metrics['all_fail']:.3f}, zero-informative {metrics['zero_informative']:.3f}, "
          f"reward contrast {metrics['reward_contrast']:.3f}; "
          f"{metrics['n_failed_attempts']} failed samples")
    print(f"[diagnose] wrote {io.DETAILS}/{name}.json")


if __name__ == "__main__":
    main(sys.argv[1:])
