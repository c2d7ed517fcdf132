"""The public API: what ``forge`` exports exists, and its one list is the one list.

``forge/__init__.py`` declares the public names once (``_EXPORTS``: module -> names),
from which ``_LAZY`` and ``__all__`` are derived; type checkers, which cannot follow
``__getattr__``, read them from an import block of their own. The two are read from
its source with ``ast``, so a name added to one and not the other fails here rather
than in a user's ``from forge import ...`` or their type checker.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import forge
import forge.errors


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then everything else."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def test_every_exported_name_exists() -> None:
    missing = [name for name in forge.__all__ if not hasattr(forge, name)]
    assert missing == []


def test_all_is_unique() -> None:
    assert len(set(forge.__all__)) == len(forge.__all__)


def test_each_module_s_names_are_listed_in_order() -> None:
    unordered = {module: names for module, names in _exports().items()
                 if list(names) != sorted(names, key=isort_key)}
    assert unordered == {}


def test_every_public_name_of_the_package_is_exported() -> None:
    public = {name for name, value in vars(forge).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)
              and name != "annotations"}
    assert public - set(forge.__all__) == set()


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(forge.__path__, "forge.")
                  if m.name not in {"forge.__main__"})


@pytest.mark.parametrize("module_name", _modules())
def test_every_module_all_names_exist_and_are_unique(module_name: str) -> None:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", [])
    assert len(set(names)) == len(names)
    assert [n for n in names if not hasattr(module, n)] == []



def _init_tree() -> ast.Module:
    return ast.parse(Path(forge.__file__).read_text(encoding="utf-8"))


def _exports() -> dict[str, tuple[str, ...]]:
    """``_EXPORTS`` as written: module -> the names exported from it."""
    for node in _init_tree().body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "_EXPORTS"):
            assert isinstance(node.value, ast.Dict)
            exports: dict[str, tuple[str, ...]] = ast.literal_eval(node.value)
            assert len(exports) == len(node.value.keys), "a module is listed twice"
            return exports
    raise AssertionError("forge/__init__.py declares no _EXPORTS")


def _lists() -> tuple[dict[str, str], dict[str, str]]:
    """(name -> module of its TYPE_CHECKING import, name -> module of ``_EXPORTS``)."""
    typing_imports: dict[str, str] = {}
    for node in _init_tree().body:
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module, \
                    ast.unparse(statement)
                for alias in statement.names:
                    # ``X as X``: what mypy takes as a re-export without a literal __all__
                    assert alias.asname == alias.name, ast.unparse(statement)
                    assert alias.name not in typing_imports, alias.name
                    typing_imports[alias.name] = statement.module
    listed = [(name, module) for module, names in _exports().items() for name in names]
    lazy = dict(listed)
    assert len(lazy) == len(listed), "a name is exported from two modules"
    assert typing_imports and lazy
    return typing_imports, lazy


#: Defined in forge/__init__.py itself, so neither imported nor lazy.
_EAGER = {"__version__"}


def test_the_one_list_is_what_forge_exports_and_loads() -> None:
    _, lazy = _lists()
    assert set(forge.__all__) - _EAGER == set(lazy)
    assert lazy == forge._LAZY


def test_the_type_checkers_imports_name_the_one_list() -> None:
    typing_imports, lazy = _lists()
    assert set(typing_imports) ^ set(lazy) == set()


def test_each_name_is_imported_for_type_checkers_from_the_module_it_is_loaded_from() -> None:
    typing_imports, lazy = _lists()
    assert {n: m for n, m in typing_imports.items() if lazy.get(n) != m} == {}


@pytest.mark.parametrize("name", sorted(_lists()[1]))
def test_each_lazy_name_is_that_module_s_attribute(name: str) -> None:
    module = importlib.import_module(_lists()[1][name])
    assert name in getattr(module, "__all__", [name]), f"{module.__name__} does not export it"
    assert getattr(forge, name) is getattr(module, name)


def test_a_lazy_name_shadowed_by_a_submodule_stays_the_object() -> None:
    # forge.search.launch imports the module forge.evaluation.evaluate, which Python binds
    # on its package as ``evaluate``; a fresh interpreter shows what a user's script sees.
    code = ("import forge.search.launch, forge.cli\n"
            "from forge import evaluate\n"
            "import forge.evaluation.evaluate\n"
            "print(evaluate is forge.evaluate"
            " is sys.modules['forge.evaluation.evaluate'].evaluate)\n")
    out = subprocess.run([sys.executable, "-c", "import sys\n" + code], check=True,
                         capture_output=True, text=True).stdout
    assert out == "True\n"


def test_the_whole_error_tree_is_exported() -> None:
    assert set(forge.errors.__all__) - set(forge.__all__) == set()
    for name in forge.errors.__all__:
        error = getattr(forge, name)
        assert error is getattr(forge.errors, name)
        assert issubclass(error, forge.ForgeError)
