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


BENCHMARKS = sorted((REPO / "benchmarks").glob("*.py"))
TEST_MODULES = {"conftest", *(p.stem for p in (REPO / "tests").rglob("*.py"))}  # what sys.path + tests/ would import


def imports_from_tests(path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file of a module that lives in tests/ (conftest, test_*, helpers)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [(node.lineno, name) for name in names if name.split(".")[0] in TEST_MODULES | {"tests"}]
    return found


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_benchmarks_import_nothing_from_the_tests(path):
    """The benchmarks sit beside the package, not on top of its tests: tiny sizes and the lists of archs come
    from the registry (attnrepro.archs), never from conftest."""
    assert BENCHMARKS and not imports_from_tests(path), f"{path.relative_to(REPO)} imports {imports_from_tests(path)}"


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from attnrepro.training.loop import train\n", encoding="utf-8")
    assert imported_modules(bad) == [(2, "attnrepro.training.loop")]
    assert layer_of("attnrepro.training.loop") > layer_of("attnrepro.data.tokenize")
    bad.write_text("import sys\nsys.path.insert(0, 'tests')\nfrom conftest import TINY_PARAMS\nimport test_models\n")
    assert imports_from_tests(bad) == [(3, "conftest"), (4, "test_models")]
