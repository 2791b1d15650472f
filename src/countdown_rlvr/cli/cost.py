"""What a change re-runs, and what that costs, before the run: `countdown-rlvr cost`.

    countdown-rlvr cost -S rloo.lr=1e-5              # the stages a params override re-runs
    countdown-rlvr cost --file src/countdown_rlvr/task/generate.py   # ... an edit to a file
    countdown-rlvr cost --run -S replicates.shared_sft=6 ...   # a whole run of a design
    countdown-rlvr cost --write                      # the generated tables in the docs
    countdown-rlvr cost --check                      # exit 1 when they are stale (a test does)

A params key re-runs every stage whose `params:` in dvc.yaml name it (or the section that
holds it) and, downstream, every stage that reads their outputs; a source file, every stage
that lists it as a code dep and what reads their outputs. Both are read from DVC's own view
of the pipeline (`dvc.repo.Repo(...).index`: dvc.yaml expanded over params.yaml, exactly what
`dvc repro` runs), with `check_params` left out: it re-runs on any params change but its
output never changes, so it re-runs nothing after it. The prediction is an upper bound: DVC
skips a stage whose inputs came out byte-identical (an RL run of 0 steps, say).

Minutes are the committed run's stage times: a training stage's own seconds from its
`reports/timings/` file (in git, so a fresh clone has them), and for a stage without one (an
evaluation, the data stages) UNTIMED_S, the committed run's wall time less its timed stages'
seconds, over its untimed stages (DVC's own overhead included); a timed stage adds that
overhead (OVERHEAD_S) to its own seconds.

`--run` prices a whole `dvc repro` from nothing of the params with the overrides applied (a
design for the next run: other seeds, one shared SFT, more samples per problem): dvc.yaml made
from them as `experiment --write` would, expanded by DVC, each stage timed as the committed
run's stage that wrote the same timing file (dvc.lock's outs), else as the mean of that
file's replicate group there (a new seed's RLOO arm as the mean of that run's; an arm moved to
the first replicate keeps its files' place), and an evaluation that samples a policy more than
`evaluate.n` times adds SAMPLE_S per extra 16 samples per 400 problems of each split it
samples (the development split too, for a policy of `evaluate.dev_policies`), and an int stage
its phase 7's samples beyond the committed run's (`int.claim_samples`, INT_SAMPLE_S each). A
stage whose
params changed since the committed run is timed as it ran then.

The generated tables: docs/running.md (each params key's re-run stages and minutes, keys with
the same stages in one row) and docs/design.md (each source file's stages), between
`<!-- cost:... -->` markers; tests/test_cost.py fails when either is stale or when a training
section's key reaches a shared upstream stage or SFT.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import yaml

from ..core.config import at, has, merged
from ..core.errors import StageError
from ..core.io import write_text
from .experiment import generate
from .imports import ROOT
from .stage_map import replicate_group
from .stage_params import check_all

GATE = "check_params"
# the committed run (seed 19, an idle 2-core Zen 4): 153 min 08 s for 64 stages (two
# invocations 30 s apart, the 30 s included: docs/committed-run.md), of which 33 have a timings
# file (7,680 s; the int stages' include their phase 7 at int.claim_samples 32); per timed
# stage, DVC's own bookkeeping on top (benchmarks/bench_stage_overhead.py: ~6 s), the extra
# samples of the OPD arms' evaluations (15 x SAMPLE_S), and for each of the 31 others, what is
# left, its bookkeeping included: (9,188 - 7,680 - 33 x 6 - 15 x 11) / 31 = 37 s
COMMITTED_WALL_S = 9188
OVERHEAD_S = 6.0
UNTIMED_S = 37.0
# what the stages re-run since the committed run took off their timing files: none has
RERUN_SAVED_S = 0.0
# sampling 16 more completions per prompt of 400 problems, measured in that run: anti-collapse
# OPD's test evaluation at 64 samples took 55 s against binary RLOO's 21 s at 16 (3 units: 11.4 s
# each), plain OPD's test and dev 105 s against SFT's 43 s (6 units: 10.3 s each)
SAMPLE_S = 11.0
# S3's phase 7 (`int.claim_samples`): one sample of one of its two arms on one held-out
# problem, from the int pilot's first replicate (scripts/pilots/int_samples.py on Zen 4, light
# edits beside it: 208 s less its selection sampling's ~72 s for 2 x 224 problems x 64
# samples); the held-out problems: int.n_problems x the share SFT's 32 samples all fail
# (21.2% in the committed run's replicates) x int.heldout_frac. The committed run's int stages
# sampled COMMITTED_CLAIM_SAMPLES, so their timings hold that many; a design prices the rest.
INT_PILOT_S = 136.0
INT_SAMPLE_S = INT_PILOT_S / (2 * 224 * 64)
UNSOLVED_SHARE = 0.212
COMMITTED_CLAIM_SAMPLES = 32
# the stages every policy reads, and SFT: no key of a training section may reach them
UPSTREAM = ("problems", "base", "traces", "teacher", "teacher_traces", "dedup", "pairs")
TRAINING_SECTIONS = ("rloo", "opd", "ipo", "int", "distill", "repair")
DOCS = {"keys": "docs/running.md", "files": "docs/design.md"}  # where each table goes


@dataclass
class Pipeline:
    """dvc.yaml as DVC expands it: each stage's params keys, code deps, timing file and
    the data flow (edge a -> b: b reads an output of a)."""
    params: dict[str, list[str]]  # stage -> params keys ([] for all of params.yaml)
    files: dict[str, list[str]]  # stage -> its deps under src/ and stages/
    timing: dict[str, str | None]  # stage -> its reports/timings/ out, if any
    outs: dict[str, list[str]]  # stage -> its outputs
    flow: nx.DiGraph
    cmds: dict[str, str]  # stage -> its command

    @classmethod
    def load(cls, root: str | Path = ROOT) -> Pipeline:
        from dvc.repo import Repo  # DVC reads dvc.yaml + params.yaml exactly as `dvc repro`

        params, files, timing, outs, cmds, flow = {}, {}, {}, {}, {}, nx.DiGraph()
        with Repo(str(root)) as repo:
            for stage in repo.index.stages:
                name = stage.name
                flow.add_node(name)
                params[name] = [k for d in stage.deps if type(d).__name__ == "ParamsDependency"
                                for k in (d.params or [""])]
                files[name] = [d.def_path for d in stage.deps
                               if d.def_path.startswith(("src/", "stages/"))]
                outs[name] = [o.def_path for o in stage.outs]
                cmds[name] = stage.cmd
                timing[name] = next((o for o in outs[name]
                                     if o.startswith("reports/timings/")), None)
            flow.add_edges_from((b.name, a.name) for a, b in repo.index.graph.edges)
        return cls(params, files, timing, outs, flow, cmds)

    def downstream(self, seeds: set[str]) -> set[str]:
        """The seeds and every stage that reads, directly or not, one of their outputs; the
        params check's constant output passes nothing on."""
        out = set(seeds)
        for s in seeds - {GATE}:
            out |= nx.descendants(self.flow, s) - {GATE}
        return out

    def reads(self, key: str) -> set[str]:
        """The stages whose params name params key `key` (dotted), or a section holding it."""
        def names(listed: str) -> bool:
            return listed in ("", key) or key.startswith(listed + ".") or \
                listed.startswith(key + ".")
        return {s for s, keys in self.params.items() if s != GATE and any(map(names, keys))}

    def by_key(self, key: str) -> set[str]:
        """The stages a change to params key `key` re-runs."""
        return self.downstream(self.reads(key))

    def by_file(self, path: str) -> set[str]:
        """The stages an edit to `path` re-runs (its code deps, file by file)."""
        return self.downstream({s for s, fs in self.files.items() if path in fs})

    def seconds(self, stages: set[str], root: str | Path = ROOT) -> float:
        """Their wall time at the committed run's stage times (stage_seconds)."""
        times = committed_times(root)
        return sum(stage_seconds(self.timing.get(s), times) for s in stages)

    def missing(self, root: str | Path = ROOT) -> set[str]:
        """Stages whose cached outputs (data/) are not in the workspace: a fresh clone's, or
        a workspace that never ran them; `dvc repro` runs them (and what reads them) first."""
        return {s for s, outs in self.outs.items()
                if any(o.startswith("data/") and not Path(root, o).exists() for o in outs)}


