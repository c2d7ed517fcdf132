"""The ``local`` executor: attempts run in this process, ``concurrency`` at a time.

Two kinds of lanes, one contract:

- an async harness runs as ``concurrency`` coroutine lanes on the event loop; a lane
  starts its next call before judging the last, so a wave of calls that end together
  is restarted first and judged after;
- a sync harness (one exposing ``sync_callable``) runs as ``concurrency`` daemon
  thread lanes that take attempts one after another without a round trip through
  the event loop (results are handed over in batches); a monitor on the loop
  enforces timeouts and replaces a lane whose call overran, so a stuck call never
  holds the evaluation nor the process.

Best for I/O-bound harnesses (a model endpoint); the per-attempt overhead of these
lanes is tuned (``benchmarks/engine.py``): keep work out of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forge.executors._base import EXECUTORS, Batch, Executor, Prepared

if TYPE_CHECKING:
    from forge.results import AttemptResult, StopReason

__all__ = ["LocalExecutor"]


@EXECUTORS.register("local")
class LocalExecutor(Executor):
    """In this process: coroutine lanes for async harnesses, thread lanes for sync ones.

    Takes ``workers`` and ``ray_address`` (a bench may set them for another executor
    that the command line then overrides) and needs neither: ``concurrency`` sizes it.
    """

    name = "local"

    async def run_batch(self, batch: Batch) -> None:
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
        call = asyncio.ensure_future(harness.run(p.config, p.task, p.ctx))
        inflight.add(call)
        return i, p, call

    async def lane() -> None:
        current = begin()
        while current is not None:
            i, p, call = current
            try:
                await _first_of(call, stop, timeout_s)
            except asyncio.CancelledError:
                _abandon(call)
                raise
            finally:
                inflight.discard(call)
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
    loop = asyncio.get_running_loop()
    lock = threading.Lock()
    wake = asyncio.Event()
    slots: dict[int, _Slot] = {}  # lane id -> call in flight
    state = {"next": 0, "live": 0, "lane_ids": 0}
    size, timeout_s = batch.size, batch.timeout_s

    # Lanes hand results over here and the monitor drains them on each tick (at
    # most 50 ms later): waking the loop once per attempt costs a 1 ms harness
    # several percent of its throughput.
    pending: list[tuple[int, AttemptResult]] = []

    def drain() -> None:
        with lock:
            handed = pending[:]
            pending.clear()
        for i, result in handed:
            batch.record(i, result)

    def lane_ended() -> None:
        state["live"] -= 1
        wake.set()

    def lane(lane_id: int) -> None:
        while True:
            with lock:
                if batch.cancelled or state["next"] >= size:
                    break
                i = state["next"]
                state["next"] += 1
                p = batch.prepare(i)
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
            result = batch.judge_here(p, raw, exc, loop)
            with lock:
                pending.append((i, result))
        loop.call_soon_threadsafe(lane_ended)

    def start_lane() -> None:
        state["live"] += 1
        state["lane_ids"] += 1
        threading.Thread(target=lane, args=(state["lane_ids"],), daemon=True,
                         name=f"forge-lane-{state['lane_ids']}").start()

    def wake_monitor() -> None:
        loop.call_soon_threadsafe(wake.set)

    batch.on_cancel(wake_monitor)
    tick = min(0.05, timeout_s / 10)
    try:
        for _ in range(min(batch.concurrency, size)):
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
                    if batch.cancelled:
                        expired.append((slot, "cancelled", "the evaluation was cancelled"))
                    elif now - slot.prepared.start >= timeout_s:
                        expired.append((slot, "timeout", f"no result within {timeout_s:g} s"))
                    else:
                        continue
                    slot.settled = True
                    del slots[lane_id]
                    state["live"] -= 1  # the stuck lane no longer counts
            for slot, stop, why in expired:
                batch.record(slot.index, batch.finish(slot.prepared, stop, why))
                if stop == "timeout":
                    start_lane()
        drain()
    finally:
        batch.on_cancel(None)
        if state["live"] > 0:  # our caller was cancelled: tell the lanes to stop
            batch.cancel()
