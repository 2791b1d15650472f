"""Compare two git revisions' results with an interval that knows the training noise.

    countdown-rlvr diff main shaped                    # or any two revisions
    countdown-rlvr diff HEAD~1 HEAD --policy rloo --alpha 0.1 --format md
    python -m countdown_rlvr.branch_diff main shaped   # the same command

`dvc metrics diff` prints two numbers and their difference; whether that difference is more
than another training draw would give, it cannot say. This reads each revision's
per-replicate evaluation details (reports/details/eval/<policy>/r<seed>.json, or
<policy>/shared.json for a policy trained once, or <policy>.json from before replicates; in
git: no DVC cache needed, so it works in a fresh clone) and prints, per policy and headline
metric (test pass@1, test pass@<largest k>, OOD pass@<largest k>), both means, the
difference, its t interval and a verdict. The replicate is the unit, so the interval holds
between-draw variance. Which test depends on the shared inputs (the `outs` hashes in
dvc.lock of the stages every policy reads):
- the same in both revisions: replicate r<seed> of A and of B saw the same problems, teacher
  and pairs, so the per-seed differences are paired (one-sample t-test on them), which
  removes the seed's own effect;
- different (say, another kind of CPU drew another teacher and other pairs) or no dvc.lock:
  Welch over each side's replicates, and no row is called a difference, because the change
  is mixed with a different draw of the inputs.
A policy with one draw on a side gets its difference and no interval.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml
from scipy.stats import ttest_1samp, ttest_ind

EVAL = "reports/details/eval"
# the stages whose outputs every trained policy reads; equal hashes = the same draw of inputs
SHARED_STAGES = ("problems", "base", "teacher", "traces", "teacher_traces", "dedup", "pairs")
NOT_A_TEST = "inputs differ: not a test of the change"


class DiffError(Exception):
    """A problem the user can fix: printed as one line (no traceback), exit code 2."""


def _git(top: str, *args: str) -> str | None:
    """git's stdout run at the top level (paths in revisions are relative to it), None if it
    fails."""
    proc = subprocess.run(["git", *args], cwd=top, capture_output=True, text=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


def toplevel(cwd: str | Path | None = None) -> str:
    proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise DiffError("not inside a git checkout: run this from inside the repository")
    return proc.stdout.strip()


def headline(detail: dict) -> dict[str, float]:
    """metric -> value: test pass@1, test and OOD pass@ at the largest k."""
    ks = sorted(int(k[5:]) for k in detail["test"] if k.startswith("pass@"))
    out = {"pass@1": float(detail["test"]["pass@1"]),
           f"pass@{ks[-1]}": float(detail["test"][f"pass@{ks[-1]}"])}
    if "ood" in detail:
        out[f"ood_pass@{ks[-1]}"] = float(detail["ood"][f"pass@{ks[-1]}"])
    return out


def draws(top: str, rev: str) -> dict[str, dict[str, dict[str, float]]]:
    """policy -> draw (r<seed>, shared, or one for the oldest layout) -> metric -> value."""
    if _git(top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}") is None:
        raise DiffError(f"unknown revision {rev!r}: check its name (`git branch -a`, "
                        "`git log --oneline`), or `git fetch` it first")
    paths = (_git(top, "ls-tree", "-r", "--name-only", rev, EVAL) or "").split()
    if not paths:
        raise DiffError(f"{rev} has no evaluation results ({EVAL}/ is not in it): compare a "
                        "revision whose reports are committed, or `dvc repro` and commit "
                        "reports/ there")
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for path in paths:
        policy, _, tag = path[len(EVAL) + 1:].removesuffix(".json").partition("/")
        try:
            detail = json.loads(_git(top, "show", f"{rev}:{path}") or "")
            if "test" not in detail:  # an untrained policy's details have no samples
                continue
            out[policy][tag or "one"] = headline(detail)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise DiffError(f"{rev}:{path} is corrupt ({type(e).__name__}: {e}): re-run its "
                            "eval stage (`dvc repro`) and commit the file, or compare another "
                            "revision") from None
    return dict(out)


def shared_outs(top: str, rev: str) -> dict[str, list] | None:
    """stage -> its outputs' (path, md5) in rev's dvc.lock; None without a readable lock."""
    text = _git(top, "show", f"{rev}:dvc.lock")
    try:
        stages = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["stages"]
        return {s: sorted((o["path"], o.get("md5")) for o in stages[s].get("outs", []))
                for s in SHARED_STAGES if s in stages}
    except (yaml.YAMLError, TypeError, KeyError, AttributeError):
        return None


def choose_test(top: str, rev_a: str, rev_b: str) -> tuple[bool, str, list[str]]:
    """(paired?, the reason, warnings) from the shared stages' output hashes."""
    locks = {rev: shared_outs(top, rev) for rev in (rev_a, rev_b)}
    missing = [rev for rev, lock in locks.items() if lock is None]
    if missing:
        why = f"no readable dvc.lock in {' and '.join(missing)}"
    else:
        differ = [s for s in SHARED_STAGES if locks[rev_a].get(s) != locks[rev_b].get(s)]
        if not differ:
            return True, (f"shared inputs {', '.join(SHARED_STAGES)}: the same dvc.lock "
                          "output hashes in both revisions, so r<seed> pairs with r<seed>"), []
        why = f"the shared inputs differ: {', '.join(differ)}"
    warning = (f"WARNING: {why}. The comparison mixes the change with a different draw of the "
               "inputs (e.g. another kind of CPU draws another teacher and other pairs), so no "
               "row is a test of the change; to test it, run both revisions on the same "
               "shared inputs (same machine type, or A's dvc.lock outputs for those stages).")
    return False, why + ", so the two sides' replicates are not paired", [warning]


