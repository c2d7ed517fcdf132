"""What a python harness prints during an attempt: kept with the attempt, off forge's stdout.

A harness that prints (a stray ``print("debug: ...")``) writes to ``sys.stdout``, the
stream ``forge eval --json`` and ``forge search --json`` print their one JSON value
on. Wherever attempts of a python harness run (this process's lanes, a process
worker, a Ray actor), ``sys.stdout`` is a :class:`StdoutRouter`: a write made within
an attempt goes to that attempt's :class:`Printed`, which the engine keeps on the
attempt's result (``AttemptResult.stdout``); any other write goes on to the stream
the router stands in for, or, while a ``--json`` command runs, to stderr
(:meth:`StdoutRouter.diverted`).

"Within an attempt" is a context variable, not a thread: the local executor runs
attempts on many threads and coroutines at once, and each write is told apart by the
context it is made in. The thread lane or the task running the attempt carries it,
and so does whatever copies its context (``asyncio.to_thread``, a task it creates, a
:class:`~forge._util.threads.DaemonThreadPool` call); a thread the harness starts itself
does not, and its writes count as outside any attempt.

Only text written through ``sys.stdout`` is captured. Bytes written below it (to
``sys.stdout.buffer``, ``os.write(1, ...)``, by C code or by a child process that
inherits file descriptor 1) are not; the commands with ``--json`` point descriptor 1
at stderr while they run (:mod:`forge.commands._stdout`), so they cannot reach the
JSON either, and a process worker points its own at its stderr.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Awaitable, Iterator
from contextvars import ContextVar, Token
from typing import Any, TextIO, TypeVar

from forge._util.bounds import MAX_PRINTED_CHARS

__all__ = ["Printed", "StdoutRouter", "capture", "captured", "release", "stdout_router"]

T = TypeVar("T")

#: The attempt whose context a write is made in, if any.
_current: ContextVar[Printed | None] = ContextVar("forge_printed", default=None)


class Printed:
    """What one attempt wrote to ``sys.stdout``: the last :data:`MAX_PRINTED_CHARS`
    characters, and how many bytes (UTF-8) came before them. Held bounded as it is
    written, so a harness printing in a loop cannot fill memory. Thread-safe."""

    __slots__ = ("_chunks", "_dropped", "_lock", "_size", "_told")

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._size = 0  # characters in _chunks
        self._dropped = 0  # bytes cut from the front
        self._lock = threading.Lock()
        self._told: str | None = None

    @classmethod
    def told(cls, text: str | None) -> Printed:
        """What a worker elsewhere kept of an attempt (its :meth:`text`), as it is."""
        printed = cls()
        printed._told = text or ""
        return printed

    def write(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            self._chunks.append(text)
            self._size += len(text)
            # Cut at twice the bound, not at each write: one join per bound's worth.
            if self._size > 2 * MAX_PRINTED_CHARS:
                self._cut()

    def _cut(self) -> None:
        """Keep the last MAX_PRINTED_CHARS characters; the caller holds the lock."""
        whole = "".join(self._chunks)
        cut = len(whole) - MAX_PRINTED_CHARS
        self._dropped += len(whole[:cut].encode("utf-8", "replace"))
        self._chunks = [whole[cut:]]
        self._size = MAX_PRINTED_CHARS

    def text(self) -> str | None:
        """What is kept, after a first line ``[N earlier bytes dropped]`` when more was
        printed (the marker :func:`forge.secrets.masking.redact` knows: a piece of a secret the
        cut left after it is masked too); None when nothing was printed. Not redacted:
        the secrets are registered where the result is made, which redacts it."""
        if self._told is not None:
            return self._told or None
        with self._lock:
            if self._size > MAX_PRINTED_CHARS:
                self._cut()
            kept, dropped = "".join(self._chunks), self._dropped
        if dropped:
            return f"[{dropped} earlier bytes dropped]\n{kept}"
        return kept or None


def capture(printed: Printed) -> Token[Printed | None]:
    """From now on, in this context, ``sys.stdout`` writes go to ``printed``; undo with
    :func:`release`. (Two calls, not a context manager: this is on every attempt's path.)"""
    return _current.set(printed)


def release(token: Token[Printed | None]) -> None:
    _current.reset(token)


async def captured(printed: Printed, call: Awaitable[T]) -> T:
    """``await call`` with its writes to ``sys.stdout`` going to ``printed``. Run as a
    task of its own: the task's context is a copy, so the capture ends with it."""
    _current.set(printed)
    return await call


class StdoutRouter(io.TextIOBase):
    """``sys.stdout`` while attempts may run: each write goes to the current attempt's
    :class:`Printed`, or, made outside any attempt, to :attr:`outside`."""

    def __init__(self, outside: TextIO | None) -> None:
        super().__init__()
        self._outside = outside
        self._diverted: TextIO | None = None

    @property
    def stream(self) -> TextIO | None:
        """The stream this router stands in for (``sys.stdout`` before it)."""
        return self._outside

    @property
    def outside(self) -> TextIO | None:
        """Where a write made outside any attempt goes: the stream this router stands in
        for, unless :meth:`diverted`."""
        return self._diverted if self._diverted is not None else self._outside

    @contextlib.contextmanager
    def diverted(self, to: TextIO) -> Iterator[None]:
        """Send what is written outside any attempt to ``to`` until the block ends."""
        before, self._diverted = self._diverted, to
        try:
            yield
        finally:
            self._diverted = before

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        printed = _current.get()
        if printed is not None:
            printed.write(text)
            return len(text)
        outside = self.outside
        return len(text) if outside is None else outside.write(text)

    def flush(self) -> None:
        outside = self.outside
        if _current.get() is None and outside is not None:
            outside.flush()

    def isatty(self) -> bool:
        # Within an attempt the text goes to a buffer, not a terminal: no colours in it.
        outside = self.outside
        return _current.get() is None and outside is not None and outside.isatty()

    @property
    def closed(self) -> bool:  # type: ignore[override]
        """Whether the stream this router passes writes on to is closed (at exit, say:
        a library that kept ``sys.stdout`` then asks before it writes)."""
        outside = self.outside
        return outside is not None and bool(getattr(outside, "closed", False))

    def fileno(self) -> int:
        outside = self.outside
        if outside is None:
            raise io.UnsupportedOperation("fileno")
        return outside.fileno()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        """Not closed: the stream is the process's, and a harness that closes
        ``sys.stdout`` must not take it from the other attempts and from forge."""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.outside, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.outside, "errors", None)

    def __getattr__(self, name: str) -> Any:
        # Anything else (``buffer``, ``mode``, ``name``) is the outside stream's; our own
        # attributes are never looked up there (before __init__ sets them, say).
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.outside, name)


_install = threading.Lock()


def stdout_router() -> StdoutRouter:
    """``sys.stdout`` as a :class:`StdoutRouter`, installed now if it is not one.

    It stays installed: outside an attempt it passes every write on, and a thread of an
    attempt abandoned after its timeout may still be printing, to its own attempt.
    Something that replaces ``sys.stdout`` later (and puts it back) is left alone.
    """
    with _install:
        current = sys.stdout
        if isinstance(current, StdoutRouter):
            return current
        router = StdoutRouter(current)
        sys.stdout = router
        return router
