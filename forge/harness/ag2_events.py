"""An attempt in ``ag2.eval``'s terms: the ``Task``, ``Trace`` and ``outputs`` AG2's scorers
read, rebuilt from what forge recorded.

AG2's own runner rebuilds each task's trace from OpenTelemetry spans: per model call a
``ModelResponse``, per tool execution a ``ToolCallEvent`` with its ``ToolResultEvent``
(or ``ToolErrorEvent``), and ``UsageEvent`` records for the tokens. :func:`trace_of`
rebuilds the same events from a forge attempt, so an AG2 scorer grades an attempt of
the ``ag2`` harness as it grades a run of ``ag2.eval.run_agent``:

- the tokens: one ``UsageEvent`` with the attempt's usage (so ``trace.tokens`` equals
  forge's ``usage``);
- the model calls: the harness records each in ``RunOutput.trace["ag2_turns"]`` (its
  text, model, finish reason and how many tool calls it asked for); each becomes a
  ``ModelResponse``, followed by the tool executions it led to;
- the tool executions: ``RunOutput.tool_calls`` in order, ``ok`` ones with their
  result, failed ones as ``ToolErrorEvent`` carrying the error text.

An attempt of any other harness (no ``ag2_turns``) gets its tool executions, then one
``ModelResponse`` with its output: an AG2 scorer can judge a bench of any harness.
``outputs`` mirror AG2's projection: ``body`` the final text (a structured output as
JSON), ``content`` that text parsed as JSON when it is JSON, else the text.
"""

from __future__ import annotations

import json
import math
from itertools import islice
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import to_jsonable_python

from forge.core.task import Task
from forge.harness.ag2_sdk import inputs_of, module, reference_of
from forge.harness.base import RunOutput, ToolCall

__all__ = ["TURNS_KEY", "Turn", "events_of", "outputs_of", "task_of", "text_of", "trace_of"]

#: The key of ``RunOutput.trace`` under which the ``ag2`` harness records model calls.
TURNS_KEY = "ag2_turns"


class Turn(BaseModel):
    """One model call of an attempt, as the ``ag2`` harness records it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    content: str | None = None
    tool_calls: int = Field(default=0, ge=0)
    model: str | None = None
    finish_reason: str | None = None


def text_of(value: Any) -> str | None:
    """The final answer as text: a string as it is, anything else (a structured answer)
    as JSON, None for none."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False)


def outputs_of(output: RunOutput) -> dict[str, Any]:
    """AG2's ``outputs`` for an attempt: ``{}`` without an answer, else ``body`` and
    ``content`` (see the module docstring)."""
    text = text_of(output.output)
    if text is None:
        return {}
    try:
        content = json.loads(text)
    except ValueError:
        content = text
    return {"body": text, "content": content}


def _turns(output: RunOutput) -> list[Turn] | None:
    trace = output.trace
    if not isinstance(trace, dict) or not isinstance(trace.get(TURNS_KEY), list):
        return None
    try:
        return [Turn.model_validate(turn) for turn in trace[TURNS_KEY]]
    except ValidationError:  # another harness's trace that happens to use the key
        return None


def _tool_events(events: Any, call: ToolCall) -> list[Any]:
    request = events.ToolCallEvent(
        call.name, arguments=json.dumps(to_jsonable_python(call.args, fallback=repr)))
    if call.ok:
        result = call.result if call.result is not None else ""
        return [request, events.ToolResultEvent.from_call(request, result)]
    return [request, events.ToolErrorEvent.from_call(
        request, RuntimeError(call.error or "the tool failed"))]


def events_of(output: RunOutput) -> list[Any]:
    """The AG2 events of an attempt, in order (see the module docstring)."""
    events = module("ag2.events")
    rebuilt: list[Any] = []
    usage = output.usage
    if usage.input_tokens or usage.output_tokens:
        rebuilt.append(events.UsageEvent(events.Usage(
            prompt_tokens=usage.input_tokens, completion_tokens=usage.output_tokens)))
    calls = iter(output.tool_calls)
    turns = _turns(output)
    if turns is None:
        rebuilt += [e for call in calls for e in _tool_events(events, call)]
        text = text_of(output.output)
        if text is not None:
            rebuilt.append(events.ModelResponse(events.ModelMessage(text)))
        return rebuilt
    for turn in turns:
        message = events.ModelMessage(turn.content) if turn.content is not None else None
        rebuilt.append(events.ModelResponse(message, model=turn.model,
                                            finish_reason=turn.finish_reason))
        for call in islice(calls, turn.tool_calls):
            rebuilt += _tool_events(events, call)
    # Calls no recorded turn asked for (a tool run by a provider, a forced result).
    rebuilt += [e for call in calls for e in _tool_events(events, call)]
    return rebuilt


def trace_of(output: RunOutput | None, *, exception: BaseException | None = None,
             duration_ms: int | None = None) -> Any:
    """An ``ag2.eval.Trace`` of an attempt; ``output`` None for one that never answered."""
    if duration_ms is None:
        duration_ms = _recorded_duration(output)
    return module("ag2.eval").Trace(events=events_of(output) if output is not None else (),
                                    exception=exception, duration_ms=duration_ms)


def _recorded_duration(output: RunOutput | None) -> int:
    trace = output.trace if output is not None else None
    value = trace.get("duration_ms") if isinstance(trace, dict) else None
    if isinstance(value, int | float) and math.isfinite(value) and 0 <= value < 2**53:
        return int(value)
    return 0


def task_of(task: Task, *, task_id: str | None = None) -> Any:
    """The ``ag2.eval.Task`` of a forge task (``task_id`` instead of its id, for a repeat)."""
    return module("ag2.eval").Task(
        inputs=inputs_of(task), task_id=task_id or task.id, reference_outputs=reference_of(task),
        tags=tuple(task.tags), metadata=dict(task.metadata))
