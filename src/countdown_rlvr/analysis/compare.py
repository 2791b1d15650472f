"""Compare evaluated policies on the same problems (torch-free: the `compare` stage and the
report import it without loading a model).

    compare_policies(records, pairs, ks) -> one training draw: pass@k and coverage intervals per
                                            policy, and
                                            per pair, split and k: the all-sample paired test
                                            (sign-flip permutation + bootstrap interval on the
                                            per-problem pass@k difference), and McNemar on
                                            sample 0 (S0's test)
    compare_replicates(runs, pairs, ks)  -> every draw: compare_policies per replicate, and
                                            pooled over replicates (replicate-unit t-test and
                                            t interval of the per-replicate effects, each
                                            policy's pass@k and coverage likewise, and the
                                            crossed problems x replicates test of a pair: the
                                            claims' verdict test, stats.crossed)
    compare_markdown(report) / replicates_markdown(report) -> reports/compare.md
    per_problem_records(records, splits)  -> what the tests count, per split: each policy's,
                                            replicate's and problem's correct of n samples
                                            and distinct correct solutions
                                            (reports/details/per_problem/<split>.csv)
    fmt_ci, fmt_p                         -> the one way every table (compare.md, report.md,
                                            the claims, `countdown-rlvr diff`) writes an
                                            estimate with its interval and a p-value; its
                                            tables: markdown.md_table (re-exported here)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..eval.coverage import distinct_correct, has_solutions
from ..eval.metrics import pass_at_k, solved_within
from ..stats import bootstrap_ci, mcnemar, paired_permutation_test, pass_at_k_ci, replicate_t_test
from ..stats.crossed import crossed_test
from .markdown import md_table  # report and branch_diff import it from here

SHARED = "shared"  # the run tag of a policy trained once (base, teacher)
NA = "–"  # a missing value in a table


# --------------------------------------------------------------------------- formatting
# Here, not in stats.py: the stages that only compute with stats.py (traces, repair, int,
# distill) must not re-run when a table's format changes; compare and report render tables.

def fmt_ci(mean: float | None, lo: float | None, hi: float | None, spec: str = ".3f",
           alone: str = "") -> str:
    """`mean [lo, hi]`, each number in format `spec` (".3f"; "+.3f" for a signed difference).
    No interval (lo None): the mean, then `alone` (e.g. " (one replicate)"); no mean (None):
    the interval alone."""
    if lo is None:
        return f"{mean:{spec}}{alone}"
    interval = f"[{lo:{spec}}, {hi:{spec}}]"
    return interval if mean is None else f"{mean:{spec}} {interval}"


def fmt_p(p: float | None, digits: int = 3, na: str = NA) -> str:
    """A p-value to `digits` significant digits; `na` when there is none."""
    return na if p is None else f"{p:.{digits}g}"


def _per_problem_counts(records: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Samples and correct samples per problem, pooled over seeds (the bootstrap unit is the
    problem; more seeds are just more samples of it)."""
    g = records.groupby("problem_id")["correct"]
    return g.size().sort_index(), g.sum().astype(int).sort_index()


def _same_problems(a: pd.Index, b: pd.Index) -> None:
    if not a.equals(b):
        only = sorted(set(a) ^ set(b))[:5]
        raise ValueError("the two policies were evaluated on different problems "
                         f"(e.g. {only}); re-run their evaluate stages on the same problems")


def _pass_per_problem(counts: tuple[pd.Series, pd.Series], k: int, index) -> np.ndarray:
    """Unbiased pass@k of each problem in `index` from its (samples, correct) counts."""
    n, c = counts
    return np.array([pass_at_k(int(n.loc[i]), int(c.loc[i]), k) for i in index], dtype=float)


def per_problem_pass_diff(rec_a: pd.DataFrame, rec_b: pd.DataFrame, k: int) -> pd.Series:
    """Unbiased pass@k of a minus b per problem (from every sample of every seed), by
    problem_id; the two must hold the same problems."""
    ca, cb = _per_problem_counts(rec_a), _per_problem_counts(rec_b)
    _same_problems(ca[0].index, cb[0].index)
    index = ca[0].index
    return pd.Series(_pass_per_problem(ca, k, index) - _pass_per_problem(cb, k, index),
                     index=index, dtype=float)


