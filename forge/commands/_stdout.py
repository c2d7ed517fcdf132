"""``--json``: forge's stdout holds the one JSON value, whatever a harness writes.

While a command that runs harness code (``eval``, ``search``) prints JSON, stdout is
the document's alone:

- a write to ``sys.stdout`` made within an attempt is kept with the attempt
  (:mod:`forge._util.printed`); one made outside any attempt (a harness module that prints
  when it is imported, a thread it started) goes to stderr;
- file descriptor 1 points at stderr, so that bytes written below ``sys.stdout``
  (``os.write(1, ...)``, C code, a child process that inherits it, the workers of
  the ``process`` executor and of a local Ray instance) go there too. The document
  is written to a duplicate of the original descriptor, kept for it.

Why descriptor 1 and not only ``sys.stdout``: a harness's C extension or subprocess
never sees ``sys.stdout``; with descriptor 1 moved, nothing but the document can
reach the file or pipe the caller reads, and the rest is still shown, on stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from forge._util.printed import stdout_router

__all__ = ["document", "json_stdout"]

#: Where the JSON document goes while :func:`json_stdout` holds stdout.
_document: TextIO | None = None


def document() -> TextIO:
    """The stream the command's JSON value goes to."""
    return _document if _document is not None else sys.stdout


@contextlib.contextmanager
def json_stdout(enabled: bool = True) -> Iterator[None]:
    """Hold stdout for one JSON document until the block ends (nothing if not
    ``enabled``): see the module docstring. At the end descriptor 1 is put back, and
    ``sys.stdout`` (a :class:`~forge._util.printed.StdoutRouter` from now on) passes what is
    written outside an attempt on to it again."""
    global _document
    if not enabled or _document is not None:
        yield
        return
    router = stdout_router()
    original = router.stream
    if original is None:  # no stdout at all: nowhere to print the document either
        yield
        return
    kept = _keep_descriptor(original)
    _document = (original if kept is None
                 else open(kept, "w", encoding=original.encoding,  # noqa: SIM115
                           errors=original.errors, closefd=False))
    try:
        with router.diverted(sys.stderr):
            yield
    finally:
        document_stream, _document = _document, None
        document_stream.flush()
        if kept is not None:
            document_stream.close()  # not the descriptor (closefd=False): restored next
            _restore_descriptor(original, kept)


def _keep_descriptor(stream: TextIO) -> int | None:
    """A duplicate of descriptor 1, which now points at stderr, when ``stream`` writes
    to it (not when a test captured ``sys.stdout`` in memory); None otherwise."""
    try:
        if stream.fileno() != 1:
            return None
        stream.flush()
        kept = os.dup(1)
    except (AttributeError, OSError, ValueError):  # no descriptor: io.UnsupportedOperation
        return None
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr to point at: leave descriptor 1 as it is
        os.close(kept)
        return None
    return kept


def _restore_descriptor(stream: TextIO, kept: int) -> None:
    """Descriptor 1 back where it was; what ``stream`` still buffers went to stderr."""
    with contextlib.suppress(OSError, ValueError):
        stream.flush()
    os.dup2(kept, 1)
    os.close(kept)
