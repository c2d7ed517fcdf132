"""Ending every process an attempt started, even one that left its process group (Linux).

A command harness's child leads a session and a process group of its own, and signals
to that group reach whatever it spawns; but a grandchild that calls ``setsid`` (or
``setpgid``) leaves the group and outlives the attempt, and when its parent exits it
is re-parented to init. Here, on Linux:

- forge's process (and each worker of the ``process`` executor) becomes a **child
  subreaper** (``prctl(PR_SET_CHILD_SUBREAPER)``), so an orphaned descendant is
  re-parented to forge, not to init: it stays in reach, and its exit is forge's to reap;
- each lineage (one command child, one executor worker) is **tagged**: its
  environment holds ``FORGE_PROCESS_TAG=<tag>``, unique to it, which every descendant
  inherits. A lineage's processes are its leader's descendants, its session and
  process group, and the orphans re-parented to forge that carry its tag, with their
  descendants; nothing else forge started (a Ray node, a server, another attempt's
  processes) carries that tag, so nothing else is ended;
- :func:`end_lineage` ends them on a thread of its own: SIGTERM, SIGKILL after a
  grace, then ``waitpid`` on each that is forge's child, so that none stays a zombie.
  :func:`end_all_now` does the same without the grace when forge exits.

Limits: a process that both clears its environment and leaves the session after its
parent exited is not recognised (it is never signalled; it stays re-parented to
forge until forge exits); nor is one started through another service (``systemd-run``,
a container runtime, ``at``), which is not forge's descendant at all. A process of a
lineage that exits on its own after leaving the session, before the lineage ends, is
not recognised as a zombie (its environment is gone): it waits, as a zombie holding
only its pid, until forge exits. Only processes whose ``/proc`` entries forge may
read (same user) are found. Elsewhere (macOS, no ``/proc``) nothing here runs, and
process groups are all there is.

Why not psutil: forge's base dependencies do not include it; what is needed is one
``prctl`` (ctypes, libc) and reading ``/proc/<pid>/stat`` and ``environ``. Why not a
cgroup per attempt: a writable cgroup v2 tree is rarely delegated to a user's
process (containers, CI runners), and a subreaper needs no set-up.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import itertools
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["ENDING_SLACK_S", "TAG_VARIABLE", "Lineage", "become_subreaper", "children_now",
           "end_all_now", "end_lineage", "end_new_descendants", "lineage_pids", "new_tag",
           "process_table"]

log = logging.getLogger(__name__)

#: The environment variable that tags a lineage's processes.
TAG_VARIABLE = "FORGE_PROCESS_TAG"
_PR_SET_CHILD_SUBREAPER = 36
#: How long killed processes get to become zombies and be reaped (s).
_REAP_S = 2.0
#: An ending takes at most its grace and this (s): the SIGKILL, then the reaping.
ENDING_SLACK_S = 2 * _REAP_S + 1
_POLL_S = 0.02

_lock = threading.Lock()
_subreaper_pid = 0  # the pid that made itself a subreaper (a fork does not inherit it)
_ids = itertools.count(1)
_endings: set[_Ending] = set()


def become_subreaper() -> bool:
    """Make this process a child subreaper, once; whether it is one (Linux only)."""
    global _subreaper_pid
    with _lock:
        if _subreaper_pid != os.getpid():
            if not sys.platform.startswith("linux"):
                return False
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                    log.warning("cannot become a child subreaper: %s",
                                os.strerror(ctypes.get_errno()))
                    return False
            except (OSError, AttributeError) as exc:
                log.warning("cannot become a child subreaper: %s", exc)
                return False
            _subreaper_pid = os.getpid()
        return True


def new_tag() -> str:
    """A tag no other lineage of any process has."""
    return f"{os.getpid()}-{next(_ids)}-{secrets.token_hex(6)}"


@dataclass(frozen=True)
class Proc:
    """One process as ``/proc/<pid>/stat`` shows it; ``start`` tells a reused pid apart."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    zombie: bool
    start: int


def process_table() -> dict[int, Proc]:
    """Every process this one can see; empty where there is no ``/proc``."""
    table: dict[int, Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            proc = _read_stat(int(name))
            if proc is not None:
                table[proc.pid] = proc
    return table


def _read_stat(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may hold anything, ")" included.
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]),
                    fields[0] in (b"Z", b"X"), int(fields[19]))
    except (IndexError, ValueError):
        return None


