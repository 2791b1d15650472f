"""A file of params overrides as `dvc exp run -S key=value` flags.

DVC has no option that takes a whole file of overrides, so `params.qwen.yaml` (or any
file shaped like params.yaml) becomes one `-S` per leaf value:

    dvc exp run $(python -m countdown_rlvr.cli.overrides params.qwen.yaml)

DVC applies them to params.yaml for that experiment only (comments kept), and fails on a
key params.yaml does not have, so a renamed key in the file cannot go unnoticed.

A file that changes the graph (replicate lists, evaluate lists) cannot run as an experiment:
dvc.yaml is made from params.yaml. `--apply` writes the file into params.yaml instead, with
DVC's own `-S` code (comments kept, an unknown key refused), for a new default such as the next
run's design (params.next.yaml); then `python -m countdown_rlvr.cli.experiment --write`:

    python -m countdown_rlvr.cli.overrides --apply params.next.yaml
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import yaml

from ..core.config import leaves, merged  # leaves: {"section.key": value}, one `-S` per leaf


def _text(value: Any) -> str:
    """A value in JSON syntax (what DVC's Hydra parser reads); a string as it is."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def set_flags(values: dict[str, Any]) -> list[str]:
    """`-S key=value` arguments."""
    flags = []
    for key, value in values.items():
        text = _text(value)
        if any(c.isspace() for c in text):
            raise ValueError(f"{key}: {text!r} has whitespace, which the $(...) recipe splits "
                             f"on; pass it yourself: dvc exp run -S '{key}={text}'")
        flags += ["-S", f"{key}={text}"]
    return flags


def read_overrides(path: Path) -> dict[str, Any]:
    """The file's mapping of params sections; `fail` (one line, no traceback) otherwise."""
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "not found"
        fail(f"{path} {what}; pass the path of an overrides file, e.g. params.qwen.yaml")
    try:
        tree = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        fail(f"{path} is not valid YAML ({_where(exc)}); fix its syntax")
    if not isinstance(tree, dict):
        fail(f"{path} holds {type(tree).__name__ if tree is not None else 'nothing'}, not a "
             "mapping of params sections; write it as params.yaml is (`rloo: {reward: shaped}`)")
    return tree


def apply(path: Path, params: Path = Path("params.yaml")) -> list[str]:
    """Write the overrides file at `path` into `params` (DVC's `-S` code: comments kept, a key
    `params` lacks refused); the keys it set. The file written must read as `params` with the
    overrides on top: DVC's round-trip writer has joined two lines of a block it rewrote (seen
    with the 83 values of params.smoke.yaml), so anything else restores `params` and fails."""
    from dvc.exceptions import InvalidArgumentError
    from dvc.utils.hydra import apply_overrides

    overrides, text = read_overrides(path), params.read_text()
    values = leaves(overrides)
    try:
        apply_overrides(params, [f"{key}={_text(value)}" for key, value in values.items()])
    except InvalidArgumentError as exc:  # Hydra's message names the key it could not set
        fail(f"{path}: {exc.__cause__ or exc}; every key must be one of {params}'s")
    try:
        wrong = yaml.safe_load(params.read_text()) != merged(yaml.safe_load(text), overrides)
    except yaml.YAMLError:
        wrong = True
    if wrong:
        params.write_text(text)
        fail(f"writing {path} into {params} did not give {params} with its values on top "
             f"(DVC's YAML writer); {params} is unchanged: set these keys by hand")
    return list(values)


def _where(exc: yaml.YAMLError) -> str:
    """PyYAML's multi-line message as one line: where, and what is wrong."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(exc).split())
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


# `$(...)` drops the helper's exit code, so an error alone would leave `dvc exp run` with no
# flags: it would run the default params. This flag names a key params.yaml lacks instead, and
# DVC refuses it before running anything ("Could not override 'overrides_file_not_read'").
STOP_FLAG = "-S overrides_file_not_read=see_the_error_above"


def fail(message: str) -> NoReturn:
    """A user error: one line on stderr, STOP_FLAG on stdout and exit code 2."""
    print(f"[overrides] error: {message}", file=sys.stderr)
    print(STOP_FLAG)
    sys.exit(2)


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--apply":
        keys = apply(Path(argv[1]))
        print(f"params.yaml: {len(keys)} values set from {argv[1]}; now `python -m "
              "countdown_rlvr.cli.experiment --write` (dvc.yaml follows params.yaml)")
        return
    if len(argv) != 1:
        fail("usage: python -m countdown_rlvr.cli.overrides [--apply] <overrides.yaml>")
    try:
        flags = set_flags(leaves(read_overrides(Path(argv[0]))))
    except ValueError as exc:  # a value the shell would split: set_flags names it
        fail(f"{argv[0]}: {exc}")
    print(" ".join(flags))


if __name__ == "__main__":
    main(sys.argv[1:])
