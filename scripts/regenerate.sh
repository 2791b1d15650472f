#!/usr/bin/env bash
# The next regeneration, in one command, on an idle fast-kind machine, in a clone with the
# README's install done:
#
#   bash scripts/regenerate.sh            # prepare (below), then `dvc repro` (~2.6 h)
#   bash scripts/regenerate.sh --prepare  # prepare only: inspect `git diff` first
#
# Prepare: write the design (params.next.yaml) into params.yaml and its analysis plan
# (plan.next.yaml) over plan.yaml, both committed before the run; make dvc.yaml from the new
# params; price the design at the committed run's stage times; delete the committed run's
# files under reports/ and dvclive/ that no stage of the new graph writes (its replicates), so
# no file of that run is read beside this one. None of it is committed: main keeps the
# committed run, whose numbers the docs quote, until the new run's outputs and numbers are
# committed together. Then the base stage runs and times this machine against the committed
# run's (it stops there if the projected run exceeds REGENERATE_BUDGET_MIN), then every other
# stage (`--no-run-cache`: nothing is restored from an earlier run). Each stage's start goes
# to regenerate.stamps (untracked), beside the timing files, for docs/committed-run.md's stage
# table. A run stopped part-way resumes with `dvc repro --no-run-cache`: DVC skips the stages
# dvc.lock records.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "regenerate: the checkout has uncommitted changes; commit or stash them first" >&2
  exit 1
fi
if [ ! -f params.next.yaml ] || [ ! -f plan.next.yaml ]; then
  echo "regenerate: no params.next.yaml / plan.next.yaml: write the next run's design and plan" \
       "first (docs/running.md, 'The next regeneration')" >&2
  exit 1
fi

python -m countdown_rlvr.cli.overrides --apply params.next.yaml
git mv -f plan.next.yaml plan.yaml
git rm -q params.next.yaml
python -m countdown_rlvr.cli.experiment --write
# the design's price at the committed run's stage times, read before its files are deleted
estimate=$(python -c 'import yaml; from countdown_rlvr.cli.cost import run_estimate
print(round(run_estimate(yaml.safe_load(open("params.yaml")), ".")[0] / 60))')
python - <<'PY'
"""Delete the files under reports/ and dvclive/ that no stage of the new dvc.yaml writes, and
dvc.lock's entries for the stages it no longer defines (dvc repro leaves them)."""
import re
from pathlib import Path

from dvc.repo import Repo

with Repo(".") as repo:
    outs = {Path(o.fs_path).resolve() for stage in repo.index.stages for o in stage.outs}
    names = {stage.addressing for stage in repo.index.stages}
lock, keep = [], True
for line in Path("dvc.lock").read_text().splitlines(keepends=True):
    if m := re.match(r"  (\S[^:]*):\s*$", line):  # a stage's entry begins
        keep = m.group(1).strip("'\"") in names
    if keep:
        lock.append(line)
Path("dvc.lock").write_text("".join(lock))
stale = [f for top in ("reports/details", "reports/timings", "reports/metrics", "dvclive")
         for f in sorted(Path(top).rglob("*"))
         if f.is_file() and not any(o == f.resolve() or o in f.resolve().parents for o in outs)]
for f in stale:
    f.unlink()
    for d in f.parents:  # and the folders that leaves empty
        if d == Path(".") or any(d.iterdir()):
            break
        d.rmdir()
print(f"regenerate: deleted {len(stale)} files of the committed run that no stage writes now")
PY
echo "regenerate: prepared (uncommitted; \`git diff --stat\` shows it); ~${estimate} min at" \
     "the committed run's stage times"
[ "${1:-}" = "--prepare" ] && exit 0

stamped_repro() {  # dvc repro, each stage's start time-stamped into regenerate.stamps
  dvc repro --no-run-cache "$@" 2>&1 | while IFS= read -r line; do
    case "$line" in
      "Running stage "*) echo "$(date -u +%FT%TZ) $line" >> regenerate.stamps ;;
    esac
    echo "$line"
  done
}
echo "start $(date -u +%FT%TZ) $(git rev-parse --short HEAD)" >> regenerate.stamps
# This machine's speed before the long stages: the base model's pretraining (compute-bound,
# ~3 min) against the committed run's. Fast-kind machines differ by up to ~25%; a run that
# cannot finish in the time left is better not started (REGENERATE_BUDGET_MIN, default 170).
stamped_repro base
ratio=$(python -c 'import json, subprocess
now = json.load(open("reports/timings/base.json"))["seconds"]
then = json.loads(subprocess.check_output(["git", "show", "HEAD:reports/timings/base.json"]))["seconds"]
print(f"{now / then:.3f}")')
projected=$(python -c "print(round($estimate * $ratio))")
echo "regenerate: base took ${ratio}x the committed run's; the run projects to ~${projected} min" \
  | tee -a regenerate.stamps
if [ "$projected" -gt "${REGENERATE_BUDGET_MIN:-170}" ]; then
  echo "regenerate: stopping: ~${projected} min exceeds REGENERATE_BUDGET_MIN=${REGENERATE_BUDGET_MIN:-170};" \
       "go on, on a faster machine or with more time, with \`dvc repro --no-run-cache\`" >&2
  exit 3
fi
stamped_repro
echo "end $(date -u +%FT%TZ)" >> regenerate.stamps
