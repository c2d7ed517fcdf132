"""The executor protocol: where the attempts of one batch run.

An executor takes work items (config values, task, attempt, seed, split, timeout)
and reports one :class:`WorkOutcome` per item: the harness's output already checked
by :func:`forge.rollout._as_run_output`, or a failure with its reason. Scoring stays
in the parent (the scorer is built there), so a result depends only on the output,
never on where the harness ran: every executor gives the same seeds, scores and
decisions.

The in-process lanes of :class:`forge.rollout.RolloutEngine` are the ``local``
executor; remote executors (``process``, ``ray``) implement :class:`Executor`.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from forge.harness._base import AttemptContext, AttemptTimeout, RunOutput
from forge.task import Task

__all__ = [
    "ChunkQueue","Executor", "ExecutorSettings", "Outcome", "WorkItem", "WorkOutcome", "run_item"]

Outcome = Literal["ok", "error", "timeout", "lost"]


@dataclass(frozen=True)
class ExecutorSettings:
    """Which executor and how big: journaled with a search so a resume uses the same."""

    name: str = "local"
    workers: int | None = None  # None: the machine's cores
    ray_address: str | None = None

    def journal_form(self) -> dict[str, Any]:
        return {"name": self.name, "workers": self.workers, "ray_address": self.ray_address}


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
    died or the task was lost; ``error`` gives the reason.
    """

    index: int
    kind: Outcome
    output: RunOutput | None = None
    error: str | None = None
    duration_s: float = 0.0


OnOutcome = Callable[[WorkOutcome], None]


class Executor(Protocol):
    """Runs batches of work items; one executor serves many batches, then is closed.

    ``run`` blocks (the engine calls it from a thread), calls ``on_outcome`` once per
    item as results arrive (from any thread), and stops starting items once
    ``cancelled()`` is true; items it never reported are the engine's to settle.
    A failing worker never raises out of ``run``: its items come back ``lost``.
    """

    name: str

    def run(self, items: Sequence[WorkItem], on_outcome: OnOutcome,
            cancelled: Callable[[], bool]) -> None: ...

    def close(self) -> None: ...


def load_harness(target: str, base_dir: str) -> Callable[..., Any]:
    """The harness function, imported in a worker (once per worker).

    Also imports what :func:`run_item` needs: the parent times each attempt from the
    moment the worker is ready, so no first attempt may pay for forge's imports.
    """
    import forge.rollout  # noqa: F401 - warm-up, see above
    from forge.harness.python import import_target

    fn, _ = import_target(target, Path(base_dir))
    return fn


def run_item(fn: Callable[..., Any], item: WorkItem) -> WorkOutcome:
    """Run one attempt in this process, as the local lanes would, and check its output.

    Every exception of the harness (even SystemExit) is data, as on the local lanes.
    """
    from forge.rollout import _as_run_output

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
        kind: Outcome = "timeout" if isinstance(exc, AttemptTimeout) else "error"
        return WorkOutcome(item.index, kind, None, f"{type(exc).__name__}: {exc}",
                           time.monotonic() - start)
    duration = time.monotonic() - start
    try:
        output = _as_run_output(raw)
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
    t = threading.Thread(target=lambda: box.append(run_item(fn, item)), daemon=True)
    t.start()
    t.join(item.timeout_s)
    if box:
        return box[0], False
    return WorkOutcome(item.index, "timeout", None, f"no result within {item.timeout_s:g} s",
                       item.timeout_s), True


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

    def put_back(self, chunk: list[WorkItem]) -> None:
        """Return the unfinished rest of a chunk to the front of the queue."""
        if chunk:
            with self._lock:
                self._chunks.appendleft(chunk)

    def put_back_singly(self, chunk: list[WorkItem]) -> None:
        """Return a chunk as one-item chunks (to find the one item that breaks a worker)."""
        with self._lock:
            self._chunks.extendleft([[item] for item in reversed(chunk)])
