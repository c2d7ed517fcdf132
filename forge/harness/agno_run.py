"""An Agno run as forge records it, and a forge record as an Agno run.

:func:`forge_output` turns the ``RunOutput`` of a completed Agno run into forge's
:class:`~forge.harness.RunOutput`:

- ``output``: the run's ``content`` (a pydantic model, under ``output_schema``, as
  its JSON data);
- ``tool_calls``: every tool *execution* of the run (``run.tools``), in order:
  ``name``, ``args``, ``ok`` (false when Agno marked ``tool_call_error``), ``error``
  (then the tool's message) or ``result``. Calls the model asked for that never ran
  (refused by ``tool_call_limit``, paused for a human) are not executions and are
  not recorded;
- ``usage`` and ``cost``: the run's ``metrics`` (input and output tokens; the cost
  when the model reports one, else none);
- ``metrics``: ``tool_errors``, ``total_tokens``;
- ``signals``: ``tool_call_limit_hit`` (the model asked for a call past the agent's
  ``tool_call_limit``, found as Agno's own rollouts find it), ``tool_error``,
  ``empty_answer``;
- ``trace``: ``{"agno_run": ...}``, the run as Agno serialises it (``to_dict``),
  without its content (that is ``output``) and, past :data:`MAX_TRACE_CHARS`,
  without its messages. An Agno scorer and ``forge export agno`` rebuild the run
  from it.

:func:`agno_run` is the way back, for an Agno scorer: the recorded run when there is
one, else a run built from forge's record (content, tool executions, token metrics
and cost), so an Agno scorer also judges attempts of a harness that is not Agno.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from forge.harness.base import RunOutput, ToolCall, Usage

__all__ = ["MAX_TRACE_CHARS", "TRACE_KEY", "agno_run", "agno_run_dict", "forge_output",
           "tool_call_limit_hit"]

#: The key of the trace that holds the Agno run.
TRACE_KEY = "agno_run"
#: Past this size as JSON, the recorded run keeps no messages (the attempt's output and
#: tool calls are kept whole): a long conversation must not push an attempt over
#: forge's bound on what one attempt may return.
MAX_TRACE_CHARS = 1_000_000


def forge_output(run: Any) -> RunOutput:
    """forge's record of the completed Agno run ``run`` (see the module's docstring)."""
    content = run.content
    if isinstance(content, BaseModel):
        content = content.model_dump(mode="json")
    calls = [_tool_call(t) for t in run.tools or () if not t.is_paused]
    metrics = run.metrics
    usage = Usage(input_tokens=_tokens(metrics, "input_tokens"),
                  output_tokens=_tokens(metrics, "output_tokens"))
    errors = sum(not call.ok for call in calls)
    signals = []
    if tool_call_limit_hit(run):
        signals.append("tool_call_limit_hit")
    if errors:
        signals.append("tool_error")
    if content is None or content == "":
        signals.append("empty_answer")
    cost = getattr(metrics, "cost", None)
    return RunOutput(
        output=content, tool_calls=calls, usage=usage,
        cost=float(cost) if isinstance(cost, int | float) else None,
        metrics={"tool_errors": float(errors),
                 "total_tokens": float(_tokens(metrics, "total_tokens"))},
        signals=signals, trace={TRACE_KEY: _record(run)})


def _tool_call(execution: Any) -> ToolCall:
    result = execution.result
    args = execution.tool_args if isinstance(execution.tool_args, dict) else {}
    name = str(execution.tool_name or "")
    if execution.tool_call_error:
        return ToolCall(name=name, args=args, ok=False, error=str(result or "tool call failed"))
    return ToolCall(name=name, args=args, result=result)


def _tokens(metrics: Any, name: str) -> int:
    value = getattr(metrics, name, 0) if metrics is not None else 0
    return value if isinstance(value, int) and value > 0 else 0


def tool_call_limit_hit(run: Any) -> bool:
    """Whether a call the model asked for was refused by ``tool_call_limit``: a tool
    message marked as an error whose call never became an execution (Agno's own test in
    its rollouts: an execution that failed has both, with the same id)."""
    executed = {t.tool_call_id for t in run.tools or () if t.tool_call_id}
    return any(getattr(m, "tool_call_error", None) and getattr(m, "tool_call_id", None)
               and m.tool_call_id not in executed for m in run.messages or ())


def _record(run: Any) -> dict[str, Any]:
    """The run as Agno serialises it, JSON-safe, without its content; without its
    messages past MAX_TRACE_CHARS."""
    data: dict[str, Any] = to_jsonable_python(run.to_dict(), fallback=repr)
    data.pop("content", None)
    if len(json.dumps(data, ensure_ascii=False)) > MAX_TRACE_CHARS:
        for key in ("messages", "input", "additional_input", "reasoning_messages"):
            data.pop(key, None)
        data["forge_messages_dropped"] = True
    return data


def agno_run_dict(output: RunOutput) -> dict[str, Any]:
    """The Agno run of ``output`` as Agno serialises a run (what ``RunOutput.from_dict``
    and ``EnvironmentRunResult.load`` read): the recorded one with its content put
    back, else one built from forge's record."""
    trace = output.trace
    record = trace.get(TRACE_KEY) if isinstance(trace, dict) else None
    if isinstance(record, dict):
        data = copy.deepcopy(record)
        data["content"] = output.output
        return data
    usage = output.usage
    metrics: dict[str, Any] = {
        "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens}
    if output.cost is not None:
        metrics["cost"] = output.cost
    return {"content": output.output, "status": "COMPLETED", "metrics": metrics,
            "tools": [_execution(i, call) for i, call in enumerate(output.tool_calls)]}


def _execution(index: int, call: ToolCall) -> dict[str, Any]:
    failed = not call.ok or call.error is not None
    result = call.error if failed else call.result
    if result is not None and not isinstance(result, str):
        result = json.dumps(to_jsonable_python(result, fallback=repr), ensure_ascii=False)
    return {"tool_call_id": f"forge_call_{index}", "tool_name": call.name,
            "tool_args": dict(call.args), "tool_call_error": failed, "result": result}


def agno_run(output: RunOutput) -> Any:
    """``output`` as an ``agno.run.agent.RunOutput`` (see :func:`agno_run_dict`)."""
    from agno.run.agent import RunOutput as AgnoRunOutput

    return AgnoRunOutput.from_dict(agno_run_dict(output))
