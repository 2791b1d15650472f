"""Small file helpers shared by every stage: params, atomic writes, metrics.

Every output is written to a temporary sibling and renamed into place, so a stage
that crashes half-way leaves the previous output (or nothing), never half a file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML, YAMLError

from .config import shared_problems
from .errors import StageError  # re-exported: stages raise io.StageError


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """params.yaml, before a stage does any work, with the sections every stage may read as it
    starts checked (`config.SHARED`: model, sampler, replicates); the stage's own sections are
    checked as it builds them (`config.from_section`), and the whole file by the params check,
    the pipeline's first stage. Every stage starts here, so this is also where a killed run's
    stale temporary files are cleared."""
    params = read_params(path)
    if bad := shared_problems(params):
        raise StageError("params", f"{path}: " + "\n  ".join(bad) + "\nfix the value in "
                         f"{path} (or the `-S` override) and run again.")
    clear_stale_tmp()
    return params


def read_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """params.yaml as a mapping, its values unchecked: for `check_params`, which lists every
    problem at once (stage_params.check_all) where `load_params` stops at the bad values."""
    path = Path(path)
    if not path.exists():
        raise StageError("params", f"{path} not found; run from the repository root.")
    try:  # YAML 1.2, as DVC reads it: `-S rloo.lr=1e-5` lands as 1e-05, a float (PyYAML's
        # YAML 1.1 would read that as a string and the lr check would refuse it)
        params = YAML(typ="safe", pure=True).load(path.read_text())
    except YAMLError as exc:
        raise StageError("params", f"{path} is not valid YAML ({exc}); fix the syntax.") from exc
    if not isinstance(params, dict):
        raise StageError("params", f"{path} must be a mapping of stage sections.")
    return params


TMP = re.compile(r"^\..+\.tmp$")  # atomic_path's temporary siblings: .<name>.<random>.tmp


def clear_stale_tmp(roots: tuple[str, ...] = ("data", "reports", "dvclive")) -> list[Path]:
    """Remove the temporary siblings a killed stage left behind, so no later stage hashes
    half a file into a directory dep (.dvcignore hides them from DVC as well)."""
    stale = [Path(d) / n for root in roots if Path(root).is_dir()
             for d, dirs, files in os.walk(root) for n in dirs + files if TMP.match(n)]
    for p in stale:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    return stale


def require_inputs(stage: str, *paths: str | Path) -> None:
    """Stop the stage in one line when an input is missing, naming each missing file's
    producing stage (dvc.yaml) and the command that makes it."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        made = {s for p in missing if (s := producing_stage(p))}
        by = f" (written by {', '.join(f'`{s}`' for s in sorted(made))})" if made else ""
        raise StageError(
            stage, f"missing input {missing}{by}; run `dvc repro {stage}` so upstream stages "
                   "run first."
        )


