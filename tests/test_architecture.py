"""The shape of forge/: rooms that do not lean on each other, read from the source.

The import graph of the package is built with ``ast`` from every module of it
(a folder is part of the package only if it and every folder above it has an
``__init__.py``: forge/scaffold/template holds a bench's files, not forge's),
counting every import: at the top, under ``if TYPE_CHECKING:`` and inside functions,
because a cycle a type checker or a late import hides is a cycle a reader still walks.
A *room* is a top-level subpackage (``forge.search``) or a top-level module
(``forge.cli``), the root package itself included.

The rules, each failing with the offenders named:

- no import cycle between modules;
- no import of another package's private module: ``forge.a._x`` is imported only from
  inside ``forge.a``; the root's own private rooms (``forge._util``, ``forge._text``,
  ``forge._version``) are imported from anywhere in forge;
- no two rooms import each other;
- at most :data:`MAX_TOP_MODULES` modules at the top of ``forge/``;
- no module over :data:`MAX_LINES` lines.

Each rule is also run on a small package written to ``tmp_path`` that breaks it, so
that a rule which finds nothing because it looked at nothing fails too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import forge

FORGE = Path(forge.__file__).resolve().parent
MAX_TOP_MODULES = 8
MAX_LINES = 500


@dataclass
class ImportGraph:
    """A package's modules (dotted name -> file) and who imports whom."""

    package: str
    files: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)


def _package_modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted name -> file of every module of the package whose folder is ``root``."""
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        folders = path.relative_to(root).parent.parts
        if not all((root.joinpath(*folders[:i]) / "__init__.py").exists()
                   for i in range(len(folders) + 1)):
            continue  # a data folder inside the package
        parts = [package, *folders]
        if path.stem != "__init__":
            parts.append(path.stem)
        modules[".".join(parts)] = path
    return modules


def _nearest(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module ``name`` is in: itself, or the closest package above it."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
              modules: Mapping[str, Path]) -> Iterator[str]:
    """The package's modules one import statement of ``module`` imports."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if (target := _nearest(alias.name, modules)) is not None:
                yield target
        return
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        here = here[:len(here) - (node.level - 1)]
        base = ".".join([*here, *([node.module] if node.module else [])])
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        target = submodule if submodule in modules else _nearest(base, modules)
        if target is not None:
            yield target


