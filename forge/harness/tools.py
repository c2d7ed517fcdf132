"""Python functions as model tools: JSON schemas from signatures, validated execution.

The ``openai`` harness loads a bench's tools with :func:`load_tools` and runs the
calls a model asks for with :meth:`ToolBox.execute`. Every way a call can go wrong
(malformed JSON, an unknown tool, arguments the signature refuses, a tool that
raises) is an outcome, a ``ToolCall`` with ``ok=False`` and a message for the
model, never an exception out of the attempt.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_jsonable_python

from forge._util.files import error_wording
from forge._util.threads import DaemonThreadPool
from forge.core.spec import BuildContext
from forge.harness.base import ToolCall
from forge.harness.python import import_target

__all__ = ["Tool", "ToolBox", "import_value", "load_tools", "tool_from_function"]

log = logging.getLogger(__name__)

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what OpenAI accepts as a function name
_SECTION = re.compile(r"(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):")
_DOC_ARG = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


@dataclass(frozen=True)
class Tool:
    """A Python function the model may call, with the model of its arguments."""

    name: str
    fn: Callable[..., Any]
    arguments: type[BaseModel]
    fields: tuple[tuple[str, str], ...]  # (model field, parameter name)
    description: str

    @property
    def schema(self) -> dict[str, Any]:
        """The ``tools`` entry of a Chat Completions request."""
        params = self.arguments.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            if isinstance(prop, dict) and isinstance(prop.get("title"), str):
                del prop["title"]  # derived from the name: noise in every request
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": params}}

    def bind(self, args: dict[str, Any]) -> dict[str, Any]:
        """Keyword arguments for ``fn``; raises :class:`ValidationError` on bad ones."""
        validated = self.arguments.model_validate(args)
        # Attributes, not model_dump: a parameter typed as a model or dataclass gets
        # the validated object, as a direct call would pass it.
        return {param: getattr(validated, name) for name, param in self.fields}


def tool_from_function(fn: Callable[..., Any], name: str | None = None) -> Tool:
    """A :class:`Tool` from ``fn``'s signature, type hints and docstring.

    The docstring's text before its first section (``Args:``, ``Returns:``...) is
    the description; ``name: text`` lines under ``Args:`` (or ``Parameters:``)
    describe the parameters. Raises ``ValueError`` for
    a function the model could not call with named JSON arguments.
    """
    tool_name = name or str(getattr(fn, "__name__", ""))
    if not _TOOL_NAME.fullmatch(tool_name):
        raise ValueError(f"tool name {tool_name!r}: expected 1-64 letters, digits, '_' or '-'")
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn)
    except (TypeError, ValueError, NameError) as exc:
        raise ValueError(f"tool {tool_name!r}: cannot read its signature: {exc}") from None
    description, arg_docs = _parse_doc(inspect.getdoc(fn) or "")
    fields: dict[str, Any] = {}
    names: list[tuple[str, str]] = []
    for i, p in enumerate(signature.parameters.values()):
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise ValueError(f"tool {tool_name!r}: parameter {p.name!r} cannot be passed "
                             "by name")
        # Internal field names with the parameter as alias: a parameter called `json`
        # or `copy` would otherwise shadow a BaseModel attribute.
        default = ... if p.default is p.empty else p.default
        fields[f"p{i}"] = (hints.get(p.name, Any),
                           Field(default, alias=p.name, description=arg_docs.get(p.name)))
        names.append((f"p{i}", p.name))
    try:
        model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"),
                             **fields)
        model.model_json_schema()
    except Exception as exc:  # an annotation pydantic cannot validate or describe
        raise ValueError(f"tool {tool_name!r}: {type(exc).__name__}: {exc}") from None
    return Tool(tool_name, fn, model, tuple(names), description or tool_name)


def _parse_doc(doc: str) -> tuple[str, dict[str, str]]:
    """The text before the first section (``Args:``, ``Returns:``...), and each
    argument's description from the ``Args:`` section."""
    before: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    for line in doc.splitlines():
        header = _SECTION.fullmatch(line.strip())
        if header and not line[:1].isspace():
            section = header[1]
        elif section is None:
            before.append(line)
        elif line[:1].isspace() and section in ("Args", "Arguments", "Parameters") and (
                match := _DOC_ARG.match(line)):
            args[match[1].lstrip("*")] = match[2].strip()
    return " ".join(" ".join(before).split()), args


