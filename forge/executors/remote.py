"""Executors whose workers live outside this process (``process``, ``ray``).

A remote executor takes work items (config values, task, attempt, seed, split,
timeout) and reports one :class:`WorkOutcome` per item: the harness's output already
checked by :meth:`RunOutput.coerce`, or a failure with its reason. Only the
``python`` harness can leave the process: a worker re-imports it from its
``module:function`` target (``command``, ``http`` and ``openai`` are out of process
already). :class:`RemoteExecutor` turns a batch into work items, runs them on a
thread of its own (``run`` blocks) and judges each outcome on the event loop as it
arrives.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import math
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic_core import PydanticSerializationError

from forge._util.printed import Printed, capture, release, stdout_router
from forge.core.spec import BuildContext, Spec
from forge.core.task import Task
from forge.errors import OptionError
from forge.executors.base import (
    Batch,
    Executor,
    ExecutorContext,
    ExecutorOptions,
    ExecutorSettings,
    Prepared,
)
from forge.harness.base import AttemptContext, AttemptTimeout, RunOutput

if TYPE_CHECKING:
    from forge.results.model import AttemptResult

__all__ = [
    "CallStatus",
    "ChunkQueue",
    "LaneQueue",
    "OnOutcome",
    "RemoteExecutor",
    "WorkItem",
    "WorkOutcome",
    "load_harness",
    "run_item",
    "run_item_bounded",
]

CallStatus = Literal["ok", "error", "timeout", "lost"]


@dataclass(frozen=True)
class WorkItem:
    """One attempt to run remotely; ``index`` is its place in the engine's batch."""

    index: int
    config: dict[str, Any]
    task_json: str
    seed: int
    attempt: int
    split: str
    timeout_s: float


@dataclass(frozen=True)
class WorkOutcome:
    """What became of one item.

    ``ok``: ``output`` holds the harness's valid output. ``error``: the harness raised
    or returned something invalid; ``error`` says what, exactly as the local lanes
    word it. ``timeout``: no result within the item's timeout. ``lost``: the worker
    died or the task was lost; ``error`` gives the reason. ``stdout``: what the
    harness printed meanwhile, as :meth:`forge._util.printed.Printed.text` keeps it (not yet
    redacted: the secrets are registered in forge's process, which redacts it).
    """

    index: int
    kind: CallStatus
    output: RunOutput | None = None
    error: str | None = None
    duration_s: float = 0.0
    stdout: str | None = None


OnOutcome = Callable[[WorkOutcome], None]


