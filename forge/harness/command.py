"""The ``command`` harness: a program that takes an attempt as JSON on stdin.

Bench syntax (a list is the shorthand for ``argv``)::

    harness: {command: [python3, agent.py]}
    harness: {command: {argv: [python3, agent.py], cwd: ".", env: {NAME: value},
                        worker: false, cancel_timeout_s: 2, max_stderr_bytes: 65536}}

One process per attempt (the default): the child reads one JSON object
``{"config", "task", "ctx": {"seed", "attempt", "split", "timeout_s", "remaining_s"}}``
from stdin (then EOF), prints one RunOutput JSON object on stdout and exits 0.
``remaining_s`` is how long the child has before it is stopped. With ``worker: true``
a pool of long-lived children each takes one attempt at a time as one JSON line on
stdin and answers with one JSON line on stdout (and must flush it).

Each child leads a new session, hence its own process group, so whatever it spawns
goes with it: when its leader exits, stragglers in the group are killed; an attempt
that is stopped gets SIGTERM to the group, then SIGKILL after ``cancel_timeout_s``.
A descendant that leaves the group (``setsid``, a double-forked daemon) escapes this.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import json
import logging
import math
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from forge._digest import digest_of, file_digest
from forge.harness._base import AttemptContext, AttemptTimeout, RunOutput
from forge.spec import BuildContext
from forge.task import Task

__all__ = ["CommandError", "CommandHarness", "CommandTimeout"]

log = logging.getLogger(__name__)

_KEYS = ("argv", "cwd", "env", "worker", "cancel_timeout_s", "max_stderr_bytes")
#: More stdout than this for one attempt is refused rather than held in memory.
_MAX_STDOUT_BYTES = 16 * 2**20
#: The engine keeps the first 2000 characters of an error; the stderr tail must fit.
_ERROR_STDERR_CHARS = 1200
_EXCERPT_CHARS = 200
#: How long pipes may stay open after the leader exits (a descendant outside the
#: group can hold them): then what was read is all there is.
_DRAIN_S = 1.0

#: Process groups alive now; killed at interpreter exit if an evaluation never closed
#: its harness (children in their own session would not get the terminal's Ctrl-C).
_LIVE_GROUPS: set[int] = set()


@atexit.register
def _kill_live_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    if pgid > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


class CommandError(RuntimeError):
    """The child failed its attempt; the message says how, with the tail of its stderr."""


class CommandTimeout(AttemptTimeout):
    """The child gave no answer before the attempt's deadline."""


class _Tail:
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


class _Child(asyncio.SubprocessProtocol):
    """One spawned process group: its output as it arrives, its exit, its killing."""

    def __init__(self, max_stderr: int, on_closed: Callable[[_Child], None], *,
                 line_mode: bool) -> None:
        self.transport: asyncio.SubprocessTransport | None = None
        self.pgid = 0
        self.stdout = bytearray()  # in line mode: the incomplete last line
        self.lines: collections.deque[bytes] = collections.deque()
        self._line_mode = line_mode
        self._buffered = 0
        self.open_pipes = {1, 2}
        self.overflow = False
        self.stderr = _Tail(max_stderr)
        self.returncode: int | None = None
        self.changed = asyncio.Event()
        self._on_closed = on_closed
        self._killer: threading.Timer | None = None
        self._ended = False

    @property
    def alive(self) -> bool:
        return self.transport is not None and self.returncode is None

    # -- protocol callbacks, on the event loop ---------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.SubprocessTransport, transport)
        self.pgid = self.transport.get_pid()  # a session leader: its pid is its group
        _LIVE_GROUPS.add(self.pgid)

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 2:
            self.stderr.add(data)
            return
        if self._buffered + len(data) > _MAX_STDOUT_BYTES:
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
        self._end_group()
        self.changed.set()
        asyncio.get_running_loop().call_later(_DRAIN_S, self.close)

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    # -- driving it --------------------------------------------------------------------

    def send(self, data: bytes, *, eof: bool) -> None:
        assert self.transport is not None
        pipe = cast(asyncio.WriteTransport, self.transport.get_pipe_transport(0))
        pipe.write(data)
        if eof:
            pipe.close()

    def close_stdin(self) -> None:
        if self.transport is not None:
            pipe = self.transport.get_pipe_transport(0)
            if pipe is not None:
                pipe.close()

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
        _LIVE_GROUPS.discard(self.pgid)

    def close(self) -> None:
        """Release the transport once the leader is gone (closing it earlier kills it)."""
        if self.transport is not None and self.returncode is not None:
            if not self.transport.is_closing():
                self.transport.close()
            self._on_closed(self)


