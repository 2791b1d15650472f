"""What the pilots share: the development split and its evaluation (never the test split)."""

import json
import time

from countdown_rlvr.core import io
from countdown_rlvr.core.config import eval_sampler, prompt_style
from countdown_rlvr.eval.metrics import pass_at_k
from countdown_rlvr.eval.scoring import evaluate_policy

DEV = "data/problems/dev.jsonl"  # pilots and tuning read this split; `test` is confirmatory
REPLICATE = 100  # the pilots' replicate seed: no committed run uses it


def evaluate_dev(model, tok, what: str, log: str, n: int = 8) -> dict:
    """pass@1 and pass@n of (model, tok) on the development split at the evaluation sampler
    (sampling seed 0), printed and appended to the JSON-lines file `log`."""
    params = io.load_params()
    t = time.time()
    rec = evaluate_policy((model, tok), io.read_jsonl(DEV), n, eval_sampler("pilot", params),
                          [0], prompt_style("pilot", params), batch_size=1024, progress=False)
    # correct samples per (problem, sampling seed) group of n: the unbiased pass@k estimate
    hits = rec.groupby(["problem_id", "seed"])["correct"].sum().tolist()
    row = {"what": what, **{f"pass@{k}": round(sum(pass_at_k(n, int(c), k) for c in hits)
                                               / len(hits), 4) for k in (1, n)},
           "eval_s": round(time.time() - t)}
    print(row, flush=True)
    with open(log, "a") as f:
        f.write(json.dumps(row) + "\n")
    return row
