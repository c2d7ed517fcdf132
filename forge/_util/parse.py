"""Parsing JSON and YAML text that forge did not write, within bounds.

Input files come from people and from programs forge does not control. Parsed naively,
some few-byte texts crash or hang whatever reads them next: 3,000 nested brackets
overflow the parsers' stack, a YAML "billion laughs" expands to 10^9 nodes, a 1 MiB text
repeated by 5,000 aliases stands for 5 GB (few nodes, but a digest of it as JSON took
7 GB of memory: the loader counts the bytes of what aliases repeat), a 5,000-digit
integer cannot be converted, ``\\ud800`` decodes to a lone surrogate that no UTF-8 writer
accepts, ``1e400`` is infinity. Here each of those is a :class:`HostileValue` (or, in
YAML, a :class:`yaml.MarkedYAMLError` with its line), which the file readers of
:mod:`forge._util.files` turn into one line naming the file, the line and the field. The
bounds are in :mod:`forge._util.bounds`.

YAML is read with YAML 1.2 scalars: only ``true``/``false`` are booleans and ``1e-3`` is
a float (PyYAML follows YAML 1.1, where ``on``/``off``/``yes``/``no`` are booleans, so
the key ``on:`` of a runtime rule became ``True``, and ``1e-3`` is a string).

A key written twice in one mapping is refused (:class:`DuplicateKey`): PyYAML keeps the
last silently, so a second ``metrics:`` block dropped the first's tolerances. JSON the
same (:class:`DuplicateJsonKey`): ``json.loads`` keeps the last too, so a task line
``{"id": "a", ..., "id": "b"}`` was read as task ``b``.

Why PyYAML with a hand-made resolver rather than ruamel.yaml (weighed for issue 16):
ruamel would give YAML 1.2 scalars and duplicate keys natively, but forge needs more
than it gives: the bounds above are checked as the node tree is composed (ruamel's
composer is as recursive as PyYAML's, so the same hooks would be needed), line numbers
come from the same node tree in both, and ruamel's round-trip loader is several times
slower and would be one more dependency whose error texts (two lines, with the
document's snippet) must be rewritten into one line anyway. The YAML 1.2 resolver is
fifteen lines and the duplicate check thirty; both are tested. Switching would move
every one of these checks, not remove them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from forge._util.bounds import MAX_INT_DIGITS, MAX_NESTING, MAX_YAML_BYTES, MAX_YAML_NODES

__all__ = ["BoundExceeded", "ComposedYaml", "DuplicateJsonKey", "DuplicateKey", "HostileValue",
           "check_value", "compose_yaml", "field_path", "loads_json", "parse_yaml"]


class HostileValue(ValueError):
    """A value no reader should go on with; ``loc`` is its key path in the document."""

    def __init__(self, message: str, loc: Sequence[str | int] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.loc = tuple(loc)


# -- YAML --------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 scalars (module docstring) and bounds: nesting, the
    nodes a document expands to through its aliases and the bytes its scalars then
    add up to, and the digits of an integer.

    The bounds are checked as the node tree is composed, before anything is built
    from it and before the composer's recursion could overflow the stack. An alias
    is counted as what its anchor expands to, in nodes and in bytes, so a document
    refused for either is refused at the alias that crosses the bound.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        # Nodes and scalar bytes composed so far in the document, aliases expanded.
        self._nodes = self._bytes = 0
        # Per collection being composed: the counts when it started.
        self._open: list[tuple[int, int]] = []
        # id(collection node) -> (nodes, bytes) it expands to.
        self._sizes: dict[int, tuple[int, int]] = {}

    @property
    def expanded(self) -> tuple[int, int]:
        """Nodes and scalar bytes of the document composed, aliases expanded."""
        return self._nodes, self._bytes

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if len(self._open) >= MAX_NESTING:
                raise _bound_error(f"the document is nested deeper than {MAX_NESTING} levels",
                                   event.start_mark)
            self._open.append((self._nodes, self._bytes))
            self._count(1, 0, event)
            node = super().compose_node(parent, index)
            nodes, size = self._open.pop()
            self._sizes[id(node)] = (self._nodes - nodes, self._bytes - size)
            return node
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.ScalarNode):
            # An alias of a scalar repeats its text as much as the scalar itself does.
            self._count(1, _utf8_len(node.value), event)
        else:
            # An alias of a collection counts what it expands to; one of a collection
            # still being composed is a cycle, which the value check refuses after.
            self._count(*self._sizes.get(id(node), (1, 0)), event)
        return node

    def _count(self, nodes: int, size: int, event: Any) -> None:
        """Add to the document's counts; refuse at the event that crosses a bound."""
        self._nodes += nodes
        self._bytes += size
        if self._nodes > MAX_YAML_NODES:
            raise _bound_error(f"the document expands to more than {MAX_YAML_NODES:,} nodes "
                               "(the bound) through aliases repeating aliases",
                               event.start_mark)
        if self._bytes > MAX_YAML_BYTES:
            raise _bound_error(f"the document expands to more than {MAX_YAML_BYTES:,} bytes "
                               f"of text ({MAX_YAML_BYTES // 2**20} MiB, the bound) through "
                               "aliases repeating long text", event.start_mark)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = sum(ch.isdigit() for ch in node.value)
        if digits > MAX_INT_DIGITS:
            raise ConstructorError(None, None, f"an integer of {digits} digits (at most "
                                   f"{MAX_INT_DIGITS})", node.start_mark)
        return super().construct_yaml_int(node)

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        try:
            return super().construct_yaml_timestamp(node)
        except (ValueError, OverflowError) as exc:  # 2024-13-45 matches the date pattern
            raise ConstructorError(None, None, f"not a date: {exc}", node.start_mark) from None


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_yaml_timestamp)

