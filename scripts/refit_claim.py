"""Refit one contrast's crossed problems x replicates test from the per-problem records alone.

    python scripts/refit_claim.py rloo sft                     # test split, pass@1
    python scripts/refit_claim.py rloo_shaped rloo --k 16 --split test

Reads reports/details/per_problem/<split>.csv (columns policy, replicate, problem_id,
correct, n: what the compare stage commits, no evaluation records needed), turns each row
into its unbiased pass@k (eval.metrics.pass_at_k(n, correct, k)), takes a - b per problem on
every replicate both policies have (a policy trained once, replicate `shared`, stands in each
replicate of the other), and fits the crossed problems x replicates test (stats.crossed) on
that problems x replicates matrix: the test behind compare.json's `crossed` blocks and the
claims' verdicts. Prints the effect, its interval and p, then compare.json's own numbers for
the contrast when it holds them. docs/statistics.md, "Per-problem records", says more.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from countdown_rlvr.analysis.compare import SHARED, fmt_ci, fmt_p, pair_key
from countdown_rlvr.eval.metrics import pass_at_k
from countdown_rlvr.stats.crossed import CrossedTest, crossed_test

RECORDS = Path("reports/details/per_problem")
COMPARE = Path("reports/details/compare.json")


def load(records: Path, split: str) -> pd.DataFrame:
    path = Path(records) / f"{split}.csv"
    if not path.exists():
        raise SystemExit(f"no {path}: the compare stage writes it (`dvc repro compare`), or "
                         "pass --records / --split")
    return pd.read_csv(path, dtype={"policy": str, "replicate": str, "problem_id": str})


def pass_matrix(frame: pd.DataFrame, policy: str, k: int) -> pd.DataFrame:
    """problems x replicates table of one policy's unbiased pass@k."""
    rows = frame[frame["policy"] == policy]
    if rows.empty:
        raise ValueError(f"no records of {policy!r}; the file holds "
                         f"{sorted(frame['policy'].unique())}")
    if k > rows["n"].min():
        raise ValueError(f"k={k} is more than {policy}'s {rows['n'].min()} samples per problem")
    value = [pass_at_k(int(n), int(c), k) for n, c in zip(rows["n"], rows["correct"])]
    return rows.assign(value=value).pivot(index="problem_id", columns="replicate",
                                          values="value")


def effect_matrix(frame: pd.DataFrame, a: str, b: str, k: int) -> pd.DataFrame:
    """problems x replicates of pass@k(a) - pass@k(b), on the replicates both have, in seed
    order (the compare stage's)."""
    pa, pb = pass_matrix(frame, a, k), pass_matrix(frame, b, k)
    if not pa.index.equals(pb.index):
        raise ValueError(f"{a} and {b} were evaluated on different problems")

    def column(m: pd.DataFrame, t: str) -> str:  # a shared policy's one draw stands in each
        return SHARED if list(m.columns) == [SHARED] else t

    own = [t for t in (*pa.columns, *pb.columns) if t != SHARED]
    tags = sorted(set(own), key=lambda t: int(t[1:])) or [SHARED]
    tags = [t for t in tags if column(pa, t) in pa and column(pb, t) in pb]
    return pd.DataFrame({t: pa[column(pa, t)] - pb[column(pb, t)] for t in tags})


def refit(frame: pd.DataFrame, a: str, b: str, k: int = 1, null: float = 0.0,
          alternative: str = "two-sided", alpha: float = 0.05) -> CrossedTest:
    """The crossed test of a - b at pass@k (one replicate: no test, its p None)."""
    return crossed_test(effect_matrix(frame, a, b, k).to_numpy(dtype=float), null=null,
                        alternative=alternative, alpha=alpha)


def line(label: str, mean: float, lo: float | None, hi: float | None, p: float | None) -> str:
    return f"{label}: effect {fmt_ci(mean, lo, hi, '+.3f')}, p {fmt_p(p)}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="the policy whose pass@k comes first (a - b)")
    ap.add_argument("b", help="the reference policy")
    ap.add_argument("--k", type=int, default=1, help="pass@k (default 1)")
    ap.add_argument("--split", default="test", help="the problems' split (default test)")
    ap.add_argument("--null", type=float, default=0.0, help="the effect under H0 (default 0)")
    ap.add_argument("--alternative", default="two-sided",
                    choices=["two-sided", "greater", "less"])
    ap.add_argument("--alpha", type=float, default=0.05, help="1 - interval coverage")
    ap.add_argument("--records", type=Path, default=RECORDS, help=f"default {RECORDS}")
    ap.add_argument("--compare", type=Path, default=COMPARE,
                    help=f"compare.json to print beside the refit (default {COMPARE})")
    args = ap.parse_args(argv)
    frame = load(args.records, args.split)
    try:
        d = effect_matrix(frame, args.a, args.b, args.k)
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc
    res = crossed_test(d.to_numpy(dtype=float), args.null, args.alternative, args.alpha)
    print(f"{args.a} - {args.b}, {args.split} split, pass@{args.k}: {res.n_problems} problems x "
          f"{res.n} replicate(s) ({', '.join(d.columns)}), H0 effect {args.null:g}, "
          f"{args.alternative}")
    print(line("refit", res.mean, res.ci_low, res.ci_high, res.pvalue))
    stored = None
    if args.compare.exists():
        stored = (json.loads(args.compare.read_text())["pairs"].get(pair_key(args.a, args.b), {})
                  .get(args.split, {}).get(f"k{args.k}", {}).get("crossed"))
    if stored and (args.null, args.alternative) == (0.0, "two-sided"):
        print(line(str(args.compare), stored["mean"], stored["ci_low"], stored["ci_high"],
                   stored["pvalue"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
