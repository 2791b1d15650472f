"""Stage `base`: the base model every later stage starts from.

`model.base: tiny` builds the embedded Qwen2-architecture model and pre-trains all of its
parameters on a synthetic arithmetic corpus (not Countdown solutions), so it plays the role
of a pretrained base. Any other value (a hub id such as Qwen/Qwen2.5-0.5B, or a local model
dir) is passed through: data/models/base/REF.json names it and `model.resolve_base` follows it.

Also runs under `accelerate launch --multi_gpu --num_processes N stages/base.py`.
"""

import tempfile
from pathlib import Path

from countdown_rlvr import headline
from countdown_rlvr.config import Base, from_section
from countdown_rlvr.io import (
    StageError,
    atomic_path,
    empty_curves,
    load_params,
    section,
    write_json,
    write_metrics,
    write_timing,
)
from countdown_rlvr.model import (
    REF_FILE,
    TINY_PRESETS,
    build_tiny,
    configure,
    load_model,
    pretraining_corpus,
)
from countdown_rlvr.train.runtime import is_main_process
from countdown_rlvr.train.sft import fit_sft

OUT = Path("data/models/base")


def passthrough(base: str) -> None:
    """Record which existing model is the base; nothing is trained."""
    if not is_main_process():
        return
    path = Path(base)
    if path.exists() and not (path / "config.json").exists():
        raise StageError("base", f"model.base {base!r} is a local path without config.json; "
                                 "point it at a `save_pretrained` model dir or a hub id.")
    with atomic_path(OUT) as tmp:
        tmp.mkdir()
        write_json(tmp / REF_FILE, {"base": base})
    empty_curves("base", ("loss", "token_acc"))  # the declared curve dir: empty plots
    write_metrics("base", {"base": base, "trained": False,
                           "note": "pass-through: downstream stages load this model"},
                  headline.training)
    write_timing("base", {"seconds": 0.0})
    print(f"[base] wrote {OUT}/{REF_FILE} -> {base} (pass-through, nothing trained)")


def pretrain_tiny(m: dict, cfg: Base) -> None:
    if m["tiny_preset"] not in TINY_PRESETS:
        raise StageError("base", f"model.tiny_preset {m['tiny_preset']!r} is unknown; "
                                 f"valid: {', '.join(TINY_PRESETS)}")
    with tempfile.TemporaryDirectory() as tmp:  # each process builds the same seeded init
        model, tok = load_model(str(build_tiny(m["tiny_preset"], Path(tmp) / "init",
                                               seed=m["seed"])))
    docs = pretraining_corpus(cfg.corpus_size, seed=cfg.seed, facts_frac=cfg.facts_frac)
    fit_sft("base", model, tok, [("", d) for d in docs], cfg, OUT,
                 {"base": "tiny", "trained": True, "tiny_preset": m["tiny_preset"],
                  "corpus_docs": len(docs)})


def main() -> None:
    params = load_params()
    configure(params)  # model.dtype for every load, sampler for saved policies
    m = section(params, "model", required=("base", "tiny_preset", "seed"))
    if not isinstance(m["base"], str) or not m["base"]:
        raise StageError("base", "model.base must be `tiny` or a hub id / local model path.")
    if m["base"] != "tiny":
        passthrough(m["base"])
        return
    pretrain_tiny(m, from_section(Base, "base", params, "base"))  # fails before any work


if __name__ == "__main__":
    main()
