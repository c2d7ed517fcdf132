"""The ``local`` executor: attempts run in this process, ``concurrency`` at a time.

Two kinds of lanes, one contract:

- an async harness runs as ``concurrency`` coroutine lanes on the event loop; a lane
  starts its next call before judging the last, so a wave of calls that end together
  is restarted first and judged after;
- a sync harness (one exposing ``sync_callable``) runs as ``concurrency`` daemon
  thread lanes that take attempts one after another without a round trip through
  the event loop (results are handed over in batches); a monitor on the loop
  enforces timeouts and replaces a lane whose call overran, so a stuck call never
  holds the evaluation nor the process. A call that holds the GIL (pure-Python or C
  computation) keeps the monitor from running until it returns; it is a timeout all
  the same, since each lane notes when its call ended, but it was not stopped at its
  deadline: CPU-bound harnesses belong on the ``process`` executor.

Best for I/O-bound harnesses (a model endpoint); the per-attempt overhead of these
lanes is tuned (``benchmarks/engine.py``): keep work out of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forge._util.printed import capture, captured, release, stdout_router
from forge.executors.base import EXECUTORS, Batch, Executor, Prepared

if TYPE_CHECKING:
    from forge.results.model import AttemptResult, StopReason

__all__ = ["LocalExecutor"]


@EXECUTORS.register("local")
class LocalExecutor(Executor):
    """In this process: coroutine lanes for async harnesses, thread lanes for sync ones.

    Takes ``workers`` and ``ray_address`` (a bench may set them for another executor
    that the command line then overrides) and needs neither: ``concurrency`` sizes it.
    """

    name = "local"

    async def run_batch(self, batch: Batch) -> None:
        # What an attempt prints goes to its own record, never to forge's stdout.
        stdout_router()
        fn = batch.harness.sync_callable
        if fn is not None:
            await _run_threads(batch, fn)
        else:
            await _run_coroutines(batch)


# -- async harnesses: coroutine lanes ---------------------------------------------------


async def _run_coroutines(batch: Batch) -> None:
    next_index = 0
    inflight: set[asyncio.Future[Any]] = set()
    # Set on cancel: attempts stop waiting even for a harness that ignores
    # cancellation (it would otherwise hold a Ctrl-C until its timeout).
    stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    harness, timeout_s = batch.harness, batch.timeout_s

    def cancel() -> None:
        for call in list(inflight):
            call.cancel()
        if not stop.done():
            stop.set_result(None)

    def begin() -> tuple[int, Prepared, asyncio.Future[Any]] | None:
        nonlocal next_index
        if next_index >= batch.size or batch.cancelled:
            return None
        i = next_index
        next_index += 1
        p = batch.prepare(i)
        call = asyncio.ensure_future(_timed(p, harness.run(p.config, p.task, p.ctx)))
        inflight.add(call)
        return i, p, call

    async def lane() -> None:
        current = begin()
        while current is not None:
            i, p, call = current
            try:
                # The call started before this lane judged the attempt before it:
                # its timeout runs from its own start.
                await _first_of(call, stop, p.start + timeout_s - time.monotonic())
            except asyncio.CancelledError:
                _abandon(call)
                raise
            finally:
                inflight.discard(call)
            if p.end is None:  # the call did not end (or never started): now is its end
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
            batch.record(i, await _conclude(batch, p, call))

    batch.on_cancel(cancel)
    lanes = [asyncio.ensure_future(lane()) for _ in range(min(batch.concurrency, batch.size))]
    try:
        await asyncio.gather(*lanes)
    finally:
        batch.on_cancel(None)
        for w in lanes:
            w.cancel()


async def _conclude(batch: Batch, p: Prepared, call: asyncio.Future[Any]) -> AttemptResult:
    if (p.overran or call.cancelled()) and batch.cancelled:
        return batch.finish(p, "cancelled", "the evaluation was cancelled")
    if p.overran:
        return batch.finish(p, "timeout", f"no result within {batch.timeout_s:g} s")
    if call.cancelled():
        return batch.finish(p, "error", "the harness cancelled its own attempt")
    exc = call.exception()
    judged = batch.judge(p, None if exc else call.result(), exc)
    result: AttemptResult = await judged if inspect.isawaitable(judged) else judged
    return result


async def _timed(p: Prepared, call: Awaitable[Any]) -> Any:
    """The harness call, capturing what it prints; notes in ``p`` when it ended. The lane
    looks only once it has judged the attempt before, which may be much later."""
    try:
        return await captured(p.printed, call)
    finally:
        if p.end is None:  # else the lane gave up on it already, and said when
            p.end = time.monotonic()


async def _first_of(call: asyncio.Future[Any], stop: asyncio.Future[None],
                    timeout: float) -> None:
    """Return when ``call`` or ``stop`` is done or ``timeout`` passes (at once if <= 0).

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


def _abandon(call: asyncio.Future[Any]) -> None:
    call.cancel()
    # Retrieve whatever it ends with, so asyncio does not log "never retrieved".
    call.add_done_callback(lambda f: f.cancelled() or f.exception())