def committed_times(root: str | Path = ROOT) -> dict[str, float]:
    """{timing file: seconds} of the committed run: the `reports/timings/` outs dvc.lock
    records (git holds the files, so a fresh clone has them). Read from the lock, not from
    dvc.yaml, so the prices stay the committed run's while params.yaml plans another."""
    lock = Path(root, "dvc.lock")
    stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {}) if lock.is_file() else {}
    out = {}
    for stage in stages.values():
        for o in stage.get("outs", []):
            f = Path(root, o["path"])
            if not (o["path"].startswith("reports/timings/") and f.is_file()):
                continue
            if (sec := json.loads(f.read_text()).get("seconds")) is not None:
                out[o["path"]] = float(sec)
    return out


def _timing_group(path: str) -> str:
    """`reports/timings/rloo/r11.json` -> `reports/timings/rloo`: a replicated stage's
    timings, whatever its stage is called (an arm moved to the first replicate only
    keeps its timing files' place)."""
    return re.sub(r"/r\d+\.json$", "", path)


def stage_seconds(timing: str | None, times: dict[str, float]) -> float:
    """A stage's wall time at the committed run's: a stage with a timing file, its seconds
    there (its replicate group's mean for a seed that run did not train; a stage new since,
    OVERHEAD_S + UNTIMED_S) plus DVC's OVERHEAD_S; a stage without one, UNTIMED_S."""
    if timing is None:
        return UNTIMED_S
    if timing in times:
        return OVERHEAD_S + times[timing]
    peers = [v for p, v in times.items() if _timing_group(p) == _timing_group(timing)]
    return OVERHEAD_S + (sum(peers) / len(peers) if peers else UNTIMED_S)