_BOOL, _FLOAT = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:float"
_FLOAT_RE = re.compile(r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, _FLOAT_RE if tag == _FLOAT else rx) for tag, rx in resolvers if tag != _BOOL]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


class DuplicateKey(yaml.MarkedYAMLError):
    """A key written twice in one mapping; ``loc`` is the key path of the second."""

    def __init__(self, loc: Sequence[str | int], first_line: int, mark: Any) -> None:
        key = loc[-1]
        super().__init__(problem=f"key {key!r} is written twice in one mapping (first on "
                         f"line {first_line}); a second one would silently replace the "
                         "first", problem_mark=mark)
        self.loc = tuple(loc)


_MERGE = "tag:yaml.org,2002:merge"


def _refuse_duplicate_keys(root: yaml.Node | None) -> None:
    """Walk the node tree (each node once: an alias repeats a node, not its keys) and
    raise :class:`DuplicateKey` for the first mapping holding one scalar key twice.

    Keys are compared as written with their resolved tag, so ``1`` and ``"1"`` differ, as
    they do once built. A ``<<`` merge may repeat keys: that is what it is for.
    """
    seen_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, tuple[str | int, ...]]] = [] if root is None else [(root, ())]
    while stack:
        node, loc = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, (*loc, i)) for i, child in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            keys: dict[tuple[str, str], int] = {}
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE:
                    written = (key_node.tag, key_node.value)
                    if written in keys:
                        raise DuplicateKey((*loc, key_node.value), keys[written],
                                           key_node.start_mark)
                    keys[written] = key_node.start_mark.line + 1
                    stack.append((value_node, (*loc, key_node.value)))
                else:
                    stack.append((value_node, loc))


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class BoundExceeded(yaml.MarkedYAMLError):
    """A well-formed document beyond one of the bounds of :mod:`forge._util.bounds`, refused
    at the mark where composing it crossed the bound."""


def _bound_error(problem: str, mark: Any) -> BoundExceeded:
    return BoundExceeded(problem=problem, problem_mark=mark)


