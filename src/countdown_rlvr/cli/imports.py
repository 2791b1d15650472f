"""What a stage script runs: the countdown_rlvr source files it imports, transitively.

Every import counts, lazy ones inside functions and relative ones included, and importing
`a.b.c` runs `a/__init__.py` and `a/b/__init__.py` too. dvc.yaml's code deps are made from
this (countdown_rlvr.cli.experiment), and tests/test_stage_deps.py checks them against it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "countdown_rlvr"
SRC = Path(__file__).resolve().parents[2]  # src/ (an editable install: the checkout's)
ROOT = SRC.parent  # the repository: stages/, dvc.yaml


def module_file(module: str) -> Path | None:
    """The source file of a dotted countdown_rlvr module (a package: its __init__.py)."""
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported_modules(path: Path, module: str | None) -> set[str]:
    """countdown_rlvr modules `path` imports anywhere in its body (module: its dotted name,
    None for a stage script)."""
    package = ""
    if module:
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == PACKAGE}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != PACKAGE:
                continue
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names if module_file(f"{base}.{a.name}")}
    return out


def closure(script: Path) -> set[Path]:
    """Every countdown_rlvr source file that running `script` executes on import, relative
    to the repository root (`src/countdown_rlvr/core/io.py`)."""
    todo, seen = list(imported_modules(script, None)), set()
    while todo:
        mod = todo.pop()
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__, ...
            name = ".".join(parts[:i])
            if name in seen or not (path := module_file(name)):
                continue
            seen.add(name)
            todo.extend(imported_modules(path, name))
    return {module_file(m).relative_to(ROOT) for m in seen}