def group(stages: set[str]) -> dict[str, int]:
    """`rloo@rloo-19`, `rloo@rloo-20` -> {`rloo@rloo`: 2}: replicates counted, not listed."""
    out: dict[str, int] = defaultdict(int)
    for s in stages:
        out[replicate_group(s)] += 1
    return dict(sorted(out.items()))


def describe(stages: set[str]) -> str:
    return ", ".join(f"{g} x{n}" if n > 1 else g for g, n in group(stages).items())


def leaf_keys(params: dict, prefix: str = "") -> list[str]:
    """Every leaf key of params.yaml, dotted (a list value is a leaf)."""
    out = []
    for k, v in params.items():
        key = f"{prefix}{k}"
        out += leaf_keys(v, key + ".") if isinstance(v, dict) and v else [key]
    return out


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f}"


def keys_table(pipe: Pipeline, params: dict, root: str | Path = ROOT) -> str:
    """Markdown: each params key's re-run stages (keys with the same stages share a row):
    the stages whose params name it, then how many more read their outputs."""
    rows: dict[frozenset, list[str]] = defaultdict(list)
    for key in leaf_keys(params):
        rows[frozenset(pipe.by_key(key))].append(key)
    lines = ["| keys | stages | min | the stages that read it (+ those downstream) |",
             "| --- | --- | --- | --- |"]
    for stages, keys in sorted(rows.items(), key=lambda r: (len(r[0]), r[1][0])):
        shown = ", ".join(f"`{k}`" for k in keys[:4]) + \
            (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
        direct = pipe.reads(keys[0])
        groups = group(direct)
        named = describe(direct) if len(groups) <= 4 else \
            f"{len(direct)} stages: {', '.join(list(groups)[:3])}, ..."
        which = f"{named} (+ {len(stages) - len(direct)})" if stages else "(none)"
        lines.append(f"| {shown} | {len(stages)} | "
                     f"{minutes(pipe.seconds(set(stages), root))} | {which} |")
    return "\n".join(lines)


def files_table(pipe: Pipeline, root: str | Path = ROOT) -> str:
    """Markdown: each library file, the stages that run it and what an edit re-runs."""
    paths = sorted({f for fs in pipe.files.values() for f in fs if f.startswith("src/")})
    lines = ["| file | stages that run it | an edit re-runs |", "| --- | --- | --- |"]
    for p in paths:
        runs = {s for s, fs in pipe.files.items() if p in fs}
        lines.append(f"| `{p.removeprefix('src/countdown_rlvr/')}` | {len(runs)} | "
                     f"{len(pipe.by_file(p))} |")
    return "\n".join(lines)


def _marked(text: str, name: str, table: str) -> str:
    start, end = f"<!-- cost:{name} (generated: countdown-rlvr cost --write) -->", \
        f"<!-- /cost:{name} -->"
    if start not in text or end not in text:
        raise SystemExit(f"{name}: the markers {start} ... {end} are missing from its doc")
    head, rest = text.split(start, 1)
    return f"{head}{start}\n{table}\n{end}{rest.split(end, 1)[1]}"


def rendered(root: str | Path = ROOT) -> dict[Path, str]:
    """Each doc with its generated table made anew."""
    pipe = Pipeline.load(root)
    params = yaml.safe_load(Path(root, "params.yaml").read_text())
    tables = {"keys": keys_table(pipe, params, root), "files": files_table(pipe, root)}
    return {Path(root, DOCS[n]): _marked(Path(root, DOCS[n]).read_text(), n, t)
            for n, t in tables.items()}


def override_keys(overrides: list[str], params: dict) -> list[str]:
    """The keys of `-S key=value` overrides whose value differs from params.yaml's (an
    override that repeats the current value re-runs nothing)."""
    keys = []
    for o in overrides:
        key, eq, value = o.partition("=")
        if not eq:
            raise SystemExit(f"cost: -S {o!r} is not key=value (as `dvc exp run -S`)")
        if not has(params, key):
            raise SystemExit(f"cost: {key!r} is not a params.yaml key; see params.yaml")
        if yaml.safe_load(value) != at(params, key):
            keys.append(key)
    return keys


def with_overrides(params: dict, overrides: list[str]) -> dict:
    """`params` with `-S key=value` overrides applied as `dvc exp run -S` applies them (a
    mapping value merges into the mapping it replaces)."""
    for key in override_keys(overrides, params):
        value = yaml.safe_load(next(o for o in overrides if o.partition("=")[0] == key)
                               .partition("=")[2])
        for part in reversed(key.split(".")):
            value = {part: value}
        params = merged(params, value)
    return params


def extra_samples(cmd: str, params: dict) -> float:
    """Seconds an evaluation stage (its `cmd`: `python stages/evaluate.py <policy> ...`) adds
    by sampling its policy more than `evaluate.n` times per prompt (`evaluate.n_by_policy`),
    and an int stage by its phase 7 (`int.claim_samples`) beyond the committed run's (fewer:
    negative)."""
    args = shlex.split(cmd)
    if "stages/int.py" in args[:2]:
        held = (at(params, "int.n_problems") or 0) * UNSOLVED_SHARE * at(params, "int.heldout_frac")
        more = (at(params, "int.claim_samples") or 0) - COMMITTED_CLAIM_SAMPLES
        return INT_SAMPLE_S * 2 * more * held
    if "stages/evaluate.py" not in args[:2] or len(args) < 3:
        return 0.0
    n = at(params, "evaluate.n")
    more = (at(params, "evaluate.n_by_policy") or {}).get(args[2], n)
    # every split it samples: evaluate.splits, and dev for a policy of evaluate.dev_policies
    splits = [*at(params, "evaluate.splits"),
              *(["dev"] if args[2] in (at(params, "evaluate.dev_policies") or []) else [])]
    problems = sum(at(params, f"problems.n_{split}") or 0 for split in splits)
    return SAMPLE_S * max(more - n, 0) / 16 * problems / 400


def run_estimate(params: dict, root: str | Path = ROOT) -> tuple[float, dict[str, tuple]]:
    """(seconds, {replicate group: (stages, seconds)}) of a whole `dvc repro` of `params` from
    nothing, at the committed run's stage times (`root`'s dvc.lock and its timing files:
    stage_seconds), with the samples `evaluate.n_by_policy` adds."""
    times = committed_times(root)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        Path(tmp, "dvc.yaml").write_text(generate(params))
        subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=tmp,
                       check=True)
        design = Pipeline.load(tmp)
        cmds = design.cmds
    total, groups = 0.0, defaultdict(lambda: [0, 0.0])
    for stage, cmd in cmds.items():
        sec = stage_seconds(design.timing.get(stage), times) + extra_samples(cmd, params)
        total += sec
        g = groups[replicate_group(stage)]
        g[0], g[1] = g[0] + 1, g[1] + sec
    return total, {g: tuple(v) for g, v in sorted(groups.items())}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("-S", "--set-param", dest="overrides", action="append", default=[],
                    metavar="KEY=VALUE", help="a params override, as `dvc exp run -S`")
    ap.add_argument("--file", action="append", default=[], metavar="PATH",
                    help="a source file you edit (relative to the repository)")
    ap.add_argument("--write", action="store_true",
                    help="write the generated tables into docs/running.md and docs/design.md")
    ap.add_argument("--check", action="store_true", help="exit 1 when those tables are stale")
    ap.add_argument("--run", dest="whole", action="store_true",
                    help="the minutes of a whole run of the params with the -S overrides (a "
                    "design), stage group by stage group")


