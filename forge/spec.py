"""Specs: how a pluggable piece (harness, scorer, ...) is named in a bench and rebuilt.

Every pluggable kind follows one pattern: a Protocol, a :class:`PluginRegistry` by
name, and a :class:`Spec` (name + arguments) that journals and results store and
that :meth:`PluginRegistry.build` turns back into the object. In YAML a spec is a
one-key mapping ``{name: args}``, or a bare ``name`` when there are no arguments; a
non-mapping ``args`` fills the plugin's *shorthand* argument, so
``{python: "harness:run"}`` means ``{python: {target: "harness:run"}}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forge._digest import digest_of
from forge._files import field_path
from forge.errors import BenchError, InputFileError

__all__ = ["BuildContext", "PluginRegistry", "Spec"]

T = TypeVar("T")


class Spec(BaseModel):
    """A plugin by name with its arguments, as a journal or result stores it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    @property
    def digest(self) -> str:
        return digest_of(self.model_dump(mode="json"))

    def __str__(self) -> str:
        return self.name if not self.args else f"{self.name}({self.args})"


@dataclass(frozen=True)
class BuildContext:
    """Where a spec was written: relative paths and imports resolve against ``base_dir``."""

    base_dir: Path
    file: Path | None = None
    field: str = ""


@dataclass(frozen=True)
class _Entry(Generic[T]):
    factory: Callable[[dict[str, Any], BuildContext], T]
    shorthand: str | None


class PluginRegistry(Generic[T]):
    """Plugins of one kind by name. ``register`` adds one; ``parse`` and ``build`` use them.

    A factory takes ``(args, ctx)`` and returns the plugin. It validates its own
    arguments and raises ``ValueError`` (or an :class:`InputFileError`) on bad ones;
    ``build`` turns either into a :class:`BenchError` naming the file and field.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, _Entry[T]] = {}

    def register(self, name: str, *, shorthand: str | None = None
                 ) -> Callable[[Callable[[dict[str, Any], BuildContext], T]],
                               Callable[[dict[str, Any], BuildContext], T]]:
        def decorate(factory: Callable[[dict[str, Any], BuildContext], T]
                     ) -> Callable[[dict[str, Any], BuildContext], T]:
            self._entries[name] = _Entry(factory, shorthand)
            return factory
        return decorate

    def names(self) -> list[str]:
        return sorted(self._entries)

    def parse(self, value: Any, ctx: BuildContext) -> Spec:
        """A spec from its YAML form; an unknown name or a bad shape is a :class:`BenchError`."""
        if isinstance(value, Spec):
            return value
        if isinstance(value, str):
            name, raw = value, None
        elif isinstance(value, dict) and len(value) == 1:
            ((name, raw),) = value.items()
        else:
            raise BenchError(f"expected a {self.kind} as 'name' or {{name: arguments}}, "
                             f"got {value!r}", file=ctx.file, field=ctx.field or None)
        entry = self._entries.get(str(name))
        if entry is None:
            raise BenchError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}",
                             file=ctx.file, field=ctx.field or None)
        if raw is None:
            args: dict[str, Any] = {}
        elif isinstance(raw, dict):
            args = dict(raw)
        elif entry.shorthand is not None:
            args = {entry.shorthand: raw}
        else:
            raise BenchError(f"{self.kind} {name!r} takes a mapping of arguments, got {raw!r}",
                             file=ctx.file, field=ctx.field or None)
        return Spec(name=str(name), args=args)

    def build(self, spec: Spec, ctx: BuildContext) -> T:
        entry = self._entries.get(spec.name)
        if entry is None:
            raise BenchError(f"unknown {self.kind} {spec.name!r}; known: "
                             f"{', '.join(self.names())}", file=ctx.file, field=ctx.field or None)
        try:
            return entry.factory(spec.args, ctx)
        except InputFileError:
            raise
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(filter(None, [ctx.field, spec.name, field_path(first["loc"])]))
            raise BenchError(first["msg"], file=ctx.file, field=where or None) from None
        except (ValueError, TypeError) as exc:
            where = ".".join(filter(None, [ctx.field, spec.name]))
            raise BenchError(str(exc), file=ctx.file, field=where or None) from None
