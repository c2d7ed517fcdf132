"""The rollout engine: run attempts with seeds, isolation, bounded concurrency, timeouts.

A failure of the harness is data. Whatever one attempt does (raise, hang, return
garbage, return something that cannot be serialised), the engine records a stop
reason and an error and goes on with the next attempt.

Two ways to run attempts, one contract:

- an async harness runs as ``concurrency`` coroutine lanes on the event loop;
- a sync harness (one exposing ``sync_callable``) runs as ``concurrency`` daemon
  thread lanes that take attempts one after another without a round trip through
  the event loop; a monitor on the loop enforces timeouts and replaces a lane whose
  call overran, so a stuck call never holds the evaluation nor the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import math
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from forge.executors._base import Executor, WorkItem, WorkOutcome
from forge.harness._base import AttemptContext, AttemptTimeout, Harness, RunOutput
from forge.registry import Config
from forge.results import AttemptResult, StopReason
from forge.scorers._base import Score, Scorer
from forge.secrets import redact
from forge.task import Task

__all__ = ["AttemptKey", "RolloutEngine", "derive_seed"]

_MAX_ERROR_CHARS = 2000


def derive_seed(run_seed: int, split: str, task_id: str, attempt: int) -> int:
    """A 63-bit seed from (run seed, split, task id, attempt index).

    The config is deliberately not an input: two configs evaluated with the same run
    seed see the same seeds, so their comparison is paired attempt by attempt.
    """
    key = f"{run_seed}\x1f{split}\x1f{task_id}\x1f{attempt}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class AttemptKey:
    """Which attempt to run: a task of the split and the attempt's index."""

    task: Task
    attempt: int


@dataclass
class _Prepared:
    key: AttemptKey
    seed: int
    start: float
    config: dict[str, Any]
    task: Task
    ctx: AttemptContext
    end: float | None = None  # when the harness call ended; judging comes after
    overran: bool = False  # not done when its wait ended: timed out, or cancelled


@dataclass
class _Slot:
    """A sync call in flight on a thread lane. ``settled`` is set, under the lane lock,
    by whoever records the attempt first: the lane (result) or the monitor (timeout)."""

    index: int
    prepared: _Prepared
    settled: bool = False


