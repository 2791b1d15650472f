"""Compare two git revisions' results with an interval that knows the training noise.

    python -m countdown_rlvr.branch_diff main shaped        # or any two revisions
    python -m countdown_rlvr.branch_diff HEAD~1 HEAD --alpha 0.1

`dvc metrics diff` prints two numbers and their difference; whether that difference is more
than another training draw would give, it cannot say. This reads each revision's
per-replicate evaluation details (reports/details/eval/<policy>/r<seed>.json, in git:
no DVC cache needed, so it works in a fresh clone) and prints, per policy and headline metric
(test pass@1, test pass@<largest k>, OOD pass@<largest k>), both replicate means, the
difference, its Welch t interval over the two revisions' replicates (the replicate is the
unit, so the interval holds between-draw variance), and a verdict. A policy with one draw on
either side (shared, a first-replicate-only policy, one replicate, or a revision from before
replicates: reports/details/eval/<policy>.json) gets its difference and no interval.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict

import numpy as np
from scipy.stats import ttest_ind

EVAL = "reports/details/eval"


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"[branch_diff] error: git {' '.join(args)} failed: "
                         f"{proc.stderr.strip()} (is this a git checkout, and the revision known?)")
    return proc.stdout


def draws(rev: str) -> dict[str, dict[str, dict]]:
    """policy -> draw (r<seed>, shared, or one for an older layout) -> its eval details."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for path in _git("ls-tree", "-r", "--name-only", rev, EVAL).split():
        rel = path[len(EVAL) + 1:].removesuffix(".json")
        policy, _, tag = rel.partition("/")
        detail = json.loads(_git("show", f"{rev}:{path}"))
        if "test" in detail:  # an untrained policy's details have no samples
            out[policy][tag or "one"] = detail
    return dict(out)


def headline_values(runs: dict[str, dict]) -> dict[str, list[float]]:
    """metric -> one value per draw: test pass@1, test and OOD pass@ at the largest k."""
    out: dict[str, list[float]] = defaultdict(list)
    for detail in runs.values():
        ks = sorted(int(k[5:]) for k in detail["test"] if k.startswith("pass@"))
        out["pass@1"].append(detail["test"]["pass@1"])
        out[f"pass@{ks[-1]}"].append(detail["test"][f"pass@{ks[-1]}"])
        if "ood" in detail:
            out[f"ood_pass@{ks[-1]}"].append(detail["ood"][f"pass@{ks[-1]}"])
    return dict(out)


def compare(a: list[float], b: list[float], alpha: float = 0.05) -> dict:
    """b - a with a Welch t interval over the replicates of each side (needs >= 2 on both)."""
    diff = float(np.mean(b) - np.mean(a))
    if len(a) < 2 or len(b) < 2:
        return {"diff": diff, "ci": None, "pvalue": None,
                "verdict": "one draw on a side: no interval"}
    if np.std(a) == 0 and np.std(b) == 0:
        return {"diff": diff, "ci": (diff, diff), "pvalue": 1.0 if diff == 0 else 0.0,
                "verdict": "no detectable difference" if diff == 0 else "differs"}
    res = ttest_ind(b, a, equal_var=False)
    lo, hi = res.confidence_interval(1 - alpha)
    p = float(res.pvalue)
    return {"diff": diff, "ci": (float(lo), float(hi)), "pvalue": p,
            "verdict": "differs" if p < alpha else "no detectable difference"}


def rows(rev_a: str, rev_b: str, alpha: float = 0.05) -> list[dict]:
    old, new = draws(rev_a), draws(rev_b)
    out = []
    for policy in sorted(set(old) & set(new)):
        va, vb = headline_values(old[policy]), headline_values(new[policy])
        for metric in (m for m in va if m in vb):
            out.append({"policy": policy, "metric": metric, "a": float(np.mean(va[metric])),
                        "b": float(np.mean(vb[metric])), "n_a": len(va[metric]),
                        "n_b": len(vb[metric]), **compare(va[metric], vb[metric], alpha)})
    return out


def markdown(rev_a: str, rev_b: str, found: list[dict], alpha: float) -> str:
    ci = f"{100 * (1 - alpha):g}% CI"
    lines = [(f"| policy | metric | {rev_a} | {rev_b} | diff | {ci} (Welch, replicates) | p | "
             "verdict |"), "|---|---|---|---|---|---|---|---|"]
    for r in found:
        interval = "–" if r["ci"] is None else f"[{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]"
        p = "–" if r["pvalue"] is None else f"{r['pvalue']:.3g}"
        lines.append(f"| {r['policy']} | {r['metric']} | {r['a']:.3f} (n={r['n_a']}) | "
                     f"{r['b']:.3f} (n={r['n_b']}) | {r['diff']:+.3f} | {interval} | {p} | "
                     f"{r['verdict']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m countdown_rlvr.branch_diff",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("rev_a", help="the baseline revision, e.g. main")
    ap.add_argument("rev_b", help="the revision compared with it, e.g. an experiment branch")
    ap.add_argument("--alpha", type=float, default=0.05, help="1 - interval coverage")
    args = ap.parse_args(argv)
    found = rows(args.rev_a, args.rev_b, args.alpha)
    if not found:
        raise SystemExit(f"[branch_diff] error: no policy has evaluation details in both "
                         f"{args.rev_a} and {args.rev_b} ({EVAL}/); run `dvc repro` and commit "
                         "the reports first")
    sys.stdout.write(markdown(args.rev_a, args.rev_b, found, args.alpha))


if __name__ == "__main__":
    main()
