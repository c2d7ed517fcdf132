"""Process supervision for the ``command`` harness: spawning, process groups, stopping, reaping.

Each child leads a new session, hence its own process group, so whatever it spawns
goes with it: when its leader exits, stragglers in the group are killed; a child
that is stopped gets SIGTERM to the group, then SIGKILL after the grace period.
A descendant that leaves the group (``setsid``, a double-forked daemon) is found
through :mod:`forge._util.descendants` (Linux): forge is a child subreaper and each
child's environment carries a tag of its own; when the leader exits, those get
SIGTERM, then SIGKILL after the grace, and are reaped. Elsewhere they escape.

:class:`Supervisor` holds the children of one harness (and its idle workers between
attempts); :class:`Child` is one of them, its output as it arrives and its exit.
"""

from __future__ import annotations

import array
import asyncio
import atexit
import collections
import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from forge._util.descendants import (
    ENDING_SLACK_S,
    TAG_VARIABLE,
    Lineage,
    become_subreaper,
    end_all_now,
    end_lineage,
    new_tag,
)

__all__ = ["MAX_STDOUT_BYTES", "Child", "Supervisor", "Tail", "end_group", "kill_live_groups",
           "track_group"]

log = logging.getLogger(__name__)

#: More stdout than this for one attempt is refused rather than held in memory.
MAX_STDOUT_BYTES = 16 * 2**20
#: How long pipes may stay open after the leader exits (a descendant outside the
#: group can hold them): then what was read is all there is.
DRAIN_S = 1.0

#: Process groups alive now, with their lineage; killed at interpreter exit if an
#: evaluation never closed its harness (children in their own session would not get
#: the terminal's Ctrl-C).
_LIVE_GROUPS: dict[int, Lineage] = {}


@atexit.register
def kill_live_groups() -> None:
    """SIGKILL every process group a command harness has alive now, and what left the
    groups, without a grace."""
    live = list(_LIVE_GROUPS.items())
    for pgid, _ in live:
        _signal_group(pgid, signal.SIGKILL)
    end_all_now(lineage for _, lineage in live)


def track_group(pgid: int, tag: str) -> None:
    """Note a process group (led by ``pgid``, its environment tagged ``tag``) as alive:
    killed, with what left it, at exit unless :func:`end_group` comes first."""
    _LIVE_GROUPS[pgid] = Lineage(tag, pgid, session=True)


def end_group(pgid: int, grace: float) -> threading.Thread | None:
    """The leader of the group has exited: end what left the group (its session, the
    orphans carrying its tag), SIGTERM then SIGKILL after ``grace`` s (Linux), on the
    thread returned."""
    lineage = _LIVE_GROUPS.pop(pgid, None)
    return None if lineage is None else end_lineage(lineage, grace)


async def join_endings(endings: list[threading.Thread], until: float) -> None:
    """Wait, until the monotonic time ``until``, for the threads ending what children
    left outside their groups; forget those that ended."""
    for ending in list(endings):
        await asyncio.to_thread(ending.join, max(0.0, until - time.monotonic()))
        if not ending.is_alive():
            endings.remove(ending)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    if pgid > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


