"""Pilot: where the noise of S3's held-out pass@K sits (samples, problems or training draws).

For each replicate of an int run already in the workspace (data/models/{int,int_plain_rl}/r<seed>),
re-derive its held-out unsolved problems (the stage's phase 1 and split, deterministic) and
sample the claim's two arms `--n` times per problem with a sampling seed the stage never used
(`--eval-seed`). Writes the per-problem correct counts and problem ids, from which
`countdown_rlvr.stats.design.nested_samples` reads the sampling, problem and draw variance of
a replicate's pass@K difference at any number of samples per problem
(`scripts/plan_power.py --int-pilot`).

    python scripts/pilots/int_samples.py --seeds 11 12 13 14 --n 64 --out int_samples.json

Reads the replicates' own held-out problems (from `unseen`, which no stage trains on): a plan
for a later run with other replicate seeds, not a re-decision.
"""

import argparse
import time

from countdown_rlvr.core import io
from countdown_rlvr.core.config import eval_sampler, prompt_style
from countdown_rlvr.core.int_config import Interventions
from countdown_rlvr.core.replicates import model_dir, seed_for
from countdown_rlvr.core.replicates import sft_dir as replicate_sft
from countdown_rlvr.eval.scoring import evaluate_policy
from countdown_rlvr.model.policy import load_model, load_replicate_stage, policy_ref
from countdown_rlvr.research.interventions import (
    find_unsolved,
    replicate_problems,
    solved_counts,
    split_heldout,
)

UNSEEN = "data/problems/unseen.jsonl"
ARMS = {"int": "int", "plain_rl": "int_plain_rl"}  # the claim's two arms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", nargs="+", required=True, help="replicates of replicates.int")
    ap.add_argument("--n", type=int, default=64, help="samples per held-out problem")
    ap.add_argument("--eval-seed", type=int, default=2, help="a sampling seed the stage never used")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = {"n": args.n, "eval_seed": args.eval_seed, "replicates": {}}
    for seed in args.seeds:
        t = time.time()
        params, cfg, r = load_replicate_stage("int", Interventions, seed, chain="int")
        sampler, style = eval_sampler("int", params), prompt_style("int", params)
        gen = {"backend": sampler["backend"], "batch_size": cfg.batch_size}
        problems = replicate_problems(io.read_jsonl(UNSEEN), cfg.n_problems, cfg.pool,
                                      params["replicates"]["int"].index(r))
        ref = policy_ref(replicate_sft("int", params, r))
        found, _ = find_unsolved(load_model(ref.base, ref.adapter), problems, cfg.select_k,
                                 sampler, cfg.seed, style, **gen)
        _, heldout = split_heldout(found, cfg.heldout_frac, cfg.seed)
        counts = {}
        for arm, policy in ARMS.items():
            rec = evaluate_policy(policy_ref(model_dir(policy, r)), heldout, args.n, sampler,
                                  [seed_for(args.eval_seed, r)], style, progress=False, **gen)
            c = solved_counts(rec)
            counts[arm] = [int(c[p["id"]]) for p in heldout]
        out["replicates"][str(r)] = {"k": cfg.k, "problems": [p["id"] for p in heldout], **counts}
        print(f"[int_samples] r{r}: {len(heldout)} held-out problems, {time.time() - t:.0f} s",
              flush=True)
        io.write_json(args.out, out)  # after each replicate: a killed pilot keeps what it did


if __name__ == "__main__":
    main()
