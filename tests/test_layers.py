"""The package's folders are its layers, and no module imports one from a higher layer.

Lazy imports inside functions count (`cli.imports.imported_modules` walks every node), so a
stage cannot reach up a floor at run time either.
"""

from __future__ import annotations

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