class Tail:
    """The last ``limit`` bytes of a stream and how many came before them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        excess = len(self.data) - self.limit
        if excess > 0:
            del self.data[:excess]
            self.dropped += excess

    def clear(self) -> None:
        self.data.clear()
        self.dropped = 0

    def text(self, max_chars: int | None = None) -> str:
        text = self.data.decode("utf-8", "replace").rstrip()
        dropped = self.dropped
        if max_chars is not None and len(text) > max_chars:
            dropped += len(text[:-max_chars].encode())
            text = text[-max_chars:]
        return f"[{dropped} earlier bytes dropped]\n{text}" if dropped and text else text


class Child(asyncio.SubprocessProtocol):
    """One spawned process group: its output as it arrives, its exit, its killing."""

    def __init__(self, max_stderr: int, on_closed: Callable[[Child], None], *,
                 line_mode: bool, tag: str = "", grace: float = 0.0,
                 endings: list[threading.Thread] | None = None) -> None:
        self.transport: asyncio.SubprocessTransport | None = None
        self.pgid = 0
        #: The value of TAG_VARIABLE in its environment; ``grace``: how long what it
        #: leaves outside its group gets between SIGTERM and SIGKILL.
        self.tag = tag
        self._grace = grace
        self._endings = endings if endings is not None else []
        self.stdout = bytearray()  # in line mode: the incomplete last line
        self.lines: collections.deque[bytes] = collections.deque()
        self._line_mode = line_mode
        self._buffered = 0
        self.open_pipes = {1, 2}
        self.overflow = False
        self.stderr = Tail(max_stderr)
        self.returncode: int | None = None
        self.changed = asyncio.Event()
        self._on_closed = on_closed
        self._killer: threading.Timer | None = None
        self._ended = False
        #: Ids of the requests sent to this worker, oldest first (line mode; the
        #: command harness's protocol fills it).
        self.exchanges: list[str] = []
        # Our own descriptor of the child's stdin pipe (line mode): it keeps the pipe,
        # and what the child left unread in it, after asyncio closes its end.
        self._stdin_fd = -1
        self._sent = 0
        self._send_lost = False
        self._send_partial = False
        #: Whether the last request was still wholly unread when the child exited: it
        #: died without taking it, so it was not that request's doing.
        self.unread_at_exit = False

    @property
    def alive(self) -> bool:
        return self.transport is not None and self.returncode is None

    # -- protocol callbacks, on the event loop ---------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.SubprocessTransport, transport)
        self.pgid = self.transport.get_pid()  # a session leader: its pid is its group
        track_group(self.pgid, self.tag)
        if self._line_mode:
            pipe = self.transport.get_pipe_transport(0)
            if pipe is not None:
                self._stdin_fd = os.dup(pipe.get_extra_info("pipe").fileno())

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 2:
            self.stderr.add(data)
            return
        if self._buffered + len(data) > MAX_STDOUT_BYTES:
            self.overflow = True
        else:
            self.stdout += data
            self._buffered += len(data)
            if self._line_mode and b"\n" in data:
                *complete, rest = self.stdout.split(b"\n")
                self.stdout = bytearray(rest)
                self.lines.extend(bytes(line) for line in complete if line.strip())
                self._buffered = len(rest) + sum(len(line) for line in self.lines)
        self.changed.set()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.open_pipes.discard(fd)
        self.changed.set()

    def process_exited(self) -> None:
        assert self.transport is not None
        self.returncode = self.transport.get_returncode()
        # Before the group is killed: a straggler holding the pipe could still read it.
        self.unread_at_exit = self._request_unread()
        self._end_group()
        self.changed.set()
        asyncio.get_running_loop().call_later(DRAIN_S, self.close)

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    # -- driving it --------------------------------------------------------------------

    def send(self, data: bytes, *, eof: bool) -> None:
        assert self.transport is not None
        pipe = cast(asyncio.WriteTransport | None, self.transport.get_pipe_transport(0))
        self._sent = len(data)
        # A closed pipe drops the write silently, a broken one (the child is gone)
        # closes on it: either way the child never got the request.
        self._send_lost = pipe is None or pipe.is_closing()
        if pipe is None or self._send_lost:
            return
        pipe.write(data)
        self._send_lost = pipe.is_closing()
        # What the pipe did not take at once is queued in asyncio; how much of it the
        # child read can no longer be told, so it counts as read.
        self._send_partial = pipe.get_write_buffer_size() > 0
        if eof:
            pipe.close()

    def _request_unread(self) -> bool:
        if self._send_lost:
            return True
        if self._send_partial or self._stdin_fd < 0 or not self._sent:
            return False
        waiting = array.array("i", [0])
        try:
            fcntl.ioctl(self._stdin_fd, termios.FIONREAD, waiting, True)
        except OSError:
            return False
        return waiting[0] >= self._sent

    def close_stdin(self) -> None:
        self._close_stdin_copy()  # else the child never sees EOF
        if self.transport is not None:
            pipe = self.transport.get_pipe_transport(0)
            if pipe is not None:
                pipe.close()

    def _close_stdin_copy(self) -> None:
        fd, self._stdin_fd = self._stdin_fd, -1
        if fd >= 0:
            os.close(fd)

    def next_line(self) -> bytes | None:
        """The next non-blank complete line of stdout (line mode), taken off the buffer."""
        if not self.lines:
            return None
        line = self.lines.popleft()
        self._buffered -= len(line)
        return line

    async def wait(self, ready: Callable[[], bool], until: float) -> bool:
        """Wait until ``ready()`` or the monotonic time ``until``; whether it is ready."""
        while not ready():
            left = until - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)
        return True

    async def wait_exit(self, until: float) -> bool:
        return await self.wait(lambda: not self.alive, until)

    async def drain(self) -> None:
        """Wait a moment for the pipes to close after an exit: the last output."""
        await self.wait(lambda: not self.open_pipes, time.monotonic() + DRAIN_S)

    async def drain_stdout(self) -> None:
        await self.wait(lambda: 1 not in self.open_pipes, time.monotonic() + DRAIN_S)

    def terminate(self, grace: float) -> None:
        """SIGTERM to the group now, SIGKILL after ``grace`` s. The SIGKILL is on a timer
        thread: a search runs its loop only during evaluations, and must not wait."""
        if not self.alive or self._killer is not None:
            return
        _signal_group(self.pgid, signal.SIGTERM)
        self._killer = threading.Timer(grace, self.kill)
        self._killer.daemon = True
        self._killer.start()

    def kill(self) -> None:
        if not self._ended:
            _signal_group(self.pgid, signal.SIGKILL)

    def _end_group(self) -> None:
        # The attempt ended with its leader; what it left in the group goes too, and
        # with them the pipes they hold open.
        self._ended = True
        if self._killer is not None:
            self._killer.cancel()
        _signal_group(self.pgid, signal.SIGKILL)
        # And what left the group: its session, a setsid grandchild re-parented here.
        ending = end_group(self.pgid, self._grace)
        if ending is not None:
            self._endings.append(ending)

    def close(self) -> None:
        """Release the transport once the leader is gone (closing it earlier kills it)."""
        if self.returncode is not None:
            self._close_stdin_copy()
        if self.transport is not None and self.returncode is not None:
            if not self.transport.is_closing():
                self.transport.close()
            self._on_closed(self)


class Supervisor:
    """The children of one harness: each started in a session of its own, stopped with
    SIGTERM then SIGKILL after ``grace`` s, and all of them reaped at :meth:`aclose`.

    With ``line_mode`` the children are long-lived workers answering one line per
    request; those between attempts wait in an idle pool (:meth:`take_worker`,
    :meth:`keep`).
    """

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], grace: float,
                 max_stderr: int, line_mode: bool) -> None:
        self.argv = argv
        self.cwd = cwd
        self.env = env
        self.grace = grace
        self.max_stderr = max_stderr
        self.line_mode = line_mode
        self._children: set[Child] = set()
        self._idle: list[Child] = []
        self._closed = False
        #: Threads ending what exited children left outside their groups.
        self._endings: list[threading.Thread] = []

    async def spawn(self, cwd: Path | None = None) -> Child:
        """A new child, in ``cwd`` (default: the supervisor's); raises what starting it
        raised (a missing program, ...)."""
        if self._closed:
            # An attempt still on its way when the evaluation closes (an interruption)
            # must not leave a child that aclose() no longer waits for.
            raise RuntimeError("the harness is closed")
        loop = asyncio.get_running_loop()
        become_subreaper()  # the child's orphans come back to forge (Linux)
        child = Child(self.max_stderr, self._children.discard, line_mode=self.line_mode,
                      tag=new_tag(), grace=self.grace, endings=self._endings)
        self._children.add(child)
        starting = asyncio.ensure_future(loop.subprocess_exec(
            lambda: child, *self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=self.cwd if cwd is None else cwd,
            env={**os.environ, **self.env, TAG_VARIABLE: child.tag},
            start_new_session=True))
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            # Cancelled while starting: the process may appear after all; stop it then.
            def started(f: asyncio.Future[Any]) -> None:
                if not f.cancelled() and f.exception() is None:
                    child.kill()

            starting.add_done_callback(started)
            raise
        except Exception:
            self._children.discard(child)
            raise
        return child

    async def take_worker(self) -> Child:
        """An idle worker that wrote nothing since its last answer, or a new one."""
        while self._idle:
            worker = self._idle.pop()
            if worker.alive and not worker.lines and not worker.stdout.strip():
                return worker
            if worker.alive:
                # Output between attempts breaks the one-line-per-attempt pairing.
                log.warning("command worker %s wrote outside an attempt; replacing it",
                            worker.pgid)
                self.stop(worker)
        return await self.spawn()

    def keep(self, worker: Child) -> None:
        """Put a worker that answered back in the idle pool, its stderr forgotten."""
        worker.stderr.clear()
        self._idle.append(worker)

    def stop(self, child: Child) -> None:
        if child.alive:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("stopping command %s; stderr so far:\n%s", child.pgid,
                          child.stderr.text())
            child.terminate(self.grace)

    async def aclose(self) -> None:
        """Let idle workers end on EOF and stopped children end their grace, then SIGKILL
        every group still alive, release the pipes, and wait until what the children
        left outside their groups is ended too."""
        self._closed = True
        idle, self._idle = self._idle, []
        for worker in idle:
            worker.close_stdin()
        children = list(self._children)
        for child in children:
            if child not in idle:
                child.terminate(self.grace)
        until = time.monotonic() + self.grace
        for child in children:
            await child.wait_exit(until)
        for child in children:
            child.kill()
        until = time.monotonic() + DRAIN_S
        for child in children:
            await child.wait_exit(until)
            child.close()
        await join_endings(self._endings, time.monotonic() + self.grace + ENDING_SLACK_S)
