"""Stage `ipo@<source>-<seed>`: IPO from the SFT policy on one pairs source (S1 §3.1.3, Table 1).

    python stages/ipo.py <source> <replicate seed>   # an entry of `ipo.sources`, of `replicates.seeds`

DVC runs one stage per entry of `ipo.sources` and replicate seed (matrix), so S1's source
comparison comes out of one `dvc repro`, once per training draw; a source no seed claim uses
(`ipo.first_replicate_sources`: base) runs as `ipo_first@<source>-<seed>` for the first seed
only. The reference is the SFT policy, frozen. Also runs under
`accelerate launch --multi_gpu --num_processes N stages/ipo.py <source> <seed>`.
"""

import sys

from countdown_rlvr.core import io
from countdown_rlvr.core.config import IPO
from countdown_rlvr.core.replicates import model_dir, run_name
from countdown_rlvr.data.pairs import SOURCES
from countdown_rlvr.model.policy import load_replicate_stage
from countdown_rlvr.train.ipo import train_ipo
from countdown_rlvr.train.runtime import fit_and_save, frozen_copy, init_policy

PAIRS = "data/pairs/pairs.jsonl"
# why a source can come out empty, and which params make it non-empty
EMPTY_HINT = {
    "scripted": "raise traces.n_problems / pairs.n_problems",
    "easyneg": "the teacher needs problems with both a correct and a wrong sample: raise "
               "teacher_traces.n_problems / pairs.n_problems or train the teacher longer",
    "hardneg": "the teacher needs problems with a correct sample and a WRONG_TARGET near miss: "
               "raise teacher_traces.n_problems / pairs.n_problems or train the teacher longer",
    "base": "raise pairs.base_k / pairs.n_problems",
}
METRIC_KEYS = ("steps", "planned_steps", "stopped_by", "epochs", "pairs_used", "loss_first",
               "loss_final", "ipo_final", "margin_first", "margin_final", "pref_acc_first",
               "pref_acc_final", "chosen_reward_final", "rejected_reward_final", "chosen_nll_final",
               "val_pairs", "val_margin_before", "val_margin_after", "val_pref_acc_after")


def main(argv: list[str]) -> None:
    _, cfg, r = load_replicate_stage("ipo", IPO, argv[1] if len(argv) == 2 else None)
    sft = model_dir("sft", r)
    sources = cfg.all_sources()
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise io.StageError("ipo", f"unknown pair source(s) {unknown} in `ipo.sources` / "
                                   f"`ipo.first_replicate_sources`; valid: {', '.join(SOURCES)}; "
                                   "remove or rename them in params.yaml")
    if argv[0] not in sources:
        raise io.StageError("ipo", f"source {argv[0]!r} is not in `ipo.sources` or "
                                   f"`ipo.first_replicate_sources`; usage: python stages/ipo.py "
                                   f"<source> <seed> with <source> one of {sources}")
    source = argv[0]
    io.require_inputs("ipo", PAIRS, sft)
    pairs = [p for p in io.read_jsonl(PAIRS) if p["source"] == source]
    if not pairs:
        raise io.StageError("ipo", f"{PAIRS} has no `{source}` pairs (see reports/metrics/pairs.json); "
                                   f"remove {source} from `ipo.sources`, or {EMPTY_HINT[source]}")

    model, tok = init_policy("ipo", sft, cfg)
    ref_model = frozen_copy(sft)

    def metrics(model, stats: dict) -> dict:
        return {"source": source, "replicate": r, "pairs": len(pairs), "beta": cfg.beta, "rpo_alpha": cfg.rpo_alpha,
                "adapter": cfg.adapter, **{k: round(v, 4) if isinstance(v, float) else v
                                           for k, v in stats.items() if k in METRIC_KEYS}}

    fit_and_save(run_name(f"ipo/{source}", r), tok, model_dir(f"ipo_{source}", r),
                 lambda live, stats: train_ipo(model, ref_model, tok, pairs, cfg, live, stats),
                 metrics, config=cfg)


if __name__ == "__main__":
    main(sys.argv[1:])
