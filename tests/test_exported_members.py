"""The public API: what ``forge`` exports exists, and ``__all__`` is kept in order."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import forge


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


def test_all_is_sorted_and_unique() -> None:
    assert len(set(forge.__all__)) == len(forge.__all__)
    assert forge.__all__ == sorted(forge.__all__, key=isort_key)


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

