"""Stage `int`: Interventional Training with the solver as the oracle (S3 §4, Alg. 1).

1. K samples (fixed `sampler`) on `int.n_problems` unseen problems (the first ones, or with
   `int.pool: own` the replicate's own slice) from the SFT policy; the unsolved problems are
   those where all K fail. A seeded share `int.heldout_frac` of them is held out: nothing
   below trains on it.
2. On each (trained-on) unsolved problem, a failed trace's first erroneous step is replaced by a correct
   step (countdown_rlvr.research.interventions); continuations are sampled from
   prompt + prefix + intervention and the intervention is kept when one verifies (the filter).
3. Patch: SFT from the SFT policy on (prompt, prefix + intervention), mixed with
   `int.replay` SFT training examples per intervention -> data/models/int_sft.
4. RL: RLOO (`rloo` params, overridden by `int.rloo`) from the patched policy on the unsolved
   problems (`int.rl_problems`) -> data/models/int; and S3's control arm, the same RL (same
   problems, config and budget) from the SFT policy without the patch -> data/models/int_plain_rl.
5. Baseline: SFT from the SFT policy on full solver solutions of the same unsolved problems,
   the same replay mix and the patch's number of optimizer steps -> data/models/int_solver_sft.
6. pass@K on the trained-on and the held-out unsolved problems, with a fresh sampling seed
   (`int.eval_seed`: the selection seed made the SFT policy fail them all by construction),
   for sft, int_sft, int, plain_rl, int_solver_sft and the plain RLOO policy (data/models/rloo).
7. When `int.claim_samples` > 0: the claim's two arms (int, plain_rl) sampled that many times
   per held-out problem (same seed), for the unbiased held-out pass@K the S3 claim reads.

Each phase is a function of countdown_rlvr.research.interventions, called here in this order.

    python stages/int.py <seed>   # a seed of replicates.int: starts from data/models/{sft,rloo}/r<seed>
                                  # (SFT: replicates.shared_sft's when set)

Writes data/models/{int_sft,int,int_plain_rl,int_solver_sft}/r<seed>,
data/int/r<seed>/interventions.jsonl, reports/{details,timings}/int/r<seed>.json and
dvclive/int/r<seed>/{sft,solver_sft,rloo,plain_rl}.
"""

import os
import sys

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import inputs, io
from countdown_rlvr.core.config import MIN_HELDOUT, eval_sampler, from_section, prompt_style
from countdown_rlvr.core.data_config import Traces
from countdown_rlvr.core.errors import StageError
from countdown_rlvr.core.int_config import Interventions
from countdown_rlvr.core.replicates import for_replicate, model_dir, run_name, tag
from countdown_rlvr.core.replicates import sft_dir as replicate_sft
from countdown_rlvr.core.rl_config import RL
from countdown_rlvr.core.timing import timed
from countdown_rlvr.model.policy import load_model, load_replicate_stage, policy_ref
from countdown_rlvr.research import INT_POLICY_DIRS
from countdown_rlvr.research.interventions import (
    claim_counts,
    find_unsolved,
    interventions_metrics,
    patch_examples,
    replay_examples,
    replicate_problems,
    search_interventions,
    split_heldout,
    train_patch,
    train_rl,
    train_solver_baseline,
    unsolved_pass_at_k,
)
from countdown_rlvr.train.runtime import init_policy

UNSEEN = "data/problems/unseen.jsonl"  # no stage trains on these problems
SFT_DATA = "data/sft/train.jsonl"  # the replay mixed into the patch: train problems only