def compare(a: list[float], b: list[float], alpha: float = 0.05) -> dict:
    """b - a with a Welch t interval over the replicates of each side (needs >= 2 on both)."""
    diff = float(np.mean(b) - np.mean(a))
    out = {"diff": diff, "ci_low": None, "ci_high": None, "p": None}
    if len(a) < 2 or len(b) < 2:
        return {**out, "verdict": "one draw on a side: no interval"}
    if np.std(a) == 0 and np.std(b) == 0:
        return {**out, "verdict": "no spread on either side: no test"}
    res = ttest_ind(b, a, equal_var=False)
    lo, hi = res.confidence_interval(1 - alpha)
    p = float(res.pvalue)
    return {**out, "ci_low": float(lo), "ci_high": float(hi), "p": p,
            "verdict": "differs" if p < alpha else "no detectable difference"}


def compare_paired(d: list[float], alpha: float = 0.05) -> dict:
    """The mean of per-replicate differences b - a with a one-sample t interval over them."""
    diff = float(np.mean(d))
    out = {"diff": diff, "ci_low": None, "ci_high": None, "p": None}
    if len(d) < 2:
        return {**out, "verdict": "one draw on a side: no interval"}
    # (x + s) - x is s only up to rounding: a shift common to every seed counts as zero spread
    if np.ptp(d) <= 1e-12:
        moved = "unchanged" if diff == 0 else f"moved by {diff:+.3f}"
        return {**out, "verdict": f"all {len(d)} replicates {moved} (zero spread): no test"}
    res = ttest_1samp(d, 0.0)
    lo, hi = res.confidence_interval(1 - alpha)
    p = float(res.pvalue)
    return {**out, "ci_low": float(lo), "ci_high": float(hi), "p": p,
            "verdict": "differs" if p < alpha else "no detectable difference"}


