"""The harness protocol: what forge hands a harness for one attempt and what it gets back."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from forge.task import Task

__all__ = ["AttemptContext", "AttemptTimeout", "Harness", "RunOutput", "ToolCall", "Usage"]


class AttemptTimeout(TimeoutError):
    """Raised by a harness that enforces the attempt's deadline itself (a command it had
    to stop, an endpoint that did not answer in time): the attempt is recorded as
    ``timeout``, as when the engine's own deadline fires, not as an ``error``."""


class ToolCall(BaseModel):
    """One tool execution. ``ok`` is false when the tool raised or refused."""

    model_config = ConfigDict(extra="forbid")
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    ok: bool = True
    error: str | None = None
    result: Any = None


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)


class RunOutput(BaseModel):
    """What one attempt produced. A harness may return this or a dict of its fields."""

    model_config = ConfigDict(extra="forbid")
    output: Any = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    signals: list[str] = Field(default_factory=list)
    trace: Any = None


class AttemptContext(BaseModel):
    """Per-attempt facts for the harness.

    ``seed`` is derived from (run seed, split, task id, attempt index): the same for
    every config evaluated with the same run seed, so comparisons are paired.
    ``deadline`` is on the :func:`time.monotonic` clock.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    seed: int
    attempt: int
    split: str
    timeout_s: float
    deadline: float


@runtime_checkable
class Harness(Protocol):
    """Runs one attempt. The contract:

    - ``identity`` is a stable string that changes when the harness's behaviour can
      (its code, command or endpoint); it goes into the env fingerprint.
    - ``run`` gets a private copy of the config and of the task, may raise, may
      hang (forge enforces the timeout), and returns a :class:`RunOutput` or a dict.
    - ``aclose`` releases what the harness holds; called once per evaluation.

    Optional: a harness whose work is a plain blocking function may expose it as
    ``sync_callable`` (same arguments as ``run``); the engine then calls it on its
    own thread lanes, saving an event-loop round trip per attempt.
    """

    @property
    def identity(self) -> str: ...

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> Any: ...

    async def aclose(self) -> None: ...
