"""The acp-coder agent: a small coding agent that speaks the Agent Client Protocol over
stdio (agent-client-protocol's agent side), its language model scripted.

Asked to compute an expression, it works as its session is configured:

- mode ``ask`` (the session mode forge sets): it answers from memory, exact only when
  every operand is at most 12, an estimate otherwise;
- mode ``code``: it asks permission to write ``solve.py`` (``write_file``), writes it
  through the client (``fs/write_text_file``), reads it back and runs it
  (``run_python``) and answers the printed number. Refused the write, it answers from
  memory.
- Its scripted model slips now and then, writing a wrong operand into the script: how
  often grows with ``temperature`` (the config, as forge sends it in ``_meta`` of
  ``session/new``).
- When the instructions file forge renders into its working directory (``AGENTS.md``)
  says ``Review every script before you run it: true``, it reads the script back
  (``read_file``) and fixes a slip before running it: one tool call more, a few more
  tokens.

It reports its tokens with each answer and the session's cost in a ``usage_update``,
honours ``session/cancel``, and closes sessions, so that forge can reuse it (``worker``).
Arithmetic is evaluated from the script's syntax tree, numbers and + - * only: nothing
the agent writes is executed.
"""

from __future__ import annotations

import ast
import asyncio
import operator
import os
import random
import re
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
    Cost,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
    ToolCallUpdate,
    Usage,
    UsageUpdate,
)

#: Dollars per million tokens of the scripted model, in and out.
PRICES = (2.0, 8.0)
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


class Session:
    def __init__(self, cwd: str, meta: dict[str, Any]) -> None:
        self.cwd = cwd
        self.config = meta.get("config", {})
        self.seed = int(meta.get("seed", 0))
        self.mode = "ask"
        self.cancelled = asyncio.Event()
        self.tokens = [0, 0]  # in, out
        self.calls = 0


