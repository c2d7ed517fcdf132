"""The ``python`` harness: a ``module:function`` imported from the bench's folder."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict

from forge._util.digest import file_digest
from forge._util.threads import DaemonThreadPool
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.errors import BenchError
from forge.harness.base import HARNESSES, AttemptContext, Harness

__all__ = ["PythonHarness", "PythonOptions", "import_target"]


@overload
def import_target(target: str, base_dir: Path, *, where: BuildContext | None = None,
                  require_callable: Literal[True] = True) -> tuple[Callable[..., Any], str]: ...


@overload
def import_target(target: str, base_dir: Path, *, where: BuildContext | None = None,
                  require_callable: bool) -> tuple[Any, str]: ...


def import_target(target: str, base_dir: Path, *, where: BuildContext | None = None,
                  require_callable: bool = True) -> tuple[Any, str]:
    """Import ``module:attr`` with ``base_dir`` first on the import path.

    Returns the callable (any object, with ``require_callable`` false) and an identity
    that changes when the module's source does.
    A module of the same name imported earlier from another folder (two benches each
    with a ``harness.py``) is re-imported from ``base_dir``. ``where`` is the spec that
    names the target, for the file, field and line of a :class:`BenchError`.
    """
    def error(message: str) -> BenchError:
        return where.error(message) if where is not None else BenchError(message)

    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise error(f"expected 'module:function', got {target!r}")
    _put_first_on_path(base_dir)
    loaded = sys.modules.get(module_name)
    if loaded is not None and _stale(getattr(loaded, "__file__", None), base_dir):
        _forget_module(module_name)
    _forget_changed_helpers(base_dir)
    importlib.invalidate_caches()  # see files written since the last import
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure of user code is bad input
        raise error(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise error(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if require_callable and not callable(obj):
        raise error(f"{target!r} is not callable")
    return obj, _identity(target, module, base_dir)


def _put_first_on_path(base_dir: Path) -> None:
    base = str(base_dir.resolve())
    # First on the path even if an earlier bench left it further down: loading bench A,
    # then B, then A again must find A's module, not B's.
    while base in sys.path:
        sys.path.remove(base)
    sys.path.insert(0, base)


def _forget_module(module_name: str) -> None:
    """Drop a module and its submodules from ``sys.modules``, so the next import reads
    them again."""
    for name in [n for n in sys.modules if n == module_name or n.startswith(module_name + ".")]:
        del sys.modules[name]


def _identity(target: str, module: ModuleType, base_dir: Path) -> str:
    """An identity of the imported target that changes when its source does."""
    source = getattr(module, "__file__", None)
    digest = file_digest(source) if source else "builtin"
    if source:
        _imported_digest.setdefault(str(Path(source).resolve()), digest)
    # The module's own source, and every Python file of the bench folder when the
    # module lives there: a harness's helpers decide its outcomes as much as it does.
    folder = _folder_digest(base_dir) if source and _is_under(source, base_dir) else ""
    return f"python:{target}:{digest}" + (f":{folder}" if folder else "")


_SKIPPED_DIRS = {"__pycache__", "node_modules", "venv"}


def _folder_digest(folder: Path) -> str:
    """sha256 over the relative paths and contents of the ``.py`` files under ``folder``."""
    h = hashlib.sha256()
    root = folder.resolve()
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(p.startswith(".") or p in _SKIPPED_DIRS for p in parts[:-1]):
            continue
        h.update("/".join(parts).encode() + b"\0" + file_digest(path).encode() + b"\n")
    return h.hexdigest()


#: Source digest of each module file as it was when imported, to notice later edits.
_imported_digest: dict[str, str] = {}
#: Digest of each bench folder's Python files as they were at its last import.
_folder_seen: dict[str, str] = {}
_FORGE_DIR = Path(__file__).resolve().parents[1]


def _forget_changed_helpers(folder: Path) -> None:
    """When any Python file of ``folder`` changed since its last import, drop every module
    loaded from under it, so the harness's helpers are imported again with it: the
    identity names the folder's code, and that code must be what runs. forge's own
    modules stay, even in a bench folder that holds a copy of forge."""
    key = str(folder.resolve())
    current = _folder_digest(folder)
    if _folder_seen.get(key, current) != current:
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if _is_under(path, folder) and not _is_under(path, _FORGE_DIR):
                del sys.modules[name]
    _folder_seen[key] = current


def _stale(path: str | None, folder: Path) -> bool:
    """A loaded module must be imported again: it comes from another folder, or its
    source changed since it was imported (the identity would name code not running)."""
    if not _is_under(path, folder) or path is None:
        return True
    key = str(Path(path).resolve())
    try:
        current = file_digest(key)
    except OSError:
        return True
    if _imported_digest.get(key, current) != current:
        del _imported_digest[key]
        return True
    return False


def _is_under(path: str | None, folder: Path) -> bool:
    if not path:
        return False
    try:
        Path(path).resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


class HarnessExit(Exception):
    """A harness called ``sys.exit()``: an error of its attempt, not the end of forge."""

    def __init__(self, exc: SystemExit) -> None:
        super().__init__(f"SystemExit: {exc.code}")


class PythonOptions(BaseModel):
    """The ``python:`` argument of a bench's harness: the function to call."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    target: str


@HARNESSES.register("python", shorthand="target")
class PythonHarness(Harness):
    """Calls ``fn(config, task, ctx)``; async functions are awaited, sync ones run in
    daemon threads so that one which never returns cannot hold the process."""

    options_model = PythonOptions

    def __init__(self, fn: Callable[..., Any], identity: str) -> None:
        self._fn = fn
        self._is_async = inspect.iscoroutinefunction(fn)
        self._identity = identity
        self._pool = DaemonThreadPool("forge-harness")

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def sync_callable(self) -> Callable[..., Any] | None:
        """The plain function when it is sync, so the engine can run it on thread lanes."""
        return None if self._is_async else self._fn

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> Any:
        if self._is_async:
            try:
                result = await self._fn(config, task, ctx)
            except SystemExit as exc:
                # Raised in a task, SystemExit would end the event loop and forge with it.
                raise HarnessExit(exc) from None
        else:
            result = await asyncio.wrap_future(self._pool.submit(self._fn, config, task, ctx))
        if inspect.isawaitable(result):
            result = await result
        return result

    async def aclose(self) -> None:
        self._pool.shutdown()

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> PythonHarness:
        options = PythonOptions.model_validate(args)
        fn, identity = import_target(options.target, ctx.base_dir, where=ctx.at("python"))
        return cls(fn, identity)
