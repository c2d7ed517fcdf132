"""Executors: where attempts run (``local``, ``process``, ``ray``), chosen by name.

Each executor registers itself in :data:`EXECUTORS` next to its class; importing this
package imports them all. :func:`open_executor` builds the one that settings name for
a bench's harness. Only the ``python`` harness can run in other processes: it is
re-imported there from its ``module:function`` target.
"""

from __future__ import annotations

from pathlib import Path

from forge.core.spec import Spec
from forge.errors import OptionError
from forge.executors.base import (
    EXECUTORS,
    MAX_RAY_CONNECT_TIMEOUT_S,
    RAY_CONNECT_TIMEOUT_S,
    AttemptKey,
    Batch,
    Executor,
    ExecutorContext,
    ExecutorOptions,
    ExecutorSettings,
    Prepared,
)
from forge.executors.local import LocalExecutor
from forge.executors.process import ProcessExecutor
from forge.executors.ray import RayExecutor
from forge.executors.remote import RemoteExecutor, WorkItem, WorkOutcome, run_item

__all__ = [
    "EXECUTORS",
    "MAX_RAY_CONNECT_TIMEOUT_S",
    "RAY_CONNECT_TIMEOUT_S",
    "AttemptKey",
    "Batch",
    "Executor",
    "ExecutorContext",
    "ExecutorOptions",
    "ExecutorSettings",
    "LocalExecutor",
    "Prepared",
    "ProcessExecutor",
    "RayExecutor",
    "RemoteExecutor",
    "WorkItem",
    "WorkOutcome",
    "check_executor",
    "executor_class",
    "open_executor",
    "run_item",
]


def executor_class(name: str) -> type[Executor]:
    """The executor registered as ``name``; an unknown one is an :class:`OptionError`."""
    found = EXECUTORS.get(name)
    if found is None:
        raise OptionError(f"expected one of {', '.join(EXECUTORS.names())}, got {name!r}",
                          option="--executor")
    return found


def check_executor(settings: ExecutorSettings, harness_spec: Spec) -> None:
    """Raise :class:`OptionError` if ``settings`` cannot serve this harness: an unknown
    name, a harness that cannot leave the process, or Ray not installed. Starts nothing."""
    executor_class(settings.name).check(settings, harness_spec)


def open_executor(settings: ExecutorSettings, harness_spec: Spec, base_dir: Path) -> Executor:
    """The executor ``settings`` names; raises :class:`OptionError` as
    :func:`check_executor` does. Process workers start on first use; Ray starts now."""
    check_executor(settings, harness_spec)
    ctx = ExecutorContext(base_dir=base_dir, field="executor", harness=harness_spec)
    return EXECUTORS.build(settings.spec, ctx)
