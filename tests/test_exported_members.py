"""Every member of ``forge.__all__`` is what the one list says it is (after httpx's test).

``forge/__init__.py`` loads each public name lazily from the module its ``_EXPORTS``
names; a name exported but not importable, loaded from a module that merely passes it
on by accident, or a public attribute of ``forge`` missing from ``__all__``, is caught
here rather than in a user's ``from forge import ...``.
"""

from __future__ import annotations

import importlib
import inspect
import types

import pytest

import forge
import forge.errors


def _listed() -> list[tuple[str, str]]:
    return [(name, module) for module, names in forge._EXPORTS.items() for name in names]


def test_the_list_is_not_empty_and_names_each_member_once() -> None:
    names = [name for name, _ in _listed()]
    assert len(names) > 50  # the API as documented; an empty list would pass the rest
    assert sorted(set(names)) == sorted(names)


@pytest.mark.parametrize(("name", "module_name"), _listed())
def test_each_member_imports_and_is_defined_where_the_list_says(name: str,
                                                                module_name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from forge import {name}", namespace)
    value = namespace[name]
    module = importlib.import_module(module_name)
    assert value is getattr(module, name)
    assert name in getattr(module, "__all__", ()), f"{module_name} does not export {name}"
    defined_in = getattr(value, "__module__", None)
    if inspect.isclass(value) or inspect.isfunction(value):
        # defined in the listed module, or in one of its package's own modules
        assert defined_in == module_name or str(defined_in).startswith(module_name + "."), (
            f"{name} is defined in {defined_in}, not under {module_name}")


def test_every_public_attribute_of_forge_is_in_all() -> None:
    for name in forge.__all__:
        getattr(forge, name)  # every lazy name loaded: what a star import would bind
    public = sorted(name for name, value in vars(forge).items()
                    if not name.startswith("_") and not isinstance(value, types.ModuleType)
                    and name != "annotations")
    assert sorted(set(public) - set(forge.__all__)) == []
    assert sorted(set(forge.__all__) - set(public) - {"__version__"}) == []


def test_every_error_forge_raises_on_purpose_is_exported() -> None:
    defined = sorted(name for name, value in vars(forge.errors).items()
                     if inspect.isclass(value) and issubclass(value, forge.ForgeError)
                     and value.__module__ == "forge.errors")
    assert "ForgeError" in defined and "RunInterrupted" in defined
    assert sorted(set(defined) - set(forge.__all__)) == []


def test_a_member_the_list_does_not_name_is_not_exported() -> None:
    with pytest.raises(AttributeError, match="no attribute 'check_bench_name'"):
        _ = forge.check_bench_name
    with pytest.raises(ImportError):
        exec("from forge import check_bench_name", {})
