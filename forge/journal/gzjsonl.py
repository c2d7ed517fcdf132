"""Append-only JSONL in gzip members: one member per append, the torn-tail rule kept.

The attempt store holds every attempt of a search with its output, score and metrics;
as plain JSONL a default search of the triage bench wrote 37 MB of it, lines that
repeat the same keys, config fingerprints and tool calls. Each append here is one
complete gzip member holding whole lines. Concatenated members are one valid gzip
stream, so ``zcat attempts.jsonl.gz`` (or ``gzip.open``) reads the file whole, and
the file is a sixth to a twentieth of the plain one.

The rules of :mod:`forge.journal.jsonl` carry over, member by member:

- a **torn last member** (a kill mid-write leaves a prefix of it: no gzip trailer) is
  skipped by readers, with a warning, and cut by the next writer before its first
  append; so are bytes after the last whole member that no member can be read from
  (a power cut may leave a block of zeros);
- anything else that cannot be read (a member that fails its CRC, or one that cannot
  be inflated, with a readable member after it; a line of a whole member that is not
  JSON) is **damage**: the reader raises the caller's error naming the file and the
  line (or, for a member that cannot be inflated, its byte offset).
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge.errors import InputFileError
from forge.journal.jsonl import JsonlAppender, parse_lines

__all__ = ["GzipJsonlAppender", "Members", "cut_torn_member", "gzip_member",
           "read_gzip_jsonl_tolerant", "read_members"]

log = logging.getLogger(__name__)

#: zlib's default: 19x smaller than the plain store for the triage bench's attempts,
#: against 13x at level 1, for about 20 ms a thousand attempts (measured: docs/guide/disk.md).
LEVEL = 6
_WBITS_GZIP = 31  # zlib's window bits for a gzip header and trailer
_FEED = 256 * 1024  # bytes fed to the inflater at a time: what it leaves over is copied
_MAGIC = b"\x1f\x8b\x08"


@dataclass(frozen=True)
class Members:
    """A gzip-member file read back: its whole members' text, and where they end."""

    texts: list[bytes]
    #: Byte offset just after the last whole member: what a writer cuts the file to.
    end: int


def _inflate(data: memoryview, start: int) -> tuple[bytes, int] | None:
    """The text of the member at ``start`` and the offset after it; None if the data
    ends before the member does. Raises ``zlib.error`` for a member that cannot be read."""
    inflater = zlib.decompressobj(_WBITS_GZIP)
    parts: list[bytes] = []
    fed = start
    while not inflater.eof:
        if fed >= len(data):
            return None
        piece = data[fed:fed + _FEED]
        fed += len(piece)
        parts.append(inflater.decompress(piece))
    return b"".join(parts), fed - len(inflater.unused_data)


def _readable_after(raw: bytes, start: int) -> int | None:
    """The offset of a whole member found after ``start`` (a gzip header's first bytes
    followed by a member that inflates), or None."""
    data = memoryview(raw)
    at = raw.find(_MAGIC, start + 1)
    while at >= 0:
        try:
            if _inflate(data, at) is not None:
                return at
        except zlib.error:
            pass
        at = raw.find(_MAGIC, at + 1)
    return None


def read_members(raw: bytes, path: Path, error: type[InputFileError], *,
                 damaged: str) -> Members:
    """The whole members of ``raw`` (a file's bytes) and the torn tail after them."""
    data = memoryview(raw)
    texts: list[bytes] = []
    at = 0
    while at < len(data):
        try:
            member = _inflate(data, at)
        except zlib.error as exc:
            later = _readable_after(raw, at)
            if later is not None:
                raise error(f"{damaged}: the gzip member at byte {at:,} cannot be read "
                            f"({exc}), and the file goes on at byte {later:,}",
                            file=path) from None
            member = None
        if member is None:
            log.warning("%s: ignoring a torn last gzip member (%d bytes from byte %d)",
                        path, len(data) - at, at)
            return Members(texts, at)
        text, at = member
        texts.append(text)
    return Members(texts, at)


def read_gzip_jsonl_tolerant(path: Path, error: type[InputFileError], *, what: str,
                             damaged: str = "damaged record"
                             ) -> tuple[list[tuple[int, Any]], Members]:
    """``(line number, value)`` for each line of the whole members of ``path`` (numbered
    as ``zcat`` shows them), and the members read; a missing file holds nothing."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], Members([], 0)
    except IsADirectoryError:
        raise error(f"cannot read {what}: is a folder, not a gzip file", file=path) from None
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    members = read_members(raw, path, error, damaged=damaged)
    rows: list[tuple[int, Any]] = []
    first = 1
    for text in members.texts:
        if text and not text.endswith(b"\n"):
            # Every append is whole lines: a whole member without its newline was not
            # written by forge.
            raise error(f"{damaged}: a gzip member does not end its last line",
                        file=path, line=first + text.count(b"\n"))
        rows += parse_lines(text, path, error, damaged=damaged, first=first, torn_tail=False)
        first += text.count(b"\n")
    return rows, members


def cut_torn_member(path: Path, end: int) -> None:
    """Cut ``path`` to ``end`` (a :attr:`Members.end`), if it is longer."""
    try:
        fh = path.open("r+b")
    except FileNotFoundError:
        return
    with fh:
        if fh.seek(0, os.SEEK_END) > end:
            fh.truncate(end)
            os.fsync(fh.fileno())


def gzip_member(lines: Sequence[str]) -> bytes:
    """``lines`` (each without its newline) as one gzip member of whole lines."""
    deflater = zlib.compressobj(LEVEL, zlib.DEFLATED, _WBITS_GZIP)
    text = "".join(line + "\n" for line in lines).encode("utf-8")
    return deflater.compress(text) + deflater.flush()


class GzipJsonlAppender(JsonlAppender):
    """A :class:`~forge.journal.jsonl.JsonlAppender` whose every append is one gzip member.

    The torn tail is found by reading the file whole, so the caller, which reads it
    anyway, cuts it (:func:`cut_torn_member`) and says so with ``cut=True``; without,
    the first append reads and cuts it itself.
    """

    def __init__(self, path: str | Path, *, error: type[InputFileError], what: str,
                 fsync: bool = True, cut: bool = False) -> None:
        super().__init__(path, fsync=fsync, cut=cut)
        self._error = error
        self._what = what

    def _encode(self, lines: Sequence[str]) -> bytes:
        return gzip_member(lines)

    def _cut_tail(self) -> None:
        _, members = read_gzip_jsonl_tolerant(self.path, self._error, what=self._what)
        cut_torn_member(self.path, members.end)