def policy_intervals(records: pd.DataFrame, ks: Iterable[int], n_boot: int, alpha: float,
                     seed: int) -> dict[str, dict[str, float]]:
    """pass@k with its bootstrap interval over problems, for each k <= samples per problem."""
    n, c = _per_problem_counts(records)
    group_size = _group_size(records)  # k beyond one seed's n would be extrapolation
    out = {}
    for k in ks:
        if k > group_size:
            continue
        point = float(sum(pass_at_k(int(a), int(b), k) for a, b in zip(n, c)) / len(n))
        lo, hi = pass_at_k_ci(n.to_numpy(), c.to_numpy(), k, n_boot=n_boot, alpha=alpha,
                              seed=seed)
        out[f"pass@{k}"] = {"value": point, "ci_low": lo, "ci_high": hi}
    return out


def coverage_interval(records: pd.DataFrame, n_boot: int, alpha: float, seed: int
                      ) -> dict[str, dict[str, float]]:
    """{"coverage": mean distinct correct solutions per problem (eval.coverage), with its
    bootstrap interval over problems}; {} for records without the answers (hand-made ones)."""
    if not has_solutions(records):
        return {}
    per_problem = distinct_correct(records).to_numpy(dtype=float)
    lo, hi = bootstrap_ci(per_problem, n_boot=n_boot, alpha=alpha, seed=seed)
    return {"coverage": {"value": float(per_problem.mean()), "ci_low": lo, "ci_high": hi}}


def compare_pair(rec_a: pd.DataFrame, rec_b: pd.DataFrame, ks: Iterable[int], seed: int,
                 exact: bool = True, n_boot: int = 1000, alpha: float = 0.05,
                 boot_seed: int = 0) -> dict[str, dict[str, float]]:
    """Paired comparison of two policies on the same problems, per k.

    Outcome of a problem = solved by one of samples 0..k-1 of sampling seed `seed`
    (k = 1: the pass@1 outcome of sample 0). McNemar on those paired outcomes; plus the
    paired bootstrap interval of the difference in solve rate (a - b). `pass_diff` is the
    difference in unbiased pass@k from every sample of every seed, with its paired bootstrap
    interval over problems: the same question asked of all n samples, not one (far tighter),
    and `pass_diff_pvalue`, the paired sign-flip permutation test on those per-problem
    differences (k = 1: per-problem pass rates over every sample); `pass_a` / `pass_b` are
    the two means. `pvalue` is McNemar's on the seed-`seed` outcomes (S0's test).
    """
    counts_a, counts_b = _per_problem_counts(rec_a), _per_problem_counts(rec_b)
    out = {}
    for k in ks:
        a, b = solved_within(rec_a, k, seed), solved_within(rec_b, k, seed)
        _same_problems(a.index, b.index)
        res = mcnemar(a, b, exact=exact)
        diff = a.astype(float) - b.astype(float)
        lo, hi = bootstrap_ci(diff.to_numpy(), n_boot=n_boot, alpha=alpha, seed=boot_seed)
        pass_a = _pass_per_problem(counts_a, k, a.index)
        pass_b = _pass_per_problem(counts_b, k, a.index)
        pass_diff = pass_a - pass_b
        p_lo, p_hi = bootstrap_ci(pass_diff, n_boot=n_boot, alpha=alpha, seed=boot_seed)
        out[f"k{k}"] = {
            "n_problems": len(a), "solved_a": float(a.mean()), "solved_b": float(b.mean()),
            "diff": float(diff.mean()), "diff_ci_low": lo, "diff_ci_high": hi,
            "a_only": res.b, "b_only": res.c, "statistic": res.statistic, "pvalue": res.pvalue,
            "pass_a": float(pass_a.mean()), "pass_b": float(pass_b.mean()),
            "pass_diff": float(pass_diff.mean()), "pass_diff_ci_low": p_lo,
            "pass_diff_ci_high": p_hi,
            "pass_diff_pvalue": paired_permutation_test(pass_a, pass_b, seed=boot_seed),
        }
    return out


