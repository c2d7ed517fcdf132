"""A served agent: a server program that forge starts on this machine for a run, then stops.

A harness that talks to an agent over the network (``a2a``, ``nlip``) may name the
program that serves it (``serve: [python3, agent.py, --port, "{port}"]``). forge
picks a free port on 127.0.0.1, writes it for ``{port}`` in the program's arguments,
its environment values and the harness's url, starts the program in a process group
of its own, and waits until the port accepts connections before the first attempt
(the wait is no attempt's time: :meth:`forge.harness.Harness.astart`). The program
runs for the whole evaluation or search and is stopped when the harness closes:
SIGTERM to its group, SIGKILL after ``stop_timeout_s``; at interpreter exit every
group still alive is killed (:func:`forge.harness.supervisor.kill_live_groups`).

The program's stdout and stderr go to a temporary file, removed when it stops; its
last lines are quoted when it fails to start or exits while attempts need it. A
program that exits between batches is started again before the next batch, with a
warning; one that cannot start (or does not listen within ``ready_timeout_s``) is a
bench error naming the ``serve`` field, and the run ends there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import IO, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from forge._util.descendants import TAG_VARIABLE, become_subreaper, new_tag
from forge.core.spec import BuildContext
from forge.harness._endpoint import LOOPBACK
from forge.harness.command import _check_program, _identity
from forge.harness.supervisor import end_group, track_group

__all__ = ["ServeOptions", "ServedAgent", "check_served_url"]

log = logging.getLogger(__name__)

_PORT = "{port}"
#: ``{python}`` in argv is the interpreter forge runs on: the agent's SDK is installed
#: where forge's extra put it, whichever ``python3`` comes first on PATH.
_PYTHON = "{python}"
_TAIL_BYTES = 1500
_TRIES = 3  # a port taken between our probe and the program's bind: try another


def _argv_too(schema: dict[str, Any]) -> None:
    """The JSON Schema of ``serve``: the mapping, or its shorthand, the argv alone."""
    mapping = {k: v for k, v in schema.items() if k not in ("title", "description")}
    for key in mapping:
        del schema[key]
    schema["anyOf"] = [mapping, {"type": "array", "items": {"type": "string"},
                                 "minItems": 1}]


class ServeOptions(BaseModel):
    """The ``serve:`` argument of a network harness (a list is the shorthand for argv)."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=_argv_too)
    argv: list[str] = Field(min_length=1)
    cwd: str = "."
    env: dict[str, str] = Field(default_factory=dict)
    ready_timeout_s: float = Field(default=30.0, gt=0, le=600, allow_inf_nan=False)
    stop_timeout_s: float = Field(default=5.0, ge=0, le=60, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"argv": data} if isinstance(data, list) else data


class ServedAgent:
    """The program of one harness's ``serve``; :meth:`ensure` starts it, :meth:`stop` ends it."""

    def __init__(self, options: ServeOptions, ctx: BuildContext) -> None:
        self.options = options
        self.cwd = (ctx.base_dir / options.cwd).resolve()
        self._where = ctx
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.port: int | None = None
        if not self.cwd.is_dir():
            raise ctx.error(f"{options.cwd!r} is not a folder ({self.cwd})", "cwd")
        self.argv = [sys.executable if a == _PYTHON else a for a in options.argv]
        _check_program(self.argv[0], self.cwd, options.env, ctx.at("argv"))
        self.identity = _identity(options.argv, self.cwd, os.path.normpath(options.cwd),
                                  options.env, worker=False).replace("command:", "serve:", 1)

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def fill(self, text: str) -> str:
        """``text`` with the port written for ``{port}`` (it must be started)."""
        assert self.port is not None, "the served agent has not started"
        return text.replace(_PORT, str(self.port))

    async def ensure(self) -> bool:
        """Start the program unless it is running; whether it was started now."""
        if self.alive:
            return False
        if self._proc is not None:
            log.warning("the served agent exited (%s); starting it again",
                        self.exit_note())
            self._release()
        for tries in range(1, _TRIES + 1):
            self._spawn()
            if await self._ready():
                return True
            if self.alive or tries == _TRIES:
                break
            log.info("served agent exited at start (%s); trying another port",
                     self.exit_note())
            self._release()
        note = self.exit_note() if not self.alive else (
            f"it did not accept connections on 127.0.0.1:{self.port} within "
            f"{self.options.ready_timeout_s:g} s{self._tail_note()}")
        await self.stop()
        raise self._where.error(f"the served agent did not start: {note}")

    def _spawn(self) -> None:
        self.port = _free_port()
        argv = [self.fill(a) for a in self.argv]
        env = {**os.environ, **{k: self.fill(v) for k, v in self.options.env.items()},
               "FORGE_SERVE_PORT": str(self.port), TAG_VARIABLE: (tag := new_tag())}
        become_subreaper()  # what the program orphans comes back to forge (Linux)
        # Open as long as the program runs (its output's one place); closed by _release.
        self._log = tempfile.TemporaryFile(prefix="forge-serve-")  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(argv, cwd=self.cwd, env=env,
                                          stdin=subprocess.DEVNULL, stdout=self._log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            self._release()
            raise self._where.error(f"the served agent did not start: {exc}") from None
        track_group(self._proc.pid, tag)  # killed at exit should nothing stop it first
        log.info("served agent %s started on 127.0.0.1:%d", self._proc.pid, self.port)

    async def _ready(self) -> bool:
        """Wait until the port takes a connection; False if the program exits first or
        the wait runs out."""
        assert self.port is not None
        until = time.monotonic() + self.options.ready_timeout_s
        while time.monotonic() < until:
            if not self.alive:
                return False
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", self.port), 1.0)
            except (OSError, TimeoutError):
                await asyncio.sleep(0.05)
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return self.alive
        return False

    def exit_note(self) -> str:
        """How the program ended, with its last output; empty while it runs."""
        if self._proc is None or self._proc.returncode is None:
            return ""
        code = self._proc.returncode
        how = (f"killed by {signal.Signals(-code).name}" if code < 0 and
               -code in signal.valid_signals() else f"exit code {code}")
        return f"the served agent {self._proc.pid} ended ({how}){self._tail_note()}"

    def _tail_note(self) -> str:
        tail = self._tail()
        return f"; its last output: {tail}" if tail else "; it wrote nothing"

    def _tail(self) -> str:
        if self._log is None:
            return ""
        try:
            size = self._log.seek(0, os.SEEK_END)
            self._log.seek(max(0, size - _TAIL_BYTES))
            data = self._log.read()
        except (OSError, ValueError):
            return ""
        text = " ".join(data.decode("utf-8", "replace").split())
        return ("…" if size > _TAIL_BYTES else "") + text

    async def stop(self) -> None:
        """SIGTERM to the group, SIGKILL after ``stop_timeout_s``; then reaped."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            until = time.monotonic() + self.options.stop_timeout_s
            while proc.poll() is None and time.monotonic() < until:
                await asyncio.sleep(0.02)
        # What the leader left in its group goes too (a reloader's worker, say).
        _signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        log.info("served agent %s stopped (%s)", proc.pid, proc.returncode)
        self._release()

    def _release(self) -> None:
        if self._proc is not None:
            # What left its group goes too (at once: the program is gone already).
            end_group(self._proc.pid, 0.0)
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def check_served_url(url: str) -> str:
    """A served agent is on this machine: its url's host is a loopback address."""
    host = urlsplit(url).hostname
    if host not in LOOPBACK:
        raise ValueError(f"a served agent listens on 127.0.0.1; the url's host is {host!r}")
    return url

