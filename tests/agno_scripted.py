"""A scripted Agno model: the boundary double of the agno tests.

``ScriptedModel`` is a real ``agno.models.base.Model``: a real ``agno.agent.Agent``
calls it, runs the real Python tools it asks for and counts the usage it reports.
Its replies follow a script, one step per model turn of an attempt (``by_input``:
another script for the tasks whose input contains its key):

    ScriptedModel(script=[call("add", a=2, b=3), answer("5")])

Steps: :func:`call` (one or more tool calls), :func:`answer`, :func:`fail` (the model
call raises), :func:`hang` (awaits ``seconds``; :data:`HUNG` records a cancellation),
:func:`block` (sleeps without yielding, blocking the attempt's event loop). Past the
script's end the model answers ``"done"``. Each turn reports ``usage`` tokens and
``cost`` dollars.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from agno.metrics import MessageMetrics
from agno.models.base import Model
from agno.models.message import Message
from agno.models.response import ModelResponse

__all__ = ["HUNG", "ScriptedModel", "answer", "block", "call", "calls", "fail", "hang", "raw_call",
           "write_agno_bench"]

#: Set when a hung model call was cancelled (its run was cancelled, not abandoned).
HUNG = {"cancelled": threading.Event(), "started": threading.Event()}

Step = dict[str, Any]


def call(name: str, /, **args: Any) -> Step:
    return {"calls": [(name, args)]}


def calls(*pairs: tuple[str, dict[str, Any]]) -> Step:
    return {"calls": list(pairs)}


def answer(text: str) -> Step:
    return {"answer": text}


def fail(message: str) -> Step:
    return {"fail": message}


def hang(seconds: float) -> Step:
    return {"hang": seconds}


def block(seconds: float) -> Step:
    return {"block": seconds}


def raw_call(name: str, arguments: str) -> Step:
    """A tool call whose arguments are the text given, JSON or not."""
    return {"raw": (name, arguments)}


@dataclass
class ScriptedModel(Model):
    id: str = "scripted-test"
    name: str = "Scripted"
    provider: str = "forge-tests"
    script: list[Step] = field(default_factory=list)
    #: Scripts for the tasks whose input (the user message) contains the key.
    by_input: dict[str, list[Step]] = field(default_factory=dict)
    input_tokens: int = 10
    output_tokens: int = 5
    cost: float | None = 0.001

    def _step(self, messages: list[Message]) -> Step:
        turn = sum(1 for m in messages if m.role == "assistant")
        question = next((str(m.content) for m in messages if m.role == "user"), "")
        script = next((s for key, s in self.by_input.items() if key in question), self.script)
        return script[turn] if turn < len(script) else answer("done")

    def _reply(self, step: Step) -> ModelResponse:
        if "fail" in step:
            raise RuntimeError(step["fail"])
        response = ModelResponse(role="assistant")
        if "calls" in step:
            response.tool_calls = [
                {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}
                for name, args in step["calls"]]
        elif "raw" in step:
            name, arguments = step["raw"]
            response.tool_calls = [{"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                                    "function": {"name": name, "arguments": arguments}}]
        else:
            response.content = step.get("answer", "done")
        usage = MessageMetrics(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                               total_tokens=self.input_tokens + self.output_tokens)
        usage.cost = self.cost
        response.response_usage = usage
        return response

    async def _areply(self, messages: list[Message]) -> ModelResponse:
        step = self._step(messages)
        if "hang" in step:
            HUNG["started"].set()
            try:
                await asyncio.sleep(step["hang"])
            except asyncio.CancelledError:
                HUNG["cancelled"].set()
                raise
            return self._reply(answer("late"))
        if "block" in step:
            time.sleep(step["block"])
            return self._reply(answer("late"))
        return self._reply(step)

    def invoke(self, messages: list[Message], assistant_message: Message,
               **kwargs: Any) -> ModelResponse:
        return self._reply(self._step(messages))

    async def ainvoke(self, messages: list[Message], assistant_message: Message,
                      **kwargs: Any) -> ModelResponse:
        return await self._areply(messages)

    def invoke_stream(self, messages: list[Message], assistant_message: Message,
                      **kwargs: Any) -> Iterator[ModelResponse]:
        yield self._reply(self._step(messages))

    async def ainvoke_stream(self, messages: list[Message], assistant_message: Message,
                             **kwargs: Any) -> AsyncIterator[ModelResponse]:
        yield await self._areply(messages)

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]


def write_agno_bench(root: Any, agent_source: str, **options: Any) -> Any:
    """A complete bench (conftest's ``write_bench``) whose harness is ``agno`` with the
    factory ``harness:make_agent`` of ``agent_source`` (its harness.py)."""
    from conftest import write_bench

    bench = write_bench(root, agent_source, **options)
    text = bench.read_text(encoding="utf-8")
    bench.write_text(text.replace('harness: {python: "harness:run"}',
                                  'harness: {agno: "harness:make_agent"}'), encoding="utf-8")
    return bench