class ToolBox:
    """The tools of one harness; runs sync tools on daemon threads."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = {t.name: t for t in tools}
        self.schemas = [t.schema for t in tools]
        self._pool = DaemonThreadPool("forge-tool")

    async def execute(self, name: str, arguments: str) -> tuple[ToolCall, str]:
        """Run one requested call; returns its record and the tool message's text."""
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError as exc:
            return _failed(name, {}, f"arguments are not valid JSON: {exc}")
        if not isinstance(parsed, dict):
            return _failed(name, {}, "arguments must be a JSON object, got "
                                     f"{type(parsed).__name__}")
        tool = self.tools.get(name)
        if tool is None:
            return _failed(name, parsed, f"unknown tool {name!r}; available: "
                                         f"{', '.join(self.tools) or 'none'}")
        try:
            kwargs = tool.bind(parsed)
        except ValidationError as exc:
            # The model reads this, and people read it in the attempt's tool calls: forge's
            # wording, not pydantic's ("Input should be ...").
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {error_wording(e)}"
                for e in exc.errors(include_url=False))
            return _failed(name, parsed, f"invalid arguments: {problems}")
        try:
            if inspect.iscoroutinefunction(tool.fn):
                result = await tool.fn(**kwargs)
            else:
                # A thread, so a slow tool never blocks the event loop and the other
                # attempts; a daemon, so one that never returns cannot hold the process.
                result = await asyncio.wrap_future(
                    self._pool.submit(functools.partial(tool.fn, **kwargs)))
        except (Exception, SystemExit) as exc:  # the tool's failure is the model's to read
            return _failed(name, parsed, f"{type(exc).__name__}: {exc}")
        result = to_jsonable_python(result, fallback=repr)
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        return ToolCall(name=name, args=parsed, ok=True, result=result), text

    def close(self) -> None:
        self._pool.shutdown()


def _failed(name: str, args: dict[str, Any], error: str) -> tuple[ToolCall, str]:
    log.debug("tool call %s failed: %s", name, error)
    return ToolCall(name=name, args=args, ok=False, error=error), f"error: {error}"


def load_tools(target: str, ctx: BuildContext) -> tuple[list[Tool], str]:
    """The tools ``module:attr`` names in the bench folder (a list or tuple of
    functions, or a dict of them by name) and an identity that changes with the
    source of the module and of the bench's folder. ``ctx`` is the place of ``target``
    in the bench, which every error names."""
    value, identity = import_value(target, ctx)
    tools = _tools_of(value, target, ctx)
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise ctx.error(f"two tools are named {tool.name!r}")
        seen.add(tool.name)
    return tools, identity


def import_value(target: str, ctx: BuildContext) -> tuple[Any, str]:
    """The value ``module:attr`` names in the bench folder (any object, callable or
    not; ``attr`` may be dotted) and an identity that changes with the source of the
    module and of the bench's folder. ``ctx`` is the place of ``target`` in the bench,
    which every error names."""
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise ctx.error(f"expected 'module:attr', got {target!r}")
    # import_target wants a callable; the module's bound __getattribute__ is one. So
    # the module gets the python harness's import path, its reloading of stale
    # modules and its source identity, unchanged.
    getter, identity = import_target(f"{module}:__getattribute__", ctx.base_dir, where=ctx)
    first, *rest = attr.split(".")
    try:
        value: Any = getter(first)
        for part in rest:
            value = getattr(value, part)
    except AttributeError:
        raise ctx.error(f"module {module!r} has no attribute {attr!r}") from None
    # Named for what the bench wrote, not for the accessor used to import it.
    source = identity.removeprefix(f"python:{module}:__getattribute__:")
    return value, f"{module}:{attr}:{source}"


def _tools_of(value: Any, target: str, ctx: BuildContext) -> list[Tool]:
    """The tools of a list or tuple of functions, or of a dict of them by name."""
    if isinstance(value, Mapping):
        pairs = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        pairs = [(str(getattr(v, "__name__", "")), v) for v in value]
    else:
        raise ctx.error(f"{target!r} is a {type(value).__name__}; expected a list of functions")
    tools: list[Tool] = []
    for name, fn in pairs:
        if not callable(fn):
            raise ctx.error(f"{target!r}: {fn!r} is not a function")
        try:
            tools.append(tool_from_function(fn, name or None))
        except ValueError as exc:
            raise ctx.error(str(exc)) from None
    return tools
