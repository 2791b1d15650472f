"""`countdown-rlvr verify-outputs` on a tiny real DVC repo: a flipped byte in a cache object or
in a workspace output (its mtime, size and inode kept, so DVC's state database still trusts it)
is found; a clean repo passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from countdown_rlvr.cli import main as cli
from countdown_rlvr.cli import verify_outputs

# one stage: a cached file out, a cached directory out, a `cache: false` directory out (like
# reports/ and dvclive/); shell only, so it runs in a second
DVC_YAML = """\
stages:
  make:
    cmd: mkdir -p d r && printf 'file\\n' > f.txt && printf 'aaa\\n' > d/a.txt
      && printf 'bbb\\n' > d/b.txt && printf 'mmm\\n' > r/m.txt
    outs:
      - f.txt
      - d
      - r:
          cache: false
"""
OUTS, FILES, OBJECTS = 3, 4, 4  # f.txt, d, r; f, a, b, m; f, d's manifest, a, b


def dvc(repo: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """The stage run once (`dvc repro`): workspace, cache and dvc.lock agree; cwd is the repo."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    dvc(tmp_path, "init", "-q")
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    dvc(tmp_path, "repro", "-q")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def locked(repo: Path) -> dict[str, str]:
    """dvc.lock's md5 of each out, and of each file of the cached directory (its manifest)."""
    import yaml

    outs = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]["make"]["outs"]
    md5 = {o["path"]: o["md5"] for o in outs}
    manifest = json.loads(cache_object(repo, md5["d"]).read_text())
    md5.update({f"d/{e['relpath']}": e["md5"] for e in manifest})
    return md5


def cache_object(repo: Path, oid: str) -> Path:
    return repo / ".dvc/cache/files/md5" / oid[:2] / oid[2:]


def flip(path: Path) -> None:
    """Flip one bit of the first byte in place: same inode, same size, the old mtime put
    back (the read-only mode of a cache object too)."""
    st = path.stat()
    path.chmod(0o644)
    with path.open("r+b") as f:
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 1]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    path.chmod(st.st_mode & 0o777)
    assert path.stat().st_ino == st.st_ino and path.stat().st_size == st.st_size


def verify(capsys) -> tuple[int, list[str]]:
    code = cli.main(["verify-outputs"])
    return code, capsys.readouterr().out.splitlines()


def mismatch(lines: list[str], where: str, path: str) -> str:
    (line,) = [x for x in lines if x.split()[:2] == [where, path]]
    return line


def test_a_clean_repo_passes(repo, capsys):
    code, lines = verify(capsys)
    assert code == 0
    summary = (f"checked {OUTS} outputs ({FILES} files) in the workspace and {OBJECTS} cache "
               "objects: all match dvc.lock")
    assert lines == [summary]


def test_a_flipped_cache_object_is_found_and_kept(repo, capsys):
    md5 = locked(repo)
    for out in ("f.txt", "d/b.txt"):
        flip(cache_object(repo, md5[out]))
    code, lines = verify(capsys)
    assert code == 1
    for out in ("f.txt", "d/b.txt"):
        obj = cache_object(repo, md5[out])
        line = mismatch(lines, "cache", str(obj.relative_to(repo)))
        assert f"(of {out})" in line and f"dvc.lock: {md5[out]}" in line
        assert "now: missing" not in line and obj.exists()  # only read: DVC's check() deletes it
    assert lines[2].endswith("2 do not match dvc.lock (0 in the workspace, 2 in the cache; "
                             "0 of them missing)")
    assert lines[3:] == verify_outputs.FIX


def test_a_flipped_workspace_file_is_found_though_dvc_status_is_clean(repo, capsys):
    md5 = locked(repo)
    for out in ("f.txt", "d/b.txt", "r/m.txt"):
        flip(repo / out)
    # why the command exists: DVC's state database keys hashes by inode, mtime and size
    assert json.loads(dvc(repo, "status", "--json")) == {}
    code, lines = verify(capsys)
    assert code == 1
    for out in ("f.txt", "d/b.txt"):  # a file out, a file of a cached directory
        line = mismatch(lines, "workspace", out)
        assert f"dvc.lock: {md5[out]}" in line and "now: missing" not in line
    # `cache: false`: no manifest in the cache, so the directory as a whole
    assert f"dvc.lock: {md5['r']}" in mismatch(lines, "workspace", "r")
    assert lines[3].endswith("(3 in the workspace, 0 in the cache; 0 of them missing)")


def test_a_missing_and_an_extra_file_are_named(repo, capsys):
    md5 = locked(repo)
    (repo / "f.txt").unlink()
    (repo / "d/a.txt").unlink()
    (repo / "d/new.txt").write_text("new\n")
    code, lines = verify(capsys)
    assert code == 1
    assert mismatch(lines, "workspace", "f.txt").endswith(f"dvc.lock: {md5['f.txt']}  now: missing")
    assert mismatch(lines, "workspace", "d/a.txt").endswith("now: missing")
    assert "dvc.lock: (not listed)" in mismatch(lines, "workspace", "d/new.txt")
    assert lines[3].endswith("(3 in the workspace, 0 in the cache; 2 of them missing)")


def test_a_flipped_manifest_is_found_and_not_read(repo, capsys):
    md5 = locked(repo)
    flip(cache_object(repo, md5["d"]))  # `[` -> `Z`: no longer JSON, and not its md5
    code, lines = verify(capsys)
    assert code == 1
    line = mismatch(lines, "cache", str(cache_object(repo, md5["d"]).relative_to(repo)))
    assert f"(of d)  dvc.lock: {md5['d']}" in line
    # the files it lists are not looked up through it; the workspace still matches dvc.lock
    assert lines[1].startswith(f"checked {OUTS} outputs ({FILES} files) in the workspace and "
                               f"{OBJECTS - 2} cache objects: 1 does not match")
