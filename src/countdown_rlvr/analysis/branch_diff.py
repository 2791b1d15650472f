"""Compare two revisions' results with an interval that knows the training noise.

    countdown-rlvr diff main shaped                    # two git revisions
    countdown-rlvr diff main                           # main against the workspace
    countdown-rlvr diff main my-exp                    # a `dvc exp` by its name
    countdown-rlvr diff HEAD~1 HEAD --policy rloo --alpha 0.1 --adjust none --format md
    python -m countdown_rlvr.analysis.branch_diff main shaped   # the same command

`dvc metrics diff` prints two numbers and their difference; whether that difference is more
than another training draw would give, it cannot say. This reads each side's per-replicate
evaluation details (reports/details/eval/<policy>/r<seed>.json, or <policy>/shared.json for a
policy trained once, or <policy>.json from before replicates) and prints, per policy and
headline metric (test pass@1, test pass@<largest k>, OOD pass@<largest k>), both means, the
difference, its t interval, the raw and the adjusted p and a verdict. A side is
- a git revision (branch, tag, commit, HEAD~1): read with `git show`, no DVC cache needed, so
  it works in a fresh clone;
- the workspace (`workspace`, or B left out): the files on disk, reports and dvc.lock alike;
- a `dvc exp` name: the commit DVC keeps under refs/exps/<baseline>/<name> (a git revision of
  that name wins).
Each side counts only what its own run made: the replicates its params.yaml defines for each
policy's chain (`replicates.<chain>`, the first seed for a first-replicate policy, `shared`
for evaluate.shared), each file as its dvc.lock records it. Other files in the folder (e.g.
the baseline's r1..r5 that `dvc exp run --temp` of one-seed params commits beside its own
r0) are left out and listed in a note; a file the params make that is absent, or that differs
from its dvc.lock record, is named in a warning.
The replicate is the unit, so the interval holds between-draw variance. Which test depends on
the shared inputs (the cached data/ outputs in dvc.lock of the stages every policy reads; not
their reports/ and dvclive/ outputs, summaries that change with what a stage reports):
- the same on both sides: replicate r<seed> of A and of B saw the same problems, teacher and
  pairs, so the per-seed differences are paired (one-sample t-test on them), which removes
  the seed's own effect;
- different (say, another kind of CPU drew another teacher and other pairs) or no dvc.lock:
  Welch over each side's replicates, and no row is called a difference, because the change
  is mixed with a different draw of the inputs.
Each row's policy is also checked for what it was trained from: the model dirs its training
stage read (its init, SFT, the teacher: dvc.lock's deps under data/models/). When any differs
between the sides (a variant that re-trained SFT), the header says so and the row is marked
`*`: its difference is the variant's and a new upstream policy's together.
A policy with one draw on a side gets its difference and no interval. The rows that get a
verdict from a test, over every policy, are one family: by default Holm's correction holds its
family-wise error at alpha, and the verdict uses the adjusted p (`--adjust none`: each row at
alpha alone). `--policy` only picks the rows shown: the family, and so every adjusted p, stays
the same, and the header says how many of its rows are shown.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml
from scipy.stats import ttest_1samp, ttest_ind

from ..core.config import CHAINS, seeds_key
from .chains import chain_of, evaluation_stage, sampled

EVAL = "reports/details/eval"
# the stages whose outputs every trained policy reads; equal hashes = the same draw of inputs
SHARED_STAGES = ("problems", "base", "teacher", "traces", "teacher_traces", "dedup", "pairs")
# verdicts are short: a row of the text format fits WIDTH with them unwrapped
NOT_A_TEST = "inputs differ: no test"
ONE_DRAW = "one draw: no test"  # a side with one replicate: no spread to test with
WORKSPACE = "workspace"  # the name `dvc metrics diff` gives the working tree too
ADJUST = ("holm", "none")
WIDTH = 120  # the text format's lines fit a terminal this wide
# an experiment ref: refs/exps/<baseline sha split 2/38>/<name>; other refs/exps/ entries
# (exec/, celery/, stash) are DVC's bookkeeping, not experiments
EXP_REF = re.compile(r"refs/exps/[0-9a-f]{2}/[0-9a-f]{38}/([^/]+)")


class DiffError(Exception):
    """A problem the user can fix: printed as one line (no traceback), exit code 2."""


def _git(top: str, *args: str, raw: bool = False):
    """git's stdout (bytes if raw) run at the top level (paths in revisions are relative to
    it), None if it fails."""
    proc = subprocess.run(["git", *args], cwd=top, capture_output=True, text=not raw,
                          check=False)
    return proc.stdout if proc.returncode == 0 else None


def toplevel(cwd: str | Path | None = None) -> str:
    proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise DiffError("not inside a git checkout: run this from inside the repository")
    return proc.stdout.strip()


@dataclass(frozen=True)
class Side:
    """Where one side's files come from: a git commit, or the working tree (commit None)."""

    label: str  # as the user wrote it: the column heading and the name in messages
    top: str
    commit: str | None = None

    def read(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode()

    def read_bytes(self, path: str) -> bytes | None:
        """The file's bytes as committed (dvc.lock's md5 is of these), None if absent."""
        if self.commit is not None:
            return _git(self.top, "show", f"{self.commit}:{path}", raw=True)
        file = Path(self.top, path)
        return file.read_bytes() if file.is_file() else None

    def listing(self, folder: str) -> list[str]:
        """The .json files under folder, relative to the top level."""
        if self.commit is not None:
            paths = (_git(self.top, "ls-tree", "-r", "--name-only", self.commit, folder)
                     or "").split()
        else:
            paths = [p.relative_to(self.top).as_posix() for p in Path(self.top, folder).rglob("*")
                     if p.is_file()]
        return sorted(p for p in paths if p.endswith(".json"))

    def where(self, path: str) -> str:
        return path if self.commit is None else f"{self.label}:{path}"


def experiments(top: str, name: str) -> list[str]:
    """The commits of the `dvc exp` experiments called name (one per baseline it ran on)."""
    refs = _git(top, "for-each-ref", "--format=%(refname) %(objectname)", "refs/exps") or ""
    return [sha for ref, sha in (line.split() for line in refs.splitlines())
            if (m := EXP_REF.fullmatch(ref)) and m.group(1) == name]


def resolve(top: str, rev: str) -> Side:
    """The workspace, a git revision, or a DVC experiment's name, in that order."""
    if rev == WORKSPACE:
        return Side(rev, top)
    sha = _git(top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if sha is not None:
        return Side(rev, top, sha.strip())
    exps = experiments(top, rev)
    if len(exps) > 1:
        raise DiffError(f"experiment name {rev!r} is ambiguous: it ran on {len(exps)} baselines "
                        f"(commits {', '.join(s[:7] for s in exps)}); pass one of those commits "
                        "instead (`dvc exp list --all-commits` shows which is which)")
    if not exps:
        raise DiffError(f"unknown revision {rev!r}: neither a git revision nor a DVC experiment; "
                        "check its name (`git branch -a`, `git log --oneline`, `dvc exp list`), "
                        f"or fetch it first (`git fetch`, `dvc exp pull <remote> {rev}`)")
    return Side(rev, top, exps[0])


def headline(detail: dict) -> dict[str, float]:
    """metric -> value: test pass@1, test and OOD pass@ at the largest k."""
    ks = sorted(int(k[5:]) for k in detail["test"] if k.startswith("pass@"))
    out = {"pass@1": float(detail["test"]["pass@1"]),
           f"pass@{ks[-1]}": float(detail["test"][f"pass@{ks[-1]}"])}
    if "ood" in detail:
        out[f"ood_pass@{ks[-1]}"] = float(detail["ood"][f"pass@{ks[-1]}"])
    return out


def made(params: dict | None) -> dict[str, list[str]] | None:
    """policy -> the tags (r<seed>, or `shared`) of the evaluation files a run with these
    params makes: each replicated policy on its chain's seeds (`replicates.<chain>`; the first
    one only for a first-replicate policy; chains.sampled, or for params from before that, the
    evaluate lists), each of `evaluate.shared` once. None without a `replicates.seeds` list
    (params from before replicates, or unreadable)."""
    reps = params.get("replicates") if isinstance(params, dict) else None
    if not isinstance(reps, dict) or not isinstance(reps.get("seeds"), list):
        return None
    evaluate = params.get("evaluate") or {}
    try:  # a chain without its own list trains on SFT's seeds (the oldest per-chain layout)
        seeds = {c: [int(s) for s in reps.get(seeds_key(c), reps["seeds"])] for c in CHAINS}
        # today the training stages say what is sampled; before, the evaluate lists did
        listed = {p: True for p in [*(evaluate.get("policies") or []),
                                    *(evaluate.get("controls") or [])]}
        listed |= {p: False for p in evaluate.get("first_replicate_only") or []
                   if p not in listed}
        every = {**listed, **sampled(params)}
    except (TypeError, ValueError, AttributeError):
        return None
    out = {p: [f"r{s}" for s in (seeds[chain] if all_seeds else seeds[chain][:1])]
           for p, all_seeds in every.items() if (chain := chain_of(p)) is not None}
    return out | {p: ["shared"] for p in evaluate.get("shared") or [] if isinstance(p, str)}


def lock_md5s(lock_text: str | None) -> dict[str, str]:
    """path -> md5 of every stage output dvc.lock records ({} without a readable lock)."""
    try:
        stages = yaml.load(lock_text or "", Loader=getattr(yaml, "CSafeLoader",
                                                           yaml.SafeLoader))["stages"]
        return {o["path"]: o["md5"] for st in stages.values() for o in st.get("outs", [])
                if "md5" in o}
    except (yaml.YAMLError, TypeError, KeyError, AttributeError):
        return {}


MODELS = "data/models/"


def upstream(lock_text: str | None) -> dict[str, dict[str, str]]:
    """model dir -> {each model dir its stage read: its md5}, from dvc.lock: what every
    trained policy was trained from (its init, SFT's base, the teacher, ...)."""
    try:
        stages = yaml.load(lock_text or "", Loader=getattr(yaml, "CSafeLoader",
                                                           yaml.SafeLoader))["stages"]
    except (yaml.YAMLError, TypeError, KeyError, AttributeError):
        return {}
    out = {}
    for st in stages.values():
        read = {d["path"]: d.get("md5") for d in st.get("deps", [])
                if d.get("path", "").startswith(MODELS)}
        for o in st.get("outs", []):
            if o.get("path", "").startswith(MODELS):
                out[o["path"]] = {p: m for p, m in read.items() if p != o["path"]}
    return out


def _name(model_dir: str) -> str:
    """data/models/sft/r6 -> sft; data/models/teacher -> teacher."""
    return re.sub(r"/r\d+$", "", model_dir.removeprefix(MODELS))


# what every arm builds on: when one of these differs between the sides, a compared policy's
# difference is not the variant's alone. An arm's init that is another arm (OPD from RLOO)
# differs when the variant changed that arm: that is the variant's own chain, not a confound
FOUNDATION = ("base", "teacher", "sft", "sft_early")


def upstream_of(policy: str, tags, lock_a: dict, lock_b: dict) -> tuple[list[str], list[str]]:
    """(the upstream policies `policy`'s draws were trained from, those whose dvc.lock hash
    differs between the sides for some draw)."""
    names, differ = {}, set()
    for tag in tags:
        out = MODELS + policy + ("" if tag == "shared" else f"/{tag}")
        a, b = lock_a.get(out, {}), lock_b.get(out, {})
        for path in a.keys() | b.keys():
            names[_name(path)] = True
            if a.get(path) != b.get(path):
                differ.add(_name(path))
    return list(names), sorted(differ)


@dataclass
class Run:
    """What one side's run made, and what was found beside it."""

    draws: dict[str, dict[str, dict[str, float]]]  # policy -> tag -> metric -> value
    by_params: bool  # the files were chosen by the side's params.yaml (else: every file)
    left_out: dict[str, list[str]] = field(default_factory=dict)  # policy -> tags its params
    # do not make (left over from another run)
    missing: dict[str, list[str]] = field(default_factory=dict)  # policy -> tags its params
    # make that are not there
    stale: list[str] = field(default_factory=list)  # files unlike dvc.lock's record of them


def _tag_of(path: str) -> tuple[str, str]:
    policy, _, tag = path[len(EVAL) + 1:].removesuffix(".json").partition("/")
    return policy, tag or "one"


def read_run(side: Side) -> Run:
    """The evaluation results of the run a side holds: only the files its params.yaml makes
    (made()), each as dvc.lock records it; what else lies in reports/details/eval/ (another
    run's replicates, e.g. an experiment of fewer seeds committed beside its baseline's files)
    is left out and counted."""
    paths = side.listing(EVAL)
    if not paths and side.commit is None:
        raise DiffError(f"the workspace has no evaluation results (no {EVAL}/*.json): run "
                        "`dvc repro` first, or compare two revisions (`countdown-rlvr diff A B`)")
    if not paths:
        raise DiffError(f"{side.label} has no evaluation results ({EVAL}/ is not in it): compare "
                        "a revision whose reports are committed, or `dvc repro` and commit "
                        "reports/ there")
    try:
        params = yaml.safe_load(side.read("params.yaml") or "")
    except yaml.YAMLError:
        params = None
    expected = made(params)
    recorded = lock_md5s(side.read("dvc.lock"))
    run = Run(defaultdict(dict), expected is not None, defaultdict(list))
    found = set()
    for path in paths:
        policy, tag = _tag_of(path)
        if expected is not None and tag not in expected.get(policy, ()):
            run.left_out[policy].append(tag)
            continue
        data = side.read_bytes(path) or b""
        found.add((policy, tag))
        if path in recorded and hashlib.md5(data).hexdigest() != recorded[path]:
            run.stale.append(path)
            continue
        try:
            detail = json.loads(data)
            if "test" not in detail:  # an untrained policy's details have no samples
                continue
            run.draws[policy][tag] = headline(detail)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise DiffError(f"{side.where(path)} is corrupt ({type(e).__name__}: {e}): re-run "
                            "its eval stage (`dvc repro`) and commit the file, or compare "
                            "another revision") from None
    run.missing = {p: lost for p, tags in (expected or {}).items()
                   if (lost := [t for t in tags if (p, t) not in found])}
    run.draws, run.left_out = dict(run.draws), dict(run.left_out)
    return run


def _natural(tags) -> list[str]:
    """r2 before r10."""
    return sorted(tags, key=lambda t: (not t[1:].isdigit(), int(t[1:]) if t[1:].isdigit() else 0,
                                       t))


def _span(tags: list[str]) -> str:
    """[r1, r2, r3, r5, shared] -> `r1-r3,r5,shared`: runs of consecutive seeds as ranges."""
    parts: list[list[str]] = []
    for t in _natural(tags):
        last = parts[-1][-1] if parts else ""
        if t[1:].isdigit() and last[1:].isdigit() and int(t[1:]) == int(last[1:]) + 1:
            parts[-1].append(t)
        else:
            parts.append([t])
    return ",".join(",".join(p) if len(p) < 3 else f"{p[0]}-{p[-1]}" for p in parts)


def _tags(by_policy: dict[str, list[str]]) -> str:
    """{sft: [r1, r2, r3], base: [shared]} -> `base shared; sft r1-r3`."""
    return "; ".join(f"{p} {_span(tags)}" for p, tags in sorted(by_policy.items()))


def run_notes(side: Side, run: Run) -> tuple[list[str], list[str]]:
    """(warnings, notes) on what a side's run made and what was left out of it."""
    warnings, notes = [], []
    if not run.by_params:
        warnings.append(f"WARNING: {side.label} has no params.yaml with `replicates.seeds`, so "
                        f"every file in its {EVAL}/ is read, including any left over from "
                        "another run.")
    if run.missing:
        n = sum(map(len, run.missing.values()))
        stages = ", ".join(sorted({evaluation_stage(p) for p in run.missing}))
        warnings.append(f"WARNING: {side.label} lacks {n} evaluation file{'s' * (n != 1)} its "
                        f"params.yaml makes ({_tags(run.missing)}): its run is incomplete and "
                        f"those replicates are left out; `dvc repro` there ({stages}) makes "
                        "them.")
    if run.stale:
        stale = ", ".join(run.stale[:4]) + (f" and {len(run.stale) - 4} more"
                                            if len(run.stale) > 4 else "")
        warnings.append(f"WARNING: {side.label}: {stale} differ from what its "
                        "dvc.lock records for them (edited, or another run's), so they are left "
                        "out; `dvc status` there names the stages to re-run.")
    if run.left_out:
        n = sum(map(len, run.left_out.values()))
        notes.append(f"note: {side.label} holds {n} evaluation file{'s' * (n != 1)} its "
                     f"params.yaml does not make ({_tags(run.left_out)}): left over from another "
                     "run, they are not read.")
    return warnings, notes


def data_outs(lock_text: str | None) -> dict[str, list] | None:
    """stage -> its cached data/ outputs' (path, md5) in a dvc.lock text, for the shared stages;
    None without a readable lock. Only data/ is a draw of the inputs: a stage's reports/ and
    dvclive/ outputs (git-tracked, `cache: false`: details, curves, model cards) summarise it,
    and a change to what a stage reports changes their hashes while the data stays the same."""
    if lock_text is None:
        return None
    try:
        stages = yaml.load(lock_text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        stages = stages["stages"]
        return {s: sorted((o["path"], o.get("md5")) for o in stages[s].get("outs", [])
                          if o["path"].startswith("data/") and o.get("cache", True) is not False)
                for s in SHARED_STAGES if s in stages}
    except (yaml.YAMLError, TypeError, KeyError, AttributeError):
        return None


def choose_test(side_a: Side, side_b: Side) -> tuple[bool, str, list[str]]:
    """(paired?, the reason, warnings) from the shared stages' data output hashes."""
    lock_a, lock_b = (data_outs(side.read("dvc.lock")) for side in (side_a, side_b))
    missing = [s.label for s, lock in ((side_a, lock_a), (side_b, lock_b)) if lock is None]
    if missing:
        why = f"no readable dvc.lock in {' and '.join(dict.fromkeys(missing))}"
    else:
        differ = [s for s in SHARED_STAGES if lock_a.get(s) != lock_b.get(s)]
        if not differ:
            return True, (f"shared inputs: the data/ outputs of {', '.join(SHARED_STAGES)} have "
                          "the same dvc.lock hashes on both sides, so r<seed> pairs with "
                          "r<seed>"), []
        why = f"the shared inputs' data/ outputs differ: {', '.join(differ)}"
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
        return {**out, "verdict": ONE_DRAW}
    if np.std(a) == 0 and np.std(b) == 0:
        return {**out, "verdict": "no spread: no test"}
    res = ttest_ind(b, a, equal_var=False)
    lo, hi = res.confidence_interval(1 - alpha)
    p = float(res.pvalue)
    return {**out, "ci_low": float(lo), "ci_high": float(hi), "p": p,
            "verdict": _verdict(p, alpha)}


def compare_paired(d: list[float], alpha: float = 0.05) -> dict:
    """The mean of per-replicate differences b - a with a one-sample t interval over them."""
    diff = float(np.mean(d))
    out = {"diff": diff, "ci_low": None, "ci_high": None, "p": None}
    if len(d) < 2:
        return {**out, "verdict": ONE_DRAW}
    # (x + s) - x is s only up to rounding: a shift common to every seed counts as zero spread
    if np.ptp(d) <= 1e-12:  # the diff column says by how much they all moved
        return {**out, "verdict": "zero spread: no test"}  # all equal; n: the count column
    res = ttest_1samp(d, 0.0)
    lo, hi = res.confidence_interval(1 - alpha)
    p = float(res.pvalue)
    return {**out, "ci_low": float(lo), "ci_high": float(hi), "p": p,
            "verdict": _verdict(p, alpha)}


def _verdict(p: float, alpha: float) -> str:
    return "differs" if p < alpha else "no detectable difference"


def adjust_family(rows: list[dict], alpha: float, method: str) -> int:
    """Sets each row's p_adj and, for the rows a paired test gave a verdict, the verdict from
    it; returns the family's size. Only those rows are tested: Welch rows (inputs differ), one
    draw on a side and zero spread have no verdict from a p, so they would only dilute it."""
    family = [r for r in rows if r["paired"] and r["p"] is not None]
    adjusted = [r["p"] for r in family]
    if family and method == "holm":
        from statsmodels.stats.multitest import multipletests  # slow import: only when needed

        adjusted = [float(p) for p in multipletests(adjusted, alpha=alpha, method="holm")[1]]
    for r in rows:
        r["p_adj"] = None
    for r, p in zip(family, adjusted, strict=True):
        r["p_adj"], r["verdict"] = p, _verdict(p, alpha)
    return len(family)


def diff(rev_a: str, rev_b: str = WORKSPACE, policies: list[str] | None = None,
         alpha: float = 0.05, show_all: bool = False, cwd: str | Path | None = None,
         adjust: str = "holm") -> dict:
    """The whole comparison: the test used and why, warnings, rows, hidden unchanged rows."""
    if not 0 < alpha < 1:
        raise DiffError(f"--alpha must be between 0 and 1 (exclusive), e.g. 0.05; got {alpha:g}")
    if adjust not in ADJUST:
        raise DiffError(f"--adjust must be one of {', '.join(ADJUST)}; got {adjust!r}")
    top = toplevel(cwd)
    side_a, side_b = resolve(top, rev_a), resolve(top, rev_b)
    run_a, run_b = read_run(side_a), read_run(side_b)
    old, new = run_a.draws, run_b.draws
    known = sorted(set(old) & set(new))
    unknown = sorted(set(policies or []) - set(known))
    if unknown:
        raise DiffError(f"unknown policy {', '.join(unknown)}; the policies with results in "
                        f"both {rev_a} and {rev_b} are: {', '.join(known) or '(none)'}")
    paired, reason, warnings = choose_test(side_a, side_b)
    notes = []
    for side, run in ((side_a, run_a), (side_b, run_b)):
        w, n = run_notes(side, run)
        warnings, notes = warnings + w, notes + n
    up_a, up_b = (upstream(side.read("dvc.lock")) for side in (side_a, side_b))
    ups = {p: upstream_of(p, old[p].keys() | new[p].keys(), up_a, up_b) for p in known}
    confounded = {p: f for p, (_, d) in ups.items() if (f := [u for u in d if u in FOUNDATION])}
    chained = {p: c for p, (_, d) in ups.items() if (c := [u for u in d if u not in FOUNDATION])}
    rows, hidden = [], {}
    # every policy's rows, whatever --policy shows: they are the family Holm corrects over,
    # so narrowing the display cannot change an adjusted p
    for policy in known:
        a, b = old[policy], new[policy]
        common = sorted(a.keys() & b.keys())
        if paired and set(a) != set(b) and (not policies or policy in policies):
            warnings.append(f"{policy}: draws on one side only "
                            f"({', '.join(sorted(a.keys() ^ b.keys()))}) are left out of the "
                            "pairing")
        metrics = dict.fromkeys(m for v in a.values() for m in v)  # ordered, as headline()
        for metric in (m for m in metrics if any(m in v for v in b.values())):
            va = {t: v[metric] for t, v in a.items() if metric in v}
            vb = {t: v[metric] for t, v in b.items() if metric in v}
            if va == vb and not show_all:
                hidden[policy] = hidden.get(policy, 0) + 1
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
                    stats["verdict"] = "no common seed: no test"
            rows.append({"policy": policy, "metric": metric, "mean_a": float(np.mean(xa)),
                         "mean_b": float(np.mean(xb)), **stats, "n_a": len(xa),
                         "n_b": len(xb), "paired": bool(paired and tags),
                         "upstream": ups[policy][0],
                         "upstream_differs": confounded.get(policy, [])})
    family = adjust_family(rows, alpha, adjust)
    shown = [r for r in rows if not policies or r["policy"] in policies]
    test = ("paired t-test on per-replicate differences" if paired
            else "Welch t-test over replicates")
    shown_conf = {p: d for p, d in confounded.items() if not policies or p in policies}
    if shown_conf:
        warnings.append("CONFOUNDED: " + "; ".join(
            f"{p} was trained from a different {', '.join(d)}" for p, d in shown_conf.items()) +
            " on the two sides, so its rows (marked *) mix the variant with a new upstream "
            "policy: the difference is not the variant's alone")
    return {"rev_a": rev_a, "rev_b": rev_b, "alpha": alpha, "test": test, "reason": reason,
            "upstream": _upstream_line(confounded, chained, bool(up_a and up_b)),
            "adjust": adjust, "family": family,
            "family_shown": sum(r["p_adj"] is not None for r in shown),
            "policies": sorted(policies) if policies else None, "warnings": warnings,
            "notes": notes, "rows": shown,
            "hidden_unchanged": sum(n for p, n in hidden.items()
                                    if not policies or p in policies),
            "replicates": {"a": {p: _natural(v) for p, v in old.items()},
                           "b": {p: _natural(v) for p, v in new.items()}}}


def _upstream_line(confounded: dict, chained: dict, known: bool) -> str:
    """The header's account of what the compared policies were trained from."""
    if not known:
        return "unknown (no dvc.lock with model dirs on a side)"
    line = ("differ: " + "; ".join(f"{p} from another {', '.join(d)}"
                                   for p, d in confounded.items())
            if confounded else "the same base, teacher and SFT policies on both sides")
    by_init: dict[str, list[str]] = defaultdict(list)
    for p, inits in chained.items():
        for i in inits:
            by_init[i].append(p)
    return line + "".join(f"; {', '.join(ps)} start from {i}, which differs (the variant's own "
                          "chain)" for i, ps in by_init.items())


def multiplicity(report: dict) -> str:
    """The header line that says how the tested rows' p were corrected, and how many there are."""
    n, alpha = report["family"], report["alpha"]
    rows = f"{n} tested row{'s' * (n != 1)}"
    if not n:
        return "multiplicity: no row is tested (family of 0), so there is nothing to correct"
    if report["adjust"] == "none":
        return (f"multiplicity: no correction (--adjust none): each of the {rows} at alpha "
                f"{alpha:g} alone (with no true change, about {alpha * n:.2g} of them would "
                "read `differs`); adj. p = p")
    among = (f", every policy's: --policy shows {report['family_shown']} of them"
             if report.get("policies") else "")
    return (f"multiplicity: Holm's correction over the family of {rows} (family-wise error "
            f"{alpha:g}){among}; the verdict uses adj. p")


def _cells(r: dict) -> list[str]:
    from .compare import fmt_ci, fmt_p  # pandas and the stats: only when a table is printed

    ci = "-" if r["ci_low"] is None else fmt_ci(None, r["ci_low"], r["ci_high"], "+.3f")
    mark = "*" if r.get("upstream_differs") else ""
    return [r["policy"] + mark, r["metric"], f"{r['mean_a']:.3f}", f"{r['mean_b']:.3f}",
            f"{r['n_a']}/{r['n_b']}", f"{r['diff']:+.3f}", ci, fmt_p(r["p"], 2, "-"),
            fmt_p(r["p_adj"], 2, "-"), r["verdict"]]


def _short(label: str, width: int = len(WORKSPACE)) -> str:
    """A column heading that leaves the verdict room: a long branch name or a full sha cut."""
    return label if len(label) <= width else label[:width - 1] + "…"


def _text_table(table: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell; the last one (the verdict) wrapped so that a row
    fits WIDTH, its continuation lines under it."""
    width = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    left = sum(width[:-1]) + 2 * (len(width) - 1)
    room = max(WIDTH - left, 16)
    lines = []
    for row in table:
        verdict = textwrap.wrap(row[-1], room, break_on_hyphens=False) or [""]
        lead = "  ".join(c.ljust(w) for c, w in zip(row[:-1], width))
        lines.append(f"{lead}  {verdict[0]}".rstrip())
        lines += [" " * left + part for part in verdict[1:]]
    return lines


def _md(text: str) -> str:
    """Code spans around <word> (r<seed>): a markdown renderer drops it as an HTML tag."""
    return re.sub(r"\w*<\w+>\w*", lambda m: f"`{m.group()}`", text)


def render(report: dict, fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(report, indent=2) + "\n"
    labels = [report["rev_a"], report["rev_b"]]
    header = [f"test: {report['test']} ({report['reason']})",
              *([f"upstream: {report['upstream']}"] if report.get("upstream") else []),
              multiplicity(report)]
    if fmt == "text" and labels != [_short(label) for label in labels]:
        header.append("columns: " + ", ".join(f"{_short(x)} is {x}" for x in labels
                                              if _short(x) != x))
        labels = [_short(label) for label in labels]
    head = ["policy", "metric", *labels, "n", "diff", f"{100 * (1 - report['alpha']):g}% CI",
            "p", "adj. p", "verdict"]
    table = [head] + [_cells(r) for r in report["rows"]]
    if fmt == "md":
        lines = [x for h in header for x in (_md(h), "")][:-1]  # one paragraph each
        lines += [f"\n> **{_md(w)}**" for w in report["warnings"]]
        lines += [f"\n> {_md(n)}" for n in report["notes"]] + [""]
        from .compare import md_table  # pandas and the stats: only when a table is printed

        md = [[_md(c) for c in row] for row in table]
        lines += md_table(md[0], md[1:], tight_rule=True)
    else:
        lines = [ln for h in header + report["warnings"] + report["notes"]
                 for ln in textwrap.wrap(h, WIDTH, subsequent_indent="  ",
                                         break_on_hyphens=False)]
        lines += [""] + _text_table(table)
    if not report["rows"]:
        lines.append("(no row differs between the two sides)")
    if n := report["hidden_unchanged"]:
        lines += ["", (f"{n} unchanged row{'s' * (n != 1)} hidden (the same values on both "
                       "sides; --all shows them)")]
    return "\n".join(lines) + "\n"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("rev_a", help="the baseline: a git revision (e.g. main), a `dvc exp` name "
                    "or `workspace`")
    ap.add_argument("rev_b", nargs="?", default=WORKSPACE,
                    help="the side compared with it, the same kinds (default: the workspace)")
    ap.add_argument("--policy", action="append",
                    help="show only this policy's rows (repeatable); Holm's family stays every "
                    "policy's tested rows")
    ap.add_argument("--all", action="store_true",
                    help="also show rows whose values are the same on both sides")
    ap.add_argument("--alpha", type=float, default=0.05,
                    help="1 - interval coverage, and the tests' (family-wise) level; in (0, 1)")
    ap.add_argument("--adjust", choices=ADJUST, default="holm",
                    help="multiplicity correction over the tested rows (default: holm)")
    ap.add_argument("--format", choices=("text", "md", "json"), default="text",
                    help="text (a table for a terminal, the default), md or json")


def run(args: argparse.Namespace) -> int:
    try:
        report = diff(args.rev_a, args.rev_b, args.policy, args.alpha, args.all,
                      adjust=args.adjust)
    except DiffError as e:
        print(f"countdown-rlvr diff: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(render(report, args.format))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m countdown_rlvr.analysis.branch_diff",
                                 description=__doc__.split("\n\n")[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
