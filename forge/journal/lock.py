"""One writer at a time: an exclusive lock between processes, held on a lock file.

Two forge processes writing one run folder (two ``--resume`` of one run) or one
promoted file (two ``promote`` onto one target) interleave their writes: records
twice, a promotion silently lost. Each writer holds :func:`exclusive` while it
writes; the second comer is refused at once, before it writes anything, with the
holder's pid in the message.

The lock is ``flock`` on a small file beside what it protects, so the kernel
releases it when its holder dies, even by ``kill -9``: a lock is never stale. The file
is removed when the lock is released. A process that had opened the old file just
before it was removed finds, once it holds the lock, that the path no longer names
the file it locked, and tries again; so two holders never coexist.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from forge.errors import InputFileError

__all__ = ["exclusive", "held_by"]

# Tries before giving up on a lock file that keeps being replaced under us: each
# failed try means another process took and released the lock meanwhile.
_TRIES = 20


@contextlib.contextmanager
def exclusive(lock_file: Path, *, busy: Callable[[str], InputFileError],
              cannot: Callable[[str], InputFileError]) -> Iterator[None]:
    """Hold the lock on ``lock_file`` for the ``with`` block.

    ``busy(holder)`` is raised when another process holds it (``holder`` names it:
    ``pid 1234``); ``cannot(reason)`` when the lock file cannot be made (a read-only or
    full disk). Nothing else is written in either case.
    """
    fd = _acquire(lock_file, busy, cannot)
    try:
        with contextlib.suppress(OSError):  # only for the message of a second comer
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        # Removed while still held, so that nobody can lock this file after us and
        # believe it holds the lock (the module docstring).
        with contextlib.suppress(OSError):
            os.unlink(lock_file)
        os.close(fd)


def held_by(lock_file: Path) -> str | None:
    """Who holds the lock on ``lock_file`` now (``pid 1234``), or None: without taking
    it for longer than the look, and without making the file (a look changes nothing)."""
    try:
        fd = os.open(lock_file, os.O_RDONLY)
    except FileNotFoundError:
        return None  # a holder keeps the file until it lets go
    except OSError:
        return "another process (the lock file cannot be read)"
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _acquire(lock_file: Path, busy: Callable[[str], InputFileError],
             cannot: Callable[[str], InputFileError]) -> int:
    for _ in range(_TRIES):
        try:
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise cannot(exc.strerror or str(exc)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise busy(holder) from None
        except OSError as exc:
            os.close(fd)
            raise cannot(exc.strerror or str(exc)) from None
        if _same_file(fd, lock_file):
            return fd
        os.close(fd)  # released and removed by its holder since we opened it
    raise busy("another process (the lock kept changing hands)")


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def _holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "another process"
