"""Stage `int`: Interventional Training with the solver as the oracle (S3 §4, Alg. 1).

1. K samples (fixed `sampler`) on the first `int.n_problems` train problems from the SFT
   policy; the unsolved problems are those where all K fail. A seeded share
   `int.heldout_frac` of them is held out: nothing below trains on it.
2. On each (trained-on) unsolved problem, a failed trace's first erroneous step is replaced by a correct
   step (countdown_rlvr.research.interventions); continuations are sampled from
   prompt + prefix + intervention and the intervention is kept when one verifies (the filter).
3. Patch: SFT from the SFT policy on (prompt, prefix + intervention) only -> data/models/int_sft.
4. RL: RLOO (`rloo` params, overridden by `int.rloo`) from the patched policy on the unsolved
   problems (`int.rl_problems`) -> data/models/int; and S3's control arm, the same RL (same
   problems, config and budget) from the SFT policy without the patch -> data/models/int_plain_rl.
5. Baseline: SFT from the SFT policy on full solver solutions of the same unsolved problems,
   the patch's number of optimizer steps -> data/models/int_solver_sft.
6. pass@K on the trained-on and the held-out unsolved problems, with a fresh sampling seed
   (`int.eval_seed`: the selection seed made the SFT policy fail them all by construction),
   for sft, int_sft, int, plain_rl, int_solver_sft and the plain RLOO policy (data/models/rloo).

Each phase is a function of countdown_rlvr.research.interventions, called here in this order.
Writes reports/metrics/int.json, reports/timings/int.json, data/int/interventions.jsonl,
dvclive/int/{sft,solver_sft,rloo,plain_rl}.
"""

from countdown_rlvr import headline, io
from countdown_rlvr.config import (
    RL,
    Interventions,
    Traces,
    eval_sampler,
    from_section,
    prompt_style,
)
from countdown_rlvr.model import load_model, load_stage, policy_ref
from countdown_rlvr.research import INT_POLICIES
from countdown_rlvr.research.interventions import (
    find_unsolved,
    interventions_metrics,
    patch_examples,
    search_interventions,
    split_heldout,
    train_patch,
    train_rl,
    train_solver_baseline,
    unsolved_pass_at_k,
)
from countdown_rlvr.timing import timed
from countdown_rlvr.train.runtime import init_policy

SFT, RLOO, TRAIN = "data/models/sft", "data/models/rloo", "data/problems/train.jsonl"
INT_SFT, INT, SOLVER = "data/models/int_sft", "data/models/int", "data/models/int_solver_sft"
PLAIN_RL = "data/models/int_plain_rl"
OUT_ROWS = "data/int/interventions.jsonl"
# research.INT_POLICIES, in its order -> the model directory
POLICIES = dict(zip(INT_POLICIES, (SFT, INT_SFT, INT, PLAIN_RL, SOLVER, RLOO), strict=True))


def main() -> None:
    params, cfg = load_stage("int", Interventions)  # fails before any work
    sft_cfg = cfg.sft
    rl_cfg = from_section(RL, "int", params, "int.rloo", inherit="rloo")  # rloo's keys, overridden
    sampler = eval_sampler("int", params)
    style = prompt_style("int", params)
    styles = from_section(Traces, "int", params, "traces").styles
    io.require_inputs("int", SFT, RLOO, TRAIN)
    problems = io.read_jsonl(TRAIN)[:cfg.n_problems]
    gen = {"backend": sampler["backend"], "batch_size": cfg.batch_size}
    seconds: dict[str, float] = {}
    with timed(seconds, "sample"):  # 1. who is unsolved
        ref = policy_ref(SFT)
        policy = load_model(ref.base, ref.adapter)
        print(f"[int] {len(problems)} train problems x {cfg.k} samples from {SFT}", flush=True)
        found, by_problem = find_unsolved(policy, problems, cfg.k, sampler, cfg.seed, style,
                                          **gen)
        unsolved, heldout = split_heldout(found, cfg.heldout_frac, cfg.seed)
        held_ids = {p["id"] for p in heldout}
    with timed(seconds, "search"):  # 2. interventions + the filter
        rows = search_interventions(policy, unsolved, by_problem, cfg.n_continuations,
                                    cfg.traces_per_problem, sampler, cfg.seed, style, **gen)
        io.write_jsonl(OUT_ROWS, rows)
        print(f"[int] {len(found)} unsolved ({len(heldout)} held out); {len(rows)} interventions, "
              f"{sum(r['kept'] for r in rows)} kept by the filter", flush=True)
    with timed(seconds, "sft"):  # 3. patch
        del policy
        model, tok, patch = train_patch("sft", patch_examples(rows, style, cfg.filter), sft_cfg,
                                        SFT, INT_SFT)
    rl_set = unsolved if cfg.rl_problems == "unsolved" else \
        [p for p in problems if p["id"] not in held_ids]
    with timed(seconds, "rloo"):  # 4. RL from the patched policy
        rl = train_rl(model, tok, rl_set, rl_cfg, style, INT_SFT, INT)
        del model
    with timed(seconds, "plain_rl"):  # 4'. the same RL from the unpatched SFT policy
        model, tok = init_policy("int", SFT, sft_cfg)  # the patch's starting point, adapter
        plain_rl = train_rl(model, tok, rl_set, rl_cfg, style, SFT, PLAIN_RL, curves="plain_rl")
        del model
    with timed(seconds, "solver_sft"):  # 5. the full-solution baseline, same budget
        solver = train_solver_baseline(unsolved, style, styles, cfg.seed, sft_cfg, SFT, SOLVER,
                                       steps=patch.get("steps"))
    with timed(seconds, "eval"):  # 6. pass@K on the unsolved problems, fresh seed
        passk, solved = unsolved_pass_at_k(POLICIES, unsolved, cfg.k, sampler, cfg.eval_seed,
                                           style, **gen)
        held_passk, held_solved = unsolved_pass_at_k(POLICIES, heldout, cfg.k, sampler,
                                                     cfg.eval_seed, style, **gen)
    metrics = interventions_metrics(cfg, problems, unsolved, heldout, rows, patch=patch, rl=rl,
                                    plain_rl=plain_rl, solver=solver, passk=passk, solved=solved,
                                    heldout_passk=held_passk, heldout_solved=held_solved)
    io.write_metrics("int", metrics, headline.interventions)
    io.write_timing("int", {"seconds": round(sum(seconds.values()), 2), "phases": seconds})
    for what, res, part in (("trained-on", passk, unsolved), ("held-out", held_passk, heldout)):
        summary = ", ".join(f"{name} {v['pass@k']:.3f}" for name, v in res.items()
                            if v["pass@k"] is not None)
        print(f"[int] pass@{cfg.k} on the {len(part)} {what} unsolved: {summary or 'n/a'}")
    print(f"[int] wrote {INT_SFT}, {INT}, {PLAIN_RL}, {SOLVER}, {OUT_ROWS}, reports/metrics/int.json")


if __name__ == "__main__":
    main()
