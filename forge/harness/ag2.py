"""The ``ag2`` harness: a real ``ag2.Agent``, built fresh for every attempt by your factory.

Bench syntax::

    harness: {ag2: "agent:make_agent"}       # shorthand: the factory
    harness:
      ag2:
        target: "agent:make_agent"            # module:function in the bench folder
        prices: {input_per_mtok: 0.15, output_per_mtok: 0.60}   # optional: cost

Needs the extra: ``pip install 'forge[ag2]'`` (AG2 >= 1.2). Without it the bench's
load stops with one line naming that command.

Per attempt forge calls ``make_agent(config)`` with a private copy of the attempt's
config (or ``make_agent(config, ctx)`` when the factory takes a second parameter:
``ctx.seed`` is the attempt's seed, for a model that takes one) and runs the
``ag2.Agent`` it returns on the task: ``agent.ask(inputs["input"])`` on a fresh
``MemoryStream``, as ``ag2.eval.run_agent`` asks it (a task whose input is not such a
mapping is asked as text). Nothing is shared between attempts: a new agent, a new
stream, a new event loop. The factory may be ``async``.

The attempt runs on its own event loop in a daemon thread, so an agent that blocks
(a sync call inside ``async`` code) cannot stall forge's loop, and whatever threads
AG2 starts for sync tools never hold forge at exit. At the attempt's deadline the run
is cancelled (AG2 cancels the turn and its tool tasks) and the attempt is a
``timeout``; when forge cancels the attempt (an interrupt, its own timeout) the run is
cancelled the same way. A sync tool still running then is left to finish alone.

What is recorded (read off the run's event stream, :mod:`forge.harness._ag2_record`):

- ``output``: the reply's text (``reply.body``); for an agent with a
  ``response_schema``, the validated answer as JSON data;
- ``tool_calls``: every executed tool call (name, arguments, result, ok/error), in the
  order the model asked for them (a turn's calls run concurrently; the record does not
  depend on which started first); a tool that raised, was refused by middleware or does not exist is
  ``ok=False`` with its error;
- ``usage``: the tokens AG2 accounts (its ``UsageReport`` total over the run's
  ``UsageEvent`` records); ``cost`` from ``prices`` when given (AG2 reports no cost);
- ``metrics``: ``llm_calls``, ``tool_errors``;
- ``signals``: ``tool_error``, ``tool_not_found``, ``empty_answer``, ``halted`` (an
  assembly policy stopped the run);
- ``trace``: the agent's name, each model call (``ag2_turns``: text, model, finish
  reason, tool calls asked for), usage by kind, and the run's duration.

Failures are data: a factory that raises or returns something that is not an
``ag2.Agent``, a run that raises (the model client failing, a tool error the model
client re-raises: its message names the tool), a reply that does not fit the agent's
``response_schema``, and an output over forge's size bound each end the attempt as an
``error`` with its reason; the evaluation goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, is_dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import to_jsonable_python

from forge._util.digest import digest_of
from forge._util.threads import DaemonThreadPool
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness import ag2_sdk as _ag2
from forge.harness._ag2_record import Recorder
from forge.harness.ag2_events import TURNS_KEY
from forge.harness.base import HARNESSES, AttemptContext, AttemptTimeout, Harness, RunOutput
from forge.harness.openai import Prices, render_input
from forge.harness.python import import_target

__all__ = ["Ag2Harness", "Ag2Options", "AgentToolError", "agent_prompt"]

T = TypeVar("T")

#: How long tasks an attempt left behind get to end once cancelled.
_SETTLE_S = 1.0


class AgentToolError(RuntimeError):
    """A run that ended on a tool's exception (a model client re-raised it)."""