class CommandHarness:
    """Runs a program per attempt, or keeps a pool of worker programs (``worker``)."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None,
                 worker: bool = False, cancel_timeout_s: float = 2.0,
                 max_stderr_bytes: int = 65536, cwd_label: str | None = None) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.env = dict(env or {})
        self.worker = worker
        self.cancel_timeout_s = cancel_timeout_s
        self.max_stderr_bytes = max_stderr_bytes
        self._identity = _identity(self.argv, cwd, cwd_label or str(cwd), self.env, worker)
        self._children: set[_Child] = set()
        self._idle: list[_Child] = []

    @property
    def identity(self) -> str:
        return self._identity

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> RunOutput:
        # Answer a little before the engine's own deadline, so that the attempt's
        # error can carry the child's stderr instead of a bare "no result".
        margin = min(0.25, 0.1 * ctx.timeout_s)
        until = ctx.deadline - margin
        payload: dict[str, Any] = {
            "config": config, "task": task.model_dump(mode="json"),
            "ctx": {"seed": ctx.seed, "attempt": ctx.attempt, "split": ctx.split,
                    "timeout_s": ctx.timeout_s}}
        hard = ctx.deadline - margin / 2
        if self.worker:
            return await self._run_worker(payload, until, hard, ctx.timeout_s)
        return await self._run_once(payload, until, hard, ctx.timeout_s)

    async def _run_once(self, payload: dict[str, Any], until: float, hard: float,
                        timeout_s: float) -> RunOutput:
        child = await self._spawn()
        try:
            child.send(_encode(payload, until), eof=True)
            if not await child.wait(lambda: not child.alive or child.overflow, until):
                raise await self._timed_out(child, hard, timeout_s)
            if child.overflow:
                raise CommandError(_message(f"stdout exceeds {_MAX_STDOUT_BYTES} bytes", child))
            await child.wait(lambda: not child.open_pipes, time.monotonic() + _DRAIN_S)
            if child.returncode != 0:
                raise CommandError(_message(_exit_reason(child.returncode), child))
            return _output(bytes(child.stdout), child)
        finally:
            self._stop(child)

    async def _run_worker(self, payload: dict[str, Any], until: float, hard: float,
                          timeout_s: float) -> RunOutput:
        worker = await self._take_worker()
        reusable = False
        try:
            worker.send(_encode(payload, until) + b"\n", eof=False)
            if not await worker.wait(
                    lambda: bool(worker.lines) or not worker.alive or worker.overflow, until):
                raise await self._timed_out(worker, hard, timeout_s)
            if not worker.lines and not worker.alive:
                # Its exit can be seen before the last of its output: read that first.
                await worker.wait(lambda: 1 not in worker.open_pipes,
                                  time.monotonic() + _DRAIN_S)
            line = worker.next_line()
            if line is None:
                why = (f"reply exceeds {_MAX_STDOUT_BYTES} bytes" if worker.overflow else
                       f"worker {_exit_reason(worker.returncode)} before answering")
                raise CommandError(_message(why, worker))
            output = _output(line, worker)
            reusable = True
            return output
        finally:
            if reusable and worker.alive:
                worker.stderr.clear()
                self._idle.append(worker)
            else:
                self._stop(worker)

    async def _take_worker(self) -> _Child:
        while self._idle:
            worker = self._idle.pop()
            if worker.alive and not worker.lines and not worker.stdout.strip():
                return worker
            if worker.alive:
                # Output between attempts breaks the one-line-per-attempt pairing.
                log.warning("command worker %s wrote outside an attempt; replacing it",
                            worker.pgid)
                self._stop(worker)
        return await self._spawn()

    async def _spawn(self) -> _Child:
        loop = asyncio.get_running_loop()
        child = _Child(self.max_stderr_bytes, self._children.discard, line_mode=self.worker)
        self._children.add(child)
        starting = asyncio.ensure_future(loop.subprocess_exec(
            lambda: child, *self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=self.cwd, env={**os.environ, **self.env},
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
        except Exception as exc:  # a missing program, a full process table, ...
            self._children.discard(child)
            raise CommandError(f"cannot start {self.argv[0]!r}: {exc}") from None
        return child

    def _stop(self, child: _Child) -> None:
        if child.alive:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("stopping command %s; stderr so far:\n%s", child.pgid,
                          child.stderr.text())
            child.terminate(self.cancel_timeout_s)

    async def _timed_out(self, child: _Child, hard: float, timeout_s: float) -> CommandTimeout:
        child.terminate(self.cancel_timeout_s)
        # A moment to exit and say why on stderr, still before the engine's deadline.
        exited = await child.wait_exit(min(time.monotonic() + self.cancel_timeout_s, hard))
        then = ("it exited" if exited else
                f"SIGKILL follows in {self.cancel_timeout_s:g} s unless it exits")
        return CommandTimeout(_message(
            f"gave no result within {timeout_s:g} s; sent SIGTERM to its process group, {then}",
            child))

    async def aclose(self) -> None:
        """Let idle workers end on EOF and stopped children end their grace, then SIGKILL
        every group still alive and release the pipes."""
        idle, self._idle = self._idle, []
        for worker in idle:
            worker.close_stdin()
        children = list(self._children)
        for child in children:
            if child not in idle:
                child.terminate(self.cancel_timeout_s)
        until = time.monotonic() + self.cancel_timeout_s
        for child in children:
            await child.wait_exit(until)
        for child in children:
            child.kill()
        until = time.monotonic() + _DRAIN_S
        for child in children:
            await child.wait_exit(until)
            child.close()

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> CommandHarness:
        unknown = sorted(set(args) - set(_KEYS))
        if unknown:
            raise ValueError(f"unknown argument(s) {unknown}; expected some of {list(_KEYS)}")
        argv = args.get("argv")
        if (not isinstance(argv, list) or not argv
                or not all(isinstance(a, str) for a in argv) or not argv[0]):
            raise ValueError(f"argv: expected a non-empty list of strings such as "
                             f"[python3, agent.py], got {argv!r}")
        label = args.get("cwd", ".")
        if not isinstance(label, str) or not label:
            raise ValueError(f"cwd: expected a folder, got {label!r}")
        cwd = (ctx.base_dir / label).resolve()
        if not cwd.is_dir():
            raise ValueError(f"cwd: {label!r} is not a folder ({cwd})")
        env = _env(args.get("env", {}))
        worker = args.get("worker", False)
        if not isinstance(worker, bool):
            raise ValueError(f"worker: expected true or false, got {worker!r}")
        grace = args.get("cancel_timeout_s", 2.0)
        if (isinstance(grace, bool) or not isinstance(grace, (int, float))
                or not math.isfinite(grace) or grace < 0):
            raise ValueError(f"cancel_timeout_s: expected a number >= 0, got {grace!r}")
        max_stderr = args.get("max_stderr_bytes", 65536)
        if isinstance(max_stderr, bool) or not isinstance(max_stderr, int) or max_stderr < 0:
            raise ValueError(f"max_stderr_bytes: expected an integer >= 0, got {max_stderr!r}")
        _check_program(argv[0], cwd, env)
        return cls(argv, cwd=cwd, env=env, worker=worker, cancel_timeout_s=float(grace),
                   max_stderr_bytes=max_stderr, cwd_label=os.path.normpath(label))


def _env(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ValueError(f"env: expected a mapping NAME: value, got {raw!r}")
    env: dict[str, str] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not name or "=" in name:
            raise ValueError(f"env: {name!r} is not a variable name")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            # Never echo the value: it may be a secret.
            raise ValueError(f"env: {name}: expected a string or a number "
                             f"(quote true/false), got {type(value).__name__}")
        env[name] = str(value)
    return env


def _check_program(program: str, cwd: Path, env: dict[str, str]) -> None:
    """Fail at load, not on every attempt, when the program cannot be found."""
    if os.sep in program:
        path = cwd / program
        if not path.is_file() or not os.access(path, os.X_OK):
            raise ValueError(f"argv: {program!r} is not an executable file (from {cwd})")
    elif shutil.which(program, path=env.get("PATH", os.environ.get("PATH"))) is None:
        raise ValueError(f"argv: program {program!r} not found on PATH")


def _identity(argv: list[str], cwd: Path, cwd_label: str, env: dict[str, str],
              worker: bool) -> str:
    """Command, cwd as written (portable), digests of the env and of the files that argv
    names relative to cwd (the agent script). Env values may be secrets: digest only.
    The program itself is left out when found through PATH, as are absolute paths
    (an interpreter's binary: machine-specific and large)."""
    files: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if not arg or os.path.isabs(arg) or (i == 0 and os.sep not in arg):
            continue
        path = cwd / arg
        if path.is_file():
            files[arg] = file_digest(path)
    parts = ["command", shlex.join(argv), f"cwd={cwd_label}"]
    if env:
        parts.append("env=" + digest_of(env)[:16])
    if files:
        parts.append("files=" + digest_of(files)[:16])
    if worker:
        parts.append("worker")
    return ":".join(parts)


def _encode(payload: dict[str, Any], until: float) -> bytes:
    payload["ctx"]["remaining_s"] = round(max(0.0, until - time.monotonic()), 3)
    try:
        return json.dumps(payload).encode()
    except (TypeError, ValueError) as exc:
        raise CommandError(f"the attempt cannot be sent as JSON: {exc}") from None


def _output(raw: bytes, child: _Child) -> RunOutput:
    try:
        value = json.loads(raw)
    except ValueError:
        text = raw.decode("utf-8", "replace").strip()
        excerpt = repr(text[:_EXCERPT_CHARS])  # repr: one line, control bytes visible
        if len(text) > _EXCERPT_CHARS or len(excerpt) > _EXCERPT_CHARS + 2:
            excerpt = excerpt[:_EXCERPT_CHARS] + "..."
        raise CommandError(_message(f"stdout is not JSON: {excerpt if text else '(empty)'}",
                                    child)) from None
    if not isinstance(value, dict):
        raise CommandError(_message(f"stdout is JSON but not an object: "
                                    f"{type(value).__name__}", child))
    try:
        output = RunOutput.model_validate(value)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CommandError(_message(f"gave invalid output: {where}: {first['msg']}", child)
                           ) from None
    stderr = child.stderr.text()
    if stderr:
        # RunOutput has no place for logs; ``trace`` is the agent's own, so it is only
        # filled when the child left it empty.
        if output.trace is None:
            output.trace = {"stderr": stderr}
        else:
            log.debug("stderr of a command attempt that set its own trace:\n%s", stderr)
    return output


def _message(reason: str, child: _Child) -> str:
    tail = child.stderr.text(_ERROR_STDERR_CHARS)
    return f"command {reason}; " + (f"stderr:\n{tail}" if tail else "stderr: (empty)")


def _exit_reason(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with code {returncode}"