class RemoteExecutor(Executor):
    """Runs work items in workers elsewhere; one executor serves many batches, then is
    closed.

    ``run`` blocks (it is called from a thread of its own), calls ``on_outcome`` once
    per item as results arrive (from any thread), and stops starting items once
    ``cancelled()`` is true; items it never reported are settled here. A failing
    worker never raises out of ``run``: its items come back ``lost``.
    """

    @classmethod
    def check(cls, settings: ExecutorSettings, harness: Spec) -> None:
        if harness.name != "python":
            raise OptionError(f"only the 'python' harness can run in {settings.name} workers; "
                              f"this bench uses {harness.name!r}", option="--executor")

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        where = ExecutorContext.of(ctx)
        return cls.for_target(str(where.harness.args["target"]), str(where.base_dir),
                              ExecutorOptions.model_validate(args))

    @classmethod
    @abstractmethod
    def for_target(cls, target: str, base_dir: str, options: ExecutorOptions) -> Self:
        """The executor for the harness ``target``, imported from ``base_dir``."""

    @abstractmethod
    def run(self, items: Sequence[WorkItem], on_outcome: OnOutcome,
            cancelled: Callable[[], bool]) -> None: ...

    async def run_batch(self, batch: Batch) -> None:
        """Send the batch to the workers; judge each outcome here as it arrives.

        The duration is the worker's measure of the harness call, as the local lanes
        measure it. Items never reported (cancelled) end ``cancelled``.
        """
        loop = asyncio.get_running_loop()
        arrived: asyncio.Queue[WorkOutcome | None] = asyncio.Queue()
        prepared: list[Prepared] = []
        items: list[WorkItem] = []
        for i in range(batch.size):
            p = batch.prepare(i)
            prepared.append(p)
            try:
                text = batch.task_text(p)
            except PydanticSerializationError as exc:
                batch.record(i, batch.finish(p, "error",
                                             f"task cannot be sent to a worker: {exc}"))
                continue
            items.append(WorkItem(i, p.config, text, p.seed, p.key.attempt, batch.split,
                                  batch.timeout_s))

        finished = threading.Event()

        def post(outcome: WorkOutcome | None) -> None:
            # The loop may be gone: we stop listening once every item is in (or on
            # cancel), which can be before the executor's thread returns.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(arrived.put_nowait, outcome)

        def work() -> None:
            try:
                self.run(items, post, lambda: batch.cancelled)
            finally:
                finished.set()
                post(None)

        # A daemon thread, not the loop's default executor: evaluate() must not wait
        # at shutdown for a dispatcher that is still killing a stuck worker.
        batch.on_cancel(lambda: post(None))
        threading.Thread(target=work, daemon=True, name="forge-executor").start()
        done: set[int] = set()
        try:
            while len(done) < len(items):
                outcome = await arrived.get()
                if outcome is None:  # the executor returned, or a cancel woke us
                    if batch.cancelled or finished.is_set():
                        break
                    continue
                if outcome.index in done:
                    continue
                done.add(outcome.index)
                p = prepared[outcome.index]
                p.end = p.start + outcome.duration_s
                batch.record(outcome.index, await _conclude(batch, p, outcome))
        finally:
            batch.on_cancel(None)
        for it in items:
            if it.index not in done:
                p = prepared[it.index]
                if batch.cancelled:
                    batch.record(it.index, batch.finish(p, "cancelled",
                                                        "the evaluation was cancelled"))
                else:
                    batch.record(it.index, batch.finish(p, "error",
                                                        "the executor lost the attempt"))


async def _conclude(batch: Batch, p: Prepared, outcome: WorkOutcome) -> AttemptResult:
    p.printed = Printed.told(outcome.stdout)
    if outcome.kind == "ok" and outcome.output is not None:
        judged = batch.score(p, outcome.output)
        result: AttemptResult = await judged if inspect.isawaitable(judged) else judged
        return result
    if outcome.kind == "timeout":
        return batch.finish(p, "timeout", outcome.error)
    # A harness error, or a worker lost under it: unscored, with the reason.
    return batch.finish(p, "error", outcome.error)


def load_harness(target: str, base_dir: str) -> Callable[..., Any]:
    """The harness function, imported in a worker (once per worker)."""
    from forge.harness.python import import_target

    fn, _ = import_target(target, Path(base_dir))
    return fn


def run_item(fn: Callable[..., Any], item: WorkItem, printed: Printed | None = None
             ) -> WorkOutcome:
    """Run one attempt in this process, as the local lanes would, and check its output.

    Every exception of the harness (even SystemExit) is data, as on the local lanes.
    What it prints on ``sys.stdout`` goes to ``printed`` (a new one if None) and comes
    back with the outcome.
    """
    stdout_router()
    printed = printed if printed is not None else Printed()
    token = capture(printed)
    try:
        outcome = _run_item(fn, item)
    finally:
        release(token)
    return replace(outcome, stdout=printed.text())


def _run_item(fn: Callable[..., Any], item: WorkItem) -> WorkOutcome:
    task = Task.model_validate_json(item.task_json)
    start = time.monotonic()
    ctx = AttemptContext.model_construct(seed=item.seed, attempt=item.attempt, split=item.split,
                                         timeout_s=item.timeout_s,
                                         deadline=start + item.timeout_s)
    try:
        raw = fn(item.config, task, ctx)
        if inspect.isawaitable(raw):
            raw = asyncio.run(_awaited(raw))
    except BaseException as exc:
        kind: CallStatus = "timeout" if isinstance(exc, AttemptTimeout) else "error"
        return WorkOutcome(item.index, kind, None, f"{type(exc).__name__}: {exc}",
                           time.monotonic() - start)
    duration = time.monotonic() - start
    try:
        output = RunOutput.coerce(raw)
    except ValueError as err:
        return WorkOutcome(item.index, "error", None, str(err), duration)
    return WorkOutcome(item.index, "ok", output, None, duration)


