"""The ``local`` executor: attempts run in this process.

Async harnesses run as coroutine lanes on the event loop and sync ones on daemon
thread lanes; both live in :class:`forge.rollout.RolloutEngine`, which uses them
whenever it is given no remote executor. This module only names that choice.
"""

from __future__ import annotations

__all__ = ["LOCAL"]

#: The name under which the engine's own lanes are chosen.
LOCAL = "local"
