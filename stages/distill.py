"""Stage `distill@<condition>` (S0 §3.4): internalize one repair condition into a no-feedback
policy. SFT from the SFT policy on (plain solve prompt, successful repaired completion)
pairs of that condition; `evaluate` then samples it without feedback like any policy.

    python stages/distill.py <condition> <seed>   # one of distill.conditions (R) and of
                                                  # replicates.seeds; or one of
                                                  # distill.first_replicate_conditions (F1 ...
                                                  # Fshuf) and the first seed (`distill_first@`)

A condition without a single successful repair trains nothing: the SFT policy is saved
unchanged, the metrics say `trained: false, examples: 0`, and the pipeline goes on.
Replicate <seed> distils replicate <seed>'s repairs of its own SFT policy, whose attempts are
failures on train problems (`repair@<seed>`'s pool): no example is a problem `evaluate` scores
the distilled policy on. Writes
data/models/distill_<condition>/r<seed>, reports/{details,metrics,timings}/distill/<condition>/
r<seed>.json and dvclive/distill/<condition>/r<seed>.
"""

import sys
import time

from countdown_rlvr.core import io
from countdown_rlvr.core.config import Distill, prompt_style
from countdown_rlvr.core.replicates import model_dir, run_name, tag
from countdown_rlvr.model.policy import load_replicate_stage
from countdown_rlvr.research.repair import CONDITIONS, distill_examples, read_repairs
from countdown_rlvr.train.runtime import init_policy
from countdown_rlvr.train.sft import fit_sft
from countdown_rlvr.train.untrained import untrained


def main(argv: list[str]) -> None:
    params, cfg, r = load_replicate_stage("distill", Distill, argv[1] if len(argv) == 2 else None)
    conds = cfg.all_conditions()
    if argv[0] not in conds or argv[0] not in CONDITIONS:
        raise io.StageError("distill", f"usage: python stages/distill.py <condition> <seed> with "
                                       f"<condition> one of distill.conditions / "
                                       f"distill.first_replicate_conditions {conds} (valid: "
                                       f"{', '.join(CONDITIONS)})")
    cond = argv[0]
    policy, repairs_file = model_dir("sft", r), f"data/repair/{tag(r)}/repairs.parquet"
    style = prompt_style("distill", params)
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
    print(f"[{name}] {len(examples)} distinct successful repairs -> no-feedback SFT", flush=True)
    model, tok = init_policy("distill", policy, cfg)
    fit_sft(name, model, tok, examples, cfg, out, {**info, "trained": True})


if __name__ == "__main__":
    main(sys.argv[1:])
