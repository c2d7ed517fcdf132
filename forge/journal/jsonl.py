"""Append-only JSONL files: one appender and one tolerant reader, with one torn-tail rule.

The search journal, the attempt store, the runtime journal and the llm proposer's
reply cache are JSON objects one per line, appended while the program runs and read
back after it was killed. They share one rule:

- a **torn last line** (a kill mid-write leaves a prefix of what was being written) is
  skipped by readers, with a warning, and cut by the next writer before its first
  append, so that what it appends starts on a fresh line;
- any other line that is not JSON is **damage**: the reader raises the caller's error
  naming the file and the line, since going on would silently drop records. So is a
  whole line holding a key twice (:class:`forge._util.parse.DuplicateJsonKey`), wherever it
  is: ``json.loads`` would keep the second silently, and no forge wrote it.

Each append is one ``write()`` of whole lines on a descriptor opened with ``O_APPEND``,
then ``fsync`` (unless turned off): the lines are on disk when :meth:`JsonlAppender.append`
returns.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from forge._util.files import field_path
from forge._util.parse import DuplicateJsonKey, loads_json
from forge.errors import InputFileError

__all__ = ["JsonlAppender", "cut_torn_tail", "parse_lines", "read_jsonl_tolerant"]

log = logging.getLogger(__name__)

_TAIL_CHUNK = 64 * 1024


def cut_torn_tail(path: Path) -> None:
    """Cut an unterminated last line, so that the next append starts on a fresh line.

    Reads the file from its end only: the attempt store is cut before every search and
    may be large.
    """
    try:
        fh = path.open("r+b")
    except FileNotFoundError:
        return
    with fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        end = size
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            fh.seek(start)
            newline = fh.read(end - start).rfind(b"\n")
            if newline >= 0:
                fh.truncate(start + newline + 1)
                return
            end = start
        fh.truncate(0)


def read_jsonl_tolerant(path: Path, error: type[InputFileError], *, what: str,
                        damaged: str = "damaged record",
                        missing: str | None = None) -> list[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of ``path``, in file order.

    The file's last line, if it does not parse, was torn by a kill mid-write: it is
    skipped with a warning. Any other line that does not parse raises ``error`` naming
    the file and the line, with ``damaged`` (the words a person sees, e.g. ``damaged
    record``) and what is wrong with it. A missing file holds nothing, or raises
    ``error(missing)`` when a message is given; ``what`` names the file in the message
    when it cannot be read.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if missing is None:
            return []
        raise error(missing, file=path) from None
    except IsADirectoryError:
        raise error(f"cannot read {what}: is a folder, not a JSONL file", file=path) from None
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    return parse_lines(data, path, error, damaged=damaged)


def parse_lines(data: bytes, path: Path, error: type[InputFileError], *, damaged: str,
                first: int = 1, torn_tail: bool = True) -> list[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of ``data``, numbered from
    ``first``; the rules of :func:`read_jsonl_tolerant`. ``torn_tail=False``: ``data``
    is known whole (a complete gzip member), so its last line is damage like any other.
    """
    lines = data.split(b"\n")
    # Split on newlines, a terminated file ends with an empty piece: its last line is
    # the one before it.
    last = len(lines) - 1 if lines[-1] == b"" else len(lines)
    out: list[tuple[int, Any]] = []
    for index, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        number = first + index - 1
        try:
            # Decoded here: json.loads of bytes would guess UTF-16 from a stray BOM.
            value = loads_json(raw.decode("utf-8"), bounded=False)
        # ValueError: also an integer too long to convert; RecursionError: nesting
        # deeper than the parser's stack. Neither is a line forge wrote.
        except (ValueError, RecursionError) as exc:
            # Only a line cut short is torn; a whole one says a key twice on purpose.
            torn = index == len(lines) if isinstance(exc, DuplicateJsonKey) else index >= last
            if torn_tail and torn:
                log.warning("%s:%d: ignoring a torn last line", path, number)
                break
            raise _damage(exc, error, damaged, path, number) from None
        out.append((number, value))
    return out


def _damage(exc: Exception, error: type[InputFileError], damaged: str, path: Path,
            number: int) -> InputFileError:
    if isinstance(exc, DuplicateJsonKey):
        return error(f"{damaged}: {exc.message}", file=path, line=number,
                     field=field_path(exc.loc) or None)
    return error(f"{damaged}: {_problem(exc)}", file=path, line=number)


def _problem(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return " ".join(str(exc).split())[:120]


class JsonlAppender:
    """Appends whole lines to a JSONL file, safe to share between threads of a process.

    The file is opened (and its folder made) at the first append, after cutting a
    torn tail, and stays open until :meth:`close` (the object may append again after,
    reopening it); so an appender that never writes leaves no file behind.
    ``fsync=False`` keeps the flush to the OS (a killed process loses nothing) but not
    the sync to the disk (a power cut may). ``cut=True`` says the caller has cut the
    torn tail itself (it read the whole file first), so the first append does not.
    """

    def __init__(self, path: str | Path, *, fsync: bool = True, cut: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._fd: int | None = None
        self._cut = cut  # True: the caller has cut the torn tail already
        self._lock = threading.Lock()

    def append(self, lines: Sequence[str]) -> None:
        """Append ``lines`` (each without its newline) in one write, then sync."""
        if not lines:
            return
        data = self._encode(lines)
        with self._lock:
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if not self._cut:
                    # A line torn by an earlier kill would glue onto ours and turn a
                    # tolerated torn tail into damage in the middle of the file.
                    self._cut_tail()
                    self._cut = True
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            view = memoryview(data)
            while view:  # one write in practice; the loop only guards a short write
                view = view[os.write(self._fd, view):]
            if self.fsync:
                os.fsync(self._fd)

    def _encode(self, lines: Sequence[str]) -> bytes:
        """The bytes one append writes (a subclass may compress them)."""
        return "".join(line + "\n" for line in lines).encode("utf-8")

    def _cut_tail(self) -> None:
        """Cut what a kill mid-write left at the end, before the first append."""
        cut_torn_tail(self.path)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
