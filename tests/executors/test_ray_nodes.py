"""The Ray executor's view of a cluster's nodes (``ray.nodes()``, the GCS's node table,
is the boundary: a stand-in plays it here; tests/executors/test_ray_cluster.py runs the
real thing)."""

from __future__ import annotations

import time
from typing import Any

from forge.executors._ray_nodes import ClusterWatch


class GCS:
    """``ray.nodes()`` as the GCS answers it: every node it has known, alive or not."""

    def __init__(self, *rows: dict[str, Any]) -> None:
        self.rows = list(rows)
        self.asked = 0
        self.down = False

    def nodes(self) -> list[dict[str, Any]]:
        self.asked += 1
        if self.down:
            raise ConnectionError("GCS unavailable")
        return [dict(r) for r in self.rows]

    def kill(self, node_id: str) -> None:
        for row in self.rows:
            if row["NodeID"] == node_id:
                row["Alive"], row["Resources"] = False, {}


def node(node_id: str, cpus: float, *, alive: bool = True) -> dict[str, Any]:
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": "127.0.0.1",
            "Resources": {"CPU": cpus, "memory": 1e9} if alive else {}}


def test_capacity_counts_the_actors_the_live_nodes_can_hold() -> None:
    gcs = GCS(node("head", 0.0), node("a" * 56, 2.0), node("b" * 56, 1.5),
              node("old", 8.0, alive=False))
    watch = ClusterWatch(gcs, every=0.0)
    assert watch.capacity(1.0) == 3  # 2 + 1 (half a CPU holds no actor), the dead none
    assert watch.describe() == "3 node(s), 3.5 CPU(s)"
    gcs.kill("a" * 56)
    assert watch.capacity(1.0) == 1
    assert not watch.alive("a" * 56) and watch.alive("b" * 56)


def test_a_node_lost_is_one_seen_alive_then_dead() -> None:
    gcs = GCS(node("a" * 56, 2.0), node("b" * 56, 2.0), node("old", 2.0, alive=False))
    watch = ClusterWatch(gcs, every=0.0)
    assert watch.lost() == []  # an earlier run's dead node is no loss of this one
    before = time.monotonic()
    gcs.kill("a" * 56)
    [lost] = watch.died_since(before)
    assert str(lost) == f"node {'a' * 8} at 127.0.0.1"
    assert watch.lost() == [lost]
    assert watch.died_since(time.monotonic()) == []  # it died before: not since then


def test_the_gcs_is_asked_at_most_once_per_period_unless_forced() -> None:
    gcs = GCS(node("a" * 56, 2.0))
    watch = ClusterWatch(gcs, every=60.0)
    assert gcs.asked == 1
    for _ in range(50):
        watch.alive("a" * 56)
        watch.capacity(1.0)
    assert gcs.asked == 1
    gcs.kill("a" * 56)
    assert watch.alive("a" * 56)  # not asked again yet
    assert watch.died_since(0.0)[0].node_id == "a" * 56  # forced: asked now
    assert gcs.asked == 2


def test_a_gcs_that_does_not_answer_leaves_the_last_view() -> None:
    gcs = GCS(node("a" * 56, 2.0))
    watch = ClusterWatch(gcs, every=0.0)
    gcs.down = True
    assert watch.alive("a" * 56)
    assert watch.capacity(1.0) == 2
    assert watch.lost() == []