class RolloutEngine:
    """Runs attempts of one config against one harness and scorer.

    ``run`` takes any list of attempt keys, so callers can evaluate a whole split or
    add attempts to a close decision later (the seeds do not depend on the batch).
    """

    def __init__(self, harness: Harness, scorer: Scorer, *, split: str, run_seed: int,
                 concurrency: int, timeout_s: float, stream: str | None = None,
                 executor: Executor | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.harness = harness
        self.scorer = scorer
        self.split = split
        # Seeds come from the stream (by default the split's name); a search draws
        # fresh seeds for confirmation runs from another stream of the same split.
        self.stream = stream or split
        self.run_seed = run_seed
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        # None: the in-process lanes (``local``); otherwise attempts run in the
        # executor's workers and come back here to be judged, so scoring is the same.
        self.executor = executor
        self._inflight: set[asyncio.Future[Any]] = set()
        self._cancelling = False
        self._wake: Callable[[], None] | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelling

    def cancel(self) -> None:
        """Start no more attempts; end those in flight as ``cancelled``. Idempotent."""
        self._cancelling = True
        for call in list(self._inflight):
            call.cancel()
        if self._wake is not None:
            self._wake()

    async def run(self, config: Config, keys: Sequence[AttemptKey], *,
                  on_attempt: Callable[[AttemptResult], None] | None = None,
                  ) -> list[AttemptResult]:
        """Results in the order of ``keys``.

        After :meth:`cancel`, the attempts that were in flight come back ``cancelled``
        and those never started are left out, so the list may be shorter than ``keys``.
        """
        results: list[AttemptResult | None] = [None] * len(keys)
        task_json: dict[str, str] = {}

        def record(i: int, result: AttemptResult) -> None:
            results[i] = result
            if on_attempt is not None:
                on_attempt(result)

        if keys:
            sync_fn = getattr(self.harness, "sync_callable", None)
            if self.executor is not None:
                await self._run_remote(self.executor, config, keys, task_json, record)
            elif sync_fn is not None:
                await self._run_threads(sync_fn, config, keys, task_json, record)
            else:
                await self._run_coroutines(config, keys, task_json, record)
        return [r for r in results if r is not None]

    # -- shared pieces --------------------------------------------------------------

    def _prepare(self, config: Config, key: AttemptKey, task_json: dict[str, str]
                 ) -> _Prepared:
        seed = derive_seed(self.run_seed, self.stream, key.task.id, key.attempt)
        start = time.monotonic()
        # model_construct: these values are ours and already valid; validating them
        # again per attempt is a measurable share of the engine's overhead.
        ctx = AttemptContext.model_construct(seed=seed, attempt=key.attempt, split=self.split,
                                             timeout_s=self.timeout_s,
                                             deadline=start + self.timeout_s)
        # Private copies: nothing a harness writes can reach another attempt. Config
        # values are immutable scalars, so a new dict is a deep copy; a task is
        # rebuilt from its JSON, which is several times faster than copy.deepcopy.
        return _Prepared(key, seed, start, dict(config.values), _fresh_task(key.task, task_json),
                         ctx)

    def _finish(self, p: _Prepared, stop: StopReason, error: str | None = None,
                output: RunOutput | None = None, score: Score | None = None) -> AttemptResult:
        duration = (p.end if p.end is not None else time.monotonic()) - p.start
        return AttemptResult.model_construct(
            task_id=p.key.task.id, attempt=p.key.attempt, seed=p.seed, stop_reason=stop,
            error=_clip(error), duration_s=duration, output=output, score=score,
            metrics=_attempt_metrics(output, duration))

    def _judge(self, p: _Prepared, raw: Any, exc: BaseException | None
               ) -> AttemptResult | Coroutine[Any, Any, AttemptResult]:
        """The result of a returned call; an awaitable of it when the scorer is async."""
        if exc is not None:
            stop: StopReason = "timeout" if isinstance(exc, AttemptTimeout) else "error"
            return self._finish(p, stop, f"{type(exc).__name__}: {exc}")
        try:
            output = _as_run_output(raw)
        except ValueError as err:
            return self._finish(p, "error", str(err))
        return self._score_output(p, output)

    def _score_output(self, p: _Prepared, output: RunOutput
                      ) -> AttemptResult | Coroutine[Any, Any, AttemptResult]:
        try:
            verdict = self.scorer.score(p.key.task, output)
        except Exception as err:  # a scorer failure leaves the attempt unscored, not failed
            return self._unscored(p, output, err)
        if inspect.isawaitable(verdict):
            return self._await_verdict(p, output, verdict)
        return self._scored(p, output, verdict)

    async def _await_verdict(self, p: _Prepared, output: RunOutput, verdict: Any
                             ) -> AttemptResult:
        try:
            verdict = await verdict
        except asyncio.CancelledError:
            raise
        except Exception as err:
            return self._unscored(p, output, err)
        return self._scored(p, output, verdict)

    def _scored(self, p: _Prepared, output: RunOutput, verdict: Any) -> AttemptResult:
        if not isinstance(verdict, Score):
            return self._unscored(p, output, TypeError(
                f"scorer returned {type(verdict).__name__}, not a Score"))
        return self._finish(p, "completed", None, output, verdict)

    def _unscored(self, p: _Prepared, output: RunOutput, err: BaseException) -> AttemptResult:
        return self._finish(p, "completed", f"scorer failed: {type(err).__name__}: {err}",
                            output)

    # -- remote executors: process pool, Ray ----------------------------------------

    async def _run_remote(self, executor: Executor, config: Config, keys: Sequence[AttemptKey],
                          task_json: dict[str, str],
                          record: Callable[[int, AttemptResult], None]) -> None:
        """Send the batch to ``executor``; judge each outcome here as it arrives.

        The duration is the worker's measure of the harness call, as the local lanes
        measure it. Items the executor never reported (cancelled) end ``cancelled``.
        """
        loop = asyncio.get_running_loop()
        arrived: asyncio.Queue[WorkOutcome | None] = asyncio.Queue()
        prepared: list[_Prepared] = []
        items: list[WorkItem] = []
        for i, key in enumerate(keys):
            p = self._prepare(config, key, task_json)
            prepared.append(p)
            try:
                text = task_json.get(key.task.id) or key.task.model_dump_json()
            except PydanticSerializationError as exc:
                record(i, self._finish(p, "error", f"task cannot be sent to a worker: {exc}"))
                continue
            items.append(WorkItem(i, p.config, text, p.seed, key.attempt, self.split,
                                  self.timeout_s))

        finished = threading.Event()

        def post(outcome: WorkOutcome | None) -> None:
            # The loop may be gone: we stop listening once every item is in (or on
            # cancel), which can be before the executor's thread returns.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(arrived.put_nowait, outcome)

        def on_outcome(outcome: WorkOutcome) -> None:
            post(outcome)

        def work() -> None:
            try:
                executor.run(items, on_outcome, lambda: self._cancelling)
            finally:
                finished.set()
                post(None)

        # A daemon thread, not the loop's default executor: evaluate() must not wait
        # at shutdown for a dispatcher that is still killing a stuck worker.
        def wake() -> None:
            post(None)

        self._wake = wake
        threading.Thread(target=work, daemon=True, name="forge-executor").start()
        done: set[int] = set()
        try:
            while len(done) < len(items):
                outcome = await arrived.get()
                if outcome is None:  # the executor returned, or cancel() woke us
                    if self._cancelling or finished.is_set():
                        break
                    continue
                if outcome.index in done:
                    continue
                done.add(outcome.index)
                p = prepared[outcome.index]
                p.end = p.start + outcome.duration_s
                record(outcome.index, await self._conclude_remote(p, outcome))
        finally:
            self._wake = None
        for it in items:
            if it.index not in done:
                p = prepared[it.index]
                if self._cancelling:
                    record(it.index, self._finish(p, "cancelled", "the evaluation was cancelled"))
                else:
                    record(it.index, self._finish(p, "error", "the executor lost the attempt"))

    async def _conclude_remote(self, p: _Prepared, outcome: WorkOutcome) -> AttemptResult:
        if outcome.kind == "ok" and outcome.output is not None:
            judged = self._score_output(p, outcome.output)
            result: AttemptResult = await judged if inspect.isawaitable(judged) else judged
            return result
        if outcome.kind == "timeout":
            return self._finish(p, "timeout", outcome.error)
        # A harness error, or a worker lost under it: unscored, with the reason.
        return self._finish(p, "error", outcome.error)

    # -- async harnesses: coroutine lanes -------------------------------------------

    async def _run_coroutines(self, config: Config, keys: Sequence[AttemptKey],
                              task_json: dict[str, str],
                              record: Callable[[int, AttemptResult], None]) -> None:
        next_index = 0
        # Set by cancel(): attempts stop waiting even for a harness that ignores
        # cancellation (it would otherwise hold a Ctrl-C until its timeout).
        stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not stop.done():
                stop.set_result(None)

        def begin() -> tuple[int, _Prepared, asyncio.Future[Any]] | None:
            nonlocal next_index
            if next_index >= len(keys) or self._cancelling:
                return None
            i = next_index
            next_index += 1
            p = self._prepare(config, keys[i], task_json)
            call = asyncio.ensure_future(self.harness.run(p.config, p.task, p.ctx))
            self._inflight.add(call)
            return i, p, call

        async def lane() -> None:
            current = begin()
            while current is not None:
                i, p, call = current
                await self._settle(call, stop)
                p.end = time.monotonic()
                if not call.done():
                    # Decide now, not after the yield below: a call that ends in that
                    # gap still overran. Do not wait for it either: a harness that
                    # ignores cancellation must not hold us.
                    p.overran = True
                    _abandon(call)
                # Start the next call before judging this one, and let the other lanes
                # start theirs too: when many calls end together, no harness waits
                # for the judging of attempts that are not its own.
                current = begin()
                await asyncio.sleep(0)
                record(i, await self._conclude(p, call))

        self._wake = wake
        lanes = [asyncio.ensure_future(lane()) for _ in range(min(self.concurrency, len(keys)))]
        try:
            await asyncio.gather(*lanes)
        finally:
            self._wake = None
            for w in lanes:
                w.cancel()

    async def _settle(self, call: asyncio.Future[Any], stop: asyncio.Future[None]) -> None:
        try:
            await _first_of(call, stop, self.timeout_s)
        except asyncio.CancelledError:
            _abandon(call)
            raise
        finally:
            self._inflight.discard(call)

    async def _conclude(self, p: _Prepared, call: asyncio.Future[Any]) -> AttemptResult:
        if (p.overran or call.cancelled()) and self._cancelling:
            return self._finish(p, "cancelled", "the evaluation was cancelled")
        if p.overran:
            return self._finish(p, "timeout", f"no result within {self.timeout_s:g} s")
        if call.cancelled():
            return self._finish(p, "error", "the harness cancelled its own attempt")
        exc = call.exception()
        judged = self._judge(p, None if exc else call.result(), exc)
        result: AttemptResult = await judged if inspect.isawaitable(judged) else judged
        return result

    # -- sync harnesses: thread lanes -----------------------------------------------

    async def _run_threads(self, fn: Callable[..., Any], config: Config,
                           keys: Sequence[AttemptKey], task_json: dict[str, str],
                           record: Callable[[int, AttemptResult], None]) -> None:
        loop = asyncio.get_running_loop()
        lock = threading.Lock()
        wake = asyncio.Event()
        slots: dict[int, _Slot] = {}  # lane id -> call in flight
        state = {"next": 0, "live": 0, "lane_ids": 0}

        # Lanes hand results over here and the monitor drains them on each tick (at
        # most 50 ms later): waking the loop once per attempt costs a 1 ms harness
        # several percent of its throughput.
        pending: list[tuple[int, AttemptResult]] = []

        def drain() -> None:
            with lock:
                batch = pending[:]
                pending.clear()
            for i, result in batch:
                record(i, result)

        def deliver(i: int, result: AttemptResult) -> None:
            with lock:
                pending.append((i, result))

        def lane_ended() -> None:
            state["live"] -= 1
            wake.set()

        def lane(lane_id: int) -> None:
            while True:
                with lock:
                    if self._cancelling or state["next"] >= len(keys):
                        break
                    i = state["next"]
                    state["next"] += 1
                    p = self._prepare(config, keys[i], task_json)
                    slot = slots[lane_id] = _Slot(i, p)
                raw, exc = None, None
                try:
                    raw = fn(p.config, p.task, p.ctx)
                except BaseException as err:  # even SystemExit from a harness is data
                    exc = err
                with lock:
                    if slot.settled:  # the monitor recorded it (timeout or cancel)
                        return  # a replacement lane has taken over; this one bows out
                    slot.settled = True
                    del slots[lane_id]
                judged = self._judge(p, raw, exc)
                if not isinstance(judged, AttemptResult):
                    judged = asyncio.run_coroutine_threadsafe(judged, loop).result()
                deliver(i, judged)
            loop.call_soon_threadsafe(lane_ended)

        def start_lane() -> None:
            state["live"] += 1
            state["lane_ids"] += 1
            threading.Thread(target=lane, args=(state["lane_ids"],), daemon=True,
                             name=f"forge-lane-{state['lane_ids']}").start()

        def wake_monitor() -> None:
            loop.call_soon_threadsafe(wake.set)

        self._wake = wake_monitor
        tick = min(0.05, self.timeout_s / 10)
        try:
            for _ in range(min(self.concurrency, len(keys))):
                start_lane()
            while state["live"] > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), tick)
                wake.clear()
                drain()
                now = time.monotonic()
                expired: list[tuple[_Slot, StopReason, str]] = []
                with lock:
                    for lane_id, slot in list(slots.items()):
                        if self._cancelling:
                            expired.append((slot, "cancelled", "the evaluation was cancelled"))
                        elif now - slot.prepared.start >= self.timeout_s:
                            expired.append((slot, "timeout",
                                            f"no result within {self.timeout_s:g} s"))
                        else:
                            continue
                        slot.settled = True
                        del slots[lane_id]
                        state["live"] -= 1  # the stuck lane no longer counts
                for slot, stop, why in expired:
                    record(slot.index, self._finish(slot.prepared, stop, why))
                    if stop == "timeout":
                        start_lane()
            drain()
        finally:
            self._wake = None
            if state["live"] > 0:  # our caller was cancelled: tell the lanes to stop
                self._cancelling = True


