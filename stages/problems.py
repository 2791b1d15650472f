"""Stage `problems`: train / dev / test / OOD / unseen Countdown problem sets from the seeded
generator, pairwise disjoint.

- `test` is the confirmatory split: drawn from `problems.test_seed`, a seed no pilot has read,
  and read by the evaluations the claims are decided on, never by a pilot or a tuning run.
- `dev` is the development split: the previous confirmatory run's test split, drawn again from
  its seed (`problems.dev_seed`) and renamed `dev-00000`, .... Pilots and tuning measure there,
  and the policies of `evaluate.dev_policies` are sampled on it too. So each regeneration's
  plan is made on the problems the run before it decided on, and decides on new ones.
- The first runs' test split (the stream "test" of `problems.seed`, the dev split before
  `dev_seed`) stays out of every split: pilots tuned on it.
- `unseen` is the pool no stage trains on (no traces, pairs or RL prompts come from it): the
  interventions stage selects its "unsolved" problems there, so transfer is measured on
  problems the student has never seen in training. Nothing else reads it.

Each split excludes the ones drawn before it, in this order: the first runs' test split, dev,
test, ood, unseen, train. So
the test split depends on neither the train size nor the interventions' pool."""

import os
from collections import Counter
from dataclasses import replace

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.core import io
from countdown_rlvr.core.config import from_section
from countdown_rlvr.core.data_config import Problems
from countdown_rlvr.core.inputs import SPLITS  # the files written, in this order
from countdown_rlvr.task.generate import generate_problems, problem_key

OUT = "data/problems"


def renamed(problems: list, split: str) -> list:
    """`problems` as split `split`: ids `<split>-00000`, ... in order; numbers, target and
    solution unchanged."""
    return [replace(q, id=f"{split}-{i:05d}", split=split) for i, q in enumerate(problems)]


def make_splits(cfg: Problems) -> dict[str, list]:
    """Every split, pairwise disjoint: each excludes the problems of the ones before it."""
    common = {"number_range": tuple(cfg.number_range)}
    mix = {"n_numbers": tuple(cfg.n_numbers), "target_range": tuple(cfg.target_range)}
    # the test splits of the runs before: the first runs' (stream "test" of `seed`), which
    # their pilots read, then the previous run's (`dev_seed`, drawn as it was then: excluding
    # the first), the development split now
    first = generate_problems(cfg.n_dev, cfg.seed, "test", **mix, **common)
    seen = {problem_key(q.numbers, q.target) for q in first}
    dev = renamed(generate_problems(cfg.n_dev, cfg.dev_seed, "test", **mix, exclude=seen,
                                    **common), "dev")
    seen |= {problem_key(q.numbers, q.target) for q in dev}
    test = generate_problems(cfg.n_test, cfg.test_seed, "test", **mix, exclude=seen, **common)
    seen |= {problem_key(q.numbers, q.target) for q in test}
    ood = generate_problems(cfg.n_ood, cfg.seed, "ood", tuple(cfg.ood_n_numbers),
                            target_range=tuple(cfg.ood_target_range), exclude=seen, **common)
    seen |= {problem_key(q.numbers, q.target) for q in ood}
    unseen = generate_problems(cfg.n_unseen, cfg.seed, "unseen", **mix, exclude=seen, **common)
    seen |= {problem_key(q.numbers, q.target) for q in unseen}
    train = generate_problems(cfg.n_train, cfg.seed, "train", **mix, exclude=seen,
                              count_first=cfg.count_train_solutions, **common)
    splits = {"train": train, "dev": dev, "test": test, "ood": ood, "unseen": unseen}
    return {name: splits[name] for name in SPLITS}


def split_metrics(probs: list) -> dict:
    sols = [q.n_solutions for q in probs if q.n_solutions is not None]
    return {
        "count": len(probs),
        "operand_mix": {f"n{k}": v for k, v in sorted(Counter(q.n_numbers for q in probs).items())},
        "solutions": {
            "counted": len(sols),
            "single_solution_frac": sum(s == 1 for s in sols) / len(sols) if sols else None,
            "median": sorted(sols)[len(sols) // 2] if sols else None,
            "mean": sum(sols) / len(sols) if sols else None,
        },
    }


def main() -> None:
    cfg = from_section(Problems, "problems", io.load_params(), "problems")
    try:
        splits = make_splits(cfg)
    except (ValueError, TypeError) as exc:
        raise io.StageError("problems", f"{exc} (check the `problems:` section of params.yaml)") \
            from exc
    metrics = {}
    for name, probs in splits.items():
        io.write_jsonl(f"{OUT}/{name}.jsonl", [q.to_dict() for q in probs])
        metrics[name] = split_metrics(probs)
        print(f"[problems] wrote {OUT}/{name}.jsonl ({len(probs)} problems)")
    io.write_details("problems", metrics)
    print(f"[problems] wrote {io.DETAILS}/problems.json")


if __name__ == "__main__":
    main()
