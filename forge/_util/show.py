"""Values shown inside one-line messages: rendered only as far as the message shows them.

A message quotes the value it is about ("got ...", "expected ..., got ..."). That
value may be anything an input file or a harness holds: a string of a gigabyte, a
YAML "billion laughs" whose aliases expand to 10^9 nodes, a list that contains itself,
an integer of 5,000 digits. Serialising it whole and clipping the text afterwards
exhausts memory or raises. :func:`preview` writes JSON text of a value and stops as soon
as it has more than it will show; every string in it is redacted before it is cut
(:func:`forge.secrets.masking.clip`).

Text from a harness (an error message, an output) or from a file may also hold what a
terminal acts on rather than shows: an ESC that starts a colour or moves the cursor, a
NUL, a bidi override that reverses the rest of the line. :func:`forge._text.printable`
shows each such character as its escape; forge passes every such text through it before
printing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from forge.secrets.masking import clip

__all__ = ["Style", "percent", "preview", "short"]

Style = Literal["json", "canonical", "python"]

# An int of more bits than this has more than Python's 4,300 convertible digits.
_MAX_SHOWN_INT_BITS = 4000 * 3
# Shares are ratios of small integers computed in floating point (1.0 - 0.9 is
# 0.09999999999999998): closer than this, two of them are the same share.
_SAME_SHARE = 1e-9


class _Full(Exception):
    """The preview has more than it will show."""


def preview(value: Any, budget: int, *, style: Style = "json") -> str:
    """Text of ``value``, complete when it fits in ``budget`` characters, else at least
    ``budget + 1`` characters of its start (so a caller that clips at ``budget`` sees
    that it must). ``style``: ``json`` as :func:`json.dumps` writes it, ``canonical``
    as :func:`forge._util.digest.canonical_json` does (sorted keys, no spaces), ``python``
    as :func:`repr` does."""
    parts: list[str] = []
    size = 0
    for token in _tokens(value, budget, style):
        parts.append(token)
        size += len(token)
        if size > budget:
            break
    return "".join(parts)


def short(value: Any, limit: int = 60, *, style: Style = "json") -> str:
    """``value`` for a message, at most ``limit`` characters: a string as its ``repr``,
    anything else in ``style`` (see :func:`preview`); cut with ``...`` when longer."""
    if isinstance(value, str):
        text = repr(clip(value, limit + 1, marker=""))
    else:
        text = preview(value, limit, style=style)
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def _tokens(value: Any, budget: int, style: Style) -> Iterator[str]:
    """The text of ``value`` piece by piece, depth first; the caller stops reading.

    A generator per level: a container is walked only as far as the caller reads, and
    a value that contains itself ends when the budget does. Nesting is bounded by the
    budget too (each level writes at least one character).
    """
    if isinstance(value, Mapping):
        yield from _mapping_tokens(value, budget, style)
    elif isinstance(value, (list, tuple, set, frozenset)):
        yield from _sequence_tokens(value, budget, style)
    else:
        yield _scalar(value, budget, style)


def _separators(style: Style) -> tuple[str, str]:
    """The item separator and the key separator of ``style``."""
    return (",", ":") if style == "canonical" else (", ", ": ")


def _mapping_tokens(value: Mapping[Any, Any], budget: int, style: Style) -> Iterator[str]:
    comma, colon = _separators(style)
    yield "{"
    items: Any = value.items()
    if style == "canonical":
        items = sorted(items, key=lambda kv: str(kv[0]))
    for i, (key, item) in enumerate(items):
        if i:
            yield comma
        if style == "python":
            yield from _tokens(key, budget, style)
        else:
            yield _string(key if isinstance(key, str) else str(key), budget, style)
        yield colon
        yield from _tokens(item, budget, style)
    yield "}"


def _sequence_tokens(value: Iterable[Any], budget: int, style: Style) -> Iterator[str]:
    comma, _ = _separators(style)
    yield "["
    for i, item in enumerate(value):
        if i:
            yield comma
        yield from _tokens(item, budget, style)
    yield "]"


def _scalar(value: Any, budget: int, style: Style) -> str:
    """The text of a value that holds no others."""
    if isinstance(value, str):
        return _string(value, budget, style)
    if value is None or isinstance(value, (bool, float)):
        return repr(value) if style == "python" else json.dumps(value)
    if isinstance(value, int):
        return (str(value) if value.bit_length() <= _MAX_SHOWN_INT_BITS
                else f"<an integer of about {int(value.bit_length() * math.log10(2)) + 1} "
                     "digits>")
    text = _bounded_repr(value, budget)
    return text if style == "python" else _string(text, budget, style)


def _string(text: str, budget: int, style: Style) -> str:
    # Redacted, then cut past the budget: the caller's clip then marks the cut.
    window = clip(text, budget + 1, marker="")
    if style == "python":
        return repr(window)
    return json.dumps(window, ensure_ascii=style == "json")


def _bounded_repr(value: Any, budget: int) -> str:
    if hasattr(value, "model_dump"):
        return f"<{type(value).__name__}>"
    if isinstance(value, (bytes, bytearray)):
        return repr(bytes(value[: budget + 1]))
    return repr(value)[: budget + 1]


def percent(x: float | None, other: float | None = None) -> str:
    """A percentage with one decimal, or more when one decimal would show ``x`` equal
    to ``other`` though they differ (so a reason never reads "50.0% < 50.0%")."""
    if x is None:
        return "—"
    for digits in range(1, 7):
        text = f"{100 * x:.{digits}f}%"
        if other is None or abs(x - other) <= _SAME_SHARE \
                or text != f"{100 * other:.{digits}f}%":
            return text
    return text
