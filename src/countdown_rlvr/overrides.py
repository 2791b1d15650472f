"""A file of params overrides as `dvc exp run -S key=value` flags.

DVC has no option that takes a whole file of overrides, so `params.qwen.yaml` (or any
file shaped like params.yaml) becomes one `-S` per leaf value:

    dvc exp run $(python -m countdown_rlvr.overrides params.qwen.yaml)

DVC applies them to params.yaml for that experiment only (comments kept), and fails on a
key params.yaml does not have, so a renamed key in the file cannot go unnoticed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


def leaves(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"section.key": value} for every non-dict value of a nested params mapping."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def set_flags(values: dict[str, Any]) -> list[str]:
    """`-S key=value` arguments; values in JSON syntax (what DVC's Hydra parser reads)."""
    flags = []
    for key, value in values.items():
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        if any(c.isspace() for c in text):
            raise ValueError(f"{key}: {text!r} has whitespace; the $(...) recipe splits on it")
        flags += ["-S", f"{key}={text}"]
    return flags


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.exit("usage: python -m countdown_rlvr.overrides <overrides.yaml>")
    print(" ".join(set_flags(leaves(yaml.safe_load(Path(argv[0]).read_text())))))


if __name__ == "__main__":
    main(sys.argv[1:])
