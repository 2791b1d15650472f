"""`evaluate`: which policies are sampled, how, and what compare, the report and the headline
read (the rules: core.config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from .config import POS, Ks, MaybeNames, Names, Pos, Reward, Seeds, Splits, name


def samples_map(v: Any) -> str | None:
    """A policy -> samples per prompt mapping (`n_by_policy`); None when allowed."""
    ok = isinstance(v, dict) and all(name(k) is None and POS(x) is None for k, x in v.items())
    return None if ok else "a mapping of policy names to samples per prompt (integers >= 1)"


@dataclass(frozen=True)
class Evaluate:
    """`evaluate`: samples of every policy on the held-out splits.

    Which replicated policies are sampled follows from the stages that train them (each
    training stage has its evaluation, `evaluate_<stage>`, over the same matrix); the lists
    below say which of them compare, the report and the headline read (and `int_policies`,
    which of the int stage's policies are sampled at all)."""
    shared: MaybeNames  # trained once (fixed inputs): data/models/<name>
    policies: Names  # trained per replicate: data/models/<name>/r<seed>, every seed of its chain
    controls: MaybeNames  # trained per replicate like `policies`, shown in the report's tables,
    # not in the DVC headline (a claim's control arms: int_sft, int_plain_rl)
    first_replicate_only: MaybeNames  # secondary policies: only its chain's first seed
    int_policies: MaybeNames  # the int stage's policies sampled on the test split (opt-in)
    dev_policies: MaybeNames  # also sampled on the development split (pilots' preconditions)
    splits: Splits  # data/problems/<split>.jsonl files
    n: Pos  # samples per prompt and seed
    n_by_policy: Annotated[dict[str, int], samples_map]  # a policy's own n, above `n`: the
    # arms of pass@k claims, whose residual is mostly sampling noise at n = k; {} = none
    seeds: Seeds  # sampling seeds
    reward: Reward  # reward column
    batch_size: Pos  # sequences per generate call
    ks: Ks  # pass@k
    budgets: Ks  # best-of-N budgets

    def __post_init__(self):
        names = [*self.shared, *self.policies, *self.controls, *self.first_replicate_only]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"evaluate lists {twice} more than once; a policy is either "
                             "shared, replicated (policies, controls) or first_replicate_only")
        if other := [p for p in self.dev_policies if p not in names]:
            raise ValueError(f"evaluate.dev_policies names {other}, which no evaluate list "
                             "(shared, policies, controls, first_replicate_only) samples; add "
                             "them to one of those or remove them from evaluate.dev_policies")
        if other := sorted(set(self.n_by_policy) - set(names)):
            raise ValueError(f"evaluate.n_by_policy names {other}, which no evaluate list "
                             "samples; add them to one or remove them from n_by_policy")
        if fewer := sorted(p for p, n in self.n_by_policy.items() if n < self.n):
            raise ValueError(f"evaluate.n_by_policy gives {fewer} fewer samples than "
                             f"evaluate.n ({self.n}): it only raises a policy's samples (every "
                             "k of ks and compare.ks must stay within each policy's n)")
        # metrics.summarize can only report k <= n (samples per prompt and seed) and would skip
        # the rest without a word: the report would then lack a column the params asked for
        for key, what in (("ks", "pass@k"), ("budgets", "best-of-N")):
            values = getattr(self, key)
            if over := [v for v in values if v > self.n]:
                raise ValueError(f"evaluate.{key} {values} has {over} > evaluate.n ({self.n}): "
                                 f"{what} needs that many samples per prompt; remove {over} "
                                 f"from evaluate.{key} or raise evaluate.n")

    def n_of(self, policy: str) -> int:
        """Samples per prompt and seed of `policy`: its own from n_by_policy, else n."""
        return self.n_by_policy.get(policy, self.n)

    def replicated(self) -> list[str]:
        """Every policy trained per replicate."""
        return [*self.policies, *self.controls, *self.first_replicate_only]

    def all(self) -> list[str]:
        return [*self.shared, *self.replicated()]

    def splits_of(self, policy: str) -> list[str]:
        """The splits `policy` is sampled on: `splits`, and `dev` for a policy of
        `dev_policies` (the development split: pilots read it, never the test split)."""
        dev = ["dev"] if policy in self.dev_policies and "dev" not in self.splits else []
        return [*self.splits, *dev]
