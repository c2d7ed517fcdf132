"""The local Ray instance the Ray executor started: whether its processes still run,
and the helpers its raylet started (which outlive a raylet that died under them).

A local instance that stops under a run (its GCS or raylet gone) can serve nothing
more, and Ray ends the driver process a minute later; the executor asks
:meth:`LocalInstance.stopped` while it waits, to end the run first, with one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

__all__ = ["LocalInstance"]


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


class LocalInstance:
    """The processes of the instance ``ray.init`` started in this process."""

    def __init__(self, ray: Any) -> None:
        self._node = getattr(ray._private.worker, "_global_node", None)
        #: The raylet's helpers (its agents), pid -> start: ray.shutdown() leaves them
        #: running once the raylet died before it, so kill_helpers() ends them then.
        self._helpers: dict[int, str] = {}
        self.note_helpers()

    def note_helpers(self) -> None:
        """Note the raylet's helpers (it may start them after ``ray.init`` returns)."""
        for info in (self._node.all_processes.get("raylet", []) if self._node else []):
            for pid in _children(info.process.pid):
                if pid not in self._helpers and (start := _started(pid)) is not None:
                    self._helpers[pid] = start

    def stopped(self) -> str | None:
        """Why the instance can serve nothing any more (which of its processes
        exited), or None while they all run."""
        if self._node is None:
            return None
        dead = sorted({kind for kind, _ in self._node.dead_processes()})
        return f"the local Ray instance stopped ({', '.join(dead)} exited)" if dead else None

    def kill_helpers(self) -> None:
        """End the helpers noted that still run (the same processes, not their pids'
        later owners)."""
        for pid, start in self._helpers.items():
            if _started(pid) == start:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