def run(args: argparse.Namespace, root: str | Path = ".") -> int:
    if args.write or args.check:
        docs = rendered(root)
        stale = [p for p, text in docs.items() if p.read_text() != text]
        for p in stale if args.write else ():
            write_text(p, docs[p])
        if args.check and stale:
            print(f"stale: {', '.join(map(str, stale))}; run `countdown-rlvr cost --write`")
            return 1
        return 0
    if args.whole:
        params = yaml.safe_load(Path(root, "params.yaml").read_text())
        design = with_overrides(params, args.overrides)
        try:
            check_all(design)  # a design the params check refuses has no run to price
        except StageError as exc:
            print(f"cost: {exc.code}", file=sys.stderr)
            return 2
        total, groups = run_estimate(design, root)
        what = " ".join(f"-S {o}" for o in args.overrides) or "the params as they are"
        print(f"{what}: a whole run, {sum(n for n, _ in groups.values())} stages, "
              f"~{minutes(total)} min at the committed run's stage times (each new replicate "
              "as its group's mean there; a stage whose params changed since, as it ran then)")
        for g, (n, sec) in groups.items():
            print(f"  {g}" + (f" x{n}" if n > 1 else "") + f"  {sec / 60:.1f} min")
        return 0
    if not (args.overrides or args.file):
        print("cost: give -S KEY=VALUE or --file PATH (see --help)", file=sys.stderr)
        return 2
    pipe = Pipeline.load(root)
    params = yaml.safe_load(Path(root, "params.yaml").read_text())
    keys = override_keys(args.overrides, params)
    stages = set().union(*(pipe.by_key(k) for k in keys), *(pipe.by_file(f) for f in args.file))
    if keys:  # a params change re-runs the params check too (its output stays the same)
        stages.add(GATE)
    what = " ".join([*(f"-S {o}" for o in args.overrides), *(f"--file {f}" for f in args.file)])
    print(f"{what}: {len(stages)} of {len(pipe.params)} stages, "
          f"~{minutes(pipe.seconds(stages, root))} min at the committed run's stage times "
          "(an upper bound: DVC skips a stage whose inputs came out byte-identical)")
    if unchanged := [o for o in args.overrides if o.partition("=")[0] not in keys]:
        print(f"  unchanged (the value params.yaml has): {', '.join(unchanged)}")
    for g, n in group(stages).items():
        print(f"  {g}" + (f" x{n}" if n > 1 else ""))
    if missing := pipe.missing(root):
        first = pipe.downstream(missing) | stages
        print(f"this workspace lacks the outputs of {len(missing)} stages (a fresh clone has "
              "the results in git, not the data and models): the run would first make them, "
              f"{len(first)} stages, ~{minutes(pipe.seconds(first, root))} min in all; or "
              "`dvc pull` them from a remote (docs/running.md#a-remote-for-the-models)")
    return 0
