"""Stage `teacher`: the model whose samples become teacher traces and OPD targets.

`teacher.base: tiny` builds the larger tiny preset and trains all of its parameters on the
solver traces, each prompt carrying its trace's strategy hint, so the teacher can be
steered by the rotated strategy prompts of `teacher_traces` (S1 §3.1.1). Any other value
(a hub id such as Qwen/Qwen2.5-1.5B-Instruct, or a local model dir) is passed through.
"""

import tempfile
from pathlib import Path

from countdown_rlvr.io import (
    StageError,
    atomic_path,
    load_params,
    read_jsonl,
    require_inputs,
    section,
    write_json,
)
from countdown_rlvr.model import REF_FILE, TINY_PRESETS, build_tiny, load_model
from countdown_rlvr.traces import strategy_prompt
from countdown_rlvr.train.run import fit_and_save, training_config

SRC, OUT = "data/traces/solver.jsonl", Path("data/models/teacher")
EXTRA = ("base", "tiny_preset", "init_seed")


def main() -> None:
    t = section(load_params(), "teacher", required=EXTRA)
    if t["base"] != "tiny":
        with atomic_path(OUT) as tmp:
            tmp.mkdir()
            write_json(tmp / REF_FILE, {"base": t["base"]})
        write_json("reports/metrics/teacher.json", {"base": t["base"], "trained": False})
        print(f"[teacher] wrote {OUT}/{REF_FILE} -> {t['base']} (pass-through)")
        return
    if t["tiny_preset"] not in TINY_PRESETS:
        raise StageError("teacher", f"teacher.tiny_preset {t['tiny_preset']!r} is unknown; "
                                    f"valid: {', '.join(TINY_PRESETS)}")
    cfg = training_config("teacher", t, extra_keys=EXTRA)
    require_inputs("teacher", SRC)
    traces = read_jsonl(SRC)
    examples = [(strategy_prompt(r["prompt"], r["strategy"]), r["completion"]) for r in traces]
    with tempfile.TemporaryDirectory() as tmp:
        model, tok = load_model(str(build_tiny(t["tiny_preset"], Path(tmp) / "init", seed=t["init_seed"])))
    fit_and_save("teacher", model, tok, examples, cfg, OUT,
                 {"base": "tiny", "trained": True, "tiny_preset": t["tiny_preset"]})


if __name__ == "__main__":
    main()