@dataclass(frozen=True)
class ComposedYaml:
    """One YAML document: its node tree (for line numbers), its data, and what the
    loader counted of it with its aliases expanded: the nodes, and the UTF-8 bytes of
    its scalars (keys and values). Every string in ``data``, counted as often as it
    occurs, adds up to at most ``expanded_bytes``: that bound is what holds the text
    a digest, a JSON dump or a report makes of the data."""

    root: yaml.Node | None
    data: Any
    expanded_nodes: int
    expanded_bytes: int


def compose_yaml(text: str) -> ComposedYaml:
    """The node tree of ``text`` and its data, from one parse (:class:`ComposedYaml`).

    Raises :class:`yaml.YAMLError` for malformed or unbounded YAML; the caller checks
    the data with :func:`check_value` (and can then name the line of what it refuses).
    """
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        _refuse_duplicate_keys(root)
        data = None if root is None else loader.construct_document(root)
    finally:
        loader.dispose()
    return ComposedYaml(root, data, *loader.expanded)


def parse_yaml(text: str) -> Any:
    """Parse YAML text the way every forge input file is parsed (YAML 1.2 scalars,
    bounded). Raises :class:`yaml.YAMLError` or :class:`HostileValue`."""
    data = compose_yaml(text).data
    check_value(data)
    return data


