"""The ``agno`` harness: an Agno agent, built afresh for every attempt by the bench's factory.

Bench syntax::

    harness: {agno: "agent:make_agent"}     # module:function in the bench's folder

``make_agent(config)`` returns an ``agno.agent.Agent``; a factory that declares a
second parameter also gets the attempt's :class:`~forge.harness.AttemptContext`
(``make_agent(config, ctx)``: its ``seed`` for a model that takes one), and ``None``
there when forge builds the agent only to fingerprint it (``forge export agno``).
The factory may be ``async``. The config reaches the agent only through the factory,
so the registry decides what may change (the model's temperature, the agent's
``tool_call_limit``, its instructions, how much history it reads, ...).

One attempt: the factory is called with a private copy of the config; the agent it
returns is isolated as Agno's own rollouts isolate theirs (its model's response
cache off, a fresh in-memory database and user, a fresh session); Agno's telemetry is
off unless ``AGNO_TELEMETRY=true`` says otherwise (a search makes thousands of runs);
and the agent runs on the task's input (a string as it is; other inputs as text, as
the ``openai`` harness sends them) with ``arun`` streaming its events, as Agno's
rollouts run it. Each attempt has an event loop of its own on a daemon thread, so an
agent that blocks its loop (a sync call inside an async tool) cannot stall forge or
other attempts, and sync tools run on daemon threads: one that never returns cannot
hold the process at exit (Agno's default cancellation manager, shared by every run,
gets a lock that many loops can share: :func:`_loop_safe_cancellation`). At the
attempt's deadline the run is cancelled and the
attempt ends ``timeout``; a cancelled evaluation cancels the runs in flight.

What forge records is in :mod:`forge.harness.agno_run`. A run that yields an error
event (the model call failed, a hook raised), or ends paused (a tool waits for a
human), cancelled or without a run output, is an ``error`` with Agno's reason: the
attempt is unscored, never a zero.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple

from pydantic import BaseModel, ConfigDict

from forge._util.threads import DaemonThreadPool
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness.agno_run import forge_output
from forge.harness.agno_sdk import require_agno
from forge.harness.base import HARNESSES, AttemptContext, AttemptTimeout, Harness, RunOutput
from forge.harness.openai import render_input
from forge.harness.tools import import_value

__all__ = ["AgnoHarness", "AgnoOptions", "AgnoRunError", "build_agent", "factory_arity"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class AgnoRunError(RuntimeError):
    """The Agno run failed: its message is Agno's reason."""


