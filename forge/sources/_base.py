"""The task source kind: its contract and its registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from forge.core.spec import Plugin, PluginRegistry

__all__ = ["SOURCES", "TaskSource"]


class TaskSource(Plugin, ABC):
    """Gives one split's tasks. The contract:

    - :meth:`tasks` returns the split's tasks as task-line mappings, in a fixed order
      (the same on every call: searches pair attempts by task id and seed);
    - :meth:`tasks` raises :class:`~forge.errors.BenchError` (through the build
      context) on anything it cannot turn into tasks, naming the field.
    """

    @abstractmethod
    def tasks(self, split: str) -> Sequence[Mapping[str, Any]]: ...


#: Every task source by name; a module defining one registers it here.
SOURCES: PluginRegistry[TaskSource] = PluginRegistry("task source", TaskSource)