async def _awaited(value: Any) -> Any:
    return await value


def run_item_bounded(fn: Callable[..., Any], item: WorkItem) -> tuple[WorkOutcome, bool]:
    """:func:`run_item` on a daemon thread, given up after the item's timeout.

    Returns the outcome and whether a call was abandoned still running (the worker
    should then be replaced: the stuck call keeps its thread and its CPU).
    """
    box: list[WorkOutcome] = []
    printed = Printed()  # what it printed until the timeout, should it come
    t = threading.Thread(target=lambda: box.append(run_item(fn, item, printed)), daemon=True)
    t.start()
    t.join(item.timeout_s)
    if box:
        return box[0], False
    return WorkOutcome(item.index, "timeout", None, f"no result within {item.timeout_s:g} s",
                       item.timeout_s, printed.text()), True


class ChunkQueue:
    """Work items cut into chunks, about ``per_worker`` chunks per worker and at most
    ``max_chunk`` items each: big enough to keep IPC overhead low, small enough that
    the workers finish together. Thread-safe; ``take`` returns None when empty or
    cancelled."""

    def __init__(self, items: Sequence[WorkItem], workers: int,
                 cancelled: Callable[[], bool], *, per_worker: int = 4,
                 max_chunk: int = 64) -> None:
        size = max(1, min(max_chunk, math.ceil(len(items) / (workers * per_worker))))
        self._chunks: collections.deque[list[WorkItem]] = collections.deque(
            list(items[i:i + size]) for i in range(0, len(items), size))
        self._lock = threading.Lock()
        self._cancelled = cancelled

    def __len__(self) -> int:
        return len(self._chunks)

    def take(self) -> list[WorkItem] | None:
        with self._lock:
            return self._chunks.popleft() if self._chunks and not self._cancelled() else None

    def put_back(self, chunk: Sequence[WorkItem], *, singly: bool = False) -> None:
        """Return the unfinished rest of a chunk to the front of the queue, as one chunk
        or, ``singly``, one chunk per item (to find the one item that breaks a worker)."""
        with self._lock:
            self._front(chunk, singly)

    def _front(self, chunk: Sequence[WorkItem], singly: bool) -> None:
        """Put ``chunk`` at the front of the queue; the caller holds the lock."""
        if singly:
            self._chunks.extendleft([[item] for item in reversed(chunk)])
        elif chunk:
            self._chunks.appendleft(list(chunk))


class LaneQueue(ChunkQueue):
    """A chunk queue that counts the chunks out with the lanes, for executors whose
    lanes can end early (a lane with no worker left gives its chunk back and ends).

    ``take`` waits, while the queue is empty, for the chunks out to be settled: one may
    come back, and the lane that would have ended then runs it. Each chunk taken is
    settled once, with what of it goes back to the queue (nothing: it was reported).
    """

    def __init__(self, items: Sequence[WorkItem], workers: int,
                 cancelled: Callable[[], bool], *, poll_s: float = 0.25) -> None:
        super().__init__(items, workers, cancelled)
        self._out = 0
        self._moved = threading.Condition(self._lock)
        self._poll_s = poll_s  # how often a waiting take looks at ``cancelled``

    def take(self) -> list[WorkItem] | None:
        with self._moved:
            while not self._cancelled():
                if self._chunks:
                    self._out += 1
                    return self._chunks.popleft()
                if not self._out:
                    return None
                self._moved.wait(self._poll_s)
            return None

    def settle(self, back: Sequence[WorkItem] = (), *, singly: bool = False) -> None:
        """A chunk taken is done with; ``back`` (its items not reported) goes to the front
        of the queue, as one chunk or, ``singly``, one chunk per item."""
        with self._moved:
            self._out -= 1
            self._front(back, singly)
            self._moved.notify_all()
