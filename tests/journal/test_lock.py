"""The one-writer lock: held across processes, refused at once, released by the kernel."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import forge.journal.lock as lock_module
from forge.errors import JournalError
from forge.journal.lock import exclusive

#: Holds the lock on argv[1] until killed; prints "held" once it has it.
HOLDER = """
import sys, time
from pathlib import Path
import forge.journal.lock as lock_module
from forge.journal.lock import exclusive
from forge.errors import JournalError
with exclusive(Path(sys.argv[1]), busy=lambda h: JournalError("busy " + h),
               cannot=lambda r: JournalError(r)):
    print("held", flush=True)
    time.sleep(600)
"""


def _lock(path: Path) -> contextlib.AbstractContextManager[None]:
    return exclusive(path, busy=lambda holder: JournalError(f"busy: {holder}", file=path),
                     cannot=lambda reason: JournalError(f"cannot: {reason}", file=path))


def _holder(lock: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_is_refused_naming_the_holder_then_the_kernel_releases(
        tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    proc = _holder(lock)
    try:
        with pytest.raises(JournalError, match=f"busy: pid {proc.pid}"), _lock(lock):
            pass
    finally:
        proc.send_signal(signal.SIGKILL)  # a holder that dies holding it
        proc.wait()
    with _lock(lock):
        assert lock.exists()
    assert not lock.exists()  # removed on release: nothing is left behind


def test_the_lock_excludes_a_second_holder_in_the_same_process(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    with _lock(lock), pytest.raises(JournalError, match="busy"), _lock(lock):
        pass


def test_a_lock_file_replaced_under_a_waiter_is_not_shared(tmp_path: Path) -> None:
    # The race the removal on release opens: B opened the file, A released and removed
    # it, C made a new one. B must not believe it holds the lock while C does.
    lock = tmp_path / ".lock"
    lock.write_text("")
    stale = os.open(lock, os.O_RDWR)
    os.unlink(lock)
    with _lock(lock):
        assert not lock_module._same_file(stale, lock)
    os.close(stale)


def test_a_lock_that_cannot_be_made_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="cannot: No such file"), \
            _lock(tmp_path / "missing" / ".lock"):
        pass


def test_a_process_killed_while_holding_leaves_no_stale_lock(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    for _ in range(3):
        proc = _holder(lock)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        started = time.monotonic()
        with _lock(lock):
            pass
        assert time.monotonic() - started < 5
