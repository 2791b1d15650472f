"""Stage `teacher`: the model whose samples become teacher traces and OPD targets.

`teacher.base: tiny` trains all parameters of a tiny model on the solver traces. A share
`teacher.hint_frac` of the prompts carry the trace's strategy hint, so the teacher can be
steered by the rotated strategy prompts of `teacher_traces` (S1 §3.1.1); the rest are the
plain prompt, so the teacher is also evaluated (`evaluate@teacher`) with the prompt and
sampler every policy gets. `teacher.init: base` starts from the
pre-trained base (which already copies operands from its prompt) and trains longer than the
student's SFT; `teacher.init: scratch` builds the larger `teacher.tiny_preset` from random
weights. Any other `teacher.base` (a hub id such as Qwen/Qwen2.5-1.5B-Instruct, or a local
model dir) is passed through.
"""

import random
import tempfile
from pathlib import Path

from countdown_rlvr import headline
from countdown_rlvr.config import Teacher, from_section
from countdown_rlvr.io import (
    StageError,
    atomic_path,
    empty_curves,
    load_params,
    read_jsonl,
    require_inputs,
    write_json,
    write_metrics,
)
from countdown_rlvr.model import REF_FILE, TINY_PRESETS, build_tiny, configure, load_model
from countdown_rlvr.traces import strategy_prompt
from countdown_rlvr.train.sft import fit_sft

SRC, BASE, OUT = "data/traces/solver.jsonl", "data/models/base", Path("data/models/teacher")


def main() -> None:
    params = load_params()
    configure(params)  # model.dtype for every load, sampler for saved policies
    t = from_section(Teacher, "teacher", params, "teacher")  # fails before any work
    if t.base != "tiny":
        with atomic_path(OUT) as tmp:
            tmp.mkdir()
            write_json(tmp / REF_FILE, {"base": t.base})
        empty_curves("teacher", ("loss", "token_acc"))  # the declared curve dir: empty plots
        write_metrics("teacher", {"base": t.base, "trained": False}, headline.training)
        print(f"[teacher] wrote {OUT}/{REF_FILE} -> {t.base} (pass-through)")
        return
    if t.tiny_preset not in TINY_PRESETS:
        raise StageError("teacher", f"teacher.tiny_preset {t.tiny_preset!r} is unknown; "
                                    f"valid: {', '.join(TINY_PRESETS)}")
    require_inputs("teacher", SRC, BASE)
    traces = read_jsonl(SRC)
    rng = random.Random(t.seed)
    examples = [(strategy_prompt(r["prompt"], r["strategy"]) if rng.random() < t.hint_frac
                 else r["prompt"], r["completion"]) for r in traces]
    if t.init == "base":
        model, tok = load_model(BASE)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            model, tok = load_model(str(build_tiny(t.tiny_preset, Path(tmp) / "init", seed=t.init_seed)))
    fit_sft("teacher", model, tok, examples, t, OUT,
            {"base": "tiny", "trained": True, "init": t.init,
             "tiny_preset": t.tiny_preset if t.init == "scratch" else None})


if __name__ == "__main__":
    main()