@contextlib.contextmanager
def atomic_path(dest: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to `dest`; on success rename it onto `dest`.

    Works for files and directories (e.g. `save_pretrained` folders).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    except OSError as exc:
        _refuse_full_disk(dest, exc)
        raise
    target = tmp / dest.name
    try:
        yield target
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        elif dest.exists() and target.is_dir():  # a directory cannot replace a file
            dest.unlink()
        os.replace(target, dest)  # a file replaces a file at once: if it fails, the old stays
    except Exception as exc:  # a library writing into `target` raises its own type (below)
        _refuse_full_disk(dest, exc)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


FULL = (errno.ENOSPC, errno.EDQUOT)  # a full disk, a full quota
# how a library that raises its own type on a full disk may name it: the OS's words or Rust's
# "os error N" (safetensors' SafetensorError: "I/O error: No space left on device (os error 28)")
FULL_WORDS = re.compile(r"No space left on device|Disk quota exceeded|os error (28|122)\b")
ROOM = 1 << 20  # bytes left below which a failed write is put down to a full disk


def _full_disk(exc: BaseException, where: Path) -> int | None:
    """The errno of the full disk behind a failed write into `where`'s filesystem, else None:
    an OSError's own errno, an errno named in the message of `exc` or of its causes, or (for a
    writer that names no cause: torch.save's RuntimeError "unexpected pos ...") a filesystem
    left with under `ROOM` bytes, checked before the partial output is removed."""
    seen: BaseException | None = exc
    chain: set[int] = set()  # a hand-set __cause__ can loop
    while seen is not None and id(seen) not in chain:
        chain.add(id(seen))
        if isinstance(seen, OSError) and seen.errno in FULL:
            return seen.errno
        if m := FULL_WORDS.search(str(seen)):
            return errno.EDQUOT if "quota" in m.group(0) or m.group(1) == "122" else errno.ENOSPC
        seen = seen.__cause__ or seen.__context__
    try:
        st = os.statvfs(where)
    except OSError:
        return None
    return errno.ENOSPC if st.f_bavail * st.f_frsize < ROOM else None


def _refuse_full_disk(dest: Path, exc: BaseException) -> None:
    """A full disk while writing `dest` stops the stage in one line (the previous output, if
    any, is left in place); any other error is the caller's to raise."""
    if (code := _full_disk(exc, dest.parent)) is not None:
        stage = producing_stage(dest) or Path(sys.argv[0]).stem or "io"
        raise StageError(stage, f"writing {dest}: {os.strerror(code).lower()}; free "
                                f"space there and re-run `dvc repro -s {stage}`") from exc


def write_text(dest: str | Path, text: str) -> None:
    with atomic_path(dest) as tmp:
        tmp.write_text(text)


def write_json(dest: str | Path, obj: Any) -> None:
    """`obj` as strict JSON: a nan / inf (which json.dumps would write as NaN, not JSON, that
    strict readers refuse) is a ValueError naming the file and the key, nothing written."""
    try:
        text = json.dumps(obj, indent=2, sort_keys=True, default=_jsonable, allow_nan=False)
    except ValueError as exc:
        where = ", ".join(_non_finite(obj)) or "a value"
        raise ValueError(f"{dest}: {where} is nan or inf, which JSON cannot hold ({exc}); "
                         "the stage measured a broken number: fix its cause") from exc
    write_text(dest, text + "\n")


def _non_finite(obj: Any, path: str = "") -> list[str]:
    """The dotted keys of `obj` (nested dicts / lists) holding a nan / inf float."""
    if isinstance(obj, float):
        return [] if math.isfinite(obj) else [path or "the value"]
    items = obj.items() if isinstance(obj, dict) else \
        enumerate(obj) if isinstance(obj, list | tuple) else ()
    return [k for key, v in items for k in _non_finite(v, f"{path}.{key}" if path else str(key))]


def write_jsonl(dest: str | Path, rows: list[dict[str, Any]]) -> None:
    write_text(dest, "".join(json.dumps(r, sort_keys=True, default=_jsonable) + "\n" for r in rows))


# Every stage's measurements (read by compare / report: git-tracked, not DVC metrics), the
# headline DVC tracks as metrics (written by `report`: countdown_rlvr.analysis.headline), wall times.
DETAILS, METRICS, TIMINGS = "reports/details", "reports/metrics", "reports/timings"


def write_details(name: str, detail: dict[str, Any]) -> None:
    """reports/details/<name>.json: everything the stage measured."""
    write_json(f"{DETAILS}/{name}.json", detail)


def write_timing(name: str, timing: dict[str, Any]) -> None:
    """reports/timings/<name>.json: wall time varies run to run, so it is kept in git but is
    neither a DVC metric nor a DVC output (a rerun must not change dvc.lock)."""
    write_json(f"{TIMINGS}/{name}.json", timing)


def empty_curves(run: str, names: tuple[str, ...] = ("loss",)) -> None:
    """Header-only dvclive TSVs in dvclive/<run>/plots/metrics/train: what a stage that trained
    nothing leaves as the curve dir dvc.yaml declares (git keeps no empty directory, so an
    empty one would be missing from a clone and `dvc status` would call the stage changed)."""
    train = Path(f"dvclive/{run}/plots/metrics/train")
    train.mkdir(parents=True, exist_ok=True)
    for name in names:
        (train / f"{name}.tsv").write_text(f"step\t{name}\n")


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a JSON-lines file (blank lines skipped). A bad line raises a ValueError
    naming the file, its 1-based line number and the stage to re-run: json's own message
    says "line 1" for every line, since it parses one line at a time, and names no file."""
    return [row for _, row in numbered_rows(path)]


def numbered_rows(path: str | Path, producer: str | None = None
                  ) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, row) for each row of a JSON-lines file; a damaged line raises
    the ValueError of `read_jsonl`, naming `producer` (default: the dvc.yaml stage whose
    outs hold `path`) as the stage to re-run."""
    with open(path, "rb") as fh:  # bytes: a line that is not UTF-8 is named like any other
        for number, raw in enumerate(fh, start=1):
            try:
                line = raw.decode()
            except UnicodeDecodeError as exc:
                raise ValueError(_bad_line(path, number, repr(raw)[2:-1], f"byte {exc.start + 1}: "
                                           "not UTF-8 text", producer)) from exc
            if not line.strip():
                continue
            text = line.rstrip("\r\n")  # so an error at the line's end is at its last column
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(_bad_line(path, number, text, f"column {exc.colno}: not "
                                           f"valid JSON ({exc.msg})", producer)) from exc
            if not isinstance(row, dict):  # bad data as above: callers catch one type
                raise ValueError(_bad_line(path, number, text,  # noqa: TRY004
                                           f"a JSON object expected, got {type(row).__name__}",
                                           producer))
            yield number, row


def _bad_line(path: str | Path, number: int, line: str, what: str,
              producer: str | None = None) -> str:
    producer = producer or producing_stage(path)
    rerun = f"`dvc repro -s {producer}`" if producer else "the stage that writes it"
    return (f"{path}, line {number}, {what}: {line.strip()[:80]!r}; the file is damaged or "
            f"half-written: re-run {rerun}")


def _jsonable(x: Any) -> Any:
    if hasattr(x, "item"):  # numpy / torch scalars
        return x.item()
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def producing_stage(path: str | Path, dvc_yaml: str | Path = "dvc.yaml") -> str | None:
    """Name of the dvc.yaml stage whose outs contain `path`, for error messages: a plain stage's
    name, or a matrix / foreach group's (`dvc repro sft` runs every replicate of it). In a
    template, `${item.<key>}` matches the matrix's literal list for <key> where it has one
    (rloo's arms), any one path component otherwise (seeds from params.yaml)."""
    try:
        stages = (yaml.safe_load(Path(dvc_yaml).read_text()) or {}).get("stages", {})
    except (OSError, yaml.YAMLError):
        return None
    target = Path(path).as_posix().rstrip("/")
    for name, stage in stages.items():
        body = stage.get("do", stage) if isinstance(stage, dict) else {}
        lists = {k: v for k, v in (stage.get("matrix") or {}).items() if isinstance(v, list)} \
            if isinstance(stage, dict) else {}
        for out in body.get("outs", []) if isinstance(body, dict) else []:
            out = (next(iter(out)) if isinstance(out, dict) else str(out)).rstrip("/")
            if re.fullmatch(_out_pattern(out, lists) + "(/.*)?", target):
                return name
    return None


def _out_pattern(out: str, lists: dict[str, list]) -> str:
    def part(p: str) -> str:
        if not p.startswith("${"):
            return re.escape(p)
        values = lists.get(p[2:-1].removeprefix("item."))
        if values and not any("${" in str(v) for v in values):
            return "(" + "|".join(re.escape(str(v)) for v in values) + ")"
        return "[^/]+"
    return "".join(part(p) for p in re.split(r"(\$\{[^}]*\})", out))
