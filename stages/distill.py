"""Stage `distill@<condition>` (S0 §3.4): internalize one repair condition into a no-feedback
policy. SFT from the SFT policy on (plain solve prompt, successful repaired completion)
pairs of that condition; `evaluate` then samples it without feedback like any policy.

    python stages/distill.py <condition>     # one of distill.conditions (F1 ... Fshuf, R)

A condition without a single successful repair trains nothing: the SFT policy is saved
unchanged, the metrics say `trained: false, examples: 0`, and the pipeline goes on.
Writes data/models/distill/<condition>, reports/metrics/distill/<condition>.json,
reports/timings/distill/<condition>.json, dvclive/distill/<condition>.
"""

import sys
import time

from countdown_rlvr import headline, io
from countdown_rlvr.config import Distill, prompt_style
from countdown_rlvr.model import load_stage
from countdown_rlvr.research import untrained
from countdown_rlvr.research.repair import CONDITIONS, distill_examples, read_repairs
from countdown_rlvr.train.runtime import init_policy
from countdown_rlvr.train.sft import fit_sft

POLICY, REPAIRS = "data/models/sft", "data/repair/repairs.parquet"


def main(argv: list[str]) -> None:
    params, cfg = load_stage("distill", Distill)  # fails before any work
    conds = cfg.conditions
    if len(argv) != 1 or argv[0] not in conds or argv[0] not in CONDITIONS:
        raise io.StageError("distill", f"usage: python stages/distill.py <condition> with <condition> "
                                       f"one of distill.conditions {conds} (valid: {', '.join(CONDITIONS)})")
    cond = argv[0]
    style = prompt_style("distill", params)
    io.require_inputs("distill", POLICY, REPAIRS)
    repairs = read_repairs(REPAIRS)
    if cond not in set(repairs["condition"]):
        raise io.StageError("distill", f"{REPAIRS} has no {cond} repairs; add {cond} to "
                                       "repair.conditions and run `dvc repro repair`")
    examples = distill_examples(repairs, cond, style)
    name, out = f"distill/{cond}", f"data/models/distill/{cond}"
    info = {"condition": cond, "label": CONDITIONS[cond],
            "successful_samples": int(repairs[(repairs["condition"] == cond)]["correct"].sum())}
    if not examples:
        t0 = time.time()
        print(f"[{name}] warning: no successful {cond} repair; saving the SFT policy unchanged "
              f"as {out}")
        untrained(POLICY, out, name)
        io.write_metrics(name, {**info, "trained": False, "examples": 0}, headline.training)
        io.write_timing(name, {"seconds": round(time.time() - t0, 2)})
        return
    print(f"[{name}] {len(examples)} distinct successful repairs -> no-feedback SFT", flush=True)
    model, tok = init_policy("distill", POLICY, cfg)
    fit_sft(name, model, tok, examples, cfg, out, {**info, "trained": True})


if __name__ == "__main__":
    main(sys.argv[1:])