def compare_policies(records: dict[str, pd.DataFrame], pairs: Sequence[Sequence[str]],
                     ks: Sequence[int], seed: int = 0, splits: Sequence[str] = ("test",),
                     exact: bool = True, n_boot: int = 1000, alpha: float = 0.05,
                     boot_seed: int = 0) -> dict[str, Any]:
    """The compare report: pass@k and coverage intervals for every policy in `records`, and a
    paired
    comparison for each [a, b] in `pairs`, per split (those present) and k.

    A policy with empty records (its evaluate stage skipped it: a policy that was never
    trained, e.g. distill without a successful repair) has no intervals, and each pair that
    names it is listed under `skipped` with the reason instead of being tested.
    """
    for pair in pairs:
        if len(pair) != 2 or any(p not in records for p in pair):
            raise ValueError(f"pair {list(pair)} must name two of the evaluated policies "
                             f"{sorted(records)}")
    ks = [int(k) for k in ks]
    out: dict[str, Any] = {
        "settings": {"ks": ks, "seed": seed, "splits": list(splits), "exact": exact,
                     "n_boot": n_boot, "alpha": alpha, "pairs": [list(p) for p in pairs]},
        "policies": {}, "pairs": {}, "skipped": {},
    }
    empty = {name for name, frame in records.items() if frame.empty}

    def part(name: str, split: str) -> pd.DataFrame:
        return records[name][records[name]["split"] == split]

    for name in empty:
        out["skipped"][name] = "no evaluation records (its evaluate stage skipped it)"
    for name in (n for n in records if n not in empty):
        out["policies"][name] = {
            split: policy_intervals(part(name, split), ks, n_boot, alpha, boot_seed)
            | coverage_interval(part(name, split), n_boot, alpha, boot_seed)
            for split in splits if not part(name, split).empty}
    for a, b in pairs:
        if untested := [p for p in (a, b) if p in empty]:
            out["skipped"][pair_key(a, b)] = (f"not compared: {', '.join(untested)} has no "
                                              "evaluation records (not trained)")
            continue
        out["pairs"][pair_key(a, b)] = {
            split: compare_pair(part(a, split), part(b, split),
                                [k for k in ks if k <= _group_size(part(a, split), part(b, split))],
                                seed, exact, n_boot, alpha, boot_seed)
            for split in splits if not part(a, split).empty and not part(b, split).empty}
    return out


def pair_key(a: str, b: str) -> str:
    return f"{a}_vs_{b}"


def _group_size(*frames: pd.DataFrame) -> int:
    return min(int(f.groupby(["problem_id", "seed"]).size().min()) for f in frames)


