"""Stage `problems`: train / test / OOD / unseen Countdown problem sets from the seeded
generator, pairwise disjoint. `unseen` is the pool no stage trains on (no traces, pairs or RL
prompts come from it): the interventions stage selects its "unsolved" problems there, so
transfer is measured on problems the student has never seen in training."""

import os
from collections import Counter

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import io
from countdown_rlvr.core.config import from_section
from countdown_rlvr.core.data_config import Problems
from countdown_rlvr.task import generate_problems, problem_key

OUT = "data/problems"


def main() -> None:
    cfg = from_section(Problems, "problems", io.load_params(), "problems")
    common = {"number_range": tuple(cfg.number_range)}
    try:
        # test first, so the held-out set does not depend on the train size
        test = generate_problems(cfg.n_test, cfg.seed, "test", tuple(cfg.n_numbers),
                                 target_range=tuple(cfg.target_range), **common)
        seen = {problem_key(q.numbers, q.target) for q in test}
        ood = generate_problems(cfg.n_ood, cfg.seed, "ood", tuple(cfg.ood_n_numbers),
                                target_range=tuple(cfg.ood_target_range), exclude=seen, **common)
        seen |= {problem_key(q.numbers, q.target) for q in ood}
        unseen = generate_problems(cfg.n_unseen, cfg.seed, "unseen", tuple(cfg.n_numbers),
                                   target_range=tuple(cfg.target_range), exclude=seen, **common)
        seen |= {problem_key(q.numbers, q.target) for q in unseen}
        train = generate_problems(cfg.n_train, cfg.seed, "train", tuple(cfg.n_numbers),
                                  target_range=tuple(cfg.target_range), exclude=seen,
                                  count_first=cfg.count_train_solutions, **common)
    except (ValueError, TypeError) as exc:
        raise io.StageError("problems", f"{exc} (check the `problems:` section of params.yaml)") \
            from exc

    metrics = {}
    for name, probs in (("train", train), ("test", test), ("ood", ood), ("unseen", unseen)):
        io.write_jsonl(f"{OUT}/{name}.jsonl", [q.to_dict() for q in probs])
        sols = [q.n_solutions for q in probs if q.n_solutions is not None]
        metrics[name] = {
            "count": len(probs),
            "operand_mix": {f"n{k}": v for k, v in sorted(Counter(q.n_numbers for q in probs).items())},
            "solutions": {
                "counted": len(sols),
                "single_solution_frac": sum(s == 1 for s in sols) / len(sols) if sols else None,
                "median": sorted(sols)[len(sols) // 2] if sols else None,
                "mean": sum(sols) / len(sols) if sols else None,
            },
        }
        print(f"[problems] wrote {OUT}/{name}.jsonl ({len(probs)} problems)")
    io.write_details("problems", metrics)
    print(f"[problems] wrote {io.DETAILS}/problems.json")


if __name__ == "__main__":
    main()
