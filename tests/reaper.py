"""Run one command as a child subreaper and report every process it left behind.

    python reaper.py OUT_DIR -- COMMAND ARGS...

The test runs this script, not the command: as a child subreaper (Linux
``prctl(PR_SET_CHILD_SUBREAPER)``), this process becomes the parent of whatever the
command orphans, so after the command exits every process it started and left
running is still a descendant of this one, however it was started (a process group,
a session, a double fork). The command leads a process group of its own (a shell's
foreground job: Ctrl-C at a terminal signals the whole group). It writes the command's
pid to ``OUT_DIR/pid`` at once; when the command has exited and its leftovers had
``SETTLE_S`` to end, it writes ``OUT_DIR/report.json`` (exit status, survivors with
their command lines), kills the survivors and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
#: How long leftovers get to end after the command exits (a resource tracker reads
#: its EOF, a killed group is reaped) before they count as survivors.
SETTLE_S = 2.0


def descendants(root: int) -> dict[int, str]:
    """Live (not zombie) descendants of ``root``: pid -> command line."""
    parent: dict[int, int] = {}
    state: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state[int(entry.name)], parent[int(entry.name)] = fields[0], int(fields[1])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child, ppid in parent.items():
            if ppid == pid and child not in found:
                frontier.append(child)
                if state[child] not in ("Z", "X"):
                    try:
                        cmd = Path(f"/proc/{child}/cmdline").read_bytes()
                    except OSError:
                        continue
                    found[child] = cmd.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def state(pid: int) -> str | None:
    """The process state letter (``Z``: a zombie), or None once the pid is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def assert_gone(pids: list[int], within: float = 3.0) -> None:
    """Neither running nor a zombie, within ``within`` s: ended and reaped."""
    deadline = time.monotonic() + within
    while (left := {p: state(p) for p in pids if state(p) is not None}) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"left behind (pid: state): {left}"


def sigterm_when(proc: subprocess.Popen[bytes], ready: Callable[[], bool],
                 output: Callable[[], str], within: float = 60.0) -> int:
    """Send SIGTERM to ``proc`` once ``ready()`` (failing if it exits first, with
    ``output()``, or if ``within`` s pass); its exit status. Killed if it outlives this."""
    try:
        deadline = time.monotonic() + within
        while not ready():
            assert proc.poll() is None, output()
            assert time.monotonic() < deadline, "never ready for the signal"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=within)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> int:
    out = Path(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1:]
    # A background job of a shell starts with SIGINT ignored, and would pass that on.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    with open(out / "stdout", "wb") as stdout, open(out / "stderr", "wb") as stderr:
        # A process group of its own, as a shell gives a foreground job: signalling the
        # group is what Ctrl-C at a terminal does.
        proc = subprocess.Popen(command, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                process_group=0)
        (out / "pid.tmp").write_text(str(proc.pid))
        os.replace(out / "pid.tmp", out / "pid")
        returncode = proc.wait()
    me = os.getpid()
    deadline = time.monotonic() + SETTLE_S
    while (left := descendants(me)) and time.monotonic() < deadline:
        reap()
        time.sleep(0.05)
    report = {"returncode": returncode,
              "survivors": [{"pid": p, "cmdline": c} for p, c in sorted(left.items())]}
    (out / "report.tmp").write_text(json.dumps(report))
    os.replace(out / "report.tmp", out / "report.json")
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.1)
    reap()
    return 0


if __name__ == "__main__":
    sys.exit(main())