def diff(rev_a: str, rev_b: str, policies: list[str] | None = None, alpha: float = 0.05,
         show_all: bool = False, cwd: str | Path | None = None) -> dict:
    """The whole comparison: the test used and why, warnings, rows, hidden unchanged rows."""
    if not 0 < alpha < 1:
        raise DiffError(f"--alpha must be between 0 and 1 (exclusive), e.g. 0.05; got {alpha:g}")
    top = toplevel(cwd)
    old, new = draws(top, rev_a), draws(top, rev_b)
    known = sorted(set(old) & set(new))
    unknown = sorted(set(policies or []) - set(known))
    if unknown:
        raise DiffError(f"unknown policy {', '.join(unknown)}; the policies with results in "
                        f"both {rev_a} and {rev_b} are: {', '.join(known) or '(none)'}")
    paired, reason, warnings = choose_test(top, rev_a, rev_b)
    rows, hidden = [], 0
    for policy in [p for p in known if not policies or p in policies]:
        a, b = old[policy], new[policy]
        common = sorted(a.keys() & b.keys())
        if paired and set(a) != set(b):
            warnings.append(f"{policy}: draws in one revision only "
                            f"({', '.join(sorted(a.keys() ^ b.keys()))}) are left out of the "
                            "pairing")
        metrics = dict.fromkeys(m for v in a.values() for m in v)  # ordered, as headline()
        for metric in (m for m in metrics if any(m in v for v in b.values())):
            va = {t: v[metric] for t, v in a.items() if metric in v}
            vb = {t: v[metric] for t, v in b.items() if metric in v}
            if va == vb and not show_all:
                hidden += 1
                continue
            tags = [t for t in common if t in va and t in vb]
            if paired and tags:
                xa, xb = [va[t] for t in tags], [vb[t] for t in tags]
                stats = compare_paired([y - x for x, y in zip(xa, xb)], alpha)
            else:
                xa, xb = list(va.values()), list(vb.values())
                stats = compare(xa, xb, alpha)
                if not paired:
                    stats["verdict"] = NOT_A_TEST
                elif not tags:
                    stats["verdict"] = "no replicate seed in both revisions: nothing to pair"
            rows.append({"policy": policy, "metric": metric, "mean_a": float(np.mean(xa)),
                         "mean_b": float(np.mean(xb)), **stats, "n_a": len(xa),
                         "n_b": len(xb), "paired": bool(paired and tags)})
    test = ("paired t-test on per-replicate differences" if paired
            else "Welch t-test over replicates")
    return {"rev_a": rev_a, "rev_b": rev_b, "alpha": alpha, "test": test, "reason": reason,
            "warnings": warnings, "rows": rows, "hidden_unchanged": hidden}


def _cells(r: dict) -> list[str]:
    ci = "-" if r["ci_low"] is None else f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
    return [r["policy"], r["metric"], f"{r['mean_a']:.3f} (n={r['n_a']})",
            f"{r['mean_b']:.3f} (n={r['n_b']})", f"{r['diff']:+.3f}", ci,
            "-" if r["p"] is None else f"{r['p']:.3g}", r["verdict"]]


def render(report: dict, fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(report, indent=2) + "\n"
    head = ["policy", "metric", report["rev_a"], report["rev_b"], "diff",
            f"{100 * (1 - report['alpha']):g}% CI", "p", "verdict"]
    table = [head] + [_cells(r) for r in report["rows"]]
    lines = [f"test: {report['test']} ({report['reason']})"]
    if fmt == "md":
        lines += [f"\n> **{w}**" for w in report["warnings"]] + [""]
        md = ["| " + " | ".join(row) + " |" for row in table]
        lines += [md[0], "|" + "---|" * len(head), *md[1:]]
    else:
        width = [max(len(row[i]) for row in table) for i in range(len(head))]
        lines += report["warnings"] + [""]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, width)).rstrip() for row in table]
    if not report["rows"]:
        lines.append("(no row differs between the two revisions)")
    if n := report["hidden_unchanged"]:
        lines += ["", (f"{n} unchanged row{'s' * (n != 1)} hidden (the same values in both "
                       "revisions; --all shows them)")]
    return "\n".join(lines) + "\n"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("rev_a", help="the baseline revision, e.g. main")
    ap.add_argument("rev_b", help="the revision compared with it, e.g. an experiment branch")
    ap.add_argument("--policy", action="append", help="only this policy (repeatable)")
    ap.add_argument("--all", action="store_true",
                    help="also show rows whose values are the same in both revisions")
    ap.add_argument("--alpha", type=float, default=0.05, help="1 - interval coverage (0, 1)")
    ap.add_argument("--format", choices=("text", "md", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    try:
        report = diff(args.rev_a, args.rev_b, args.policy, args.alpha, args.all)
    except DiffError as e:
        print(f"countdown-rlvr diff: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(render(report, args.format))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m countdown_rlvr.branch_diff",
                                 description=__doc__.split("\n\n")[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