class Coder:
    def __init__(self) -> None:
        self.client: Any = None
        self.sessions: dict[str, Session] = {}
        self.made = 0

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = AgentCapabilities(session_capabilities=SessionCapabilities(
            close=SessionCloseCapabilities()))
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=caps,
                                  agent_info=Implementation(name="acp-coder", version="1.0"))

    async def new_session(self, cwd: str, mcp_servers: Any = None,
                          **kwargs: Any) -> NewSessionResponse:
        self.made += 1
        sid = f"coder-{self.made}"
        self.sessions[sid] = Session(cwd, kwargs.get("forge") or {})
        return NewSessionResponse(session_id=sid, modes=SessionModeState(
            current_mode_id="ask", available_modes=[
                SessionMode(id="ask", name="Ask", description="answer from memory"),
                SessionMode(id="code", name="Code", description="write and run a script")]))

    async def set_session_mode(self, session_id: str, mode_id: str,
                               **kwargs: Any) -> SetSessionModeResponse:
        self.sessions[session_id].mode = mode_id
        return SetSessionModeResponse()

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        self.sessions.pop(session_id, None)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if session_id in self.sessions:
            self.sessions[session_id].cancelled.set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self.sessions[session_id]
        text = "".join(getattr(block, "text", "") for block in prompt)
        found = re.search(r"Compute (.+?)\.", text)
        if found is None:
            raise RequestError.invalid_params({"prompt": "expected 'Compute <expression>.'"})
        expression = found.group(1)
        instructions = await self.read(session_id, session, "AGENTS.md", record=False)
        review = re.search(r"Review every script before you run it: (\w+)", instructions or "")
        session.tokens[0] += len(text.split()) + len((instructions or "").split())
        if session.mode == "code":
            answer = await self.code(session_id, session, expression,
                                     review is not None and review.group(1) == "true")
        else:
            answer = from_memory(expression)
        if session.cancelled.is_set():
            return PromptResponse(stop_reason="cancelled")
        session.tokens[1] += 2
        await self.client.session_update(session_id=session_id, update=update_agent_message(
            text_block(answer)))
        tokens_in, tokens_out = session.tokens
        cost = (tokens_in * PRICES[0] + tokens_out * PRICES[1]) / 1e6
        await self.client.session_update(session_id=session_id, update=UsageUpdate(
            session_update="usage_update", used=tokens_in + tokens_out, size=8192,
            cost=Cost(amount=cost, currency="USD")))
        return PromptResponse(stop_reason="end_turn", usage=Usage(
            input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out))

    # -- working in code mode ------------------------------------------------------------------

    async def code(self, sid: str, session: Session, expression: str, review: bool) -> str:
        rng = random.Random(session.seed)
        slip = rng.random() < 0.5 * float(session.config.get("temperature", 0.6))
        script = f"print({slipped(expression, rng) if slip else expression})\n"
        session.tokens[1] += len(script.split()) * 3
        if not await self.write(sid, session, "solve.py", script):
            return from_memory(expression)
        if review:
            seen = await self.read(sid, session, "solve.py")
            if seen is not None and expression not in seen:
                session.tokens[1] += len(script.split()) * 3
                await self.write(sid, session, "solve.py", f"print({expression})\n")
        return await self.run(sid, session, "solve.py")

    async def write(self, sid: str, session: Session, name: str, content: str) -> bool:
        call = self.call_id(session)
        await self.client.session_update(session_id=sid, update=start_tool_call(
            call, "write_file", kind="edit", status="pending",
            raw_input={"path": name, "content": content}))
        options = [PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                   PermissionOption(option_id="reject", name="Reject", kind="reject_once")]
        answer = await self.client.request_permission(
            session_id=sid, tool_call=ToolCallUpdate(tool_call_id=call, title="write_file"),
            options=options)
        if getattr(answer.outcome, "option_id", None) != "allow":
            await self.client.session_update(session_id=sid, update=update_tool_call(
                call, status="failed", raw_output="permission refused"))
            return False
        await self.client.write_text_file(session_id=sid, path=os.path.join(session.cwd, name),
                                          content=content)
        await self.client.session_update(session_id=sid, update=update_tool_call(
            call, status="completed", raw_output=f"wrote {len(content)} characters"))
        return True

    async def read(self, sid: str, session: Session, name: str, *,
                   record: bool = True) -> str | None:
        call = self.call_id(session)
        if record:
            await self.client.session_update(session_id=sid, update=start_tool_call(
                call, "read_file", kind="read", status="in_progress", raw_input={"path": name}))
        try:
            answer = await self.client.read_text_file(session_id=sid,
                                                      path=os.path.join(session.cwd, name))
        except RequestError as exc:
            if record:
                await self.client.session_update(session_id=sid, update=update_tool_call(
                    call, status="failed", raw_output=str(exc)))
            return None
        session.tokens[0] += len(answer.content.split())
        if record:
            await self.client.session_update(session_id=sid, update=update_tool_call(
                call, status="completed", raw_output=answer.content))
        return str(answer.content)

    async def run(self, sid: str, session: Session, name: str) -> str:
        call = self.call_id(session)
        await self.client.session_update(session_id=sid, update=start_tool_call(
            call, "run_python", kind="execute", status="in_progress",
            raw_input={"path": name}))
        source = await self.client.read_text_file(session_id=sid,
                                                  path=os.path.join(session.cwd, name))
        printed = str(evaluate(source.content))
        session.tokens[0] += 2
        await self.client.session_update(session_id=sid, update=update_tool_call(
            call, status="completed", raw_output=printed))
        return printed

    @staticmethod
    def call_id(session: Session) -> str:
        session.calls += 1
        return f"call-{session.calls}"


def from_memory(expression: str) -> str:
    """Exact for small operands; for large ones, two significant figures each."""
    numbers = [int(n) for n in re.findall(r"\d+", expression)]
    if all(n <= 12 for n in numbers):
        return str(evaluate(f"print({expression})"))
    rounded = re.sub(r"\d+", lambda m: str(_two_figures(int(m.group()))), expression)
    return str(evaluate(f"print({rounded})"))


def _two_figures(n: int) -> int:
    scale = 10 ** max(0, len(str(n)) - 2)
    return round(n / scale) * scale


def slipped(expression: str, rng: random.Random) -> str:
    """The expression with one operand off by one: the scripted model's typo."""
    numbers = list(re.finditer(r"\d+", expression))
    pick = numbers[rng.randrange(len(numbers))]
    return f"{expression[:pick.start()]}{int(pick.group()) + 1}{expression[pick.end():]}"


def evaluate(source: str) -> int:
    """The number ``print(EXPR)`` would print, for integers and + - * only."""
    call = ast.parse(source.strip(), mode="eval").body
    if not (isinstance(call, ast.Call) and len(call.args) == 1):
        raise ValueError("expected print(<expression>)")
    return _value(call.args[0])


def _value(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return int(_OPS[type(node.op)](_value(node.left), _value(node.right)))
    raise ValueError("only integers and + - * are allowed")


if __name__ == "__main__":
    asyncio.run(run_agent(Coder(), use_unstable_protocol=True))
