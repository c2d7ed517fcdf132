"""Finding pieces of registered secrets in text: any 12 characters of one in a row, in any
of its registered forms, even with whitespace between them.

A service that echoes a credential rarely echoes it whole and exactly: it returns the
first 40 of 48 characters, wraps it over lines, base64-encodes it inside a larger
blob, percent-encodes it in a URL. :func:`forge.secrets.masking.redact` masks every run of
:data:`MIN_PIECE_CHARS` or more characters that is a piece of a form of a secret,
where runs of whitespace (and the escapes ``\\n``, ``\\r``, ``\\t`` a JSON or Python
string writes for them) and of invisible characters (:data:`INVISIBLE_RANGES`, raw or
as the ``\\u200b``, ``\\xad``, ``\\U000e0041`` escapes JSON and Python write) between its
characters are skipped: the whole run, from the piece's first character to its last,
is masked.

How it stays fast (``redact`` runs on every attempt's output, every journal line):

- the text is made one byte per character (``encode("ascii", "replace")``: a character
  that is not ASCII becomes one ``?``, so offsets hold; a text that is not all ASCII
  goes through numpy instead, which also marks its invisible characters) and stripped
  of whitespace and of those escapes by ``re.sub`` and ``bytes.translate``, at C speed;
- every 12 characters in a row of the stripped text hold one of its 8-byte grams
  starting at a multiple of 4 (4 + 8 - 1 = 11 < 12). Those grams, read as 64-bit
  integers through a strided numpy view, are hashed into a bitmap of the grams of
  every form: one vectorised pass over the text;
- only the rare samples that hit are looked up exactly and grown, byte by byte, into
  the longest run of a form around them.

``redact`` of 1 MB of attempt-like JSON with a 48-character key registered took
6.5 ms with this index (10.5 ms when the key is echoed in it), against 2.6 ms for the
whole-value replaces alone it does instead; a 2 KB text, 14 us against 5 us. Cutting
the text into 6-character Python strings to look up in a set took 35 to 155 ms.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["INVISIBLE_RANGES", "MIN_PIECE_CHARS", "PieceIndex", "encoded_forms",
           "findable_in_pieces", "lower_hex", "stripped_len"]

#: A run of this many characters of a secret's form is masked wherever it is.
#: Shorter runs are ordinary text too often (``"the "``, a word of a base64 blob).
MIN_PIECE_CHARS = 12

_GRAM = 8  # bytes of one sample: one 64-bit integer
_STRIDE = 4  # samples start every 4 bytes: _STRIDE + _GRAM - 1 <= MIN_PIECE_CHARS
_BITS = 20  # the bitmap of grams: 2^20 bits, a few thousand set
_MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of gram * _MUL
_SHIFT = np.uint64(64 - _BITS)

#: What is skipped between the characters of a piece: ASCII whitespace, and the
#: escapes of newline, carriage return and tab in JSON and Python strings.
_WHITESPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"
_ESCAPES = re.compile(rb"\\[nrt]")
_IS_WHITESPACE = np.zeros(256, dtype=bool)
_IS_WHITESPACE[list(_WHITESPACE)] = True
_NUMBER_LIKE = re.compile(rb"[0-9+\-.eE]+")
#: Backslash escapes a mask must not cut in two (JSON and Python strings): their length.
_ESCAPE_LEN = {"u": 6, "x": 4, "U": 10}

#: Characters that show nothing, skipped between a piece's characters like whitespace: a
#: key with zero-width spaces or soft hyphens between its characters reads, and copies,
#: as the key. Every format character (Unicode category Cf: zero-width space, joiners,
#: soft hyphen, direction marks, BOM, tags; tests/secrets check the list against this
#: Python's Unicode tables) and the invisible combining ones (the grapheme joiner and
#: the variation selectors).
INVISIBLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064),
    (0x2066, 0x206F), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F), (0xE0100, 0xE01EF))
_SKIPPED = 0x1F  # what an invisible character becomes: a byte of _WHITESPACE
_INVISIBLE_BMP = np.zeros(0x10000, dtype=bool)
for _first, _last in INVISIBLE_RANGES:
    _INVISIBLE_BMP[_first:min(_last, 0xFFFF) + 1] = True
_INVISIBLE_ASTRAL = [(a, b) for a, b in INVISIBLE_RANGES if a > 0xFFFF]


_UPPER_HEX = str.maketrans("abcdef", "ABCDEF")


def _escapes_of(code: int) -> list[str]:
    """How JSON and Python strings write ``code`` in ASCII (without the backslash), in
    lower- and upper-case hex: ``\\xad``, ``\\u200b``, ``\\U000e0041`` and JSON's surrogate
    pair ``\\udb40\\udc41``."""
    if code <= 0xFF:
        forms = [f"x{code:02x}", f"u{code:04x}"]
    elif code <= 0xFFFF:
        forms = [f"u{code:04x}"]
    else:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms = [f"U{code:08x}", f"u{high:04x}\\u{low:04x}"]
    return [f for form in forms for f in {form, form.translate(_UPPER_HEX)}]


def _trie_pattern(words: list[str]) -> str:
    """A regular expression matching exactly ``words``, as a trie: at each backslash of a
    text the engine follows one branch, not every word in turn."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items())
                    if char]
        if not branches:
            return ""
        if len(branches) == 1 and "" not in node:
            return branches[0]
        return "(?:" + "|".join(branches) + ")" + ("?" if "" in node else "")

    return emit(trie)


