"""The ``ray`` executor: actors on a Ray cluster, for more work than one machine holds.

``address`` joins an existing cluster; without it a local Ray instance starts (and
is shut down on :meth:`RayExecutor.close`). Each actor imports the harness once and
runs chunks of attempts, each attempt on a daemon thread bounded by its timeout
(an actor that had to abandon a stuck call is replaced after its chunk). A lost
chunk (the actor died, the task was lost) is run again one attempt at a time so
only the attempt that kills its worker is recorded ``lost``, with the reason. What
the harness prints through ``sys.stdout`` during an attempt comes back with it; the
rest of an actor's output stays in Ray's log files (``log_to_driver`` is off), never
on forge's stdout.

Joining a cluster (``address``) is bounded (:mod:`forge.executors._ray_connect`,
``ray_connect_timeout_s``): one that does not answer in time is
:class:`~forge.errors.ClusterUnreachable`, before anything runs.

A node of a cluster lost under a run (its raylet gone, the machine down) is the
infrastructure's failure, not the attempts': the lanes watch the nodes their actors
run on (the GCS's node table, :mod:`forge.executors._ray_nodes`), and the chunks of
a node lost are queued again, whole and uncharged, for the live nodes (an attempt
that went down with ``_NODE_LOSSES`` nodes is charged: it likely kills them). Before an
actor is started again the live nodes' CPUs are counted: lanes beyond what they can
hold give their chunks back and end; once no live node can hold an actor at all (for
``_NO_NODE_S``, said on stderr), :attr:`RayExecutor.broken` says so and the session
ends the run with one line naming the resume command. Every wait is bounded and,
past a few seconds, said.

A local instance that stops under a run (its GCS or raylet gone) is another matter
(:mod:`forge.executors._ray_local`): no attempt can succeed any more. The lanes
watch its processes while they wait; once one has exited, every attempt not yet
reported is ``lost`` with that reason and :attr:`RayExecutor.broken` is set, so that
the session ends the run at once, with one line.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Self

from forge.core.spec import Spec
from forge.errors import OptionError
from forge.executors._ray_connect import join_cluster
from forge.executors._ray_local import LocalInstance
from forge.executors._ray_nodes import ClusterWatch, NodeInfo
from forge.executors.base import (
    EXECUTORS,
    RAY_CONNECT_TIMEOUT_S,
    ExecutorOptions,
    ExecutorSettings,
)
from forge.executors.remote import (
    LaneQueue,
    OnOutcome,
    RemoteExecutor,
    WorkItem,
    WorkOutcome,
    load_harness,
    run_item_bounded,
)

__all__ = ["RayExecutor", "import_ray"]

log = logging.getLogger(__name__)

#: Beyond the sum of its items' timeouts, how long a chunk may take on an actor that
#: is running before the actor is presumed lost (s).
_CHUNK_SLACK_S = 60.0
#: How often a waiting lane checks that the local instance is alive (s).
_WATCH_S = 0.25
#: How often the lanes ask the cluster which nodes are alive (s), together.
_NODES_S = 1.0
#: The CPUs each actor asks for.
_ACTOR_CPUS = 1.0
#: How long an actor may wait for a free CPU on a live node (s); past it, its lane ends
#: (or, if no actor of this executor runs, the executor is broken).
_PLACE_S = 60.0
#: A wait for a CPU is said on stderr once it is this long (s): start-up takes less.
_SAY_S = 5.0
#: Once no live node has CPUs enough for an actor, how long to wait for one to join (s).
_NO_NODE_S = 10.0
#: An attempt that went down with this many nodes is charged with it: it is the likely
#: cause (it exhausts its machine), not the infrastructure.
_NODE_LOSSES = 3


class _RayGone(Exception):
    """The executor is broken (:attr:`RayExecutor.broken`) while a lane waited."""


class _NodeLost(Exception):
    """The node of the actor running a chunk died."""

    def __init__(self, node_id: str) -> None:
        super().__init__(node_id)
        self.node_id = node_id


class _Retire(Exception):
    """No live node has room for this lane's actor beside the others: the lane ends."""


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

    def node(self) -> str:
        """The id of the node this actor runs on (it answers once it runs)."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

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
                 address: str | None = None, connect_timeout_s: float | None = None) -> None:
        self.ray = import_ray()
        self.target = target
        self.base_dir = base_dir
        self._owns = False
        if not self.ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "configure_logging": False}
            if address:  # bounded: a cluster that does not answer is one line, soon
                join_cluster(self.ray, address, connect_timeout_s or RAY_CONNECT_TIMEOUT_S,
                             **kwargs)
            else:
                self.ray.init(num_cpus=workers or os.cpu_count() or 1, **kwargs)
            self._owns = True
        cpus = int(self.ray.cluster_resources().get("CPU", 1))
        self.workers = workers or max(1, cpus)
        self._actor_cls = self.ray.remote(num_cpus=_ACTOR_CPUS, max_restarts=0)(_Runner)
        self._lock = threading.Lock()
        self._actors: list[Any] = [None] * self.workers
        self._probes: dict[int, Any] = {}  # slot -> its actor's node() call, until it runs
        self._where: dict[int, str] = {}  # slot -> the node its actor runs on
        # A local instance is one node, watched by its processes; a cluster, by its nodes.
        self._nodes = None if address is None and self._owns else ClusterWatch(self.ray,
                                                                               _NODES_S)
        self._cluster = (f"the Ray cluster at {address}" if address
                         else "the local Ray instance" if self._owns else "the Ray cluster")
        self._no_node_since: float | None = None
        self._said_lost: set[str] = set()
        self._local = LocalInstance(self.ray) if self._owns else None
        self._stopped = False  # the local instance's processes exited

    @classmethod
    def check(cls, settings: ExecutorSettings, harness: Spec) -> None:
        super().check(settings, harness)
        import_ray()

    @classmethod
    def for_target(cls, target: str, base_dir: str, options: ExecutorOptions) -> Self:
        return cls(target, base_dir, workers=options.workers, address=options.ray_address,
                   connect_timeout_s=options.ray_connect_timeout_s)

    def _gone(self) -> str | None:
        """Why this executor can serve nothing any more (the local instance it started
        stopped, or no live node can hold an actor), or None."""
        if self.broken is None and self._local is not None:
            self.broken = self._local.stopped()
            self._stopped = self.broken is not None
        return self.broken

    def _capacity(self) -> int:
        """How many actors the live nodes can hold (a local instance: ``workers``)."""
        return self.workers if self._nodes is None else self._nodes.capacity(_ACTOR_CPUS)

    def _placed(self, slot: int) -> Any:
        """The slot's actor once it runs on a live node, started if need be.

        Raises :class:`_Retire` when the live nodes have no room for it beside this
        executor's running actors, :class:`_RayGone` once the executor is broken.
        """
        began, said = time.monotonic(), False
        while True:
            capacity = self._capacity()  # asked before the lock: it may ask the GCS
            with self._lock:
                if slot in self._where:
                    return self._actors[slot]
                if (self._actors[slot] is None
                        and capacity > len(self._where) + len(self._probes)):
                    self._actors[slot] = self._actor_cls.remote(self.target, self.base_dir)
                    self._probes[slot] = self._actors[slot].node.remote()
                probe = self._probes.get(slot)
            if probe is not None:
                ready, _ = self.ray.wait([probe], timeout=_WATCH_S)
                if ready:
                    node_id = self.ray.get(ready[0])  # raises if the actor died starting
                    with self._lock:
                        self._probes.pop(slot, None)
                        self._where[slot] = node_id
                    continue
            else:
                time.sleep(_WATCH_S)
            if self._gone():
                raise _RayGone
            waited = time.monotonic() - began
            self._check_room(waited)
            if not said and waited >= _SAY_S and self._no_node_since is None:
                said = True  # (with no node at all, _check_room said what it waits for)
                log.warning("ray executor: waiting up to %.0f s more for a free CPU on a live "
                            "node for actor %d (%s; %d of forge's actors running)",
                            _PLACE_S - waited, slot, self._room_text(), len(self._where))

    def _room_text(self) -> str:
        return ("live: " + self._nodes.describe() if self._nodes is not None
                else "the local instance")

    def _check_room(self, waited: float) -> None:
        """While an actor waits for a CPU: end its lane if the live nodes are full of
        this executor's actors; break the executor if none can hold an actor for
        ``_NO_NODE_S``, or no actor of this executor found a CPU within ``_PLACE_S``."""
        capacity = self._capacity()
        with self._lock:
            running = len(self._where)
            if capacity == 0:
                now = time.monotonic()
                if self._no_node_since is None:
                    self._no_node_since = now
                    log.warning("ray executor: no live node of %s can run an actor "
                                "(%g CPU); waiting up to %g s for one to join",
                                self._cluster, _ACTOR_CPUS, _NO_NODE_S)
                elif now - self._no_node_since >= _NO_NODE_S and self.broken is None:
                    self.broken = (f"no live node of {self._cluster} can run an actor "
                                   f"({_ACTOR_CPUS:g} CPU)" + self._lost_text())
                if self.broken:
                    raise _RayGone
                return
            self._no_node_since = None
            if running >= capacity or (running and waited >= _PLACE_S):
                raise _Retire
            if waited >= _PLACE_S:
                self.broken = (f"no live node of {self._cluster} had a free CPU for an "
                               f"actor within {_PLACE_S:g} s ({self._room_text()})")
                raise _RayGone

    def _lost_text(self) -> str:
        lost = self._nodes.lost() if self._nodes is not None else []
        return "; lost: " + ", ".join(str(n) for n in lost) if lost else ""

    def _result(self, ref: Any, limit: float, slot: int) -> tuple[list[WorkOutcome], bool]:
        """The chunk's outcomes, watching the instance, or the actor's node, meanwhile."""
        deadline = time.monotonic() + limit
        node_id = self._where.get(slot)
        while True:
            wait = min(_WATCH_S, max(0.0, deadline - time.monotonic()))
            ready, _ = self.ray.wait([ref], timeout=wait)
            if ready:
                result: tuple[list[WorkOutcome], bool] = self.ray.get(ready[0])
                return result
            if self._gone():
                raise _RayGone
            if self._nodes is not None and node_id and not self._nodes.alive(node_id):
                raise _NodeLost(node_id)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no result within {limit:g} s")

    def _lost_node(self, slot: int, began: float, exc: Exception) -> NodeInfo | None:
        """The node lost under a chunk that failed, if that is why it failed: the node of
        its actor is dead, or (its actor never ran) a node died since it began."""
        if self._nodes is None or getattr(exc, "actor_init_failed", False):
            return None  # a harness that fails to import fails on every node
        node_id = exc.node_id if isinstance(exc, _NodeLost) else self._where.get(slot)
        if node_id is None:
            died = self._nodes.died_since(began)
            return died[0] if died else None
        self._nodes.refresh(force=True)
        return None if self._nodes.alive(node_id) else self._nodes.info(node_id)

    def _replace(self, slot: int) -> None:
        with self._lock:
            actor = self._actors[slot]
            self._actors[slot] = None
            self._probes.pop(slot, None)
            self._where.pop(slot, None)
        if actor is not None:
            with contextlib.suppress(Exception):  # it may be gone already
                self.ray.kill(actor)

    def run(self, items: Sequence[WorkItem], on_outcome: OnOutcome,
            cancelled: Callable[[], bool]) -> None:
        if not items:
            return
        if self._local is not None:
            self._local.note_helpers()  # the raylet may start them after ray.init returns
        queue = LaneQueue(items, self.workers, cancelled, poll_s=_WATCH_S)
        losses: collections.Counter[int] = collections.Counter()

        def lane(slot: int) -> None:
            while (chunk := queue.take()) is not None:
                verdict, back = "done", list[WorkItem]()  # if _chunk raises: settled empty
                try:
                    verdict, back = self._chunk(slot, chunk, on_outcome, losses)
                finally:
                    queue.settle(back, singly=verdict == "singly")
                if verdict == "retire":
                    return

        # The slots whose actors run first: a lane ends (_Retire) only while another
        # lane's actor runs, so no running actor may be left without a lane.
        slots = sorted(range(self.workers), key=lambda s: s not in self._where)
        lanes = [threading.Thread(target=lane, args=(slot,), daemon=True,
                                  name=f"forge-ray-lane-{slot}")
                 for slot in slots[:len(queue)]]
        for t in lanes:
            t.start()
        for t in lanes:
            t.join()

    def _chunk(self, slot: int, chunk: list[WorkItem], on_outcome: OnOutcome,
               losses: collections.Counter[int]) -> tuple[str, list[WorkItem]]:
        """Run one chunk on the slot's actor. The verdict, with the items to queue again:
        ``done`` (every item reported), ``again`` (lost with a node: the rest, whole),
        ``singly`` (lost otherwise: one by one, to find the item that kills its worker),
        ``retire`` (no room for the lane's actor: the whole chunk, and the lane ends)."""
        if self._gone():
            _report_lost(chunk, f"ray task lost: {self.broken}", on_outcome)
            return "done", []
        began = time.monotonic()
        limit = sum(i.timeout_s for i in chunk) + _CHUNK_SLACK_S
        try:
            ref = self._placed(slot).run_chunk.remote(chunk)
            outcomes, tainted = self._result(ref, limit, slot)
        except _Retire:
            self._replace(slot)
            return "retire", chunk
        except Exception as exc:
            if self._gone():
                _report_lost(chunk, f"ray task lost: {self.broken}", on_outcome)
                return "done", []
            node = self._lost_node(slot, began, exc)
            self._replace(slot)
            if node is not None:
                return "again", self._again(chunk, node, losses, on_outcome)
            if len(chunk) > 1:
                return "singly", chunk
            first = (str(exc).splitlines() or [""])[0]
            why = f"ray task lost: {type(exc).__name__}" + (f": {first}" if first else "")
            on_outcome(WorkOutcome(chunk[0].index, "lost", None, why))
            return "done", []
        for outcome in outcomes:
            on_outcome(outcome)
        if tainted:
            self._replace(slot)
        return "done", []

    def _again(self, chunk: list[WorkItem], node: NodeInfo, losses: collections.Counter[int],
               on_outcome: OnOutcome) -> list[WorkItem]:
        """The items of a chunk lost with ``node`` to run again; one that went down with
        ``_NODE_LOSSES`` nodes is reported lost instead."""
        again = []
        for item in chunk:
            losses[item.index] += 1
            if losses[item.index] < _NODE_LOSSES:
                again.append(item)
            else:
                on_outcome(WorkOutcome(item.index, "lost", None,
                                       f"ray task lost: {losses[item.index]} nodes died under "
                                       f"it, the last {node}"))
        with self._lock:
            first = node.node_id not in self._said_lost
            self._said_lost.add(node.node_id)
        if first:
            log.warning("ray executor: %s lost; the attempts it ran will run again "
                        "elsewhere (%s)", node, self._room_text())
        return again

    def close(self) -> None:
        """Kill the actors; shut Ray down if this executor started it."""
        self._gone()
        if self._stopped:
            self._actors = [None] * self.workers  # nothing left to kill them with
        for slot in range(len(self._actors)):
            self._replace(slot)
        if self._owns and self.ray.is_initialized():
            self.ray.shutdown()
        if self._stopped and self._local is not None:
            self._local.kill_helpers()


def _report_lost(chunk: list[WorkItem], why: str, on_outcome: OnOutcome) -> None:
    for item in chunk:
        on_outcome(WorkOutcome(item.index, "lost", None, why))
