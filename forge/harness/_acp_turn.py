"""One attempt's ACP session as forge records it: the streamed message text, the tool
calls and their updates, the permission requests and how the policy answered them, the
file requests, usage and cost; and the :class:`RunOutput` they make.

Imports the ``acp`` SDK: only the ``acp`` harness imports this module, once the SDK
was found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    ContentToolCallContent,
    CurrentModeUpdate,
    DeniedOutcome,
    FileEditToolCallContent,
    PermissionOption,
    PromptResponse,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
)

from forge.harness._acp_common import POLICIES
from forge.harness.base import RunOutput, ToolCall, Usage

__all__ = ["MAX_RECORDS", "Turn"]

#: Entries kept of each list in the trace (permission requests, file requests); the
#: counts in the metrics go on past it.
MAX_RECORDS = 1000

#: Stop reasons that say something about the attempt -> the failure signal forge uses
#: for it elsewhere (the openai harness's names where they mean the same).
_STOP_SIGNALS = {"max_tokens": "max_tokens_hit", "max_turn_requests": "iteration_cap_hit",
                 "refusal": "refusal"}


@dataclass
class _Call:
    """A tool call as its start and updates left it."""

    id: str
    title: str
    kind: str | None = None
    status: str | None = None
    raw_input: Any = None
    raw_output: Any = None
    content: list[Any] = field(default_factory=list)

    def update(self, update: ToolCallStart | ToolCallProgress | ToolCallUpdate) -> None:
        for name in ("title", "kind", "status", "raw_input", "raw_output"):
            value = getattr(update, name)
            if value is not None:
                setattr(self, name, value)
        if update.content is not None:
            self.content = list(update.content)

    def record(self, tool_name: str) -> ToolCall:
        name = self.title if tool_name == "title" else (self.kind or "other")
        raw = self.raw_input
        args = raw if isinstance(raw, dict) else ({} if raw is None else {"input": raw})
        result = self.raw_output if self.raw_output is not None else _content_text(self.content)
        ok = self.status == "completed"
        error = None
        if self.status == "failed":
            error = (result if isinstance(result, str) and result else None) or "failed"
        elif not ok:
            # Executed calls only: one the agent never finished did not happen as far as
            # a scorer can tell.
            error = f"never completed (status {self.status or 'unset'} at the end of the turn)"
        return ToolCall(name=name or "tool", args=args, ok=ok, error=error, result=result)


def _content_text(content: list[Any]) -> str | None:
    parts = []
    for item in content:
        if isinstance(item, ContentToolCallContent) and isinstance(item.content,
                                                                   TextContentBlock):
            parts.append(item.content.text)
        elif isinstance(item, FileEditToolCallContent):
            parts.append(f"[diff of {item.path}]")
    return "\n".join(parts) or None


class Turn:
    """What one attempt's session produced, as it arrives."""

    def __init__(self, workdir: Path, *, policy: str, tool_name: str) -> None:
        self.workdir = workdir
        self.root = workdir.resolve()
        self.policy = policy
        self.tool_name = tool_name
        self.session_id: str | None = None
        #: What forge chose for the session (modes, model, options) and the agent's name.
        self.session: dict[str, Any] = {}
        self.step = "start"  # the request in flight: initialize, session/new, ...
        self._chunks: list[str] = []
        self._other_chunks = 0
        self._thought_chars = 0
        self._calls: dict[str, _Call] = {}
        self._permissions: list[dict[str, Any]] = []
        self._n_permissions = 0
        self._denied = 0
        self._files: list[dict[str, Any]] = []
        self._n_writes = 0
        self._refused = 0
        self._cost: float | None = None
        self._currency: str | None = None
        self._plan: list[dict[str, Any]] | None = None
        self._modes: list[str] = []
        self.stray = 0

    # -- what the agent sends --------------------------------------------------------------

    def add(self, update: Any) -> None:
        """One ``session/update`` of this attempt's session."""
        if isinstance(update, AgentMessageChunk):
            if isinstance(update.content, TextContentBlock):
                self._chunks.append(update.content.text)
            else:
                self._other_chunks += 1
        elif isinstance(update, AgentThoughtChunk):
            if isinstance(update.content, TextContentBlock):
                self._thought_chars += len(update.content.text)
        elif isinstance(update, (ToolCallStart, ToolCallProgress)):
            self._call(update.tool_call_id, update.title).update(update)
        elif isinstance(update, UsageUpdate):
            if update.cost is not None:
                self._cost, self._currency = update.cost.amount, update.cost.currency
        elif isinstance(update, AgentPlanUpdate):
            self._plan = [{"content": e.content, "status": e.status} for e in update.entries]
        elif isinstance(update, CurrentModeUpdate):
            self._modes.append(update.current_mode_id)

    def _call(self, call_id: str, title: str | None) -> _Call:
        call = self._calls.get(call_id)
        if call is None:
            call = self._calls[call_id] = _Call(call_id, title or call_id)
        return call

    def decide(self, tool_call: ToolCallUpdate,
               options: list[PermissionOption]) -> RequestPermissionResponse:
        """The policy's answer to a permission request, recorded."""
        self._call(tool_call.tool_call_id, tool_call.title).update(tool_call)
        wanted = POLICIES[self.policy]
        chosen = next((o for kind in wanted for o in options if o.kind == kind), None)
        self._n_permissions += 1
        if chosen is None or chosen.kind.startswith("reject"):
            self._denied += 1
        if len(self._permissions) < MAX_RECORDS:
            self._permissions.append({
                "tool_call_id": tool_call.tool_call_id, "title": tool_call.title,
                "offered": [o.kind for o in options], "policy": self.policy,
                "answer": chosen.kind if chosen else "cancelled"})
        outcome = (AllowedOutcome(outcome="selected", option_id=chosen.option_id)
                   if chosen else DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=outcome)

    def note_file(self, op: str, path: str, *, ok: bool, error: str | None = None,
                  size: int | None = None) -> None:
        """A file request (``fs/read_text_file``, ``fs/write_text_file``) and its outcome."""
        if not ok:
            self._refused += 1
        elif op == "write":
            self._n_writes += 1
        if len(self._files) < MAX_RECORDS:
            entry: dict[str, Any] = {"op": op, "path": path, "ok": ok}
            if error is not None:
                entry["error"] = error
            if size is not None:
                entry["bytes"] = size
            self._files.append(entry)

    # -- what forge records ------------------------------------------------------------------

    def output(self, response: PromptResponse, stderr: str) -> RunOutput:
        text = "".join(self._chunks).strip() or None
        calls = [c.record(self.tool_name) for c in self._calls.values()]
        errors = sum(not c.ok for c in calls)
        signals = [_STOP_SIGNALS[response.stop_reason]] if (
            response.stop_reason in _STOP_SIGNALS) else []
        signals += [name for name, hit in (
            ("tool_error", errors), ("permission_denied", self._denied),
            ("fs_refused", self._refused), ("empty_answer", text is None)) if hit]
        usage = Usage()
        metrics = {"tool_calls": float(len(calls)), "tool_errors": float(errors),
                   "permission_requests": float(self._n_permissions),
                   "permissions_denied": float(self._denied),
                   "fs_writes": float(self._n_writes), "fs_refused": float(self._refused)}
        if response.usage is not None:
            usage = Usage(input_tokens=response.usage.input_tokens,
                          output_tokens=response.usage.output_tokens)
            if response.usage.thought_tokens:
                metrics["thought_tokens"] = float(response.usage.thought_tokens)
        return RunOutput(output=text, tool_calls=calls, usage=usage, cost=self._cost,
                         metrics=metrics, signals=signals, trace=self._trace(response, stderr))

    def _trace(self, response: PromptResponse, stderr: str) -> dict[str, Any]:
        trace: dict[str, Any] = {
            "stop_reason": response.stop_reason, "session": self.session,
            "tool_calls": [{"id": c.id, "title": c.title, "kind": c.kind, "status": c.status}
                           for c in self._calls.values()][:MAX_RECORDS],
            "permissions": self._permissions, "files": self._files}
        optional = {"thought_chars": self._thought_chars, "plan": self._plan,
                    "mode_updates": self._modes[:MAX_RECORDS],
                    "non_text_chunks": self._other_chunks, "currency": self._currency,
                    "stray_messages": self.stray, "stderr": stderr}
        trace.update({k: v for k, v in optional.items() if v})
        return trace
