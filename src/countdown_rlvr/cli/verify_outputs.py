"""Re-hash every output in the workspace and every cache object dvc.lock names, and list what
does not match: `countdown-rlvr verify-outputs`.

DVC trusts what it hashed once. Its state database keeps each file's hash keyed by inode, mtime
and size, so a file changed in place with its mtime put back reads as unchanged (`dvc status`
says clean, and a stage that reads it is not re-run); and it trusts its cache: `dvc checkout`
restores a cache object with a flipped byte as it is. This command trusts neither. It reads
DVC's own records (each stage's outs with their hashes from dvc.lock, each directory's `.dir`
manifest) and hashes with DVC's own code (dvc_data's `build` and `hash_file`), but with no
state database, so every byte is read again:

- the workspace: each out of each locked stage (`cache: false` outs too: reports/, dvclive/),
  hashed as `dvc commit` would hash it (the same .dvcignore); a directory that differs is
  listed file by file against its manifest (a changed, missing or extra file);
- the cache: each out's object (`.dvc/cache/files/md5/..`), for a directory its `.dir`
  manifest and every file object it lists, each hashed and compared with its name.

    countdown-rlvr verify-outputs   # one line per mismatch, a summary; exit 1 if any, 0 if clean
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dvc.output import Output
    from dvc.repo import Repo
    from dvc_data.hashfile.tree import Tree

MISSING = "missing"  # "now" of a file or object that is not there
UNLISTED = "(not listed)"  # "dvc.lock" of a file in a directory out that its manifest lacks


# what to do, checked on a DVC repo: `dvc checkout --force` leaves a file changed with its mtime
# kept (DVC's state still trusts it), deleting it first makes checkout copy it back; `dvc commit`
# re-caches a deleted object from its workspace file, trusting that file's state entry too
FIX = [("fix: a workspace file: delete it, then `dvc checkout <path>` (`git checkout` for a "
        "`cache: false` out);"),
       "     `dvc checkout --force` alone leaves it, as DVC trusts its kept mtime",
       ("     a cache object: delete it, then `dvc commit --force <stage>` if its workspace file "
        "matches,"),
       "     else `dvc pull <path>` or `dvc repro --force <stage>` (docs/running.md#check-every-byte)"]


class VerifyError(Exception):
    """A problem the user can fix: printed as one line (no traceback), exit code 2."""


@dataclass(frozen=True)
class Mismatch:
    """One file or cache object whose bytes do not hash to what DVC recorded."""

    where: str  # "workspace" or "cache"
    path: str  # relative to the repository root
    locked: str  # the hash dvc.lock (or the manifest it names) records, or UNLISTED
    now: str  # the hash of the bytes there now, or MISSING
    out: str = ""  # for a cache object: the workspace file it stands for

    def line(self) -> str:
        of = f"  (of {self.out})" if self.out else ""
        return f"{self.where:<9}  {self.path}{of}  dvc.lock: {self.locked}  now: {self.now}"


@dataclass
class Report:
    """What one check found, and how much it read (the summary line says both)."""

    mismatches: list[Mismatch] = field(default_factory=list)
    outs: int = 0  # outs checked in the workspace
    files: int = 0  # files hashed in the workspace
    objects: int = 0  # cache objects hashed (each once)
    unlocked: list[str] = field(default_factory=list)  # outs of stages dvc.lock lacks

    def summary(self) -> str:
        checked = (f"checked {self.outs} output{'s' * (self.outs != 1)} ({self.files} "
                   f"file{'s' * (self.files != 1)}) in the workspace and {self.objects} cache "
                   f"object{'s' * (self.objects != 1)}")
        if not self.mismatches:
            return f"{checked}: all match dvc.lock"
        n = {w: sum(m.where == w for m in self.mismatches) for w in ("workspace", "cache")}
        missing = sum(m.now == MISSING for m in self.mismatches)
        verb = "does" if len(self.mismatches) == 1 else "do"
        return (f"{checked}: {len(self.mismatches)} {verb} not match dvc.lock ({n['workspace']} in "
                f"the workspace, {n['cache']} in the cache; {missing} of them missing)")


def untrusting(repo: Repo) -> None:
    """Hash with no state database. `build` takes the state from the ODB it is given (and
    `Output` passes the repo's cache ODBs), so each of them, and the repo, gets a StateNoop:
    nothing is looked up by inode/mtime/size, nothing is saved back."""
    from dvc_data.hashfile.state import StateNoop

    noop = StateNoop()
    repo.state = noop
    for _, odb in repo.cache.by_scheme():
        if odb is not None:
            odb.state = noop


def _rel(repo: Repo, path: str) -> str:
    return os.path.relpath(path, repo.root_dir)


def _short(oid: str) -> str:
    """A cache object's name is its md5; a manifest's also ends in `.dir`."""
    return oid.split(".", 1)[0]


def _object_hash(odb, oid: str) -> str:
    """The hash of a cache object's bytes now, or MISSING. Not `odb.check(oid)`: the local
    ODB returns without hashing when the object is read-only (DVC's protected mode, so every
    object DVC wrote), and on a mismatch it deletes the object."""
    from dvc_data.hashfile.hash import hash_file

    path = odb.oid_to_path(oid)
    if not odb.fs.exists(path):
        return MISSING
    _, hash_info = hash_file(path, odb.fs, odb.hash_name, state=None)
    return hash_info.value


def _manifest(out: Output) -> Tree | None:
    """A directory out's `.dir` manifest from the cache, if it is there and intact (its md5 is
    its name); None otherwise (a `cache: false` out, a clone without the cache, a corrupt one)."""
    from dvc_data.hashfile.tree import Tree

    oid = out.hash_info.value
    if _object_hash(out.cache, oid) != _short(oid):
        return None
    return Tree.load(out.cache, out.hash_info)


def workspace_mismatches(repo: Repo, out: Output, report: Report) -> list[Mismatch]:
    """The out's files that differ from dvc.lock: a file out, or each file of a directory out
    (when its manifest is at hand; else the directory as one line)."""
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.tree import Tree

    rel, locked = _rel(repo, out.fs_path), out.hash_info.value
    if not out.exists:
        return [Mismatch("workspace", rel, locked, MISSING)]
    odb = out.cache if out.use_cache else out.local_cache
    _, _, obj = build(odb, out.fs_path, out.fs, out.hash_name, ignore=out.dvcignore,
                      dry_run=True)
    report.files += len(obj) if isinstance(obj, Tree) else 1
    now = obj.hash_info.value
    if now == locked:
        return []
    manifest = _manifest(out) if out.hash_info.isdir and isinstance(obj, Tree) else None
    if manifest is None:
        return [Mismatch("workspace", rel, locked, now)]
    was = {key: hi.value for key, _, hi in manifest}
    is_ = {key: hi.value for key, _, hi in obj}
    return [Mismatch("workspace", os.path.join(rel, *key), was.get(key, UNLISTED),
                     is_.get(key, MISSING))
            for key in sorted(was.keys() | is_.keys()) if was.get(key) != is_.get(key)]


def cache_mismatches(repo: Repo, out: Output, seen: set[str], report: Report) -> list[Mismatch]:
    """The out's cache objects whose bytes do not hash to their name: its object, or a
    directory's manifest and each file object the manifest lists. An object shared by several
    outs (in `seen`) is hashed and listed once."""
    from dvc_data.hashfile.tree import Tree

    odb, rel, oid = out.cache, _rel(repo, out.fs_path), out.hash_info.value
    entries = [(oid, rel)]
    if out.hash_info.isdir and _object_hash(odb, oid) == _short(oid):
        tree = Tree.load(odb, out.hash_info)
        entries += [(hi.value, os.path.join(rel, *key)) for key, _, hi in tree]
    found = []
    for oid, label in entries:
        if oid in seen:
            continue
        seen.add(oid)
        report.objects += 1
        now = _object_hash(odb, oid)
        if now != _short(oid):
            found.append(Mismatch("cache", _rel(repo, odb.oid_to_path(oid)), oid, now, label))
    return found


def verify(root: str | None = None) -> Report:
    """Every locked out's workspace files and cache objects against dvc.lock."""
    from dvc.exceptions import NotDvcRepoError
    from dvc.repo import Repo

    try:
        repo = Repo(root)
    except NotDvcRepoError as e:
        raise VerifyError("not inside a DVC repository: run this from inside the project") from e
    report, seen = Report(), set()
    with repo:
        untrusting(repo)
        for stage in repo.index.stages:
            for out in stage.outs:
                if not out.hash_info:  # its stage is not in dvc.lock yet: nothing to check against
                    report.unlocked.append(_rel(repo, out.fs_path))
                    continue
                report.outs += 1
                report.mismatches += workspace_mismatches(repo, out, report)
                if out.use_cache:
                    report.mismatches += cache_mismatches(repo, out, seen, report)
    report.mismatches.sort(key=lambda m: (m.where != "workspace", m.path))
    return report


def render(report: Report) -> str:
    lines = [m.line() for m in report.mismatches]
    if report.unlocked:
        lines.append(f"note: {len(report.unlocked)} output{'s' * (len(report.unlocked) != 1)} "
                     "not checked, their stages are not in dvc.lock: "
                     + ", ".join(report.unlocked))
    return "\n".join([*lines, report.summary(), *(FIX if report.mismatches else [])]) + "\n"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    del ap  # no options: it checks the whole repository the current directory is in


def run(args: argparse.Namespace) -> int:
    del args
    try:
        report = verify()
    except VerifyError as e:
        print(f"countdown-rlvr verify-outputs: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(render(report))
    return 1 if report.mismatches else 0