def compare_markdown(report: dict[str, Any]) -> str:
    """Markdown tables of a compare_policies() report."""
    s = report["settings"]
    ci = f"{100 * (1 - s['alpha']):g}%"
    test = "exact binomial" if s["exact"] else "chi-square, continuity-corrected"
    rows = [[name, split, *(fmt_ci(v["value"], v["ci_low"], v["ci_high"])
                            if (v := vals.get(f"pass@{k}")) else "-" for k in s["ks"])]
            for name, per_split in report["policies"].items()
            for split, vals in per_split.items()]
    lines = ["# Policy comparison", "",
             f"pass@k with {ci} bootstrap intervals over problems ({s['n_boot']} resamples).", "",
             *md_table(["policy", "split", *(f"pass@{k}" for k in s["ks"])], rows,
                       tight_rule=True)]
    lines += ["", (f"Paired per problem, on the same problems. The headline test uses every "
              "sample: pass@k a / b are unbiased pass@k estimated from all samples of every "
              f"seed, pass@k diff their difference with its paired {ci} bootstrap interval "
              "over problems, and p its paired sign-flip permutation test (k = 1: per-problem "
              f"pass rates). S0's test: McNemar ({test}) on solved within the first k samples "
              f"of seed {s['seed']} (k = 1: sample 0 only); a-only / b-only are its discordant "
              f"counts, solve diff the solve-rate difference with its {ci} bootstrap interval."),
              ""]
    if not report["pairs"]:
        lines.append("No pairs configured (`compare.pairs` in params.yaml).")
    else:
        header = ["a", "b", "split", "k", "pass@k a", "pass@k b", "pass@k diff [CI]",
                  "p (all samples)", "solved a", "solved b", "solve diff [CI]", "a-only",
                  "b-only", "McNemar p (S0's test)"]
        rows = [[a, b, split, k[1:], _num(r.get("pass_a")), _num(r.get("pass_b")),
                 fmt_ci(r["pass_diff"], r["pass_diff_ci_low"], r["pass_diff_ci_high"], "+.3f"),
                 fmt_p(r.get("pass_diff_pvalue")), f"{r['solved_a']:.3f}",
                 f"{r['solved_b']:.3f}",
                 fmt_ci(r["diff"], r["diff_ci_low"], r["diff_ci_high"], "+.3f"),
                 str(r["a_only"]), str(r["b_only"]), fmt_p(r["pvalue"])]
                for a, b in s["pairs"]
                for split, per_k in report["pairs"].get(pair_key(a, b), {}).items()
                for k, r in per_k.items()]
        lines += md_table(header, rows, tight_rule=True)
    skipped = report.get("skipped") or {}
    if skipped:
        lines += ["", "Not compared:", ""]
        lines += [f"- `{name}`: {why}" for name, why in skipped.items()]
    return "\n".join(lines) + "\n"


def _num(x) -> str:
    return NA if x is None else f"{x:.3f}"


# --------------------------------------------------------------------------- replicates
def replicate_runs(records: dict[str, dict[str, pd.DataFrame]]) -> list[str]:
    """The replicate tags (r<seed>) any policy has records for, in seed order."""
    tags = {t for runs in records.values() for t in runs if t != SHARED}
    return sorted(tags, key=lambda t: int(t[1:]))


def records_of_run(records: dict[str, dict[str, pd.DataFrame]], tag: str) -> dict:
    """{policy: records} of one replicate: its own draw, or the one shared draw of a policy
    trained once (the same fixed input in every replicate)."""
    out = {}
    for name, runs in records.items():
        frame = runs.get(tag, runs.get(SHARED))
        if frame is not None:
            out[name] = frame
    return out


def compare_replicates(records: dict[str, dict[str, pd.DataFrame]],
                       pairs: Sequence[Sequence[str]], ks: Sequence[int], seed: int = 0,
                       splits: Sequence[str] = ("test",), exact: bool = True,
                       n_boot: int = 1000, alpha: float = 0.05,
                       boot_seed: int = 0) -> dict[str, Any]:
    """`compare_policies` once per replicate, then pooled with the replicate as the unit.

    records: policy -> run tag (r<seed>, or `shared` for a policy trained once) -> records.
    A pair is compared in every replicate where both have records (a shared policy's one
    draw stands in each); its pooled effect at (split, k) is the one-sample t-test and t
    interval of the per-replicate all-sample pass@k differences (`stats.replicate_t_test`):
    their spread holds the training draw's variance, which intervals over the problems of
    one draw leave out. A policy's pooled pass@k is the mean, SD and t interval of its
    per-replicate values, and so is its coverage. Pairs of two shared policies have one draw,
    nothing to pool.
    """
    for pair in pairs:
        if len(pair) != 2 or any(p not in records for p in pair):
            raise ValueError(f"pair {list(pair)} must name two of the evaluated policies "
                             f"{sorted(records)}")
    tags = replicate_runs(records) or [SHARED]
    per_run = {}
    for tag in tags:  # a secondary policy has the first replicate only: its pairs too
        run = records_of_run(records, tag)
        per_run[tag] = compare_policies(run, [p for p in pairs if all(x in run for x in p)],
                                        ks, seed, splits, exact, n_boot, alpha, boot_seed)
    out: dict[str, Any] = {"settings": {**next(iter(per_run.values()))["settings"],
                                        "pairs": [list(p) for p in pairs], "replicates": tags},
                           "replicates": per_run, "policies": {}, "pairs": {}, "skipped": {}}
    for name, runs in records.items():
        out["policies"][name] = _pooled_policy(per_run, name, splits, ks, alpha,
                                               shared=set(runs) == {SHARED})
    for a, b in pairs:
        key = pair_key(a, b)
        present = [t for t in tags if key in per_run[t]["pairs"]]
        if not present:
            out["skipped"][key] = next((r["skipped"][key] for r in per_run.values()
                                        if key in r.get("skipped", {})), "no replicate has both")
            continue
        out["pairs"][key] = {split: {
            k: _pooled_pair([(t, per_run[t]["pairs"][key][split][k]) for t in present
                             if k in per_run[t]["pairs"][key].get(split, {})], alpha)
            for k in per_run[present[0]]["pairs"][key].get(split, {})}
            for split in splits if split in per_run[present[0]]["pairs"][key]}
        for split, block in out["pairs"][key].items():
            for k, pooled in block.items():
                pooled["crossed"] = _crossed(records, a, b, list(pooled["per_replicate"]),
                                             split, int(k[1:]), alpha)
    return out


