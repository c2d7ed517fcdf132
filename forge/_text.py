"""Printable text: the one escape rule every line forge prints or raises follows.

Text from a harness (an error message, an output) or from a file may hold what a
terminal acts on rather than shows. It lives below every other module (the error tree
renders its messages with it) and imports nothing of forge.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["printable"]

#: How the line breaks show in one-line text: as a space (a message stays readable).
_AS_SPACE = {"\t": " ", "\n": " ", "\r": " "}
#: How they show where the text is quoted as it was: as their escapes.
_AS_ESCAPE = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str, *, breaks: Literal["space", "escape"] = "escape") -> str:
    """``text`` with every character that is not printable (Python's ``isprintable``:
    the controls, C0 and C1, with ESC and NUL; DEL; format characters such as the bidi
    overrides and zero-width marks; lone surrogates; unassigned code points) shown as its
    backslash escape, ``\\x1b``, ``\\u202e``; the space stays. A tab, newline or
    carriage return becomes a space (``breaks="space"``: a one-line message) or its
    escape (``"escape"``). Nothing a terminal would act on is left, and printing it
    never fails on an encoding."""
    if text.isprintable():
        return text
    named = _AS_SPACE if breaks == "space" else _AS_ESCAPE
    return "".join(ch if ch.isprintable() else named.get(ch) or _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
