"""A real ACP agent for the acp harness's tests, on agent-client-protocol's agent side.

Its brain is scripted: the first word of the prompt says what to do (``echo``,
``solve`` (right in ``code`` mode only), ``tool``, ``write``, ``escape``, ``link``,
``direct``, ``read``, ``config``, ``hang``, ``crash``, ``leak``, ``garbage``,
``notrpc``, ``badupdate``, ``flood``, ``cancelled``, ``refuse``; any other word is
refused with an error), the rest is its argument. It offers two modes (``ask``,
``code``), a ``model`` select option and a ``verbose`` boolean option, and closes
sessions. With ``ACP_PIDS`` set, ``hang`` writes the agent's pid and a grandchild's to
a file in that folder (``ACP_NOTE_ALL``: every agent writes its pid at start), so that
a test can check that nothing is left running.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    run_agent,
    start_tool_call,
    text_block,
    update_agent_message,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    ToolCallUpdate,
    Usage,
    UsageUpdate,
)
from acp.schema import Cost as AcpCost

PIDS = os.environ.get("ACP_PIDS")


def note_pids(*pids: int) -> None:
    if PIDS:
        Path(PIDS).mkdir(parents=True, exist_ok=True)
        (Path(PIDS) / str(os.getpid())).write_text(" ".join(map(str, pids)))


class Session:
    def __init__(self, cwd: str, meta: dict[str, Any]) -> None:
        self.cwd = cwd
        self.meta = meta
        self.mode = "ask"
        self.options: dict[str, Any] = {"model": "small", "verbose": False}
        self.cancelled = asyncio.Event()


class ScriptedAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions: dict[str, Session] = {}
        self.closed = 0
        self.count = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = AgentCapabilities(session_capabilities=SessionCapabilities(
            close=SessionCloseCapabilities()))
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=caps,
                                  agent_info=Implementation(name="scripted", version="1.0"))

    async def new_session(self, cwd: str, mcp_servers: Any = None,
                          **kwargs: Any) -> NewSessionResponse:
        self.count += 1
        sid = f"s{self.count}"
        self.sessions[sid] = Session(cwd, kwargs)
        modes = SessionModeState(current_mode_id="ask", available_modes=[
            SessionMode(id="ask", name="Ask"), SessionMode(id="code", name="Code")])
        options = [
            SessionConfigOptionSelect(id="model", name="Model", category="model", type="select",
                                      current_value="small", options=[
                                          SessionConfigSelectOption(value="small", name="S"),
                                          SessionConfigSelectOption(value="large", name="L")]),
            SessionConfigOptionBoolean(id="verbose", name="Verbose", type="boolean",
                                       current_value=False)]
        return NewSessionResponse(session_id=sid, modes=modes, config_options=options)

    async def set_session_mode(self, session_id: str, mode_id: str,
                               **kwargs: Any) -> SetSessionModeResponse:
        self.sessions[session_id].mode = mode_id
        return SetSessionModeResponse()

    async def set_config_option(self, config_id: str, session_id: str, value: Any,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        self.sessions[session_id].options[config_id] = value
        return SetSessionConfigOptionResponse(config_options=[])

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        self.sessions.pop(session_id, None)
        self.closed += 1

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if session_id in self.sessions:
            self.sessions[session_id].cancelled.set()

    async def say(self, sid: str, text: str) -> None:
        await self.conn.session_update(session_id=sid, update=update_agent_message(
            text_block(text)))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self.sessions[session_id]
        text = "".join(getattr(block, "text", "") for block in prompt)
        word, _, arg = text.partition(" ")
        behaviour = getattr(self, f"do_{word}", None)
        if behaviour is None:
            raise RequestError.invalid_params({"prompt": text})
        stop = await behaviour(session_id, session, arg)
        usage = Usage(input_tokens=len(text.split()), output_tokens=7, total_tokens=7 + len(
            text.split()))
        return PromptResponse(stop_reason=stop or "end_turn", usage=usage)

    # -- behaviours -------------------------------------------------------------------------

    async def do_echo(self, sid: str, session: Session, arg: str) -> None:
        half = len(arg) // 2
        await self.say(sid, arg[:half])
        await self.say(sid, arg[half:])
        await self.conn.session_update(session_id=sid, update=UsageUpdate(
            session_update="usage_update", used=10, size=1000,
            cost=AcpCost(amount=0.25, currency="USD")))

    async def do_solve(self, sid: str, session: Session, arg: str) -> None:
        # Only in code mode does it run its tool and get the answer right: a setting
        # that matters.
        if session.mode == "code":
            await self.conn.session_update(session_id=sid, update=start_tool_call(
                "r1", "run", kind="execute", status="completed", raw_input={"code": arg},
                raw_output=arg))
        await self.say(sid, arg if session.mode == "code" else "no idea")

    async def do_tool(self, sid: str, session: Session, arg: str) -> None:
        await self.conn.session_update(session_id=sid, update=start_tool_call(
            "c1", "lookup", kind="search", status="pending", raw_input={"q": arg}))
        await self.conn.session_update(session_id=sid, update=update_tool_call(
            "c1", status="completed", raw_output={"hits": 3}))
        await self.conn.session_update(session_id=sid, update=start_tool_call(
            "c2", "fetch", kind="fetch", status="in_progress", raw_input={"url": "x"}))
        await self.conn.session_update(session_id=sid, update=update_tool_call(
            "c2", status="failed", raw_output="404 not found"))
        await self.say(sid, "found 3")

    async def do_write(self, sid: str, session: Session, arg: str) -> None:
        name, _, content = arg.partition(" ")
        await self.conn.session_update(session_id=sid, update=start_tool_call(
            "w1", f"write {name}", kind="edit", status="pending",
            raw_input={"path": name}))
        options = [PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                   PermissionOption(option_id="no", name="Reject", kind="reject_once")]
        answer = await self.conn.request_permission(
            session_id=sid, tool_call=ToolCallUpdate(tool_call_id="w1", title=f"write {name}"),
            options=options)
        outcome = answer.outcome
        if getattr(outcome, "option_id", None) != "yes":
            await self.conn.session_update(session_id=sid, update=update_tool_call(
                "w1", status="failed", raw_output="permission denied"))
            await self.say(sid, "denied")
            return
        await self.conn.write_text_file(session_id=sid, path=os.path.join(session.cwd, name),
                                        content=content)
        await self.conn.session_update(session_id=sid, update=update_tool_call(
            "w1", status="completed", raw_output="ok"))
        await self.say(sid, f"wrote {name}")

    async def do_escape(self, sid: str, session: Session, arg: str) -> None:
        try:
            await self.conn.write_text_file(session_id=sid, path=arg, content="escaped")
        except RequestError as exc:
            await self.say(sid, f"refused: {exc}")
            return
        await self.say(sid, "escaped")

    async def do_link(self, sid: str, session: Session, arg: str) -> None:
        # A link of its own making, then a write through it, as the client is asked to.
        os.symlink(arg, os.path.join(session.cwd, "link"))
        await self.do_escape(sid, session, os.path.join(session.cwd, "link", "planted.txt"))

    async def do_direct(self, sid: str, session: Session, arg: str) -> None:
        Path(arg).write_text("written behind forge's back")
        await self.say(sid, "done")

    async def do_read(self, sid: str, session: Session, arg: str) -> None:
        answer = await self.conn.read_text_file(session_id=sid,
                                                path=os.path.join(session.cwd, arg))
        await self.say(sid, answer.content)

    async def do_config(self, sid: str, session: Session, arg: str) -> None:
        instructions = Path(session.cwd, "AGENTS.md")
        await self.say(sid, json.dumps({
            "mode": session.mode, "options": session.options, "meta": session.meta,
            "cwd": session.cwd, "process_cwd": os.getcwd(), "sessions": len(self.sessions),
            "closed": self.closed, "pid": os.getpid(),
            "instructions": instructions.read_text() if instructions.exists() else None}))

    async def do_hang(self, sid: str, session: Session, arg: str) -> str:
        code = "import signal, time\n"
        if arg == "stubborn":
            code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        grandchild = subprocess.Popen([sys.executable, "-c", code + "time.sleep(600)"])
        note_pids(os.getpid(), grandchild.pid)
        await self.say(sid, "thinking")
        print("hanging now", file=sys.stderr, flush=True)
        if arg == "cooperative":
            await session.cancelled.wait()
            return "cancelled"
        if arg == "stubborn":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:  # deaf to session/cancel
            await asyncio.sleep(3600)

    async def do_crash(self, sid: str, session: Session, arg: str) -> None:
        await self.say(sid, "about to crash")
        await asyncio.sleep(0.05)
        print("boom: the agent broke", file=sys.stderr, flush=True)
        os._exit(3)

    async def do_leak(self, sid: str, session: Session, arg: str) -> None:
        print(f"my key is {os.environ.get(arg)}", file=sys.stderr, flush=True)
        os._exit(1)

    async def do_garbage(self, sid: str, session: Session, arg: str) -> None:
        await self.say(sid, "partial")
        await asyncio.sleep(0.05)
        os.write(1, b"this is not json {\n")
        await asyncio.sleep(600)

    async def do_notrpc(self, sid: str, session: Session, arg: str) -> None:
        await self.say(sid, "partial")
        await asyncio.sleep(0.05)
        os.write(1, b'{"hello": "world"}\n')
        await asyncio.sleep(600)

    async def do_badupdate(self, sid: str, session: Session, arg: str) -> None:
        await self.say(sid, "partial")
        await asyncio.sleep(0.05)
        bad = {"jsonrpc": "2.0", "method": "session/update",
               "params": {"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk"}}}
        os.write(1, json.dumps(bad).encode() + b"\n")
        await asyncio.sleep(600)

    async def do_flood(self, sid: str, session: Session, arg: str) -> None:
        chunk = "x" * 65536
        for _ in range(int(arg)):
            await self.say(sid, chunk)

    async def do_cancelled(self, sid: str, session: Session, arg: str) -> str:
        return "cancelled"

    async def do_refuse(self, sid: str, session: Session, arg: str) -> str:
        return "refusal"


def main() -> None:
    if PIDS and os.environ.get("ACP_NOTE_ALL"):
        note_pids(os.getpid())
    asyncio.run(run_agent(ScriptedAgent(), use_unstable_protocol=True))


if __name__ == "__main__":
    main()