def _tagged(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:  # gone, or not ours to read
        return False


@dataclass(frozen=True)
class Lineage:
    """The processes one leader started: ``leader`` (a command child, which leads a
    session of its own when ``session``; an executor worker) and ``tag``."""

    tag: str
    leader: int
    session: bool = False

    def seed(self, proc: Proc, me: int) -> bool:
        """Whether ``proc`` is one of this lineage's without looking at its ancestors."""
        if proc.ppid == self.leader:
            return True
        if self.session and self.leader in (proc.sid, proc.pgid):
            return True
        # An orphan re-parented to this subreaper: ours if it carries the tag.
        return (proc.ppid == me and not proc.zombie
                and _tagged(proc.pid, f"\0{TAG_VARIABLE}={self.tag}\0".encode()))


def lineage_pids(lineage: Lineage, table: dict[int, Proc]) -> dict[int, Proc]:
    """The lineage's processes in ``table`` (zombies too), never the leader or this one."""
    me = os.getpid()
    found = {p.pid: p for p in table.values()
             if p.pid not in (me, lineage.leader) and lineage.seed(p, me)}
    return _with_descendants(found, table, skip={me, lineage.leader})


def _with_descendants(found: dict[int, Proc], table: dict[int, Proc],
                      skip: Iterable[int] = ()) -> dict[int, Proc]:
    children: dict[int, list[Proc]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p)
    frontier = list(found)
    skipped = set(skip)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child.pid not in found and child.pid not in skipped:
                found[child.pid] = child
                frontier.append(child.pid)
    return found


def _signal(proc: Proc, sig: signal.Signals) -> None:
    """Signal ``proc`` unless its pid now names another process (with a pidfd, which
    pins the process while its start time is checked, without a race)."""
    fd = _pidfd(proc.pid)
    try:
        now = _read_stat(proc.pid)
        if now is None or now.start != proc.start:
            return
        with contextlib.suppress(OSError):  # gone, or not ours to signal
            if fd >= 0:
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(proc.pid, sig)
    finally:
        if fd >= 0:
            os.close(fd)


def _pidfd(pid: int) -> int:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # an older kernel, or the process is gone
        return -1


def _reap(known: dict[int, int], table: dict[int, Proc]) -> None:
    """``waitpid`` the zombies among ``known`` (pid -> start) that are this process's
    children: orphans of the lineage, which no one else waits for."""
    me = os.getpid()
    for pid, start in list(known.items()):
        proc = table.get(pid)
        if proc is None or proc.start != start:
            del known[pid]  # gone (reaped by its parent)
        elif proc.zombie and proc.ppid == me:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            del known[pid]


#: Finds, in a process table, the processes to end.
_Finder = Callable[[dict[int, Proc]], dict[int, Proc]]


def _end(find: _Finder, grace: float) -> int:
    """SIGTERM what ``find`` finds, SIGKILL after ``grace`` s what is still there, and
    reap; how many processes were found. Found again each round: a process that forks
    as it ends, or is re-parented to this one, is found then."""
    known: dict[int, int] = {}  # pid -> start, until reaped or gone
    seen: set[int] = set()
    signaller = _Signaller(grace)
    while True:
        table = process_table()
        found = find(table)
        known.update({p.pid: p.start for p in found.values() if p.pid not in seen})
        seen.update(found)
        _reap(known, table)
        alive = [p for p in found.values() if not p.zombie]
        if not alive or not signaller.signal(alive):
            break
        time.sleep(_POLL_S)
    deadline = time.monotonic() + _REAP_S
    while known and time.monotonic() < deadline:  # killed children of killed parents
        time.sleep(_POLL_S)
        _reap(known, process_table())
    return len(seen)


class _Signaller:
    """SIGTERM once to each process, SIGKILL to all after the grace; gives up
    :data:`_REAP_S` s after the first SIGKILL (a process not ours to signal)."""

    def __init__(self, grace: float) -> None:
        self.until = time.monotonic() + grace
        self.termed: set[int] = set()
        self.killed_at: float | None = None

    def signal(self, alive: list[Proc]) -> bool:
        """Signal what is ``alive``; False once it is time to give up."""
        now = time.monotonic()
        if self.killed_at is not None and now - self.killed_at > _REAP_S:
            return False
        kill = now >= self.until
        if kill and self.killed_at is None:
            self.killed_at = now
        for proc in alive:
            if kill or proc.pid not in self.termed:
                _signal(proc, signal.SIGKILL if kill else signal.SIGTERM)
                self.termed.add(proc.pid)
        return True


class _Ending(threading.Thread):
    def __init__(self, lineage: Lineage, grace: float) -> None:
        super().__init__(daemon=True, name=f"forge-end-{lineage.leader}")
        self.lineage = lineage
        self.grace = grace

    def run(self) -> None:
        try:
            _end(functools.partial(lineage_pids, self.lineage), self.grace)
        finally:
            with _lock:
                _endings.discard(self)


def end_lineage(lineage: Lineage, grace: float) -> threading.Thread | None:
    """End the lineage's processes on a thread of its own (SIGTERM, SIGKILL after
    ``grace`` s, reaped), returned; None where there is no ``/proc``. The thread ends
    within ``grace`` + :data:`ENDING_SLACK_S` s."""
    if not os.path.isdir("/proc/self"):
        return None
    ending = _Ending(lineage, grace)
    with _lock:
        _endings.add(ending)
    ending.start()
    return ending


@atexit.register
def end_all_now(lineages: Iterable[Lineage] = ()) -> None:
    """At exit: SIGKILL, without a grace, what ``lineages`` and every ending still under
    way have left, and reap it (the threads ending them die with the process)."""
    with _lock:
        pending = [e.lineage for e in _endings]
    for lineage in {*pending, *lineages}:
        _end(functools.partial(lineage_pids, lineage), 0.0)


def _new_since(baseline: set[tuple[int, int]], table: dict[int, Proc]) -> dict[int, Proc]:
    me = os.getpid()
    found = {p.pid: p for p in table.values()
             if p.ppid == me and (p.pid, p.start) not in baseline}
    return _with_descendants(found, table)


def children_now() -> set[tuple[int, int]]:
    """This process's children now, as (pid, start): a baseline for
    :func:`end_new_descendants`."""
    me = os.getpid()
    return {(p.pid, p.start) for p in process_table().values() if p.ppid == me}


def end_new_descendants(baseline: set[tuple[int, int]], grace: float) -> int:
    """For a subreaper that runs one attempt at a time (an executor worker): end, now,
    the children not in ``baseline`` and their descendants (what the attempt started,
    orphans included, re-parented here); how many there were."""
    return _end(functools.partial(_new_since, baseline), grace)
