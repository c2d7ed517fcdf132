"""The executors' tests share a real Ray cluster on loopback (``ray_cluster``)."""

from __future__ import annotations

from ray_loopback import ray_cluster

__all__ = ["ray_cluster"]
