"""The package's folders are its layers, and no module imports one from a higher layer; within
a layer the imports make no circle, and no module imports another's private name.

Lazy imports inside functions count (`cli.imports.imported_modules` walks every node), so a
stage cannot reach up a floor at run time either, and a circle closed by a lazy import is a
circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from countdown_rlvr.cli.imports import PACKAGE, SRC, imported_modules

# Bottom to top; a module may import its own layer and the ones below it.
LAYERS = ("core", "task", "data", "model", "train", "eval", "stats", "research", "analysis",
          "cli")
ROOT = SRC / PACKAGE


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def layer(module: str) -> int:
    """The layer index of a dotted module; the package root is below every layer."""
    parts = module.split(".")
    return -1 if len(parts) == 1 else LAYERS.index(parts[1])


def upward_imports(modules: dict[str, Path]) -> list[str]:
    return [f"{mod} ({LAYERS[layer(mod)]}) imports {imp} ({LAYERS[layer(imp)]})"
            for mod, path in modules.items() for imp in sorted(imported_modules(path, mod))
            if imp in modules and layer(imp) > layer(mod)]


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's explicit imports of the package's modules (a package's `__init__`
    importing its own submodules is an edge like any other)."""
    return {mod: {imp for imp in imported_modules(path, mod) if imp in modules and imp != mod}
            for mod, path in modules.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per back edge of a depth-first walk (empty: the graph is acyclic)."""
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    circles: list[list[str]] = []

    def walk(mod: str, path: list[str]) -> None:
        state[mod] = 1
        path.append(mod)
        for imp in sorted(graph[mod]):
            if state.get(imp) == 1:
                circles.append(path[path.index(imp):] + [imp])
            elif imp not in state:
                walk(imp, path)
        path.pop()
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            walk(mod, [])
    return circles


def private_imports(modules: dict[str, Path]) -> set[tuple[str, str, str]]:
    """(importer, module, name) of every `from module import _name` between two modules."""
    out = set()
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            out |= {(mod, base, a.name) for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                    and base.split(".")[0] == PACKAGE and base != mod}
    return out


def test_every_folder_is_a_layer_and_no_module_sits_at_the_top():
    folders = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(LAYERS)
    loose = [p.name for p in ROOT.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"{loose} sit beside the layers; move each into its layer's folder"


def test_no_module_imports_a_higher_layer():
    assert upward_imports(_modules()) == []


def test_the_check_catches_an_upward_import(tmp_path):
    # the same walk over a copy of one module with one lazy upward import added
    modules = _modules()
    path = tmp_path / "io.py"
    path.write_text(modules["countdown_rlvr.core.io"].read_text()
                    + "\n\ndef _late():\n    from ..analysis import report  # noqa\n")
    modules["countdown_rlvr.core.io"] = path
    assert upward_imports(modules) == [
        "countdown_rlvr.core.io (core) imports countdown_rlvr.analysis (analysis)",
        "countdown_rlvr.core.io (core) imports countdown_rlvr.analysis.report (analysis)"]


def test_no_import_circle():
    assert import_circles(import_graph(_modules())) == []


def test_the_check_catches_an_import_circle(tmp_path):
    # the claims engine, at the package's bottom, given one lazy import of a seed's module
    modules = _modules()
    path = tmp_path / "engine.py"
    path.write_text(modules["countdown_rlvr.analysis.claims.engine"].read_text()
                    + "\n\ndef _late():\n    from .s0 import feedback  # noqa\n")
    modules["countdown_rlvr.analysis.claims.engine"] = path
    circles = import_circles(import_graph(modules))
    assert circles and all(c[0] == c[-1] for c in circles)
    assert any({"countdown_rlvr.analysis.claims.engine", "countdown_rlvr.analysis.claims.s0"}
               <= set(c) for c in circles)


def test_no_private_name_crosses_modules():
    assert private_imports(_modules()) == set()


def test_the_check_catches_a_private_import(tmp_path):
    modules = _modules()
    path = tmp_path / "s3.py"
    path.write_text(modules["countdown_rlvr.analysis.claims.s3"].read_text()
                    + "\nfrom .engine import _most  # noqa\n")
    modules["countdown_rlvr.analysis.claims.s3"] = path
    assert private_imports(modules) == {
        ("countdown_rlvr.analysis.claims.s3", "countdown_rlvr.analysis.claims.engine", "_most")}


def test_one_module_per_name():
    stems = [p.stem for p in ROOT.rglob("*.py") if p.stem != "__init__"]
    assert sorted({s for s in stems if stems.count(s) > 1}) == []
    assert sorted(set(stems) & set(LAYERS)) == [], "a module named like a layer reads as one"


@pytest.mark.parametrize("name", ["task.verify", "task.solve", "eval.pass_at_k",
                                  "eval.expected_samples", "stats.mcnemar"])
def test_public_api_paths(name):
    import importlib
    module, _, attr = f"{PACKAGE}.{name}".rpartition(".")
    assert callable(getattr(importlib.import_module(module), attr))