# -- sync harnesses: thread lanes -------------------------------------------------------


@dataclass
class _Slot:
    """A sync call in flight on a thread lane. ``settled`` is set, under the lane lock,
    by whoever records the attempt first: the lane (result) or the monitor (timeout)."""

    index: int
    prepared: Prepared
    settled: bool = False


async def _run_threads(batch: Batch, fn: Callable[..., Any]) -> None:
    await _Lanes(batch, fn, asyncio.get_running_loop()).run()


class _Lanes:
    """Thread lanes that each take the batch's next attempt until none is left, and the
    monitor on the event loop that records their results and times out stuck calls
    (a stuck lane is left behind and a new one started)."""

    def __init__(self, batch: Batch, fn: Callable[..., Any],
                 loop: asyncio.AbstractEventLoop) -> None:
        self.batch, self.fn, self.loop = batch, fn, loop
        self.size, self.timeout_s = batch.size, batch.timeout_s
        self.lock = threading.Lock()
        self.wake = asyncio.Event()
        self.slots: dict[int, _Slot] = {}  # lane id -> call in flight
        self.next = 0
        self.live = 0  # changed on the event loop only
        self.lane_ids = 0
        # Lanes hand results over here and the monitor drains them on each tick (at
        # most 50 ms later): waking the loop once per attempt costs a 1 ms harness
        # several percent of its throughput.
        self.pending: list[tuple[int, AttemptResult]] = []

    async def run(self) -> None:
        batch = self.batch
        batch.on_cancel(self._wake_monitor)
        tick = min(0.05, self.timeout_s / 10)
        try:
            for _ in range(min(batch.concurrency, self.size)):
                self._start_lane()
            while self.live > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), tick)
                self.wake.clear()
                self._drain()
                for slot, stop, why in self._expired(time.monotonic()):
                    batch.record(slot.index, batch.finish(slot.prepared, stop, why))
                    if stop == "timeout":
                        self._start_lane()
            self._drain()
        finally:
            batch.on_cancel(None)
            if self.live > 0:  # our caller was cancelled: tell the lanes to stop
                batch.cancel()

    def _drain(self) -> None:
        with self.lock:
            handed = self.pending[:]
            self.pending.clear()
        for i, result in handed:
            self.batch.record(i, result)

    def _expired(self, now: float) -> list[tuple[_Slot, StopReason, str]]:
        """Settle the calls cancelled or past the timeout; their lanes no longer count."""
        expired: list[tuple[_Slot, StopReason, str]] = []
        with self.lock:
            for lane_id, slot in list(self.slots.items()):
                if self.batch.cancelled:
                    expired.append((slot, "cancelled", "the evaluation was cancelled"))
                elif now - slot.prepared.start >= self.timeout_s:
                    expired.append((slot, "timeout",
                                    f"no result within {self.timeout_s:g} s"))
                else:
                    continue
                slot.settled = True
                del self.slots[lane_id]
                self.live -= 1  # the stuck lane no longer counts
        return expired

    def _start_lane(self) -> None:
        self.live += 1
        self.lane_ids += 1
        threading.Thread(target=self._lane, args=(self.lane_ids,), daemon=True,
                         name=f"forge-lane-{self.lane_ids}").start()

    def _wake_monitor(self) -> None:
        self.loop.call_soon_threadsafe(self.wake.set)

    def _lane_ended(self) -> None:
        self.live -= 1
        self.wake.set()

    # -- on a lane's thread --------------------------------------------------------------

    def _lane(self, lane_id: int) -> None:
        while (slot := self._claim(lane_id)) is not None:
            p = slot.prepared
            raw, exc = None, None
            token = capture(p.printed)
            try:
                raw = self.fn(p.config, p.task, p.ctx)
            except BaseException as err:  # even SystemExit from a harness is data
                exc = err
            finally:
                # Its end, before judging: a call that held the GIL past its timeout kept
                # the monitor from seeing it, and is a timeout all the same (the engine
                # compares this end with the timeout).
                p.end = time.monotonic()
                release(token)
            if not self._settle(lane_id, slot):  # the monitor recorded it (timeout, cancel)
                return  # a replacement lane has taken over; this one bows out
            result = self.batch.judge_here(p, raw, exc, self.loop)
            with self.lock:
                self.pending.append((slot.index, result))
        self.loop.call_soon_threadsafe(self._lane_ended)

    def _claim(self, lane_id: int) -> _Slot | None:
        """The batch's next attempt, prepared and in flight on this lane; None when the
        batch is cancelled or done."""
        with self.lock:
            if self.batch.cancelled or self.next >= self.size:
                return None
            i = self.next
            self.next += 1
            slot = self.slots[lane_id] = _Slot(i, self.batch.prepare(i))
            return slot

    def _settle(self, lane_id: int, slot: _Slot) -> bool:
        """Take the call's result for this lane, unless the monitor already settled it."""
        with self.lock:
            if slot.settled:
                return False
            slot.settled = True
            del self.slots[lane_id]
            return True
