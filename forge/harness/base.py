"""The harness protocol: what forge hands a harness for one attempt and what it gets back.

The harness plugins register here, each next to its class (``@HARNESSES.register``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticSerializationError

from forge._util.bounds import MAX_METRIC, MAX_OUTPUT_BYTES
from forge._util.files import validation_problem
from forge.core.spec import Plugin, PluginRegistry
from forge.core.task import Task

__all__ = ["HARNESSES", "AttemptContext", "AttemptTimeout", "Harness", "RunOutput", "ToolCall",
           "Usage"]


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

    @classmethod
    def coerce(cls, value: Any) -> RunOutput:
        """What a harness returned, as a RunOutput whose content survives JSON.

        ``ValueError`` says what is wrong with it: not a RunOutput or a dict of its
        fields, a non-finite metric or cost, one beyond :data:`~forge._util.bounds.MAX_METRIC`
        or a negative cost, content that cannot be serialised, or more than
        :data:`~forge._util.bounds.MAX_OUTPUT_BYTES` of it as JSON (16 MiB, the command
        harness's bound on its stdout).
        """
        output = cls._validated(value)
        _check_numbers(output)
        _check_size(output)
        return output

    @classmethod
    def _validated(cls, value: Any) -> RunOutput:
        if isinstance(value, RunOutput):
            return value
        if not isinstance(value, dict):
            raise ValueError("invalid output: expected RunOutput or dict, got "
                             f"{type(value).__name__}")
        try:
            return cls.model_validate(value)
        except ValidationError as exc:
            problem = validation_problem(exc)
            raise ValueError(f"invalid output: {problem.field}: {problem.message}"
                             ) from None


def _check_numbers(output: RunOutput) -> None:
    """Refuse a non-finite metric or cost, one beyond MAX_METRIC, or a negative cost."""
    for name, metric in output.metrics.items():
        if not math.isfinite(metric):
            raise ValueError(f"invalid output: metric {name!r} is {metric}")
        if abs(metric) > MAX_METRIC:
            raise ValueError(f"invalid output: metric {name!r} is {metric:g}, beyond "
                             f"±{MAX_METRIC:g}")
    if output.cost is not None and not math.isfinite(output.cost):
        raise ValueError(f"invalid output: cost is {output.cost}")
    if output.cost is not None and not 0 <= output.cost <= MAX_METRIC:
        # Money spent is never negative: a negative cost would refund a cost budget
        # and pass any cost tolerance.
        raise ValueError(f"invalid output: cost is {output.cost:g}, expected 0 to "
                         f"{MAX_METRIC:g}")


def _check_size(output: RunOutput) -> None:
    """Refuse an output that cannot be serialised or is over MAX_OUTPUT_BYTES as JSON."""
    # Measured before it is serialised: a 200 MB output must not be copied to learn
    # that it is too big, nor one that contains itself be walked forever.
    if _size_at_least(output, MAX_OUTPUT_BYTES + 1):
        raise ValueError(f"output too large: more than {_MIB} MiB as JSON (at most {_MIB} "
                         "MiB per attempt); nothing of it is kept")
    try:
        size = len(output.model_dump_json())
    except PydanticSerializationError as exc:
        raise ValueError(f"output cannot be serialised: {exc}") from None
    except (ValueError, RecursionError) as exc:  # nested too deeply for the serialiser
        raise ValueError(f"output cannot be serialised: {type(exc).__name__}") from None
    if size > MAX_OUTPUT_BYTES:
        raise ValueError(f"output too large: {size:,} bytes as JSON (at most {_MIB} MiB "
                         "per attempt); nothing of it is kept")


_MIB = MAX_OUTPUT_BYTES // 2**20


def _size_at_least(output: RunOutput, limit: int) -> bool:
    """Whether ``output`` takes ``limit`` characters or more as JSON, from a walk that
    stops there: each string counts its length and every other value at least one
    character, so the count never exceeds the real size. A value that contains itself
    is refused here (its JSON would be endless)."""
    size = 0
    on_path: set[int] = set()
    # Depth first; ``_LEAVE`` entries take a container off the path once its items
    # have all been walked, so that a list shared twice is no cycle.
    stack: list[Any] = [output.output, output.trace, output.signals,
                        *((c.args, c.result, c.error, c.name) for c in output.tool_calls)]
    while stack:
        item = stack.pop()
        if isinstance(item, _Leave):
            on_path.discard(item.ident)
            continue
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, (dict, list, tuple, set, frozenset)):
            ident = id(item)
            if ident in on_path:
                raise ValueError("output cannot be serialised: it contains itself")
            on_path.add(ident)
            stack.append(_Leave(ident))
            size += 2
            if isinstance(item, dict):
                for key, value in item.items():
                    stack.append(key)
                    stack.append(value)
            else:
                stack.extend(item)
        else:
            size += 1
        if size >= limit:
            return True
    return False


class _Leave:
    __slots__ = ("ident",)

    def __init__(self, ident: int) -> None:
        self.ident = ident


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


class Harness(Plugin, ABC):
    """Runs one attempt. The contract:

    - ``identity`` is a stable string that changes when the harness's behaviour can
      (its code, command or endpoint); it goes into the env fingerprint.
    - ``run`` gets a private copy of the config and of the task, may raise, may
      hang (forge enforces the timeout), and returns a :class:`RunOutput` or a dict.
    - ``aclose`` releases what the harness holds; called once per evaluation.
    - ``astart`` (optional) makes ready what every attempt needs, such as a server the
      harness runs its agent on; the engine awaits it before each batch, outside any
      attempt's time, so it must return at once when all is ready already.

    Optional: a harness whose work is a plain blocking function exposes it as
    ``sync_callable`` (same arguments as ``run``); the local executor then calls it
    on its own thread lanes, saving an event-loop round trip per attempt.
    """

    @property
    @abstractmethod
    def identity(self) -> str: ...

    @abstractmethod
    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> Any: ...

    @abstractmethod
    async def aclose(self) -> None: ...

    async def astart(self) -> None:
        """Nothing to make ready by default."""
        return None

    @property
    def sync_callable(self) -> Callable[..., Any] | None:
        """None: the harness is driven through ``run`` only."""
        return None


#: Every harness by name; a bench names its harness as a spec (``{python: "harness:run"}``).
HARNESSES: PluginRegistry[Harness] = PluginRegistry("harness", Harness)
