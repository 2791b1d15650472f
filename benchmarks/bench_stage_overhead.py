"""Per-stage overhead outside a torch stage's work: imports and the model load.

Compares, in the same run, the committed code (HEAD's src/ and stages/, materialised with
`git archive` into a temp dir, removed at the end) with the working tree:

  * imports: `python -c "runpy.run_path('stages/<name>.py')"` under a run name other than
    __main__, i.e. everything a stage script runs up to (excluding) main(); wall time of the
    whole process, interpreter start included;
  * load: a saved tiny policy (built once with `model.build_tiny`) loaded by `load_model`,
    timed inside the process (after the imports), and the whole process's wall time;
  * startup: the --profile stage's imports then that load in one process, what a stage
    pays before its work (a lazy import moves its cost from the imports into the load).

Every item runs --repeats times (median), baseline and working tree interleaved, their order
alternating per round, so drift on shared cores hits both alike. Then `-X importtime` of one
stage's imports with the working tree: the top modules by cumulative time and self time
summed by top-level package.

    python benchmarks/bench_stage_overhead.py [--repeats 5] [--stages sft rloo evaluate]
"""

from __future__ import annotations

import argparse
import io
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOAD = """
import sys, time
from countdown_rlvr.model.policy import load_model
t0 = time.perf_counter()
load_model(sys.argv[1])
print(f"LOAD {time.perf_counter() - t0:.6f}")
"""


def materialise_head(dest: Path) -> str:
    """HEAD's src/ and stages/ under `dest`; returns the commit id."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    tar = subprocess.run(["git", "archive", "--format=tar", commit, "src", "stages"],
                         cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(dest, filter="data")
    return commit


def env_for(tree: Path) -> dict[str, str]:
    """Environment whose `countdown_rlvr` is `tree`/src (PYTHONPATH precedes the editable
    install's path entry)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run(tree: Path, args: list[str]) -> tuple[float, str]:
    """(wall seconds, stdout) of `python *args` with `tree` as cwd and code."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, *args], cwd=tree, env=env_for(tree), check=True,
                         capture_output=True, text=True)
    return time.perf_counter() - t0, out.stdout


def check_trees(trees: dict[str, Path]) -> None:
    for name, tree in trees.items():
        _, out = run(tree, ["-c", "import countdown_rlvr; print(countdown_rlvr.__file__)"])
        if not Path(out.strip()).is_relative_to(tree):
            sys.exit(f"{name}: countdown_rlvr resolves to {out.strip()}, not under {tree}")


def importtime(tree: Path, stage: str) -> list[tuple[str, int, int, int]]:
    """(module, self us, cumulative us, depth) per `-X importtime` line of `stage`'s imports."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", stage_code(stage)], cwd=tree,
                         env=env_for(tree), check=True, capture_output=True, text=True).stderr
    rows = []
    for line in out.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            rows.append((m[4], int(m[1]), int(m[2]), len(m[3]) // 2))
    return rows


def subtree(rows: list[tuple[str, int, int, int]], package: str) -> int:
    """Cumulative microseconds of `package` and what it imported: the sum over the rows of
    its modules whose importer (the next row less deep) is outside it."""
    def inside(mod: str) -> bool:
        return mod == package or mod.startswith(package + ".")

    total = 0
    for i, (mod, _, cum, depth) in enumerate(rows):
        if inside(mod):
            parent = next((r[0] for r in rows[i + 1:] if r[3] < depth), "")
            total += 0 if inside(parent) else cum
    return total


def stage_code(stage: str) -> str:
    return f"import runpy; runpy.run_path('stages/{stage}.py', run_name='bench_imports')"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--stages", nargs="+", default=["sft", "rloo", "evaluate"])
    ap.add_argument("--profile", default="rloo", help="stage whose imports -X importtime shows")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_overhead_") as tmp:
        tmp = Path(tmp)
        commit = materialise_head(tmp / "head")
        trees = {"baseline": tmp / "head", "new": ROOT}
        check_trees(trees)
        policy = tmp / "policy"
        build = "import sys; from countdown_rlvr.model.policy import build_tiny; " \
                "build_tiny('student', sys.argv[1], seed=0)"
        run(ROOT, ["-c", build, str(policy)])

        items = {f"import stages/{s}.py": ["-c", stage_code(s)] for s in args.stages}
        items["load tiny policy (process wall)"] = ["-c", LOAD, str(policy)]
        # what a stage pays before its work: a lazy import only moves cost into the load
        items[f"stages/{args.profile}.py imports + load"] = [
            "-c", stage_code(args.profile) + "\n" + LOAD, str(policy)]
        times: dict[tuple[str, str], list[float]] = defaultdict(list)
        for r in range(args.repeats):
            order = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for item, cmd in items.items():
                for name in order:
                    wall, out = run(trees[name], cmd)
                    times[item, name].append(wall)
                    m = re.search(r"^LOAD ([\d.]+)$", out, re.MULTILINE)
                    if m and item.startswith("load"):
                        times["load_model() in process", name].append(float(m[1]))
            print(f"round {r + 1}/{args.repeats} done", file=sys.stderr)

        print(f"baseline = HEAD {commit[:10]}, new = working tree; median seconds of "
              f"{args.repeats} interleaved runs (load avg at end: {os.getloadavg()[0]:.2f})\n")
        print(f"{'item':40s} {'baseline':>9s} {'new':>9s} {'saved':>8s} {'new/base':>9s}")
        for item in [*items, "load_model() in process"]:
            base = statistics.median(times[item, "baseline"])
            new = statistics.median(times[item, "new"])
            print(f"{item:40s} {base:9.3f} {new:9.3f} {base - new:8.3f} {new / base:9.2f}")

        for name in ("baseline", "new"):
            rows = importtime(trees[name], args.profile)
            by_package: dict[str, int] = defaultdict(int)
            for mod, self_us, _, _ in rows:
                by_package[mod.split(".")[0]] += self_us
            total = sum(by_package.values())
            print(f"\n-X importtime of stages/{args.profile}.py imports, {name}: "
                  f"{total / 1e6:.2f} s in {len(rows)} modules")
            if name == "new":
                print("top 10 modules by cumulative time:")
                for mod, _, cum, depth in sorted(rows, key=lambda x: -x[2])[:10]:
                    print(f"  {cum / 1e6:7.3f} s  {'  ' * depth}{mod}")
                print("cumulative time of some subtrees (their own imports included):")
                for sub in ("sklearn", "torch._dynamo", "torch.distributed.tensor", "peft",
                            "accelerate", "dvclive", "pandas", "scipy"):
                    print(f"  {subtree(rows, sub) / 1e6:7.3f} s  {sub}")
            print("self time by top-level package:")
            for pkg, us in sorted(by_package.items(), key=lambda x: -x[1])[:10]:
                print(f"  {us / 1e6:7.3f} s  {pkg}")


if __name__ == "__main__":
    main()
