"""The package's layers, as docs/design.md's layout declares them: every module on disk is placed in a layer
there, and a module imports only from its own layer and the ones below it."""

from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import dataclass

import pytest

from conftest import REPO

PACKAGE = REPO / "src" / "attnrepro"
DESIGN = REPO / "docs" / "design.md"
ENTRY = re.compile(r"^  layer (\d+)\s+(\w+)(\.py|/)\s+(.*)$")  # `  layer 5  training/   loop.py, …`
NAMED_MODULE = re.compile(r"(?<![\w/.])(\w+)\.py\b")  # `lock.py`, not `training/lock.py` (a path elsewhere)


@dataclass(frozen=True)
class Room:
    """One entry of the layout's package part: a top-level module or package, its layer, what it names."""

    name: str
    layer: int
    is_package: bool
    text: str  # the entry's description, its continuation lines joined


def layout_block(text: str) -> str:
    """The code block under design.md's `## Layout` heading."""
    section = text.split("\n## Layout\n", 1)[1]
    return section.split("```", 2)[1]


def parse_rooms(block: str) -> dict[str, Room]:
    """The `layer N  name` entries under `src/attnrepro/` and their continuation lines (indented further)."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("src/attnrepro/"))
    entries: list[list] = []  # [layer, name, kind, text]
    for line in lines[start + 1 :]:
        if not line.startswith(" "):  # the next top-level folder: the package part is over
            break
        match = ENTRY.match(line)
        if match:
            entries.append(list(match.groups()))
        elif entries and line.startswith(" " * 10):
            entries[-1][3] += " " + line.strip()
        else:
            raise AssertionError(f"docs/design.md: a line of the package's layout that is no layer entry: {line!r}")
    names = [name for _, name, _, _ in entries]
    twice = sorted({name for name in names if names.count(name) > 1})
    assert not twice, f"docs/design.md places {', '.join(twice)} more than once"
    return {name: Room(name, int(layer), kind == "/", text) for layer, name, kind, text in entries}


BLOCK = layout_block(DESIGN.read_text(encoding="utf-8"))
ROOMS = parse_rooms(BLOCK)
LAYERS = {name: room.layer for name, room in ROOMS.items()}


def layer_of(module: str) -> int:
    """`attnrepro.data.tokenize` -> 1; the package itself (`attnrepro`) is below everything."""
    parts = module.split(".")
    if parts[0] != "attnrepro":
        raise ValueError(module)
    if len(parts) == 1:
        return -1
    if parts[1] not in LAYERS:
        raise KeyError(f"{module}: docs/design.md's layout places no `{parts[1]}` in a layer")
    return LAYERS[parts[1]]


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


def rooms_on_disk() -> dict[str, bool]:
    """The package's top-level modules and packages (a folder holding Python, `__init__.py` or not): name -> is a
    package. A folder of data alone (schemas/) is no room."""
    found = {p.stem: False for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    return found | {p.parent.name: True for p in PACKAGE.glob("*/*.py")}


def unplaced(rooms: dict[str, Room]) -> list[str]:
    """What is on disk and not where design.md says: a room without a layer entry (or declared as the other
    kind), a package's module its entry does not name, and a module an entry names that does not exist."""
    problems = []
    on_disk = rooms_on_disk()
    for name, is_package in sorted(on_disk.items()):
        shown = f"src/attnrepro/{name}{'/' if is_package else '.py'}"
        if name not in rooms:
            problems.append(f"{shown} is in no layer")
        elif rooms[name].is_package != is_package:
            problems.append(f"{shown} is placed as a {'module' if is_package else 'package'}")
        elif is_package:
            modules = {p.stem for p in (PACKAGE / name).glob("*.py")}
            named = set(NAMED_MODULE.findall(rooms[name].text))
            subpackages = sorted({p.parent.name for p in (PACKAGE / name).glob("*/*.py")})
            problems += [f"{shown}{s}/ is not named in its layer's entry" for s in subpackages
                         if not re.search(rf"(?<![\w/.]){s}/", rooms[name].text)]  # fmt: skip
            problems += [
                f"{shown}{m}.py is not named in its layer's entry" for m in sorted(modules - named - {"__init__"})
            ]
            problems += [f"{shown}{m}.py is named but does not exist" for m in sorted(named - modules)]
    problems += [
        f"{name} is placed in layer {rooms[name].layer} but does not exist" for name in rooms if name not in on_disk
    ]
    return problems


def test_every_module_and_package_is_placed_in_a_layer_by_design_md():
    """A new module, or a new package, is placed in docs/design.md's layout first; the test names what is not."""
    problems = unplaced(ROOMS)
    assert not problems, "docs/design.md's layout: " + "; ".join(problems)


def test_the_check_names_a_module_the_layout_does_not_place():
    rooms = dict(ROOMS)
    del rooms["archs"]
    training = rooms["training"]
    rooms["training"] = Room("training", training.layer, True, training.text.replace("lock.py", "lok.py"))
    assert unplaced(rooms) == [
        "src/attnrepro/archs.py is in no layer",
        "src/attnrepro/training/lock.py is not named in its layer's entry",
        "src/attnrepro/training/lok.py is named but does not exist",
    ]
    block = BLOCK.replace("  layer 0  archs.py", "  archs.py")
    with pytest.raises(AssertionError, match="no layer entry: '  archs.py"):
        parse_rooms(block)


def tracked_files() -> list[str]:
    """The repository's files as git sees them (untracked ignored files such as results/ left out)."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the layout's folders are checked against git's files")
    return out.splitlines()


def test_the_layout_names_every_folder_doc_and_config():
    """Every top-level folder, every page of docs/ and every config (overlays too) appears in the layout."""
    files = tracked_files()
    folders = {f.split("/")[0] + "/" for f in files if "/" in f}
    rooms = {f for f in files if re.fullmatch(r"docs/[^/]+\.md|config/(overlays/)?[^/]+\.yaml", f)}
    words = set(re.findall(r"[\w./-]+", BLOCK))
    missing = sorted(f for f in folders if not any(w == f.rstrip("/") or w.startswith(f) for w in words))
    missing += sorted(f for f in rooms if f.rsplit("/", 1)[1] not in words)
    assert not missing, f"docs/design.md's layout does not name: {', '.join(missing)}"


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
    with pytest.raises(KeyError, match="places no `kitchen` in a layer"):
        layer_of("attnrepro.kitchen.sink")
    bad.write_text("import sys\nsys.path.insert(0, 'tests')\nfrom conftest import TINY_PARAMS\nimport test_models\n")
    assert imports_from_tests(bad) == [(3, "conftest"), (4, "test_models")]