class AgnoOptions(BaseModel):
    """The ``agno:`` argument of a bench's harness: the factory of the agent."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    factory: str


@HARNESSES.register("agno", shorthand="factory")
class AgnoHarness(Harness):
    """Builds the agent with the factory and runs it, one attempt per thread."""

    options_model = AgnoOptions

    def __init__(self, factory: Callable[..., Any], arity: int, identity: str) -> None:
        self.factory = factory
        self.arity = arity
        self._identity = identity
        self._attempts = DaemonThreadPool("forge-agno")
        self._tools = DaemonThreadPool("forge-agno-tool")

    @property
    def identity(self) -> str:
        return self._identity

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> RunOutput:
        attempt = _Attempt(self, config, task, ctx)
        try:
            result: RunOutput = await asyncio.wrap_future(self._attempts.submit(attempt.run))
        except asyncio.CancelledError:
            attempt.cancel()  # forge's timeout, or the evaluation cancelled
            raise
        return result

    async def aclose(self) -> None:
        self._attempts.shutdown()
        self._tools.shutdown()

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> AgnoHarness:
        options = AgnoOptions.model_validate(args)
        where = ctx.at("agno")
        version = require_agno(where)
        factory, identity = import_value(options.factory, where.at("factory"))
        if not callable(factory):
            raise where.error(f"{options.factory!r} is not a function: expected a factory "
                              "make_agent(config) returning an agno.agent.Agent", "factory")
        _loop_safe_cancellation()
        arity = factory_arity(factory)
        if arity == 0:
            raise where.error(f"{options.factory!r} takes no arguments: forge calls it with the "
                              "attempt's config, make_agent(config) or make_agent(config, ctx)",
                              "factory")
        # The factory's module and the bench's code, and agno's version: a new agno can
        # change what the same agent does.
        return cls(factory, arity, f"agno:{identity}:agno=={version}")


def factory_arity(factory: Callable[..., Any]) -> int:
    """How many arguments forge passes ``factory``: 2 when it takes a second one (the
    attempt's context), 1 when it takes one, 0 when it takes none."""
    try:
        parameters = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # a builtin or C callable: the config only
        return 1
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return 2
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return min(len(positional), 2)


async def build_agent(factory: Callable[..., Any], arity: int, config: dict[str, Any],
                      ctx: AttemptContext | None) -> Any:
    """The agent ``factory`` builds for ``config``; ``TypeError`` when it is not an
    ``agno.agent.Agent`` (a Team, a string, None)."""
    from agno.agent import Agent

    product = factory(config, ctx) if arity >= 2 else factory(config)
    if inspect.isawaitable(product):
        product = await product
    if not isinstance(product, Agent):
        raise TypeError(f"the factory returned {type(product).__name__}, not an "
                        "agno.agent.Agent")
    return product


class _Attempt:
    """One attempt on an event loop of its own; :meth:`cancel` may come from any thread."""

    def __init__(self, harness: AgnoHarness, config: dict[str, Any], task: Task,
                 ctx: AttemptContext) -> None:
        self.harness, self.config, self.task, self.ctx = harness, config, task, ctx
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[Any] | None = None
        self._cancelled = False

    def run(self) -> RunOutput:
        tools = self.harness._tools
        with asyncio.Runner(loop_factory=lambda: _AttemptLoop(tools)) as runner:
            return runner.run(self._bounded())

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            loop, main = self._loop, self._main
        if loop is not None and main is not None:
            # A RuntimeError: the loop closed meanwhile, the attempt is over.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(main.cancel)

    async def _bounded(self) -> RunOutput:
        with self._lock:
            if self._cancelled:
                raise asyncio.CancelledError
            self._loop, self._main = asyncio.get_running_loop(), asyncio.current_task()
        remaining = self.ctx.deadline - time.monotonic()
        try:
            async with asyncio.timeout(max(remaining, 0.0)) as window:
                return await self._attempt()
        except TimeoutError:
            if window.expired():
                raise AttemptTimeout(f"the agent did not finish within {self.ctx.timeout_s:g} s "
                                     "(its run was cancelled)") from None
            raise

    async def _attempt(self) -> RunOutput:
        harness = self.harness
        agent = await build_agent(harness.factory, harness.arity, self.config, self.ctx)
        _isolate(agent)
        text = self.task.input if isinstance(self.task.input, str) else render_input(
            self.task.input)
        return await _run(agent, text)


class _ThreadLock:
    """An ``async with`` lock any event loop in any thread may take: a thread lock.
    Only for sections that never await (it is held for microseconds, and a coroutine
    holding it never gives its loop to another that could wait for it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    async def __aenter__(self) -> None:
        self._lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


def _loop_safe_cancellation() -> None:
    """Let runs on many event loops share Agno's default cancellation manager.

    Every ``arun`` registers, checks and drops its run id there, under one
    ``asyncio.Lock`` for the process. Such a lock belongs to the first loop that
    waits for it: runs on another loop then fail ("is bound to a different event
    loop") or wait for a wake-up that never comes. forge runs each attempt on a loop of
    its own, so it puts a thread lock in its place (the manager's sections under it
    never await). A manager someone configured (Redis, a subclass) is left alone.
    """
    from agno.run.cancel import get_cancellation_manager
    from agno.run.cancellation_management.in_memory_cancellation_manager import (
        InMemoryRunCancellationManager,
    )

    manager = get_cancellation_manager()
    if (type(manager) is InMemoryRunCancellationManager
            and isinstance(getattr(manager, "_async_lock", None), asyncio.Lock)):
        manager._async_lock = _ThreadLock()  # type: ignore[assignment]


class _AttemptLoop(asyncio.SelectorEventLoop):
    """An attempt's event loop: what it hands to the default executor (Agno's sync
    tools, ``asyncio.to_thread``) runs on daemon threads, which never hold the process
    at exit as the default executor's threads would."""

    def __init__(self, pool: DaemonThreadPool) -> None:
        super().__init__()
        self._pool = pool

    def run_in_executor(self, executor: concurrent.futures.Executor | None,
                        func: Callable[[*Ts], T], *args: *Ts) -> asyncio.Future[T]:
        if executor is not None:
            return super().run_in_executor(executor, func, *args)
        return asyncio.wrap_future(self._pool.submit(func, *args), loop=self)


def _isolate(agent: Any) -> None:
    """Isolate the attempt's agent as Agno's rollouts do; telemetry off unless the
    environment turns it on (Agno reads AGNO_TELEMETRY at every run)."""
    agent.telemetry = False
    try:
        from agno.environments.runner import _isolate_attempt
    except ImportError:  # an agno without it: the part of it forge relies on
        _isolate_minimal(agent)
        return
    _isolate_attempt(agent)


def _isolate_minimal(agent: Any) -> None:
    """A model with its response cache off (a cached attempt is a replay, not a
    sample), a fresh in-memory database and a fresh user."""
    import copy

    from agno.db.in_memory import InMemoryDb

    model = getattr(agent, "model", None)
    if model is not None and hasattr(model, "cache_response"):
        model = copy.copy(model)
        model.cache_response = False
        agent.model = model
    agent.db = InMemoryDb()  # type: ignore[no-untyped-call]
    agent.user_id = f"forge-user-{uuid.uuid4().hex}"


async def _run(agent: Any, text: str) -> RunOutput:
    """Stream the run as Agno's rollouts do (the final run output arrives in the
    stream); its error events and an end other than completed are an error."""
    from agno.run.agent import RunErrorEvent
    from agno.run.agent import RunOutput as AgnoRunOutput
    from agno.run.base import RunStatus

    run: Any = None
    errors: list[str] = []
    async for event in agent.arun(input=text, stream=True, stream_events=True,
                                  yield_run_output=True,
                                  session_id=f"forge-{uuid.uuid4().hex}"):
        if isinstance(event, AgnoRunOutput):
            run = event
        elif isinstance(event, RunErrorEvent):
            message = event.content or getattr(event, "error", None) or "unknown error"
            kind = getattr(event, "error_type", None)
            errors.append(f"{kind}: {message}" if kind else str(message))
    if errors:
        raise AgnoRunError("; ".join(errors))
    if run is None:
        raise AgnoRunError("the run ended without a run output")
    if run.status != RunStatus.completed:
        raise AgnoRunError(_not_completed(run))
    return forge_output(run)


def _not_completed(run: Any) -> str:
    status = getattr(run.status, "value", run.status)
    if run.is_paused:
        waiting = sorted({str(t.tool_name) for t in run.tools or () if t.is_paused})
        return (f"the run paused ({status}): {', '.join(waiting) or 'a tool'} waits for "
                "a person (confirmation, input or external execution), which forge cannot give")
    detail = f": {run.content}" if isinstance(run.content, str) and run.content else ""
    return f"the run ended with status {status}{detail}"
