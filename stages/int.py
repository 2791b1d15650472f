"""Stage `int`: Interventional Training with the solver as the oracle (S3 §4, Alg. 1).

1. K samples (fixed `sampler`) on the first `int.n_problems` train problems from the SFT
   policy; the unsolved problems are those where all K fail.
2. On each unsolved problem, a failed trace's first erroneous step is replaced by a correct
   step (countdown_rlvr.research.interventions); continuations are sampled from
   prompt + prefix + intervention and the intervention is kept when one verifies (the filter).
3. Patch: SFT from the SFT policy on (prompt, prefix + intervention) only -> data/models/int_sft.
4. RL: RLOO (`rloo` params, overridden by `int.rloo`) from the patched policy on the unsolved
   problems (`int.rl_problems`) -> data/models/int.
5. Baseline: SFT from the SFT policy on full solver solutions of the same unsolved problems,
   same training budget -> data/models/int_solver_sft.
6. pass@K on the previously unsolved problems, with a fresh sampling seed (`int.eval_seed`:
   the selection seed made the SFT policy fail them all by construction), for sft, int_sft,
   int, int_solver_sft and the plain RLOO policy (data/models/rloo).

Writes reports/metrics/int.json, reports/timings/int.json, data/int/interventions.jsonl,
dvclive/int/{sft,solver_sft,rloo}.
"""

import time
from collections import Counter

from countdown_rlvr import headline
from countdown_rlvr.eval import pass_at_k
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
from countdown_rlvr.model import configure, load_model, policy_ref
from countdown_rlvr.research import untrained
from countdown_rlvr.research.interventions import (
    patch_examples,
    search_interventions,
    solved_counts,
    solver_examples,
)
from countdown_rlvr.stats import mcnemar
from countdown_rlvr.train.rloo import RLOO_DEFAULTS, rloo_config, train_rloo
from countdown_rlvr.train.run import (
    ADAPTER_DEFAULTS,
    frozen_copy,
    init_policy,
    open_live,
    save_policy,
    training_config,
)
from countdown_rlvr.train.sft import train_sft

SFT, RLOO, TRAIN = "data/models/sft", "data/models/rloo", "data/problems/train.jsonl"
INT_SFT, INT, SOLVER = "data/models/int_sft", "data/models/int", "data/models/int_solver_sft"
OUT_ROWS = "data/int/interventions.jsonl"
KEYS = ("n_problems", "k", "seed", "eval_seed", "traces_per_problem", "n_continuations",
        "filter", "rl_problems", "batch_size", "sft", "rloo")
SAMPLER_KEYS = ("backend", "temperature", "top_p", "top_k", "max_new_tokens")
RL_PROBLEMS = ("unsolved", "all")
POLICIES = {"sft": SFT, "int_sft": INT_SFT, "int": INT, "int_solver_sft": SOLVER, "rloo": RLOO}
TRAIN_SUMMARY = ("examples", "steps", "epochs", "loss_first", "loss_final", "token_acc_final")
RL_SUMMARY = ("steps", "reward_mean_first", "reward_mean_final", "pass_rate_first",
              "pass_rate_final", "zero_std_frac_first", "zero_std_frac_final")


def configs(params: dict):
    s = section(params, "int", required=KEYS)
    if s["rl_problems"] not in RL_PROBLEMS:
        raise StageError("int", f"int.rl_problems {s['rl_problems']!r} is unknown; valid: "
                                f"{', '.join(RL_PROBLEMS)}")
    for key in ("n_problems", "k", "traces_per_problem", "n_continuations", "batch_size"):
        if not (isinstance(s[key], int) and s[key] >= 1):
            raise StageError("int", f"int.{key} must be a positive integer, got {s[key]!r}")
    if s["eval_seed"] == s["seed"]:
        raise StageError("int", "int.eval_seed must differ from int.seed: on the selection seed "
                                "the SFT policy fails every unsolved problem by construction")
    sft_cfg = training_config("int", s["sft"], extra_keys=tuple(ADAPTER_DEFAULTS))
    # the `rloo` stage's training keys, its own extras (problem counts, adapter) set aside
    rl = {k: v for k, v in section(params, "rloo").items() if k in RLOO_DEFAULTS}
    rl_cfg = rloo_config("int", {**rl, **(s["rloo"] or {})})
    return s, sft_cfg, rl_cfg


def train_patch(name: str, examples: list, cfg: dict, sec: dict, out: str) -> tuple:
    """SFT from the SFT policy -> out; (model, tok, summary). No examples: SFT unchanged."""
    model, tok = init_policy("int", SFT, sec)
    if not examples:
        print(f"[int] warning: no {name} examples; saving the SFT policy unchanged as {out}")
        untrained(SFT, out, f"int/{name}")
        return model, tok, {"trained": False, "examples": 0}
    live, stats = open_live(f"int/{name}"), {}
    model = train_sft(model, tok, examples, cfg, live=live, stats=stats)
    save_policy(model, tok, out)
    live.end()
    return model, tok, {"trained": True, **{k: stats[k] for k in TRAIN_SUMMARY}}


