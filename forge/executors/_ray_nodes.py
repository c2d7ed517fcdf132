"""The nodes of a Ray cluster as the Ray executor sees them: which are alive, how many
actors they can hold, which died.

The GCS is the one that knows: ``ray.nodes()`` says which nodes are alive and what each
offers. It is asked at most once per ``every`` seconds, however many lanes ask (a
forced refresh, after an actor died, asks at once); a node once seen dead is
remembered with when it was first seen so: an actor that died with a node that died
meanwhile was lost to the infrastructure, not to the attempt it ran.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["ClusterWatch", "NodeInfo"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeInfo:
    """One node: its id, its address, the CPUs it offers (in total, not free now)."""

    node_id: str
    address: str
    cpus: float

    def __str__(self) -> str:
        return f"node {self.node_id[:8]} at {self.address}"


class ClusterWatch:
    """The cluster's live nodes, refreshed from the GCS at most every ``every`` seconds."""

    def __init__(self, ray: Any, every: float) -> None:
        self._ray = ray
        self._every = every
        self._lock = threading.Lock()
        self._asked = -math.inf
        self._alive: dict[str, NodeInfo] = {}
        self._known: dict[str, NodeInfo] = {}
        self._dead: dict[str, float] = {}  # node id -> when first seen dead (monotonic)
        self.refresh(force=True)

    def refresh(self, *, force: bool = False) -> None:
        """Ask the GCS again unless it was asked within ``every`` seconds (or ``force``).
        A GCS that does not answer leaves the last view (its loss is Ray's to report)."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._asked < self._every:
                return
            self._asked = now
            try:
                rows = self._ray.nodes()
            except Exception as exc:  # the GCS busy or restarting: keep what we knew
                log.debug("ray.nodes() failed: %r", exc)
                return
            alive = {str(row.get("NodeID", "")): NodeInfo(
                str(row.get("NodeID", "")), str(row.get("NodeManagerAddress", "?")),
                float((row.get("Resources") or {}).get("CPU", 0.0)))
                for row in rows if row.get("Alive")}
            # Only a node seen alive can be lost: the GCS lists earlier runs' dead too.
            for node_id in self._alive.keys() - alive.keys():
                self._dead.setdefault(node_id, now)
            self._known.update(alive)
            self._alive = alive

    def alive(self, node_id: str) -> bool:
        """Whether the node is alive, as last seen (refreshed if due)."""
        self.refresh()
        return node_id in self._alive

    def capacity(self, cpus_each: float) -> int:
        """How many actors of ``cpus_each`` CPUs the live nodes could hold, at most
        (in total: some of it may be taken by other work)."""
        self.refresh()
        with self._lock:
            return sum(math.floor(n.cpus / cpus_each + 1e-9) for n in self._alive.values())

    def describe(self) -> str:
        """How many nodes are alive and their CPUs, for a line that says what is waited
        for."""
        with self._lock:
            cpus = sum(n.cpus for n in self._alive.values())
            return f"{len(self._alive)} node(s), {cpus:g} CPU(s)"

    def died_since(self, since: float) -> list[NodeInfo]:
        """The nodes first seen dead at or after ``since`` (monotonic clock), asking now."""
        self.refresh(force=True)
        with self._lock:
            return [self._known[i] for i, at in self._dead.items() if at >= since]

    def info(self, node_id: str) -> NodeInfo:
        with self._lock:
            return self._known.get(node_id) or NodeInfo(node_id, "?", 0.0)

    def lost(self) -> list[NodeInfo]:
        """Every node seen alive, then dead, since the watch began."""
        with self._lock:
            return [self._known[i] for i in self._dead]
