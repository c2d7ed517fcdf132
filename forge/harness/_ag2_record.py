"""What one AG2 agent run did, read off its event stream as it happens.

The ``ag2`` harness subscribes a :class:`Recorder` to the stream of the attempt's
``agent.ask``. AG2 publishes every step there: each model call's ``ModelResponse``,
each tool execution as a ``ToolCallEvent`` (sent when the executor runs it, not when
the model asks) answered by a ``ToolResultEvent``, a ``ToolErrorEvent`` (the tool
raised, or middleware refused it) or a ``ToolNotFoundEvent``, the ``UsageEvent`` of
every token spent, and a ``HaltEvent`` when an assembly policy stops the run. The
recorder keeps them as forge's records: executed tool calls (a call with no result, cut
off by a timeout, is not one), AG2's own token total (``UsageReport``, the figure AG2
reports as the bill), and the model calls.

The calls are kept in the order the model asked for them, turn by turn, not in the
order their ``ToolCallEvent`` came: the calls of one turn run concurrently, so which
starts first varies from run to run, and a record of the same attempt must not.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic_core import to_jsonable_python

from forge.harness.ag2_events import Turn
from forge.harness.ag2_sdk import module
from forge.harness.base import ToolCall, Usage

__all__ = ["Recorder"]

#: Calls no model response named go after the named ones of their turn, as they came.
_UNNAMED = 1 << 30


class Recorder:
    """Collects one attempt's tool calls, model calls and usage from its stream."""

    def __init__(self) -> None:
        self._events = module("ag2.events")
        self._calls: list[ToolCall | None] = []
        #: Per call in ``_calls``: (turn, place in the model's request) when the model's
        #: response named it, else after that turn's named calls, as they came.
        self._ranks: list[tuple[int, int]] = []
        #: A requested call's id -> (turn, place in that turn's request).
        self._asked: dict[str, tuple[int, int]] = {}
        self._pending: dict[str, tuple[int, str, dict[str, Any]]] = {}
        self._raised: dict[int, str] = {}  # id of an exception a tool raised -> the tool
        self._usage: list[Any] = []
        self.turns: list[Turn] = []
        self.llm_calls = 0
        self.not_found = 0
        self.halted: str | None = None

    async def on_event(self, event: Any) -> None:
        """The stream subscriber: one event, sorted into the records."""
        ev = self._events
        if isinstance(event, ev.ToolCallEvent):
            self._pending[event.id] = (len(self._calls), event.name, _arguments(event))
            self._ranks.append(self._asked.get(
                event.id, (len(self.turns) - 1, _UNNAMED + len(self._calls))))
            self._calls.append(None)
        elif isinstance(event, ev.ToolResultEvent):
            self._resolve(event)
        elif isinstance(event, ev.ModelResponse):
            self._turn(event)
        elif isinstance(event, ev.UsageEvent):
            self._usage.append(event)
        elif isinstance(event, ev.HaltEvent):
            self.halted = str(event.reason)

    def _resolve(self, event: Any) -> None:
        pending = self._pending.pop(event.parent_id, None)
        if pending is None:
            return  # the result of a call this stream never saw made
        index, name, args = pending
        if isinstance(event, self._events.ToolErrorEvent):
            error = event.error
            self._raised[id(error)] = name
            if isinstance(event, self._events.ToolNotFoundEvent):
                self.not_found += 1
            self._calls[index] = ToolCall(name=name, args=args, ok=False,
                                          error=f"{type(error).__name__}: {error}")
        else:
            self._calls[index] = ToolCall(name=name, args=args,
                                          result=_result(self._events, event.result))

    def _turn(self, event: Any) -> None:
        forced = bool(getattr(event, "response_force", False))
        if not forced:
            self.llm_calls += 1
        calls = event.tool_calls.calls if event.tool_calls else []
        for place, call in enumerate(calls):
            self._asked[call.id] = (len(self.turns), place)
        content = event.content
        self.turns.append(Turn(content=content if isinstance(content, str) else None,
                               tool_calls=len(calls), model=event.model,
                               finish_reason=event.finish_reason))

    @property
    def running(self) -> int:
        """Tool calls under way: started, no result yet."""
        return len(self._pending)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The executed calls, in the order the model asked for them."""
        ranked = sorted(zip(self._ranks, self._calls, strict=True), key=lambda pair: pair[0])
        return [call for _, call in ranked if call is not None]

    def usage(self) -> tuple[Usage, dict[str, Any]]:
        """The tokens spent (AG2's ``UsageReport`` total) and their split by kind."""
        report = module("ag2.usage").UsageReport.from_events(self._usage)
        total = report.total
        by_kind = {kind: {"input_tokens": _tokens(u.prompt_tokens),
                          "output_tokens": _tokens(u.completion_tokens)}
                   for kind, u in report.by_kind.items()}
        return Usage(input_tokens=_tokens(total.prompt_tokens),
                     output_tokens=_tokens(total.completion_tokens)), by_kind

    def tool_that_raised(self, exc: BaseException) -> str | None:
        """The tool whose exception this is, when a tool raised it and the run re-raised it
        (a model client that re-raises tool errors, as ``TestConfig`` does by default)."""
        return self._raised.get(id(exc))


def _arguments(event: Any) -> dict[str, Any]:
    """A call's arguments as a mapping; text the model wrote that is not a JSON object is
    kept under ``_raw`` (the tool refused it, and the record says with what)."""
    raw = event.arguments or "{}"
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    if not isinstance(parsed, dict):
        return {"_raw": raw}
    jsonable: dict[str, Any] = to_jsonable_python(parsed, fallback=repr)
    return jsonable


def _result(events: Any, result: Any) -> Any:
    """A tool's ``ToolResult`` as a value: the text or data of its one part, a list for
    several; a part that is neither (an image, a file) by its kind."""
    parts = [_part(events, part) for part in getattr(result, "parts", [])]
    if len(parts) == 1:
        return parts[0]
    return parts


def _part(events: Any, part: Any) -> Any:
    if isinstance(part, events.TextInput):
        return part.content
    if isinstance(part, events.DataInput):
        return to_jsonable_python(part.data, fallback=repr, bytes_mode="base64")
    return {"type": type(part).__name__}


def _tokens(value: float | None) -> int:
    return int(value) if value and math.isfinite(value) and value > 0 else 0