def _crossed(records: dict[str, dict[str, pd.DataFrame]], a: str, b: str, tags: list[str],
             split: str, k: int, alpha: float) -> dict | None:
    """The crossed problems x replicates test of a - b (`stats.crossed`), from the per-problem
    pass@k differences of every replicate: the verdicts' test. None with one replicate, and for
    two policies trained once (their one draw stands in every replicate: copies, not draws)."""
    if len(tags) < 2 or all(set(records[x]) == {SHARED} for x in (a, b)):
        return None
    cols = []
    for tag in tags:
        run = records_of_run(records, tag)
        ra, rb = (run[x][run[x]["split"] == split] for x in (a, b))
        cols.append(per_problem_pass_diff(ra, rb, k))
    if any(not c.index.equals(cols[0].index) for c in cols):
        raise ValueError(f"{a} vs {b}: the replicates were evaluated on different {split} "
                         "problems; re-run their evaluate stages on the same problems")
    return crossed_test(np.column_stack(cols), alpha=alpha).as_dict()


def _pooled_policy(per_run: dict, name: str, splits, ks, alpha: float, shared: bool) -> dict:
    """Mean, SD and t interval over replicates of a policy's pass@k and coverage (a shared
    policy: its one draw, under the tag `shared`)."""
    out = {}
    for split in splits:
        block = {}
        for key in (*(f"pass@{k}" for k in ks), "coverage"):
            values = {t: r["policies"][name][split][key]["value"]
                      for t, r in per_run.items()
                      if key in r["policies"].get(name, {}).get(split, {})}
            if shared and values:  # the same draw stood in every replicate
                values = {SHARED: next(iter(values.values()))}
            if values:
                res = replicate_t_test(list(values.values()), alpha)
                block[key] = {"n": res.n, "mean": res.mean, "sd": res.sd,
                                      "ci_low": res.ci_low, "ci_high": res.ci_high,
                                      "per_replicate": values}
        if block:
            out[split] = block
    return out


def _pooled_pair(rows: list[tuple[str, dict]], alpha: float) -> dict:
    """The pooled test of one (pair, split, k) over the replicates' rows."""
    effects = [r["pass_diff"] for _, r in rows]
    res = replicate_t_test(effects, alpha).as_dict()
    return {"pooled": res,
            "per_replicate": {t: {f: r[f] for f in (
                "pass_a", "pass_b", "pass_diff", "pass_diff_ci_low", "pass_diff_ci_high",
                "pass_diff_pvalue", "pvalue", "a_only", "b_only", "n_problems")}
                for t, r in rows}}


