"""The ``agno`` task source: a split's tasks from an ``agno.environments.Environment``.

Bench syntax::

    splits:
      dev: {agno: "envs:SUPPORT_DEV"}                       # every task of the environment
      val: {agno: {env: "envs:SUPPORT", split_key: split}}  # those whose metadata says val

An Agno environment holds one tuple of tasks and no splits. A split names an
environment (``module:NAME`` in the bench's folder) and takes all its tasks, or, with
``split_key``, those whose ``metadata[split_key]`` is the split's name (the others
are the other splits'; a task without that key is refused). The second form keeps one
environment, and so one Agno fingerprint, for all the splits, as Agno's own
``run_rollouts(env, tasks=...)`` runs a subset of one environment.

Each Agno task becomes a task line: ``id`` as Agno resolves it (the declared id, else
``t1``, ``t2``, ... by position in the environment), ``input``, ``expected``,
``metadata``; ``tags`` and ``expected_tools`` are read from the metadata keys of those
names when there are any (for forge's task floors and ``toolcall`` scorer; Agno
ignores them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from forge.core.spec import BuildContext
from forge.harness.agno_sdk import require_agno
from forge.harness.tools import import_value
from forge.sources._base import SOURCES, TaskSource

__all__ = ["AgnoSource", "AgnoSourceOptions", "load_environment", "resolved_id"]


class AgnoSourceOptions(BaseModel):
    """The ``agno:`` argument of a split: the environment, and how it marks splits."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    env: str
    split_key: str | None = Field(default=None, min_length=1)


def load_environment(target: str, ctx: BuildContext) -> tuple[Any, str]:
    """The ``agno.environments.Environment`` ``target`` names in the bench's folder, and
    an identity that changes with its module's source; a :class:`BenchError` through
    ``ctx`` when it is something else."""
    from agno.environments import Environment

    value, identity = import_value(target, ctx)
    if not isinstance(value, Environment):
        raise ctx.error(f"{target!r} is a {type(value).__name__}; expected an "
                        "agno.environments.Environment")
    return value, identity


def resolved_id(task: Any, index: int) -> str:
    """The id Agno gives the ``index``-th task of an environment (its own, else t1..tN)."""
    return str(task.id) if task.id is not None else f"t{index + 1}"


@SOURCES.register("agno", shorthand="env")
class AgnoSource(TaskSource):
    """The tasks of an Agno environment, or of its split ``split_key`` marks."""

    options_model = AgnoSourceOptions

    def __init__(self, options: AgnoSourceOptions, env: Any, ctx: BuildContext) -> None:
        self.options = options
        self.env = env
        self._ctx = ctx

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> AgnoSource:
        options = AgnoSourceOptions.model_validate(args)
        where = ctx.at("agno")
        require_agno(where, "agno.environments")
        env, _ = load_environment(options.env, where.at("env"))
        return cls(options, env, ctx)

    def tasks(self, split: str) -> Sequence[Mapping[str, Any]]:
        key = self.options.split_key
        lines: list[dict[str, Any]] = []
        for index, task in enumerate(self.env.tasks):
            task_id = resolved_id(task, index)
            metadata = dict(task.metadata)
            if key is not None:
                if key not in metadata:
                    raise self._ctx.error(f"task {task_id!r} of environment {self.env.name!r} "
                                          f"has no metadata {key!r} to say its split")
                if metadata[key] != split:
                    continue
            line: dict[str, Any] = {"id": task_id, "input": task.input,
                                    "expected": task.expected, "metadata": metadata}
            for name in ("tags", "expected_tools"):
                if name in metadata:
                    line[name] = metadata[name]
            lines.append(line)
        return lines
