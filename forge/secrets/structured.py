"""Masking a saved record as data, not as text: its shape survives any secret.

:func:`~forge.secrets.masking.redact` works on text. Run over a record's JSON text, it
also masks the record's own words where a registered secret shares a 12-character
window with them: a key that happens to hold ``format_version`` turns the field name
into ``***on``, and the record no longer loads (the journal writer, which reads back
what it writes, failed on it). Here a record is masked as the JSON data it is:

- every string value and every key of a free-form mapping (a metric named after a
  key, a tool call's arguments) is masked as text is;
- the field names of the record's own models are kept: forge wrote them, they echo
  nothing, and the file needs them to load;
- where a masked value no longer fits the schema (a ``Literal`` such as a verdict or a
  stop reason: forge's own vocabulary again), the value forge wrote is kept.

When no secret occurs in the record's text, the text is returned as it was, byte for
byte: the common case costs one :func:`redact` pass, as before.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from forge.secrets.masking import redact

__all__ = ["field_names", "redact_data", "redacted", "redacted_json"]


@functools.cache
def field_names(model: type[BaseModel]) -> frozenset[str]:
    """The field names (and aliases) of ``model`` and of every model its fields hold."""
    names: set[str] = set()
    seen: set[type[BaseModel]] = set()
    todo: list[Any] = [model]
    while todo:
        tp = todo.pop()
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in seen:
                continue
            seen.add(tp)
            for name, info in tp.model_fields.items():
                names.add(name)
                if info.alias:
                    names.add(info.alias)
                todo.append(info.annotation)
        else:
            todo.extend(_type_arguments(tp))
    return frozenset(names)


def _type_arguments(tp: Any) -> tuple[Any, ...]:
    if isinstance(tp, types.UnionType):
        return tp.__args__
    return typing.get_args(tp)


def redact_data(data: Any, keep: Callable[[str], bool]) -> Any:
    """``data`` (JSON data) with every registered secret masked in its strings and keys,
    but the keys ``keep`` says are forge's own kept as they are."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {k if keep(k) else redact(k): redact_data(v, keep) for k, v in data.items()}
    if isinstance(data, list):
        return [redact_data(v, keep) for v in data]
    return data


def redacted_json(model: BaseModel, *, indent: int | None = None) -> str:
    """``model`` as JSON text with every registered secret masked, the text still
    loading as ``type(model)`` (module docstring); pydantic's own text, byte for byte,
    when no secret occurs in it."""
    text = model.model_dump_json(indent=indent)
    if redact(text) == text:
        return text
    return json.dumps(redacted(type(model), json.loads(text)), ensure_ascii=False,
                      indent=indent)


def redacted(model: type[BaseModel], data: Any) -> Any:
    """``data`` (the JSON data of a ``model``) masked as :func:`redacted_json` masks it."""
    masked = redact_data(data, field_names(model).__contains__)
    for _ in range(3):  # a value put back may reveal the next error beneath it
        try:
            model.model_validate(masked)
            break
        except ValidationError as exc:
            # Only schema-bound values fail (a Literal, an enum): forge's words, kept.
            for error in exc.errors():
                _restore(masked, data, error["loc"])
    return masked


def _restore(masked: Any, original: Any, loc: tuple[int | str, ...]) -> None:
    """Put ``original``'s value back into ``masked`` at ``loc`` (a validation error's
    location). A step neither has (a union member's name pydantic puts in the path)
    is passed over; nothing above the failing value is put back, so nothing else it
    holds is unmasked."""
    parent: Any = None
    key: int | str | None = None
    for step in loc:
        try:
            inner_masked, inner_original = masked[step], original[step]
        except (KeyError, IndexError, TypeError):
            continue
        parent, key = masked, step
        masked, original = inner_masked, inner_original
    if parent is not None and not isinstance(original, dict | list):
        parent[key] = original
