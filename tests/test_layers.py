"""The package's layers: a module imports only from its own layer and the ones below it."""

from __future__ import annotations

import ast

import pytest

from conftest import REPO

PACKAGE = REPO / "src" / "attnrepro"
LAYERS = {  # lowest first (docs/design.md)
    "errors": 0,
    "archs": 0,
    "config": 0,
    "constraints": 0,
    "data": 1,
    "models": 2,
    "decoding": 3,
    "evaluation": 4,
    "training": 5,
    "verbs": 6,
    "cli": 6,
}


def layer_of(module: str) -> int:
    """`attnrepro.data.tokenize` -> 1; the package itself (`attnrepro`) is below everything."""
    parts = module.split(".")
    if parts[0] != "attnrepro":
        raise ValueError(module)
    return -1 if len(parts) == 1 else LAYERS[parts[1]]


def imported_modules(path) -> list[tuple[int, str]]:
    """(line, module) of every `attnrepro` import in the file, at any depth (function-local too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("attnrepro")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("attnrepro"):
            if node.module == "attnrepro":  # `from attnrepro import x`: x is the module imported
                found += [(node.lineno, f"attnrepro.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    for path in MODULES:
        module = ".".join(("attnrepro", *path.relative_to(PACKAGE).with_suffix("").parts))
        if module.endswith(".__init__"):
            module = module.removesuffix(".__init__")
        layer_of(module)  # a KeyError names a new top-level module that needs a layer here


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_only_go_down(path):
    own = layer_of(".".join(("attnrepro", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__"))
    upward = [f"line {line}: {module}" for line, module in imported_modules(path) if layer_of(module) > own]
    assert not upward, f"{path.relative_to(REPO)} (layer {own}) imports from a higher layer: {upward}"


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from attnrepro.training.loop import train\n", encoding="utf-8")
    assert imported_modules(bad) == [(2, "attnrepro.training.loop")]
    assert layer_of("attnrepro.training.loop") > layer_of("attnrepro.data.tokenize")
