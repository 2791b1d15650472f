#!/usr/bin/env bash
# The next regeneration, in one command, on an idle fast-kind machine, in a clone with the
# README's install done:
#
#   bash scripts/regenerate.sh            # prepare (below), then `dvc repro` (~2.6 h)
#   bash scripts/regenerate.sh --prepare  # prepare only: inspect `git diff` first
#
# Prepare: write the design (params.next.yaml) into params.yaml and its analysis plan
# (plan.next.yaml) over plan.yaml, both committed before the run; make dvc.yaml and the
# docs' generated tables from the new params; delete the committed run's files under
# reports/ and dvclive/ that no stage of the new graph writes (its replicates), so no file of
# that run is read beside this one. None of it is committed: main keeps the committed run,
# whose numbers the docs quote, until the new run's outputs and numbers are committed together.
# Then every stage runs (`--no-run-cache`: nothing is restored from an earlier run), and each
# stage's start goes to regenerate.stamps (untracked), beside the timing files, for
# docs/committed-run.md's stage table. A run stopped part-way resumes with
# `dvc repro --no-run-cache`: DVC skips the stages dvc.lock records.
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
countdown-rlvr cost --write
python - <<'PY'
"""Delete the files under reports/ and dvclive/ that no stage of the new dvc.yaml writes."""
from pathlib import Path

from dvc.repo import Repo

with Repo(".") as repo:
    outs = {Path(o.fs_path).resolve() for stage in repo.index.stages for o in stage.outs}
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
echo "regenerate: prepared (uncommitted; \`git diff --stat\` shows it)"
[ "${1:-}" = "--prepare" ] && exit 0

{ echo "start $(date -u +%FT%TZ) $(git rev-parse --short HEAD)"; } >> regenerate.stamps
dvc repro --no-run-cache 2>&1 | while IFS= read -r line; do
  case "$line" in
    "Running stage "*) echo "$(date -u +%FT%TZ) $line" >> regenerate.stamps ;;
  esac
  echo "$line"
done
echo "end $(date -u +%FT%TZ)" >> regenerate.stamps