class Ag2Options(BaseModel):
    """The ``ag2:`` argument of a bench's harness."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    target: str
    prices: Prices | None = None


def agent_prompt(task_input: Any) -> str:
    """What the agent is asked: ``inputs["input"]`` as AG2's runner asks it; a value that is
    not text is rendered as the ``openai`` harness renders a task input."""
    value = task_input
    if isinstance(task_input, Mapping) and "input" in task_input:
        value = task_input["input"]
    return value if isinstance(value, str) else render_input(value)


@HARNESSES.register("ag2", shorthand="target")
class Ag2Harness(Harness):
    """An ag2.Agent built per attempt by a factory module:function, run on the task.

    Each attempt runs on an event loop of its own in a daemon thread (see the module)."""

    options_model = Ag2Options

    def __init__(self, factory: Callable[..., Any], identity: str,
                 options: Ag2Options) -> None:
        self._factory = factory
        self._with_ctx = _takes_ctx(factory)
        self.options = options
        self._identity = "|".join([
            f"ag2={_ag2.version()}", identity,
            digest_of(options.model_dump(mode="json", exclude={"target"}))])
        self._pool = DaemonThreadPool("forge-ag2")

    @property
    def identity(self) -> str:
        return self._identity

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> RunOutput:
        own = _OwnLoop()
        future = self._pool.submit(own.run, lambda: self._attempt(config, task, ctx))
        try:
            result: RunOutput = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            own.cancel()  # forge stopped waiting: the run stops too, on its own loop
            raise
        return result

    async def _attempt(self, config: dict[str, Any], task: Task,
                       ctx: AttemptContext) -> RunOutput:
        started = time.monotonic()
        left = ctx.deadline - started
        if left <= 0:
            raise AttemptTimeout(f"no time left for the agent of {ctx.timeout_s:g} s")
        recorder = Recorder()
        timer = asyncio.timeout(left)
        try:
            async with timer:
                agent = await self._agent(config, ctx)
                stream = _ag2.module("ag2.stream").MemoryStream()
                stream.subscribe(recorder.on_event, sync_to_thread=False)
                reply = await agent.ask(agent_prompt(task.input), stream=stream)
                output = await _answer(agent, reply)
        except Exception as exc:
            # Only the deadline's own expiry is forge's timeout: a TimeoutError the
            # agent raised (a model call that timed out) is the agent's error.
            if isinstance(exc, TimeoutError) and timer.expired():
                raise AttemptTimeout(
                    f"no reply from the agent within {ctx.timeout_s:g} s; cancelled with "
                    f"{len(recorder.tool_calls)} tool calls done, {recorder.running} "
                    "running") from None
            tool = recorder.tool_that_raised(exc)
            if tool is not None:
                raise AgentToolError(f"tool {tool!r} raised {type(exc).__name__}: {exc}"
                                     ) from None
            raise
        return self._output(agent, recorder, output, time.monotonic() - started)

    async def _agent(self, config: dict[str, Any], ctx: AttemptContext) -> Any:
        made = self._factory(config, ctx) if self._with_ctx else self._factory(config)
        if inspect.isawaitable(made):
            made = await made
        agent_class = _ag2.module().Agent
        if not isinstance(made, agent_class):
            raise TypeError(f"{self.options.target} returned {type(made).__name__}, "
                            "expected an ag2.Agent")
        return made

    def _output(self, agent: Any, recorder: Recorder, output: Any,
                duration: float) -> RunOutput:
        usage, by_kind = recorder.usage()
        calls = recorder.tool_calls
        errors = sum(not call.ok for call in calls)
        signals = [name for name, raised in (
            ("tool_error", errors > 0), ("tool_not_found", recorder.not_found > 0),
            ("empty_answer", output is None), ("halted", recorder.halted is not None))
            if raised]
        prices = self.options.prices
        return RunOutput(
            output=output, tool_calls=calls, usage=usage,
            cost=prices.cost(usage) if prices is not None else None,
            metrics={"llm_calls": float(recorder.llm_calls), "tool_errors": float(errors)},
            signals=signals,
            trace={"agent": str(agent.name),
                   TURNS_KEY: [turn.model_dump() for turn in recorder.turns],
                   "usage_by_kind": by_kind, "halted": recorder.halted,
                   "duration_ms": int(duration * 1000)})

    async def aclose(self) -> None:
        self._pool.shutdown()

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Ag2Harness:
        options = Ag2Options.model_validate(args)
        where = ctx.at("ag2")
        _ag2.require("the ag2 harness", where.error)
        factory, identity = import_target(options.target, ctx.base_dir, where=where)
        return cls(factory, identity, options)


async def _answer(agent: Any, reply: Any) -> Any:
    """The reply as forge's output: its text, or its validated structured answer."""
    if agent.response_schema is None:
        body = reply.body
        return body if body else None
    try:
        content = await reply.content()
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
        first = f"{where}: {errors[0]['msg']}" if errors else str(exc)
        raise ValueError(f"the reply does not fit the agent's response_schema ("
                         f"{len(errors)} errors; first {first})") from None
    if isinstance(content, BaseModel):
        return content.model_dump(mode="json")
    if is_dataclass(content) and not isinstance(content, type):
        return to_jsonable_python(asdict(content), fallback=repr)
    return to_jsonable_python(content, fallback=repr)


def _takes_ctx(factory: Callable[..., Any]) -> bool:
    """Whether the factory takes a second positional parameter (then it gets ``ctx``)."""
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in positional)


class _OwnLoop:
    """One attempt on an event loop of its own, in the calling (daemon) thread; ``cancel``,
    from any thread, cancels it there."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False

    def run(self, make: Callable[[], Awaitable[T]]) -> T:
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(self._main(make))
        finally:
            _close(loop)

    async def _main(self, make: Callable[[], Awaitable[T]]) -> T:
        with self._lock:
            if self._cancelled:
                raise asyncio.CancelledError
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
        return await make()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            # A loop already closed has ended its attempt: nothing is left to cancel.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what the attempt left running (background tasks of the agent), then close the
    loop without waiting for executor threads (a hung sync call stays abandoned)."""
    try:
        left = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=_SETTLE_S))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()

