"""Executors: where attempts run (``local``, ``process``, ``ray``), chosen by name.

:func:`open_executor` builds one for a bench; ``None`` means the engine's own
in-process lanes (``local``). Only the ``python`` harness can run in other
processes: it is re-imported there from its ``module:function`` target.
"""

from __future__ import annotations

from forge.errors import UserError
from forge.executors._base import (
    Executor,
    ExecutorSettings,
    WorkItem,
    WorkOutcome,
    run_item,
)
from forge.executors.local import LOCAL
from forge.spec import Spec

__all__ = [
    "EXECUTORS",
    "Executor",
    "ExecutorSettings",
    "WorkItem",
    "WorkOutcome",
    "check_executor",
    "open_executor",
    "run_item",
]

#: The executor names forge knows.
EXECUTORS = (LOCAL, "process", "ray")


def check_executor(settings: ExecutorSettings, harness_spec: Spec) -> None:
    """Raise :class:`UserError` if ``settings`` cannot serve this harness: an unknown
    name, a harness that cannot leave the process, or Ray not installed. Starts nothing."""
    if settings.name not in EXECUTORS:
        raise UserError(f"--executor {settings.name!r}: expected one of {', '.join(EXECUTORS)}")
    if settings.workers is not None and settings.workers < 1:
        raise UserError("--workers: must be at least 1")
    if settings.name == LOCAL:
        return
    if harness_spec.name != "python":
        raise UserError(f"--executor {settings.name}: only the 'python' harness can run in "
                        f"worker processes; this bench uses {harness_spec.name!r}")
    if settings.name == "ray":
        from forge.executors.ray import import_ray

        import_ray()


def open_executor(settings: ExecutorSettings, harness_spec: Spec, base_dir: str
                  ) -> Executor | None:
    """The executor ``settings`` names, or None for ``local``; raises :class:`UserError`
    as :func:`check_executor` does. Process workers start on first use; Ray starts now."""
    check_executor(settings, harness_spec)
    if settings.name == LOCAL:
        return None
    target = str(harness_spec.args["target"])
    if settings.name == "process":
        from forge.executors.process import ProcessExecutor

        return ProcessExecutor(target, base_dir, workers=settings.workers)
    from forge.executors.ray import RayExecutor

    return RayExecutor(target, base_dir, workers=settings.workers, address=settings.ray_address)