def replicates_markdown(report: dict[str, Any]) -> str:
    """reports/compare.md: per pair the pooled effect over replicates (the verdict's test),
    then every replicate's own paired test, then each replicate's full tables."""
    s = report["settings"]
    ci = f"{100 * (1 - s['alpha']):g}%"
    tags = s["replicates"]
    rows = []
    for a, b in s["pairs"]:
        for split, per_k in report["pairs"].get(pair_key(a, b), {}).items():
            for k in sorted(per_k, key=lambda x: int(x[1:])):
                row = per_k[k]
                pooled = row["pooled"]
                cells = [f"{r['pass_diff']:+.3f} ({fmt_p(r['pass_diff_pvalue'])})"
                         if (r := row["per_replicate"].get(t)) else NA for t in tags]
                rows.append([a, b, split, k[1:], _diff_ci(pooled), fmt_p(pooled["pvalue"]),
                             *cells])
    lines = ["# Policy comparison", "",
             (f"Replicates: {', '.join(tags)}. Each replicate is one training draw of every "
              "replicated policy (shared policies: one draw, the same in every replicate). "
              f"Pooled = mean of the per-replicate pass@k differences with its {ci} t "
              "interval and the one-sample t-test across replicates (df = replicates - 1): the "
              "test whose unit is the training draw. Per replicate: the paired difference "
              "from all samples over problems, with its bootstrap interval and sign-flip "
              "permutation p (one draw: it leaves out the training variance)."), "",
             *md_table(["a", "b", "split", "k", "pooled diff [CI]", "pooled p",
                        *(f"{t}: diff (p)" for t in tags)], rows, tight_rule=True)]
    for key, why in (report.get("skipped") or {}).items():
        lines.append(f"\n- `{key}`: {why}")
    for tag, rep in report["replicates"].items():
        body = compare_markdown(rep).splitlines()[1:]
        lines += ["", f"## Replicate {tag}", *body]
    return "\n".join(lines) + "\n"


def _diff_ci(pooled: dict) -> str:
    return fmt_ci(pooled["mean"], pooled.get("ci_low"), pooled.get("ci_high"), "+.3f",
                  " (one replicate)")


# --------------------------------------------------------------------------- per-problem records
# What every test above is computed from, small enough to commit: a problem's correct samples
# c out of n per policy and replicate (pass@k for any k <= n is eval.metrics.pass_at_k(n, c, k)),
# so a reader refits any contrast without the evaluation records (scripts/refit_claim.py), and
# its distinct correct solutions (eval.coverage), whose mean is the policy's coverage. Files
# written before `distinct` have no such column; records without answers leave it empty.
PER_PROBLEM_COLUMNS = ("policy", "replicate", "problem_id", "correct", "n", "distinct")


def per_problem_records(records: dict[str, dict[str, pd.DataFrame]],
                        splits: Sequence[str]) -> dict[str, pd.DataFrame]:
    """split -> one row per (policy, replicate, problem) with its correct samples out of n
    (every sample of every sampling seed, as the tests count them) and its distinct correct
    solutions (the same samples; missing for records without answers); rows by policy name,
    replicate seed and problem_id, so a changed arm changes its own lines only. A policy
    without records (not trained) has no rows; a split no policy has, no frame."""
    out = {}
    for split in splits:
        parts = []
        for policy in sorted(records):
            runs = records[policy]
            for tag in sorted(runs, key=lambda t: -1 if t == SHARED else int(t[1:])):
                frame = runs[tag]
                part = frame[frame["split"] == split]
                n, c = _per_problem_counts(part)
                if len(n):
                    distinct = (distinct_correct(part).reindex(n.index) if has_solutions(part)
                                else pd.Series(pd.NA, index=n.index))
                    parts.append(pd.DataFrame({"policy": policy, "replicate": tag,
                                               "problem_id": n.index, "correct": c.to_numpy(),
                                               "n": n.to_numpy(),
                                               # nullable: written "3", or "" for none
                                               "distinct": pd.array(distinct, dtype="Int64")}))
        if parts:
            out[split] = pd.concat(parts, ignore_index=True)[list(PER_PROBLEM_COLUMNS)]
    return out