def main(argv: list[str]) -> None:
    params, cfg, r = load_replicate_stage("int", Interventions, argv[0] if argv else None,
                                          chain="int")
    sft_cfg = cfg.sft
    # rloo's keys, overridden by int.rloo; its seeds move to replicate r like the section's
    rl_cfg = for_replicate(from_section(RL, "int", params, "int.rloo", inherit="rloo"), r)
    sft_dir = replicate_sft("int", params, r)  # its seed's, or the shared SFT
    policies = {name: sft_dir if policy == "sft" else model_dir(policy, r)
                for name, policy in INT_POLICY_DIRS.items()}
    rloo_dir, int_sft_dir, int_dir, solver_dir, plain_rl_dir = (model_dir(p, r) for p in (
        "rloo", "int_sft", "int", "int_solver_sft", "int_plain_rl"))
    rows_file, run = f"data/int/{tag(r)}/interventions.jsonl", run_name("int", r)
    sampler = eval_sampler("int", params)
    style = prompt_style("int", params)
    styles = from_section(Traces, "int", params, "traces").styles
    io.require_inputs("int", sft_dir, rloo_dir, UNSEEN, SFT_DATA)
    position = params["replicates"]["int"].index(r)  # own pool: its slice of `unseen`
    try:
        problems = replicate_problems(inputs.read_rows("int", UNSEEN, params), cfg.n_problems,
                                      cfg.pool, position)
    except ValueError as e:
        raise StageError("int", str(e)) from None
    gen = {"backend": sampler["backend"], "batch_size": cfg.batch_size}
    seconds: dict[str, float] = {}
    with timed(seconds, "sample"):  # 1. who is unsolved
        ref = policy_ref(sft_dir)
        policy = load_model(ref.base, ref.adapter)
        print(f"[int] {len(problems)} unseen problems x {cfg.select_k} samples from {sft_dir}",
              flush=True)
        found, by_problem = find_unsolved(policy, problems, cfg.select_k, sampler, cfg.seed, style,
                                          **gen)
        unsolved, heldout = split_heldout(found, cfg.heldout_frac, cfg.seed)
        held_ids = {p["id"] for p in heldout}
    with timed(seconds, "search"):  # 2. interventions + the filter
        rows = search_interventions(policy, unsolved, by_problem, cfg.n_continuations,
                                    cfg.traces_per_problem, sampler, cfg.seed, style, **gen)
        io.write_jsonl(rows_file, rows)
        print(f"[int] {len(found)} unsolved ({len(heldout)} held out); {len(rows)} interventions, "
              f"{sum(r['kept'] for r in rows)} kept by the filter", flush=True)
        if len(heldout) < MIN_HELDOUT:  # the claim reads "not tested" (the int arm check)
            print(f"[int] warning: {len(heldout)} held-out unsolved problems, fewer than the "
                  f"{MIN_HELDOUT} the S3 claim's test needs; raise problems.n_unseen and "
                  "int.n_problems (or int.heldout_frac)", flush=True)
    with timed(seconds, "sft"):  # 3. patch, with SFT examples mixed in
        del policy
        sft_rows = io.read_jsonl(SFT_DATA) if cfg.replay else []
        examples = patch_examples(rows, style, cfg.filter)
        mixed = replay_examples(sft_rows, round(cfg.replay * len(examples)), cfg.seed)
        model, tok, patch = train_patch("sft", examples + mixed, sft_cfg, sft_dir, int_sft_dir,
                                        run)
        patch["replay_examples"] = len(mixed)
    rl_set = unsolved if cfg.rl_problems == "unsolved" else \
        [p for p in problems if p["id"] not in held_ids]
    with timed(seconds, "rloo"):  # 4. RL from the patched policy
        rl = train_rl(model, tok, rl_set, rl_cfg, style, int_sft_dir, int_dir, run=run)
        del model
    with timed(seconds, "plain_rl"):  # 4'. the same RL from the unpatched sft_dir policy
        model, tok = init_policy("int", sft_dir, sft_cfg)  # the patch's starting point, adapter
        plain_rl = train_rl(model, tok, rl_set, rl_cfg, style, sft_dir, plain_rl_dir, curves="plain_rl",
                            run=run)
        del model
    with timed(seconds, "solver_sft"):  # 5. the full-solution baseline, same budget
        solver = train_solver_baseline(unsolved, style, styles, cfg.seed, sft_cfg, sft_dir, solver_dir,
                                       steps=patch.get("steps"), run=run, replay=sft_rows,
                                       replay_per_example=cfg.replay)
    with timed(seconds, "eval"):  # 6. pass@K on the unsolved problems, fresh seed
        passk, solved = unsolved_pass_at_k(policies, unsolved, cfg.k, sampler, cfg.eval_seed,
                                           style, **gen)
        held_passk, held_solved = unsolved_pass_at_k(policies, heldout, cfg.k, sampler,
                                                     cfg.eval_seed, style, **gen)
    claim = None
    if cfg.claim_samples and heldout:
        with timed(seconds, "claim_eval"):  # 7. the claim's arms, many samples per problem
            claim = claim_counts(policies, heldout, cfg.claim_samples, sampler, cfg.eval_seed,
                                 style, **gen)
    metrics = interventions_metrics(cfg, problems, unsolved, heldout, rows, patch=patch, rl=rl,
                                    plain_rl=plain_rl, solver=solver, passk=passk, solved=solved,
                                    heldout_passk=held_passk, heldout_solved=held_solved,
                                    claim=claim)
    io.write_details(run, {**metrics, "replicate": r})
    io.write_timing(run, {"seconds": round(sum(seconds.values()), 2), "phases": seconds})
    for what, res, part in (("trained-on", passk, unsolved), ("held-out", held_passk, heldout)):
        summary = ", ".join(f"{name} {v['pass@k']:.3f}" for name, v in res.items()
                            if v["pass@k"] is not None)
        print(f"[int] pass@{cfg.k} on the {len(part)} {what} unsolved: {summary or 'n/a'}")
    print(f"[int] wrote {int_sft_dir}, {int_dir}, {plain_rl_dir}, {solver_dir}, {rows_file}, "
          f"{io.DETAILS}/{run}.json")


if __name__ == "__main__":
    main(sys.argv[1:])