async def _first_of(call: asyncio.Future[Any], stop: asyncio.Future[None],
                    timeout: float) -> None:
    """Return when ``call`` or ``stop`` is done or ``timeout`` passes.

    ``asyncio.wait`` does the same but builds sets and callbacks per call; at
    thousands of attempts a second its cost showed in the concurrency benchmark.
    """
    if call.done() or stop.done():
        return
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    call.add_done_callback(wake)
    stop.add_done_callback(wake)
    timer = loop.call_later(timeout, wake)
    try:
        await waiter
    finally:
        timer.cancel()
        call.remove_done_callback(wake)
        stop.remove_done_callback(wake)


def _fresh_task(task: Task, cache: dict[str, str]) -> Task:
    text = cache.get(task.id)
    if text is None:
        try:
            text = cache[task.id] = task.model_dump_json()
        except PydanticSerializationError:
            return task.model_copy(deep=True)
    return Task.model_validate_json(text)


def _as_run_output(value: Any) -> RunOutput:
    """The harness's return value as a RunOutput whose content survives JSON."""
    if isinstance(value, RunOutput):
        output = value
    elif isinstance(value, dict):
        try:
            output = RunOutput.model_validate(value)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"invalid output: {where}: {first['msg']}") from None
    else:
        raise ValueError(f"invalid output: expected RunOutput or dict, got {type(value).__name__}")
    for name, metric in output.metrics.items():
        if not math.isfinite(metric):
            raise ValueError(f"invalid output: metric {name!r} is {metric}")
    if output.cost is not None and not math.isfinite(output.cost):
        raise ValueError(f"invalid output: cost is {output.cost}")
    try:
        output.model_dump_json()
    except PydanticSerializationError as exc:
        raise ValueError(f"output cannot be serialised: {exc}") from None
    return output


def _attempt_metrics(output: RunOutput | None, duration: float) -> dict[str, float]:
    metrics = {"latency": duration}
    if output is None:
        return metrics
    if output.cost is not None:
        metrics["cost"] = output.cost
    metrics["input_tokens"] = float(output.usage.input_tokens)
    metrics["output_tokens"] = float(output.usage.output_tokens)
    metrics["tool_calls"] = float(len(output.tool_calls))
    # The harness's own metrics come first so that forge's measurement of latency,
    # which the gates compare across configs, cannot be overwritten by a report.
    return {**output.metrics, **metrics}


def _abandon(call: asyncio.Future[Any]) -> None:
    call.cancel()
    # Retrieve whatever it ends with, so asyncio does not log "never retrieved".
    call.add_done_callback(lambda f: f.cancelled() or f.exception())


def _clip(text: str | None) -> str | None:
    if text is None:
        return None
    text = redact(text)  # before the clip, which could cut a secret in two
    if len(text) <= _MAX_ERROR_CHARS:
        return text
    return text[:_MAX_ERROR_CHARS] + f"... [{len(text) - _MAX_ERROR_CHARS} more chars]"