_INVISIBLE_ESCAPES = re.compile(rb"\\" + _trie_pattern(
    [e for a, b in INVISIBLE_RANGES for code in range(a, b + 1) for e in _escapes_of(code)]
).encode("ascii"))


def _spaces(match: re.Match[bytes]) -> bytes:
    return b" " * (match.end() - match.start())


def _non_ascii(text: str) -> bytes:
    """``text`` with a ``?`` per character that is not ASCII, and a skipped byte per
    invisible one; vectorised (a regular expression of the ranges took 100 ms a MB)."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    out = codes.astype(np.uint8)
    at = np.flatnonzero(codes >= 0x80)  # most of a text is ASCII: only these are looked up
    out[at] = ord("?")
    found = codes[at]
    invisible = _INVISIBLE_BMP[np.minimum(found, 0xFFFF)]
    astral = found > 0xFFFF
    if astral.any():
        invisible[astral] = False  # the table's last entry stood for them
        beyond = found[astral]
        invisible[astral] = np.logical_or.reduce(
            [(beyond >= first) & (beyond <= last) for first, last in _INVISIBLE_ASTRAL])
    out[at[invisible]] = _SKIPPED
    return out.tobytes()


def _one_byte_each(text: str) -> bytes:
    """``text`` with a byte per character and what is skipped (the escapes of newline,
    carriage return and tab; invisible characters and their escapes) made whitespace
    (so that offsets hold)."""
    data = text.encode("ascii", "replace") if text.isascii() else _non_ascii(text)
    if b"\\" in data:
        data = _ESCAPES.sub(b"  ", data)
        data = _INVISIBLE_ESCAPES.sub(_spaces, data)
    return data


# A double quote in a text is never matched with one in a form: in the JSON that forge
# writes, a quote that is not escaped is the end of a string, and a mask through it
# would swallow the structure around the string (its escaped form ``\"`` in a form
# stops at the quote too, so a secret holding ``"`` is also replaced whole).
_TEXT_TABLE = bytes.maketrans(b'"\x02', b"\x01\x01")
_FORM_TABLE = bytes.maketrans(b'"', b"\x02")


def _strip(data: bytes, table: bytes = _TEXT_TABLE) -> bytes:
    return data.translate(table, _WHITESPACE)


def stripped_len(text: str) -> int:
    """Characters of ``text`` that can be part of a piece (all but what is skipped)."""
    return len(_strip(_one_byte_each(text)))


def findable_in_pieces(form: str) -> bool:
    """Whether the index finds ``form`` in pieces (and whole). Not: a form shorter than
    MIN_PIECE_CHARS without its whitespace; one made only of what numbers are made of,
    which is never masked in pieces (a mask inside a number of the JSON forge writes
    would corrupt it); one holding a double quote (see _TEXT_TABLE). The caller
    replaces those whole."""
    stripped = _strip(_one_byte_each(form))
    return (len(stripped) >= MIN_PIECE_CHARS and '"' not in form
            and not _NUMBER_LIKE.fullmatch(stripped))


def encoded_forms(value: str) -> set[str]:
    """The forms of ``value`` that encode its bytes: base64 (standard and urlsafe, with
    and without padding, and at each of the 3 byte alignments it can have inside a
    longer blob: the characters that encode its bytes alone) and percent-encoding
    with lower-case hex (upper case is among the textual forms)."""
    raw = value.encode("utf-8", "surrogatepass")
    forms: set[str] = set()
    for alignment in range(3):
        encoded = base64.b64encode(bytes(alignment) + raw).decode("ascii")
        if alignment == 0:
            whole = encoded
        else:  # characters whose 6 bits all come from the value's bytes
            first = -(-8 * alignment // 6)
            last = (8 * (alignment + len(raw))) // 6
            whole = encoded[first:last]
        for form in (whole, whole.rstrip("=")):
            forms |= {form, form.translate(_URLSAFE)}
    return forms


_URLSAFE = str.maketrans("+/", "-_")


def lower_hex(form: str) -> str:
    """``form`` with its percent escapes in lower-case hex."""
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), form)


@dataclass(frozen=True)
class PieceIndex:
    """The forms of every secret long enough to be found in pieces, stripped as texts
    are, with their 8-byte grams (see the module docstring)."""

    forms: tuple[bytes, ...]
    grams: dict[int, tuple[tuple[int, int], ...]]  # gram -> (form, offset) holding it
    bitmap: np.ndarray
    longest: int  # characters of the longest stripped form

    @classmethod
    def build(cls, forms: Iterable[str]) -> PieceIndex | None:
        """The index of ``forms`` (those that strip to fewer than MIN_PIECE_CHARS are
        left out: they are replaced whole); None when none is left."""
        kept = sorted({s for s in (_strip(_one_byte_each(f), _FORM_TABLE) for f in forms)
                       if len(s) >= MIN_PIECE_CHARS})
        if not kept:
            return None
        grams: dict[int, list[tuple[int, int]]] = {}
        for number, form in enumerate(kept):
            for at in range(len(form) - _GRAM + 1):
                key = int.from_bytes(form[at:at + _GRAM], "little")
                grams.setdefault(key, []).append((number, at))
        bitmap = np.zeros(1 << _BITS, dtype=bool)
        bitmap[_hash(np.fromiter(grams, dtype=np.uint64, count=len(grams)))] = True
        return cls(forms=tuple(kept), grams={k: tuple(v) for k, v in grams.items()},
                   bitmap=bitmap, longest=max(map(len, kept)))

    def mask(self, text: str, mask: str) -> str:
        """``text`` with every piece of a form (module docstring) replaced by ``mask``."""
        spans = self._spans(text)
        if not spans:
            return text
        out: list[str] = []
        done = 0
        for start, end in spans:
            out += [text[done:start], mask]
            done = end
        out.append(text[done:])
        return "".join(out)

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """The pieces in ``text``, as merged, sorted spans of its characters."""
        spaced = _one_byte_each(text)
        data = _strip(spaced)
        if len(data) < MIN_PIECE_CHARS:
            return []
        samples = np.ndarray(((len(data) - _GRAM) // _STRIDE + 1,), dtype="<u8",
                             buffer=data, strides=(_STRIDE,))
        hits = np.flatnonzero(self.bitmap[_hash(samples)])
        if not len(hits):
            return []
        found: list[tuple[int, int]] = []
        covered = 0  # end of the pieces found so far, in the stripped text
        for at in (hits * _STRIDE).tolist():
            if at + _GRAM <= covered:
                continue  # inside a piece already grown through this sample
            for number, offset in self.grams.get(int.from_bytes(data[at:at + _GRAM],
                                                                "little"), ()):
                start, end = _grow(data, at, self.forms[number], offset)
                if end - start >= MIN_PIECE_CHARS and not _NUMBER_LIKE.fullmatch(
                        data, start, end):
                    found.append((start, end))
                    covered = max(covered, end)
        if not found:
            return []
        return _merge(_widen(text, *span) for span in _to_text(spaced, found))


def _hash(grams: np.ndarray) -> np.ndarray:
    return (grams * _MUL) >> _SHIFT


def _grow(data: bytes, at: int, form: bytes, offset: int) -> tuple[int, int]:
    """The longest run of ``data`` around ``data[at:at+8] == form[offset:offset+8]``
    that is a piece of ``form``."""
    start, left = at, offset
    while start > 0 and left > 0 and data[start - 1] == form[left - 1]:
        start -= 1
        left -= 1
    end, right = at + _GRAM, offset + _GRAM
    while end < len(data) and right < len(form) and data[end] == form[right]:
        end += 1
        right += 1
    return start, end


def _to_text(spaced: bytes, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans of the stripped text as spans of the text: from the first character of a
    piece to its last, with what was skipped between them."""
    skipped = np.flatnonzero(_IS_WHITESPACE[np.frombuffer(spaced, dtype=np.uint8)])
    # The stripped text's index p is the text's p + (characters skipped before it):
    # skipped[k] - k is where, in the stripped text, the k-th skipped one fell.
    fell = skipped - np.arange(len(skipped))
    points = np.array([p for span in spans for p in (span[0], span[1] - 1)], dtype=np.int64)
    text_at = points + np.searchsorted(fell, points, side="right")
    ends = text_at.tolist()
    return [(ends[i], ends[i + 1] + 1) for i in range(0, len(ends), 2)]


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """The span grown to whole backslash escapes: a mask that cut ``\\u00e9`` or
    ``\\"`` in two would leave a JSON line that no reader accepts."""
    for at in range(max(0, start - 9), start):
        size = _escape_at(text, at)
        if size and at + size > start:
            start = at
            break
    for at in range(max(0, end - 9), end):
        size = _escape_at(text, at)
        if size and at + size > end:
            end = min(len(text), at + size)
    return start, end


def _escape_at(text: str, at: int) -> int:
    """Length of the backslash escape that starts at ``at``, or 0."""
    if text[at] != "\\" or at + 1 >= len(text):
        return 0
    before = at
    while before > 0 and text[before - 1] == "\\":
        before -= 1
    if (at - before) % 2:  # this backslash is itself escaped
        return 0
    return _ESCAPE_LEN.get(text[at + 1], 2)


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
