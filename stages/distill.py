"""Stage `distill@<condition>` (S0 §3.4): internalize one repair condition into a no-feedback
policy. SFT from the SFT policy on (plain solve prompt, successful repaired completion)
pairs of that condition; `evaluate` then samples it without feedback like any policy.

    python stages/distill.py <condition> <seed>   # one of distill.conditions (R) and of
                                                  # replicates.repair; or one of
                                                  # distill.first_replicate_conditions (F1 ...
                                                  # Fshuf) and replicates.repair's first seed
                                                  # (`distill_first@`)

A condition without a single successful repair trains nothing: the SFT policy is saved
unchanged, the metrics say `trained: false, examples: 0`, and the pipeline goes on.
Replicate <seed> distils replicate <seed>'s repairs of its own SFT policy, whose attempts are
failures on train problems (`repair@<seed>`'s pool): no example is a problem `evaluate` scores
the distilled policy on. Writes
data/models/distill_<condition>/r<seed>, reports/{details,timings}/distill/<condition>/
r<seed>.json and dvclive/distill/<condition>/r<seed>.

The skill check (analysis.checks.distilled): after training, the distilled policy and the SFT
policy are each sampled `distill.skill_samples` times with the plain solve prompt (no
feedback), the fixed evaluation sampler and one fixed seed, on (up to `distill.skill_problems`
of) the problems whose successful repairs it trained on; their pass@1 goes into the details
as `skill_distilled` / `skill_sft`. Self-distillation claims the policy internalized what the
repairs found: a falling loss shows it fitted them, this asks whether it now solves those
problems without the feedback, on train problems, never on the test split.
"""

import json
import os
import sys
import time
from pathlib import Path

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import io
from countdown_rlvr.core.config import eval_sampler, from_section, prompt_style
from countdown_rlvr.core.evaluate_config import Evaluate
from countdown_rlvr.core.replicates import model_dir, run_name, sft_dir, tag
from countdown_rlvr.core.research_config import Distill
from countdown_rlvr.eval.scoring import SKILL_SEED, skill
from countdown_rlvr.model.policy import load_replicate_stage, policy_ref
from countdown_rlvr.model.untrained import untrained
from countdown_rlvr.research.repair import (
    CONDITIONS,
    distill_examples,
    distilled_problems,
    read_repairs,
)
from countdown_rlvr.train.runtime import init_policy, is_main_process
from countdown_rlvr.train.sft import fit_sft


def main(argv: list[str]) -> None:
    params, cfg, r = load_replicate_stage("distill", Distill,
                                          argv[1] if len(argv) == 2 else None, chain="repair")
    conds = cfg.all_conditions()
    if argv[0] not in conds or argv[0] not in CONDITIONS:
        raise io.StageError("distill", f"usage: python stages/distill.py <condition> <seed> with "
                                       f"<condition> one of distill.conditions / "
                                       f"distill.first_replicate_conditions {conds} (valid: "
                                       f"{', '.join(CONDITIONS)})")
    cond = argv[0]
    policy, repairs_file = sft_dir("distill", params, r), f"data/repair/{tag(r)}/repairs.parquet"
    style = prompt_style("distill", params)
    sampler = eval_sampler("distill", params)  # the skill check's, checked before any work
    gen_batch = from_section(Evaluate, "distill", params, "evaluate").batch_size
    io.require_inputs("distill", policy, repairs_file)
    repairs = read_repairs(repairs_file)
    if cond not in set(repairs["condition"]):
        raise io.StageError("distill", f"{repairs_file} has no {cond} repairs; add {cond} to "
                                       f"repair.conditions and run `dvc repro repair@{r}`")
    examples = distill_examples(repairs, cond, style)
    name, out = run_name(f"distill/{cond}", r), model_dir(f"distill_{cond}", r)
    info = {"condition": cond, "label": CONDITIONS[cond], "replicate": r,
            "successful_samples": int(repairs[(repairs["condition"] == cond)]["correct"].sum())}
    if not examples:
        t0 = time.time()
        print(f"[{name}] warning: no successful {cond} repair; saving the SFT policy unchanged "
              f"as {out}")
        untrained(policy, out, name, same_as_source=True,
                  reason=f"no successful {cond} repair to distil")
        io.write_details(name, {**info, "trained": False, "examples": 0})
        io.write_timing(name, {"seconds": round(time.time() - t0, 2)})
        return
    problems = distilled_problems(repairs, cond)[:cfg.skill_problems]
    print(f"[{name}] {len(examples)} distinct successful repairs -> no-feedback SFT", flush=True)
    model, tok = init_policy("distill", policy, cfg)
    fit_sft(name, model, tok, examples, cfg, out, {**info, "trained": True}, section="distill")
    if not is_main_process():
        return
    print(f"[{name}] skill check: SFT and distilled policy on {len(problems)} problems of the "
          f"distilled repairs x {cfg.skill_samples} samples, no feedback", flush=True)

    def skill_of(path: str) -> float:
        return round(skill(policy_ref(path), problems, cfg.skill_samples, sampler, SKILL_SEED,
                           style, gen_batch), 4)

    sft, distilled = skill_of(policy), skill_of(out)
    detail = Path(f"{io.DETAILS}/{name}.json")  # fit_sft wrote it; the check joins it
    io.write_details(name, {**json.loads(detail.read_text()), "skill_problems": len(problems),
                            "skill_samples": cfg.skill_samples, "skill_sft": sft,
                            "skill_distilled": distilled})
    print(f"[{name}] skill check: pass@1 SFT {sft}, distilled {distilled}")


if __name__ == "__main__":
    main(sys.argv[1:])
