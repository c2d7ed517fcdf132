"""Plugins: how a pluggable piece (harness, scorer, proposer, executor) is named and built.

Every pluggable kind follows one pattern:

- a base class of the kind (:class:`~forge.harness.Harness`, :class:`~forge.scorers.Scorer`,
  :class:`~forge.proposers.Proposer`, :class:`~forge.executors.Executor`), itself a
  :class:`Plugin`: it declares the kind's contract, and its optional hooks as methods
  that do nothing unless a plugin overrides them;
- one :class:`PluginRegistry` of the kind, to which each plugin class adds itself with
  the ``@REGISTRY.register(name)`` decorator, next to its definition;
- each plugin class has a pydantic ``options_model`` (its arguments) and ``from_args``,
  the factory the registry calls with the arguments of a :class:`Spec`;
- a plugin whose options name environment variables holding credentials says which in
  :meth:`Plugin.secret_envs`: whoever builds it (the bench loader, the search's
  proposer) registers their values as secrets before anything runs;
- a :class:`Spec` (name + arguments) is what journals and results store, and what
  :meth:`PluginRegistry.build` turns back into the object.

In YAML a spec is a one-key mapping ``{name: args}``, or a bare ``name`` when there are
no arguments; a non-mapping ``args`` fills the plugin's *shorthand* argument, so
``{python: "harness:run"}`` means ``{python: {target: "harness:run"}}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Generic, NoReturn, Self, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forge._util.digest import digest_of
from forge._util.files import YamlDocument, validation_problem
from forge.errors import BenchError, InputFileError

__all__ = ["BuildContext", "NoOptions", "Plugin", "PluginRegistry", "Spec"]


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


_PART = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


@dataclass(frozen=True)
class BuildContext:
    """Where a spec was written: relative paths and imports resolve against ``base_dir``.

    ``field`` is the spec's place in ``file`` (``scorer.all[1]``); ``doc``, the parsed
    file when there is one, gives every error raised through :meth:`error` its line.
    """

    base_dir: Path
    file: Path | None = None
    field: str = ""
    doc: YamlDocument | None = None

    def at(self, *parts: str | int) -> Self:
        """The context of a part of this spec: ``ctx.at("all", 1)`` is ``scorer.all[1]``."""
        field = self.field
        for part in parts:
            field += f"[{part}]" if isinstance(part, int) else ("." if field else "") + part
        return replace(self, field=field)

    @property
    def loc(self) -> tuple[str | int, ...]:
        """``field`` as a path of keys, as pydantic and :meth:`YamlDocument.line_of` take it."""
        return tuple(int(index) if index else key
                     for index, key in _PART.findall(self.field))

    @property
    def line(self) -> int | None:
        if self.doc is None or (self.file is not None and self.doc.path != self.file):
            return None
        return self.doc.line_of(self.loc)

    def error(self, message: str, *parts: str | int) -> BenchError:
        """A :class:`BenchError` about this spec (or a part of it): file, field and line."""
        where = self.at(*parts)
        return BenchError(message, file=self.file, field=where.field or None, line=where.line)

    def invalid(self, exc: ValidationError, *parts: str | int) -> NoReturn:
        """Raise pydantic's first error about this spec's arguments as a :class:`BenchError`."""
        problem = validation_problem(exc)
        raise self.error(problem.message, *parts, *problem.loc) from None


class NoOptions(BaseModel):
    """The options of a plugin that takes none: any argument is refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Plugin:
    """Base of every plugin class: its arguments' model and the factory a registry calls.

    The default ``from_args`` suits a plugin without options: the arguments are checked
    against ``options_model`` (:class:`NoOptions` unless overridden) and the class is
    built without any. A plugin with options overrides both.
    """

    options_model: ClassVar[type[BaseModel]] = NoOptions

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        cls.options_model.model_validate(args)
        return cls()

    def secret_envs(self) -> tuple[str, ...]:
        """The environment variables whose values this plugin uses as credentials (API
        keys, tokens, headers): none by default.

        Whoever builds the plugin registers them (:func:`forge.secrets.masking.
        register_secret_envs`) at once, so a key is masked from the first byte forge
        writes, not from the plugin's first use of it (a judge is first called after
        the first attempt has been written; a harness may echo its key before that).
        """
        return ()


P = TypeVar("P", bound=Plugin)
C = TypeVar("C", bound=type[Plugin])


@dataclass(frozen=True)
class _Entry(Generic[P]):
    plugin: type[P]
    shorthand: str | None


class PluginRegistry(Generic[P]):
    """The plugins of one kind by name. ``register`` adds one; ``parse`` and ``build`` use them.

    ``from_args`` validates its own arguments and raises a pydantic ``ValidationError``,
    a ``ValueError`` / ``TypeError`` or an :class:`InputFileError` on bad ones; ``build``
    turns each into a :class:`BenchError` naming the file, the field and its line.
    """

    def __init__(self, kind: str, base: type[Plugin]) -> None:
        self.kind = kind
        self.base = base
        self._entries: dict[str, _Entry[P]] = {}

    def register(self, name: str, *, shorthand: str | None = None) -> Callable[[C], C]:
        """Class decorator: add the class under ``name``."""
        def decorate(cls: C) -> C:
            if not issubclass(cls, self.base):
                raise TypeError(f"{cls.__name__} is not a {self.base.__name__}")
            if name in self._entries:
                raise ValueError(f"two {self.kind}s are named {name!r}")
            self._entries[name] = _Entry(cast(type[P], cls), shorthand)
            return cls
        return decorate

    def names(self) -> list[str]:
        return sorted(self._entries)

    def shorthand(self, name: str) -> str | None:
        """The argument a non-mapping value fills for plugin ``name`` (None: no shorthand,
        or no such plugin)."""
        entry = self._entries.get(name)
        return None if entry is None else entry.shorthand

    def get(self, name: str) -> type[P] | None:
        """The class registered as ``name``, or None."""
        entry = self._entries.get(name)
        return None if entry is None else entry.plugin

    def plugin(self, name: str, ctx: BuildContext) -> type[P]:
        """The class registered as ``name``; an unknown name is a :class:`BenchError`."""
        return self._entry(name, ctx).plugin

    def _entry(self, name: str, ctx: BuildContext) -> _Entry[P]:
        entry = self._entries.get(name)
        if entry is None:
            raise ctx.error(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return entry

    def parse(self, value: Any, ctx: BuildContext) -> Spec:
        """A spec from its YAML form; an unknown name or a bad shape is a :class:`BenchError`."""
        if isinstance(value, Spec):
            return value
        if isinstance(value, str):
            name, raw = value, None
        elif isinstance(value, dict) and len(value) == 1:
            ((name, raw),) = value.items()
        else:
            raise ctx.error(f"expected a {self.kind} as 'name' or {{name: arguments}}, "
                            f"got {value!r}")
        entry = self._entry(str(name), ctx)
        if raw is None:
            args: dict[str, Any] = {}
        elif isinstance(raw, dict):
            args = dict(raw)
        elif entry.shorthand is not None:
            args = {entry.shorthand: raw}
        else:
            raise ctx.error(f"{self.kind} {name!r} takes a mapping of arguments, got {raw!r}")
        return Spec(name=str(name), args=args)

    def build(self, spec: Spec, ctx: BuildContext) -> P:
        entry = self._entry(spec.name, ctx)
        try:
            built = entry.plugin.from_args(spec.args, ctx)
        except InputFileError:
            raise
        except ValidationError as exc:
            ctx.invalid(exc, spec.name)
        except (ValueError, TypeError) as exc:
            raise ctx.error(str(exc), spec.name) from None
        return built
