"""Task sources: where a split's tasks come from when they are not a JSONL file.

A bench names a split's tasks as a path (``splits: {dev: tasks/dev.jsonl}``) or as a
task source, a plugin spec like every harness or scorer (``splits: {dev: {agno:
"envs:support"}}``): :class:`TaskSource` is the kind's base, :data:`SOURCES` its
registry. A source returns the split's tasks as mappings in the task-line shape
(``id``, ``input``, ``expected``, ``tags``, ``metadata``, ``expected_tools``); the bench
checks them exactly as it checks a JSONL file's lines (unique ids and inputs across
splits, the task bound). A source whose package is an optional extra imports it in
:meth:`TaskSource.from_args`, never at forge's import, and says which ``pip install``
is missing in one line when it is not there.
"""

from __future__ import annotations

from forge.sources._base import SOURCES, TaskSource
from forge.sources.ag2 import Ag2Suite
from forge.sources.agno import AgnoSource

__all__ = ["SOURCES", "Ag2Suite", "AgnoSource", "TaskSource"]