def build_graph(root: Path, package: str) -> ImportGraph:
    """The import graph of the package in ``root``, every import statement counted
    wherever it stands (``ast.walk`` reaches ``if TYPE_CHECKING:`` and function bodies)."""
    graph = ImportGraph(package, _package_modules(root, package))
    for module, path in graph.files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets = graph.edges.setdefault(module, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                targets.update(_imported(node, module, path.name == "__init__.py",
                                         graph.files))
        targets.discard(module)
    return graph


def import_cycles(graph: ImportGraph) -> list[list[str]]:
    """Every set of modules that import each other round (Tarjan's strongly connected
    components of more than one module), each sorted, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph.edges):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


def _owner_of_private(module: str) -> str | None:
    """The package whose private module ``module`` is (``forge.a`` for ``forge.a._x.y``),
    or None for a module nothing private leads to."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def private_imports(graph: ImportGraph) -> list[str]:
    """``importer -> module`` for each import of a private module from outside the
    package it belongs to (the root package's private rooms excepted)."""
    found = []
    for importer, targets in sorted(graph.edges.items()):
        for target in sorted(targets):
            owner = _owner_of_private(target)
            if owner is None or owner == graph.package:
                continue
            if importer != owner and not importer.startswith(owner + "."):
                found.append(f"{importer} -> {target}")
    return found


def room_of(module: str) -> str:
    """``forge.a`` for anything in the subpackage ``forge.a``; a top-level module and the
    root package are rooms of their own."""
    return ".".join(module.split(".")[:2])


def room_pairs(graph: ImportGraph) -> list[str]:
    """``a <-> b`` for each two rooms that import each other, each with an import that
    does it, so a reader knows where to look."""
    between: dict[tuple[str, str], str] = {}
    for importer, targets in sorted(graph.edges.items()):
        for target in sorted(targets):
            rooms = (room_of(importer), room_of(target))
            if rooms[0] != rooms[1]:
                between.setdefault(rooms, f"{importer} -> {target}")
    return [f"{a} <-> {b} ({between[(a, b)]}; {between[(b, a)]})"
            for a, b in sorted(between) if a < b and (b, a) in between]


def top_level_modules(root: Path) -> list[str]:
    return sorted(path.name for path in root.glob("*.py"))


def long_modules(root: Path, limit: int = MAX_LINES) -> list[str]:
    """``path: lines`` of each module of ``root`` over ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(root.parent).as_posix()}: {lines}")
    return found


# --- forge itself -------------------------------------------------------------------

def _forge() -> ImportGraph:
    return build_graph(FORGE, "forge")


def test_the_graph_reads_forge_whole() -> None:
    graph = _forge()
    assert {"forge", "forge.cli", "forge.search.loop", "forge.harness.acp"} <= set(graph.files)
    assert "forge.scaffold.template.harness" not in graph.files  # a bench's file, not forge's
    assert "forge.errors" in graph.edges["forge.cli"]


def test_no_module_import_cycle() -> None:
    cycles = import_cycles(_forge())
    assert cycles == [], "modules that import each other round:\n" + "\n".join(
        " -> ".join(cycle) for cycle in cycles)


def test_no_import_of_another_package_s_private_module() -> None:
    found = private_imports(_forge())
    assert found == [], "private modules imported from outside their package:\n" + "\n".join(
        found)


def test_no_two_rooms_import_each_other() -> None:
    pairs = room_pairs(_forge())
    assert pairs == [], "rooms that import each other:\n" + "\n".join(pairs)


def test_the_top_of_forge_holds_few_modules() -> None:
    modules = top_level_modules(FORGE)
    assert len(modules) <= MAX_TOP_MODULES, f"{len(modules)} modules at the top: {modules}"


def test_no_module_is_over_the_line_limit() -> None:
    found = long_modules(FORGE)
    assert found == [], f"modules over {MAX_LINES} lines:\n" + "\n".join(found)


# --- each rule fails where it should --------------------------------------------------

def _write(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


_BROKEN = {
    "__init__.py": "",
    "_util.py": "",
    "a/__init__.py": "",
    "a/_inner.py": "",
    "a/x.py": "from pkg import _util\nfrom . import _inner\nfrom pkg.b.y import thing\n",
    "a/w.py": "from .x import name\n",
    "b/__init__.py": "",
    "b/y.py": "def thing():\n    from ..a import x\n",
    "b/z.py": ("from typing import TYPE_CHECKING\n"
               "if TYPE_CHECKING:\n    from pkg.a._inner import Hidden\n"),
    "data/notes.py": "import pkg.b.z\n",  # no __init__.py: not a module of pkg
}


def test_the_checks_find_what_a_broken_package_breaks(tmp_path: Path) -> None:
    graph = build_graph(_write(tmp_path / "pkg", _BROKEN), "pkg")
    assert "pkg.data.notes" not in graph.files
    assert graph.edges["pkg.a.w"] == {"pkg.a.x"}
    # the cycle closes through a function-level, relative import
    assert import_cycles(graph) == [["pkg.a.x", "pkg.b.y"]]
    # the TYPE_CHECKING import of another package's private module; pkg.a's own, and
    # the root's private room, are allowed
    assert private_imports(graph) == ["pkg.b.z -> pkg.a._inner"]
    assert room_pairs(graph) == ["pkg.a <-> pkg.b (pkg.a.x -> pkg.b.y; pkg.b.y -> pkg.a.x)"]


def test_a_clean_package_passes(tmp_path: Path) -> None:
    clean = {k: v for k, v in _BROKEN.items() if k not in {"b/y.py", "b/z.py"}}
    graph = build_graph(_write(tmp_path / "pkg", {**clean, "b/y.py": "thing = 1\n"}), "pkg")
    assert graph.edges["pkg.a.x"] == {"pkg._util", "pkg.a._inner", "pkg.b.y"}
    assert import_cycles(graph) == [] and private_imports(graph) == []
    assert room_pairs(graph) == []


def test_the_size_checks_count(tmp_path: Path) -> None:
    root = _write(tmp_path / "pkg", {f"m{i}.py": "" for i in range(MAX_TOP_MODULES + 1)})
    _write(root, {"sub/big.py": "x = 1\n" * (MAX_LINES + 1), "sub/ok.py": "x = 1\n" * MAX_LINES})
    assert len(top_level_modules(root)) == MAX_TOP_MODULES + 1
    assert long_modules(root) == [f"pkg/sub/big.py: {MAX_LINES + 1}"]
