"""The wire of the ``acp`` harness: agent processes, and their stdio as ACP's transport.

forge's :class:`~forge.harness.supervisor.Supervisor` starts each agent in a process
group of its own and stops it (SIGTERM to the group, SIGKILL after the grace), as it
does command workers. :class:`LineTransport` hands the agent's stdout to the SDK's
``ClientSideConnection`` one JSON-RPC message a line, and ends the connection, keeping
the reason, at the first line that is not one: not JSON, JSON that is not a JSON-RPC
message, a ``session/update`` the schema refuses, or more than ``limit`` bytes in one
attempt. (The SDK's own stdio transport skips a line it cannot parse and logs it: a
broken agent would look like a slow one until the timeout.)

Imports the ``acp`` SDK: only the ``acp`` harness imports this module, once the SDK
was found.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from acp import CLIENT_METHODS, Client
from acp.core import ClientSideConnection
from acp.schema import InitializeResponse, SessionNotification
from pydantic import ValidationError

from forge._util.files import validation_problem
from forge._util.show import short
from forge.harness._acp_client import ForgeClient
from forge.harness.supervisor import Child, Supervisor

__all__ = ["AgentPool", "AgentProcess", "LineTransport"]

log = logging.getLogger(__name__)

_KNOWN_NOTIFICATIONS = frozenset(CLIENT_METHODS.values())
_SHOWN = 200  # characters of a bad message quoted in the attempt's error


class LineTransport:
    """An agent's stdin and stdout as a stream of JSON-RPC messages (``acp``'s Transport)."""

    def __init__(self, child: Child, limit: int) -> None:
        self.child = child
        self.limit = limit
        #: Bytes received in the current attempt (:meth:`reset` at each start).
        self.received = 0
        #: Why the connection was ended, when it was forge's doing.
        self.fault: str | None = None

    def reset(self) -> None:
        self.received = 0

    async def send(self, message: dict[str, Any]) -> None:
        if not self.child.alive:
            raise ConnectionError("the agent process has exited")
        self.child.send(json.dumps(message, separators=(",", ":")).encode() + b"\n", eof=False)

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None ends the connection (end of output, or a fault)."""
        while self.fault is None:
            line = await self._line()
            if line is None:
                return None
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):  # RecursionError: nested too deeply
                text = line.decode("utf-8", "replace")
                self._fail(f"wrote a line that is not JSON: {short(text, _SHOWN)}")
                return None
            problem = _problem(message)
            if problem is not None:
                self._fail(problem)
                return None
            method = message.get("method")
            if ("id" not in message and isinstance(method, str)
                    and method not in _KNOWN_NOTIFICATIONS and not method.startswith("_")):
                # The SDK would log a traceback for each; a notification needs no answer.
                continue
            return cast(dict[str, Any], message)
        return None

    async def close(self) -> None:
        self.child.close_stdin()

    def _fail(self, reason: str) -> None:
        if self.fault is None:
            self.fault = reason

    async def _line(self) -> bytes | None:
        child = self.child
        while True:
            line = child.next_line()
            if line is None and not child.alive:
                await child.drain_stdout()  # its exit can be seen before its last output
                line = child.next_line()
                if line is None and child.stdout.strip():
                    line = bytes(child.stdout)  # a last message without its newline
                    child.stdout.clear()
            if line is not None:
                self.received += len(line) + 1
            if child.overflow or self.received + len(child.stdout) > self.limit:
                self._fail(f"sent more than {self.limit} bytes in one attempt")
                return None
            if line is not None or not child.alive:
                return line
            child.changed.clear()
            await child.changed.wait()


def _problem(message: Any) -> str | None:
    """Why ``message`` is no JSON-RPC message forge can take, or None."""
    if not isinstance(message, dict):
        return f"wrote JSON that is not a JSON-RPC message: {short(message, _SHOWN)}"
    method = message.get("method")
    if method is None:
        if "id" not in message or not ("result" in message or isinstance(
                message.get("error"), dict)):
            return ("wrote a JSON object that is no request, notification or response: "
                    f"{short(message, _SHOWN)}")
        return None
    if not isinstance(method, str):
        return f"wrote a message whose method is not a string: {short(method, _SHOWN)}"
    if method == CLIENT_METHODS["session_update"]:
        try:
            SessionNotification.model_validate(message.get("params"))
        except ValidationError as exc:
            problem = validation_problem(exc)
            return f"sent a session/update the protocol refuses: {problem.field}: {problem.message}"
    return None


class AgentProcess:
    """One agent process: its child, the transport, the SDK's connection and our client."""

    def __init__(self, child: Child, limit: int) -> None:
        self.child = child
        self.transport = LineTransport(child, limit)
        self.client = ForgeClient()
        # cast: ForgeClient answers what forge offers; the SDK looks the rest up by name
        # and answers "method not found" for what it lacks.
        self.conn = ClientSideConnection(cast(Client, self.client), self.transport)
        self.init: InitializeResponse | None = None

    @property
    def can_close(self) -> bool:
        """Whether the agent said it closes sessions (``sessionCapabilities.close``)."""
        caps = self.init.agent_capabilities if self.init is not None else None
        session = caps.session_capabilities if caps is not None else None
        return session is not None and session.close is not None

    @property
    def clean(self) -> bool:
        """Alive, and nothing came from it that no attempt asked for."""
        return (self.child.alive and self.transport.fault is None and not self.client.stray
                and not self.child.lines and not self.child.stdout.strip())


class AgentPool:
    """The agent processes of one harness: a new one per attempt, or (``worker``) idle
    ones kept between attempts, each serving one attempt at a time."""

    def __init__(self, supervisor: Supervisor, *, limit: int, worker: bool) -> None:
        self._supervisor = supervisor
        self._limit = limit
        self.worker = worker
        self._idle: list[AgentProcess] = []
        self._warned = False

    async def take(self, new_cwd: Callable[[], Path], *,
                   fresh: bool = False) -> tuple[AgentProcess, bool]:
        """A process for one attempt and whether it served one before (never, ``fresh``);
        a new one starts in the folder ``new_cwd()`` makes. Raises what starting it raised."""
        while self._idle and not fresh:
            proc = self._idle.pop()
            if proc.clean:
                return proc, True
            log.warning("acp agent %s ended or wrote outside an attempt; replacing it",
                        proc.child.pgid)
            await self.stop(proc)
        child = await self._supervisor.spawn(cwd=new_cwd())
        return AgentProcess(child, self._limit), False

    def no_close_warning(self) -> None:
        if not self._warned:
            self._warned = True
            log.warning("the acp agent does not close sessions (sessionCapabilities.close): "
                        "each process serves one attempt, as without worker: true")

    def keep(self, proc: AgentProcess) -> None:
        proc.child.stderr.clear()
        self._idle.append(proc)

    async def stop(self, proc: AgentProcess) -> None:
        """SIGTERM to its group now (SIGKILL after the grace), then the connection closed."""
        self._supervisor.stop(proc.child)
        await proc.conn.close()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for proc in idle:
            await proc.conn.close()  # its stdin closed: an agent ends at the end of input
        await self._supervisor.aclose()
