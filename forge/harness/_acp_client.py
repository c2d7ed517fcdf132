"""forge's side of the Agent Client Protocol for one agent process.

:class:`ForgeClient` is the ``acp.Client`` the SDK's ``ClientSideConnection`` calls: it
routes what the agent sends to the attempt in flight (its :class:`Turn`), answers
permission requests by the attempt's policy and file requests inside the attempt's
working directory only, and counts whatever arrives outside an attempt's session (the
process is then not reused).

File requests are confined by path: the path (absolute, or relative to the working
directory) is resolved with its links, and one that lands outside the working directory
is refused with an error the agent sees and recorded on the attempt (``fs_refused``). A
write creates the folders it needs and never follows a link at its last step.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import (
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
    WriteTextFileResponse,
)

from forge.harness._acp_turn import MAX_RECORDS, Turn

__all__ = ["ForgeClient"]

#: A file larger than this is not read for the agent (it could not be sent back anyway).
_MAX_READ_BYTES = 16 * 2**20


class _Refused(Exception):
    """A file request forge does not carry out; the message says why."""


class ForgeClient:
    """The client of one agent process; ``turn`` is the attempt in flight, if any."""

    def __init__(self) -> None:
        self.turn: Turn | None = None
        #: Messages that belonged to no attempt's session: the process is not reused.
        self.stray = 0
        self._early: list[tuple[str, Any]] = []

    def begin(self, turn: Turn) -> None:
        self.turn = turn
        self._early.clear()

    def end(self) -> None:
        self.turn = None
        self.stray += len(self._early)
        self._early.clear()

    def opened(self, session_id: str) -> None:
        """The attempt's session has its id: updates that came before it are its own now."""
        turn = self.turn
        assert turn is not None
        turn.session_id = session_id
        early, self._early = self._early, []
        for sid, update in early:
            if sid == session_id:
                turn.add(update)
            else:
                self._stray(turn)

    def _stray(self, turn: Turn | None) -> None:
        self.stray += 1
        if turn is not None:
            turn.stray += 1

    def _turn_of(self, session_id: str, method: str) -> Turn:
        turn = self.turn
        if turn is None or turn.session_id is None or session_id != turn.session_id:
            self._stray(turn)
            raise RequestError(-32602, f"{method}: unknown session {session_id!r}")
        return turn

    # -- the acp.Client methods ------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        turn = self.turn
        if turn is not None and turn.session_id is None and len(self._early) < MAX_RECORDS:
            # An agent may send updates of a new session before its answer to session/new
            # has been read here.
            self._early.append((session_id, update))
        elif turn is not None and session_id == turn.session_id:
            turn.add(update)
        else:
            self._stray(turn)

    async def request_permission(self, session_id: str, tool_call: ToolCallUpdate,
                                 options: list[PermissionOption],
                                 **kwargs: Any) -> RequestPermissionResponse:
        return self._turn_of(session_id, "session/request_permission").decide(tool_call,
                                                                             options)

    async def write_text_file(self, session_id: str, path: str, content: str,
                              **kwargs: Any) -> WriteTextFileResponse:
        turn = self._turn_of(session_id, "fs/write_text_file")
        data = content.encode("utf-8", "surrogatepass")
        try:
            target = _confined(turn.root, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            _inside(turn.root, str(target.parent))  # a link made meanwhile
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        except (_Refused, OSError) as exc:
            raise _refusal(turn, "write", path, exc) from None
        turn.note_file("write", _shown(turn.root, target), ok=True, size=len(data))
        return WriteTextFileResponse()

    async def read_text_file(self, session_id: str, path: str, line: int | None = None,
                             limit: int | None = None, **kwargs: Any) -> ReadTextFileResponse:
        turn = self._turn_of(session_id, "fs/read_text_file")
        try:
            target = _confined(turn.root, path)
            if target.stat().st_size > _MAX_READ_BYTES:
                raise _Refused(f"the file is over {_MAX_READ_BYTES} bytes")
            text = target.read_text(encoding="utf-8", errors="replace")
        except (_Refused, OSError) as exc:
            raise _refusal(turn, "read", path, exc) from None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max(0, (line or 1) - 1)
            text = "".join(lines[start:None if limit is None else start + max(0, limit)])
        turn.note_file("read", _shown(turn.root, target), ok=True, size=len(text))
        return ReadTextFileResponse(content=text)

    async def create_terminal(self, session_id: str, command: str, **kwargs: Any) -> Any:
        turn = self._turn_of(session_id, "terminal/create")
        turn.note_file("terminal", command, ok=False, error="forge offers no terminal")
        raise RequestError(-32601, "terminal/create: forge offers no terminal "
                                   "(clientCapabilities.terminal is false)")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _refusal(turn: Turn, op: str, path: str, exc: Exception) -> RequestError:
    """The error the agent gets for a file request forge did not carry out, recorded."""
    reason = str(exc) if isinstance(exc, _Refused) else (
        exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__)
    turn.note_file(op, path, ok=False, error=reason)
    return RequestError(-32602, f"fs/{op}_text_file refused: {reason}", {"path": path})


def _confined(root: Path, path: str) -> Path:
    """File ``path`` resolved (links followed), when it lies inside ``root``."""
    resolved = _inside(root, path)
    if resolved == root:
        raise _Refused(f"{path} is the working directory itself, not a file in it")
    return resolved


def _inside(root: Path, path: str) -> Path:
    """``path`` resolved (links followed), when it is ``root`` or lies inside it."""
    if not path or "\0" in path:
        raise _Refused("expected a file path")
    resolved = Path(os.path.realpath(root / path))
    if not resolved.is_relative_to(root):
        raise _Refused(f"{path} is outside the session's working directory")
    return resolved


def _shown(root: Path, target: Path) -> str:
    """A path as the trace keeps it: relative to the working directory, portable."""
    return target.relative_to(root).as_posix()