def main() -> None:
    params = load_params()
    configure(params)  # model.dtype for every load, sampler for saved policies
    s, sft_cfg, rl_cfg = configs(params)
    sampler = section(params, "sampler", required=SAMPLER_KEYS)
    style = section(params, "model", required=("prompt_style",))["prompt_style"]
    styles = section(params, "traces", required=("styles",))["styles"]
    require_inputs("int", SFT, RLOO, TRAIN)
    problems = read_jsonl(TRAIN)[:s["n_problems"]]
    gen = {"backend": sampler["backend"], "batch_size": s["batch_size"]}
    seconds, t = {}, time.time()

    # 1. who is unsolved
    ref = policy_ref(SFT)
    policy = load_model(ref.base, ref.adapter)
    print(f"[int] {len(problems)} train problems x {s['k']} samples from {SFT}", flush=True)
    records = evaluate_policy(policy, problems, s["k"], sampler, [s["seed"]], style, **gen)
    hits = solved_counts(records)
    unsolved = [p for p in problems if hits[p["id"]] == 0]
    by_problem = {pid: g.sort_values("sample").to_dict("records")
                  for pid, g in records.groupby("problem_id")}
    seconds["sample"], t = round(time.time() - t, 2), time.time()

    # 2. interventions + the filter
    rows = search_interventions(policy, unsolved, by_problem, s["n_continuations"],
                                s["traces_per_problem"], sampler, s["seed"], style, **gen)
    write_jsonl(OUT_ROWS, rows)
    kept = [r for r in rows if r["kept"]]
    print(f"[int] {len(unsolved)} unsolved; {len(rows)} interventions, {len(kept)} kept by the "
          "filter", flush=True)
    seconds["search"], t = round(time.time() - t, 2), time.time()
    del policy

    # 3. patch, 4. RL from the patched policy
    model, tok, patch = train_patch("sft", patch_examples(rows, style, s["filter"]), sft_cfg,
                                    s["sft"], INT_SFT)
    seconds["sft"], t = round(time.time() - t, 2), time.time()
    rl_set = unsolved if s["rl_problems"] == "unsolved" else problems
    if rl_set:
        live, stats = open_live("int/rloo"), {}
        ref_model = frozen_copy(INT_SFT) if rl_cfg["kl_coef"] > 0 else None
        model = train_rloo(model, tok, rl_set, rl_cfg, ref_model=ref_model, prompt_style=style,
                           live=live, stats=stats)
        save_policy(model, tok, INT)
        live.end()
        rl = {"trained": True, "n_problems": len(rl_set), **{k: stats[k] for k in RL_SUMMARY}}
    else:
        print(f"[int] warning: no problems to run RL on; saving {INT_SFT} unchanged as {INT}")
        untrained(INT_SFT, INT, "int/rloo")
        rl = {"trained": False, "n_problems": 0}
    del model
    seconds["rloo"], t = round(time.time() - t, 2), time.time()

    # 5. the full-solution baseline, same budget
    _, _, solver = train_patch("solver_sft", solver_examples(unsolved, style, styles, s["seed"]),
                               sft_cfg, s["sft"], SOLVER)
    seconds["solver_sft"], t = round(time.time() - t, 2), time.time()

    # 6. pass@K on the previously unsolved problems, fresh seed
    solved, passk = {}, {}
    for name, path in POLICIES.items():
        if not unsolved:
            passk[name] = {"pass@1": None, "pass@k": None, "solved": 0}
            continue
        rec = evaluate_policy(policy_ref(path), unsolved, s["k"], sampler, [s["eval_seed"]],
                              style, progress=False, **gen)
        c = solved_counts(rec)
        solved[name] = [c[p["id"]] > 0 for p in unsolved]
        passk[name] = {
            "pass@1": sum(pass_at_k(s["k"], c[p["id"]], 1) for p in unsolved) / len(unsolved),
            "pass@k": sum(solved[name]) / len(unsolved), "solved": int(sum(solved[name]))}
    seconds["eval"] = round(time.time() - t, 2)
    tests = {}
    for other in ("rloo", "int_solver_sft", "int_sft", "sft"):
        if unsolved:
            res = mcnemar(solved["int"], solved[other])
            tests[f"int_vs_{other}"] = {"b": res.b, "c": res.c, "pvalue": res.pvalue}

    metrics = {
        "n_problems": len(problems), "k": s["k"], "unsolved": len(unsolved),
        "unsolved_frac": len(unsolved) / len(problems),
        "interventions": {
            "found": len(rows), "kept": len(kept), "filter": bool(s["filter"]),
            "n_continuations": s["n_continuations"],
            "reasons": dict(sorted(Counter(r["reason"] for r in rows).items())),
            "kept_reasons": dict(sorted(Counter(r["reason"] for r in kept).items())),
            "continuation_success": (sum(r["continuations_correct"] for r in rows)
                                     / (len(rows) * s["n_continuations"]) if rows else None),
        },
        "sft": patch, "rloo": rl, "solver_sft": solver,
        "pass_at_k": passk, "mcnemar": tests,
    }
    write_metrics("int", metrics, headline.interventions)
    write_timing("int", {"seconds": round(sum(seconds.values()), 2), "phases": seconds})
    summary = ", ".join(f"{n} {v['pass@k']:.3f}" for n, v in passk.items() if v["pass@k"] is not None)
    print(f"[int] pass@{s['k']} on the {len(unsolved)} previously unsolved: {summary or 'n/a'}")
    print(f"[int] wrote {INT_SFT}, {INT}, {SOLVER}, {OUT_ROWS}, reports/metrics/int.json")


if __name__ == "__main__":
    main()
