"""A session: what one evaluation or one search holds open while its attempts run.

:class:`Session` opens the bench's executor (worker processes, a Ray cluster, or the
in-process lanes), builds its harness and the one :class:`RolloutEngine` that runs
every batch, and closes them in the reverse order. Used from async code
(``async with``) it runs on the caller's loop; used from sync code (``with``) it
runs on an event loop of its own, which it also closes.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine, Sequence
from types import TracebackType
from typing import Any, TypeVar

from forge._util.interrupt import Interrupted, cancelling, received
from forge.bench.loader import Bench
from forge.config.registry import Config
from forge.errors import ExecutorLost
from forge.evaluation.rollout import RolloutEngine
from forge.executors import AttemptKey, ExecutorSettings
from forge.results.model import AttemptResult

__all__ = ["Session"]

T = TypeVar("T")

#: How long leftover tasks get to end after the session's last run; the rest are
#: abandoned with the loop.
_SHUTDOWN_GRACE_S = 0.2


class Session:
    """The executor, harness, engine and (when used from sync code) event loop of one
    evaluation or search. Raises :class:`~forge.errors.OptionError` for an executor that
    cannot serve the bench's harness, before anything starts."""

    def __init__(self, bench: Bench, executor: ExecutorSettings, *, seed: int,
                 concurrency: int, timeout_s: float) -> None:
        self.executor = bench.open_executor(executor)
        try:
            self.harness = bench.build_harness()
            self.engine = RolloutEngine(self.harness, bench.scorer, run_seed=seed,
                                        concurrency=concurrency, timeout_s=timeout_s,
                                        executor=self.executor)
        except BaseException:
            self.executor.close()
            raise
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Told of each batch before it runs (config, split, size) and of each attempt as
        #: it ends: what a live view of a search counts (forge.search.progress).
        self.on_batch: Callable[[Config, str, int], None] | None = None
        self.on_attempt: Callable[[AttemptResult], None] | None = None

    # -- from async code: the caller's loop -------------------------------------------

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release the harness, then the executor; nothing starts meanwhile."""
        self.engine.cancel()
        try:
            await self.harness.aclose()
        finally:
            self.executor.close()

    # -- from sync code: a loop of its own --------------------------------------------

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` to completion on the session's loop (made on first use)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
        return self._loop.run_until_complete(coro)

    def attempts(self, config: Config, keys: Sequence[AttemptKey], *, split: str,
                 stream: str | None = None) -> list[AttemptResult]:
        """:meth:`RolloutEngine.run` on the session's loop, every attempt finished.

        A signal (see :mod:`forge._util.interrupt`) cancels the attempts in flight and raises
        :class:`~forge._util.interrupt.Interrupted` rather than return them: a cancelled
        attempt says nothing about its config and must not be stored. An executor
        that broke under them raises :class:`~forge.errors.ExecutorLost`, as
        :meth:`check_executor`.
        """
        if self.on_batch is not None and keys:
            self.on_batch(config, split, len(keys))
        engine = self.engine
        results = self.run(cancelling(engine.cancel, engine.run(
            config, keys, split=split, stream=stream, on_attempt=self.on_attempt)))
        if engine.cancelled:
            raise Interrupted(received() or signal.SIGINT)
        self.check_executor()
        return results

    def check_executor(self) -> None:
        """Raise :class:`ExecutorLost` once the executor can run nothing more: the
        attempts it lost meanwhile say nothing about their config, and must not be kept."""
        if self.executor.broken is not None:
            raise ExecutorLost(self.executor.broken)

    def close(self) -> None:
        """Release harness and executor on the session's loop, then close the loop.

        The engine is cancelled first: after an interruption its batch may still be on
        the loop, and must start nothing while the harness closes."""
        self.engine.cancel()
        try:
            self.run(self.aclose())
        finally:
            loop, self._loop = self._loop, None
            if loop is not None:
                _shut_down(loop)


def _shut_down(loop: asyncio.AbstractEventLoop) -> None:
    """``asyncio.run``'s ending without its last wait: ``asyncio.run`` cancels the tasks
    left over and waits for every one of them, so an async harness that ignores
    cancellation (its attempt already recorded as a timeout) would hold the session
    forever. Leftovers get a short grace to end, then are abandoned with the loop."""
    try:
        leftovers = asyncio.all_tasks(loop)
        for task in leftovers:
            task.cancel()
        if leftovers:
            loop.run_until_complete(asyncio.wait(leftovers, timeout=_SHUTDOWN_GRACE_S))
        for task in leftovers:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: no "never retrieved" log
            elif not task.done():
                task._log_destroy_pending = False  # type: ignore[attr-defined]
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