# -- JSON --------------------------------------------------------------------------------


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise HostileValue(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise HostileValue(f"the number {text[:40]} is out of range")
    return value


def _parse_constant(text: str) -> Any:
    raise HostileValue(f"{text} is not JSON; expected a finite number")


def loads_json(text: str, *, bounded: bool = True) -> Any:
    """``json.loads`` for text forge did not write, checked with :func:`check_value`.

    Raises :class:`json.JSONDecodeError` for malformed JSON, :class:`DuplicateJsonKey`
    for an object holding one key twice, and :class:`HostileValue` for ``NaN``/``Infinity``,
    a number out of range, an integer of more than MAX_INT_DIGITS digits, nesting
    deeper than MAX_NESTING or a lone surrogate.

    ``bounded=False`` keeps only the duplicate-key check, for files forge appends
    itself (journals, the attempt store): an attempt's output is the harness's and may
    be nested deeper than an input file may, and forge must read back what it wrote.
    """
    if not bounded:
        try:
            return json.loads(text, object_pairs_hook=_object)
        except _KeyTwice:
            raise DuplicateJsonKey(*_first_duplicate(text)) from None
    try:
        value = json.loads(text, parse_int=_parse_int, parse_float=_parse_float,
                           parse_constant=_parse_constant, object_pairs_hook=_object)
    except _KeyTwice:
        raise DuplicateJsonKey(*_first_duplicate(text)) from None
    except RecursionError:
        raise HostileValue(f"nested deeper than {MAX_NESTING} levels") from None
    check_value(value, surrogates=_may_hold_surrogates(text))
    return value


class DuplicateJsonKey(HostileValue):
    """A JSON object holding one key twice; ``loc`` is the key path of the second."""

    def __init__(self, key: str, loc: Sequence[str | int]) -> None:
        super().__init__(f"key {key!r} is written twice in one object; a second one would "
                         "silently replace the first", loc)
        self.key = key


class _KeyTwice(Exception):
    """Raised by :func:`_object` out of the parser, which cannot say where it was."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _KeyTwice
    return out


class _Twice(dict[str, Any]):
    """An object read with a key twice (only while :func:`_first_duplicate` looks)."""

    key = ""


def _first_duplicate(text: str) -> tuple[str, tuple[str | int, ...]]:
    """The key and key path of the duplicate :func:`_object` refused first.

    Parsed again (only once a duplicate is known to be there) with objects that keep
    the key they repeat, then walked for the first of them the parser finished, which
    is the one the first parse stopped at. Numbers are not converted: what comes after
    the duplicate may be out of bounds, and only the shape matters here.
    """
    found: list[_Twice] = []

    def mark(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) == len(pairs):
            return out
        twice = _Twice(out)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                twice.key = key
                break
            seen.add(key)
        found.append(twice)
        return twice

    try:
        value = json.loads(text, object_pairs_hook=mark, parse_int=len, parse_float=len,
                           parse_constant=len)
    except (ValueError, RecursionError):  # damage after the duplicate: its key alone
        return found[0].key, ()
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, loc = stack.pop()
        if item is found[0]:
            return item.key, (*loc, item.key)
        children: Any = item.items() if isinstance(item, dict) else enumerate(item)
        stack.extend((child, (*loc, key)) for key, child in children
                     if isinstance(child, (dict, list)))
    return found[0].key, ()


# A lone surrogate can only come from an escape: UTF-8 text cannot hold one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _may_hold_surrogates(text: str) -> bool:
    return _SURROGATE_ESCAPE.search(text) is not None


# -- values ------------------------------------------------------------------------------


def check_value(value: Any, *, surrogates: bool = True) -> None:
    """Refuse nesting deeper than MAX_NESTING and (unless ``surrogates`` is False: the
    caller knows there are none) strings or keys holding a lone surrogate.

    Iterative, so that a value too deep for recursion is refused rather than
    crashing the check. A value that contains itself (a YAML alias inside its own
    anchor, ``r: &r [1, *r]``) is refused at the alias, naming the value it refers
    back to, rather than as too deep after a hundred levels of the same path.
    """
    seen: set[int] = set()  # the containers walked so far: only these can be ancestors
    stack: list[tuple[Any, tuple[str | int, ...], _Chain]] = [(value, (), None)]
    while stack:
        item, loc, above = stack.pop()
        if isinstance(item, str):
            if surrogates and _has_surrogate(item):
                raise HostileValue(_surrogate_text(item), loc)
            continue
        children = _children(item)
        if children is None:
            continue
        if id(item) in seen:
            _refuse_cycle(item, loc, above)  # else an alias repeating a value: walked again
        seen.add(id(item))
        if len(loc) >= MAX_NESTING:
            raise HostileValue(f"nested deeper than {MAX_NESTING} levels", loc)
        chain = (item, loc, above)
        for key, child in children:
            if surrogates and isinstance(key, str) and _has_surrogate(key):
                raise HostileValue(_surrogate_text(key), (*loc, key.encode(
                    "utf-8", "backslashreplace").decode("ascii", "backslashreplace")))
            if isinstance(child, (dict, list)) or (surrogates and isinstance(child, str)):
                stack.append((child, (*loc, key), chain))


#: The containers from the root down to one being walked: (container, its key path,
#: the chain above it), None above the root.
_Chain = tuple[Any, tuple[str | int, ...], Any] | None


def _refuse_cycle(item: Any, loc: tuple[str | int, ...], above: _Chain) -> None:
    """Refuse ``item`` at ``loc`` if it is one of the containers above it (a cycle)."""
    while above is not None:
        ancestor, where, above = above
        if ancestor is item:
            named = field_path(where) or "the whole document"
            raise HostileValue(f"refers back to {named}, which contains it (a recursive "
                               "alias); expected a value that does not contain itself", loc)


def field_path(loc: Sequence[str | int]) -> str:
    """``("settings", "t", "max")`` -> ``settings.t.max``; list indexes as ``[i]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _children(item: Any) -> Iterable[tuple[Any, Any]] | None:
    """A container's (key, child) pairs; None for a value that holds no others."""
    if isinstance(item, dict):
        return item.items()
    if isinstance(item, list):
        return enumerate(item)
    return None


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def _surrogate_text(text: str) -> str:
    found = _SURROGATE.search(text)
    code = ord(found.group()) if found else 0
    return (f"a lone surrogate (\\u{code:04x}) is not a character; expected text that is "
            "valid Unicode")
