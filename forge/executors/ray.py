"""The ``ray`` executor: actors on a Ray cluster, for more work than one machine holds.

``address`` joins an existing cluster; without it a local Ray instance starts (and
is shut down on :meth:`RayExecutor.close`). Each actor imports the harness once and
runs chunks of attempts, each attempt on a daemon thread bounded by its timeout
(an actor that had to abandon a stuck call is replaced after its chunk). A lost
chunk (the actor died, the task was lost) is run again one attempt at a time so
only the attempt that kills its worker is recorded ``lost``, with the reason.

A local instance that stops under a run (its GCS or raylet gone) is another matter:
no attempt can succeed any more, and Ray ends the driver process a minute later.
The lanes watch its processes while they wait; once one has exited, every attempt
not yet reported is ``lost`` with that reason and :attr:`RayExecutor.broken` is set,
so that the session ends the run at once, with one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Self

from forge.errors import OptionError
from forge.executors._base import EXECUTORS, ExecutorOptions, ExecutorSettings
from forge.executors.remote import (
    ChunkQueue,
    OnOutcome,
    RemoteExecutor,
    WorkItem,
    WorkOutcome,
    load_harness,
    run_item_bounded,
)
from forge.spec import Spec

__all__ = ["RayExecutor", "import_ray"]

#: Beyond the sum of its items' timeouts, how long a chunk may take before its actor
#: is presumed lost (s): actor start-up and scheduling on a busy cluster.
_CHUNK_SLACK_S = 60.0
#: How often a lane waiting for its chunk checks that the local instance is alive (s).
_WATCH_S = 0.25


class _RayGone(Exception):
    """The local Ray instance stopped while a chunk was out."""


def _started(pid: int) -> str | None:
    """When process ``pid`` started (in clock ticks since boot), to tell it from a
    later process given the same pid; None if it is gone (or there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                found.update(int(c) for c in f.read().split())
    return found


def import_ray() -> Any:
    """The ``ray`` module, or a one-line :class:`OptionError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise OptionError("Ray is not installed; install forge[ray] "
                          "(pip install 'forge[ray]')", option="--executor") from None
    return ray


class _Runner:
    """The actor's body: the harness imported once, chunks run in order."""

    def __init__(self, target: str, base_dir: str) -> None:
        self.fn = load_harness(target, base_dir)

    def run_chunk(self, items: list[WorkItem]) -> tuple[list[WorkOutcome], bool]:
        outcomes, tainted = [], False
        for item in items:
            outcome, stuck = run_item_bounded(self.fn, item)
            outcomes.append(outcome)
            tainted = tainted or stuck
        return outcomes, tainted


@EXECUTORS.register("ray")
class RayExecutor(RemoteExecutor):
    """``workers`` actors (default: the cluster's CPUs, or the local cores)."""

    name = "ray"

    def __init__(self, target: str, base_dir: str, *, workers: int | None = None,
                 address: str | None = None) -> None:
        self.ray = import_ray()
        self.target = target
        self.base_dir = base_dir
        self._owns = False
        if not self.ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "configure_logging": False}
            if address:
                self.ray.init(address=address, **kwargs)
            else:
                self.ray.init(num_cpus=workers or os.cpu_count() or 1, **kwargs)
            self._owns = True
        cpus = int(self.ray.cluster_resources().get("CPU", 1))
        self.workers = workers or max(1, cpus)
        self._actor_cls = self.ray.remote(num_cpus=1, max_restarts=0)(_Runner)
        self._actors: list[Any] = [None] * self.workers
        #: The raylet's helpers (its agents), pid -> start: ray.shutdown() leaves them
        #: running once the raylet died before it, so close() ends them then.
        self._helpers: dict[int, str] = {}
        self._note_helpers()

    @classmethod
    def check(cls, settings: ExecutorSettings, harness: Spec) -> None:
        super().check(settings, harness)
        import_ray()

    @classmethod
    def for_target(cls, target: str, base_dir: str, options: ExecutorOptions) -> Self:
        return cls(target, base_dir, workers=options.workers, address=options.ray_address)

    def _actor(self, slot: int) -> Any:
        if self._actors[slot] is None:
            self._actors[slot] = self._actor_cls.remote(self.target, self.base_dir)
        return self._actors[slot]

    def _node(self) -> Any:
        return getattr(self.ray._private.worker, "_global_node", None) if self._owns else None

    def _note_helpers(self) -> None:
        node = self._node()
        for info in (node.all_processes.get("raylet", []) if node else []):
            for pid in _children(info.process.pid):
                if pid not in self._helpers and (start := _started(pid)) is not None:
                    self._helpers[pid] = start

    def _gone(self) -> str | None:
        """Why the local instance this executor started can serve nothing any more."""
        if self.broken is None and (node := self._node()) is not None:
            dead = sorted({kind for kind, _ in node.dead_processes()})
            if dead:
                self.broken = f"the local Ray instance stopped ({', '.join(dead)} exited)"
        return self.broken

    def _result(self, ref: Any, limit: float) -> tuple[list[WorkOutcome], bool]:
        """The chunk's outcomes, watching the instance meanwhile."""
        deadline = time.monotonic() + limit
        while True:
            wait = min(_WATCH_S, max(0.0, deadline - time.monotonic()))
            ready, _ = self.ray.wait([ref], timeout=wait)
            if ready:
                result: tuple[list[WorkOutcome], bool] = self.ray.get(ready[0])
                return result
            if self._gone():
                raise _RayGone
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no result within {limit:g} s")

    def _replace(self, slot: int) -> None:
        actor = self._actors[slot]
        if actor is not None:
            with contextlib.suppress(Exception):  # it may be gone already
                self.ray.kill(actor)
        self._actors[slot] = None

    def run(self, items: Sequence[WorkItem], on_outcome: OnOutcome,
            cancelled: Callable[[], bool]) -> None:
        if not items:
            return
        self._note_helpers()  # the raylet may start its agents after ray.init returns
        queue = ChunkQueue(items, self.workers, cancelled)

        def lost(chunk: list[WorkItem], why: str) -> None:
            for item in chunk:
                on_outcome(WorkOutcome(item.index, "lost", None, why))

        def lane(slot: int) -> None:
            while (chunk := queue.take()) is not None:
                if self._gone():
                    lost(chunk, f"ray task lost: {self.broken}")
                    continue
                limit = sum(i.timeout_s for i in chunk) + _CHUNK_SLACK_S
                try:
                    ref = self._actor(slot).run_chunk.remote(chunk)
                    outcomes, tainted = self._result(ref, limit)
                except Exception as exc:
                    if self._gone():
                        lost(chunk, f"ray task lost: {self.broken}")
                        continue
                    self._replace(slot)
                    if len(chunk) > 1:
                        queue.put_back_singly(chunk)  # find the attempt that kills its worker
                        continue
                    first = (str(exc).splitlines() or [""])[0]
                    why = f"ray task lost: {type(exc).__name__}" + (f": {first}" if first else "")
                    on_outcome(WorkOutcome(chunk[0].index, "lost", None, why))
                    continue
                for outcome in outcomes:
                    on_outcome(outcome)
                if tainted:
                    self._replace(slot)

        lanes = [threading.Thread(target=lane, args=(slot,), daemon=True,
                                  name=f"forge-ray-lane-{slot}")
                 for slot in range(min(self.workers, len(queue)))]
        for t in lanes:
            t.start()
        for t in lanes:
            t.join()

    def close(self) -> None:
        """Kill the actors; shut Ray down if this executor started it."""
        if self._gone():
            self._actors = [None] * self.workers  # nothing left to kill them with
        for slot in range(len(self._actors)):
            self._replace(slot)
        if self._owns and self.ray.is_initialized():
            self.ray.shutdown()
        if self.broken is not None:
            for pid, start in self._helpers.items():
                if _started(pid) == start:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
