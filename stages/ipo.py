"""Stage `ipo@<source>-<seed>`: IPO from the SFT policy on one pairs source (S1 §3.1.3, Table 1).

    python stages/ipo.py <source> <replicate seed>   # an entry of `ipo.sources`, of `replicates.ipo`

DVC runs one stage per entry of `ipo.sources` and seed of `replicates.ipo` (matrix), so S1's source
comparison comes out of one `dvc repro`, once per training draw; a source no seed claim uses
(`ipo.first_replicate_sources`: base) runs as `ipo_first@<source>-<seed>` for the first seed
of `replicates.ipo` only. The reference is the SFT policy, frozen. Also runs under
`accelerate launch --multi_gpu --num_processes N stages/ipo.py <source> <seed>`.

The skill check (analysis.checks.margin_rises): after training, the SFT policy and the IPO
policy are each sampled `ipo.skill_samples` times on the `ipo.skill_problems` train problems
that follow the pairs' (the first `pairs.n_problems`, which IPO trains on), with the fixed
evaluation sampler and one fixed seed; their pass@1 goes into the details as `skill_sft` /
`skill_ipo`. IPO can widen its preference margin and still lose SFT's ability to solve; this
asks the question the seed's claim rests on, on train problems, never on the test split.
"""

import os
import sys

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import inputs, io
from countdown_rlvr.core.config import eval_sampler, from_section, prompt_style
from countdown_rlvr.core.data_config import Pairs
from countdown_rlvr.core.evaluate_config import Evaluate
from countdown_rlvr.core.ipo_config import IPO
from countdown_rlvr.core.replicates import model_dir, run_name, sft_dir
from countdown_rlvr.data.pairs import SOURCES
from countdown_rlvr.eval.scoring import SKILL_SEED, skill
from countdown_rlvr.model.policy import load_replicate_stage, policy_ref
from countdown_rlvr.train.ipo import train_ipo
from countdown_rlvr.train.runtime import fit_and_save, frozen_copy, init_policy

PAIRS, TRAIN = "data/pairs/pairs.jsonl", "data/problems/train.jsonl"
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
               "val_pairs", "val_margin_before", "val_margin_after", "val_pref_acc_after",
               "skill_problems", "skill_samples", "skill_margin", "skill_sft", "skill_ipo")


def skill_problems(train: list[dict], n_pairs: int | None, n: int) -> list[dict]:
    """The `n` train problems right after the first `n_pairs` (those the pairs, and so IPO,
    are built from): train problems IPO never saw. StageError naming the fix when the split
    has fewer."""
    if n_pairs is None:
        raise io.StageError("ipo", f"`pairs.n_problems` is null (pairs from every train problem): "
                                   f"the skill check needs {n} train problems IPO does not train "
                                   "on after them; set pairs.n_problems")
    if n_pairs + n > len(train):
        raise io.StageError("ipo", f"the skill check needs the {n} train problems after the "
                                   f"first {n_pairs} (`pairs.n_problems`), but {TRAIN} has "
                                   f"{len(train)}; raise problems.n_train to at least "
                                   f"{n_pairs + n}, or lower ipo.skill_problems / "
                                   "pairs.n_problems")
    return train[n_pairs:n_pairs + n]


def main(argv: list[str]) -> None:
    params, cfg, r = load_replicate_stage("ipo", IPO, argv[1] if len(argv) == 2 else None,
                                          chain="ipo")
    sft = sft_dir("ipo", params, r)
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
    io.require_inputs("ipo", PAIRS, sft, TRAIN)
    pairs = [p for p in io.read_jsonl(PAIRS) if p["source"] == source]
    if not pairs:
        raise io.StageError("ipo", f"{PAIRS} has no `{source}` pairs (see reports/details/pairs.json); "
                                   f"remove {source} from `ipo.sources`, or {EMPTY_HINT[source]}")
    # the skill check's inputs, checked before any training
    held_out = skill_problems(inputs.read_rows("ipo", TRAIN, params),
                              from_section(Pairs, "ipo", params, "pairs").n_problems,
                              cfg.skill_problems)
    sampler, style = eval_sampler("ipo", params), prompt_style("ipo", params)
    gen_batch = from_section(Evaluate, "ipo", params, "evaluate").batch_size
    out = model_dir(f"ipo_{source}", r)

    def skill_of(path: str) -> float:
        return round(skill(policy_ref(path), held_out, cfg.skill_samples, sampler, SKILL_SEED,
                           style, gen_batch), 4)

    model, tok = init_policy("ipo", sft, cfg)
    ref_model = frozen_copy(sft)

    def metrics(model, stats: dict) -> dict:
        # after the policy is saved (main process only): sample it and SFT the way `evaluate` does
        print(f"[ipo] skill check: SFT and IPO on train problems {held_out[0]['id']} .. "
              f"{held_out[-1]['id']} x {cfg.skill_samples} samples", flush=True)
        stats.update(skill_problems=len(held_out), skill_samples=cfg.skill_samples,
                     skill_margin=cfg.skill_margin, skill_sft=skill_of(sft), skill_ipo=skill_of(out))
        print(f"[ipo] skill check: pass@1 SFT {stats['skill_sft']}, IPO {stats['skill_ipo']}",
              flush=True)
        return {"source": source, "replicate": r, "pairs": len(pairs), "beta": cfg.beta, "rpo_alpha": cfg.rpo_alpha,
                "adapter": cfg.adapter, **{k: round(v, 4) if isinstance(v, float) else v
                                           for k, v in stats.items() if k in METRIC_KEYS}}

    fit_and_save(run_name(f"ipo/{source}", r), tok, out,
                 lambda live, stats: train_ipo(model, ref_model, tok, pairs, cfg, live, stats),
                 metrics, config=cfg)


if __name__ == "__main__":
    main(sys.argv[1:])
