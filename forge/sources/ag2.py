"""The ``ag2`` task source: a split's tasks from an ``ag2.eval.Suite``.

Bench syntax::

    splits:
      dev: {ag2: "suites:DEV"}                 # shorthand: module:attr in the bench folder
      val: {ag2: {jsonl: suites/val.jsonl}}    # or a suite file in AG2's JSONL format

``target`` names an ``ag2.eval.Suite`` (``Suite.from_list(...)``, ``Suite.from_jsonl(...)``)
or a function without arguments that returns one; ``jsonl`` a suite file, one AG2 task
a line (``task_id``, ``inputs``, ``reference_outputs``, ``tags``, ``metadata``), read
with forge's bounded JSONL reader and turned into tasks by AG2's ``Suite.from_list``
(so a missing ``task_id`` is ``task-0000``, ``task-0001``, ... as AG2 numbers them).
Needs the extra ``pip install 'forge[ag2]'``.

Each AG2 task becomes one forge task: ``id`` its ``task_id``, ``input`` its ``inputs``
(the mapping: the ``ag2`` harness asks the agent ``inputs["input"]``), ``expected`` its
``reference_outputs``, with its tags and metadata. Mapped back (:mod:`forge.harness.ag2_sdk`), the
task is the suite's own, so ``forge export ag2`` of its attempts diffs against a run of
``ag2.eval.run_agent`` on the same suite. Like AG2's runner, every task's ``inputs``
must hold ``input``; and, since forge journals tasks, its fields must be JSON data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticSerializationError

from forge._util.digest import canonical_json
from forge._util.files import read_jsonl
from forge.core.spec import BuildContext
from forge.errors import BenchError
from forge.harness import ag2_sdk as _ag2
from forge.harness.python import import_target
from forge.sources._base import SOURCES, TaskSource

__all__ = ["Ag2Suite", "Ag2SuiteOptions"]


class Ag2SuiteOptions(BaseModel):
    """The ``ag2:`` argument of a split: a suite object or a suite file, one of them."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    target: str | None = None
    jsonl: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> Ag2SuiteOptions:
        if (self.target is None) == (self.jsonl is None):
            raise ValueError("give one of target ('module:attr' of an ag2.eval.Suite) "
                             "or jsonl (a suite file)")
        return self


@SOURCES.register("ag2", shorthand="target")
class Ag2Suite(TaskSource):
    """The tasks of one AG2 suite (see the module docstring)."""

    options_model = Ag2SuiteOptions

    def __init__(self, suite: Any, ctx: BuildContext) -> None:
        self.suite = suite
        self._ctx = ctx

    def tasks(self, split: str) -> Sequence[Mapping[str, Any]]:
        return [self._line(task, i) for i, task in enumerate(self.suite)]

    def _line(self, task: Any, index: int) -> dict[str, Any]:
        inputs = task.inputs
        if not isinstance(inputs, Mapping) or "input" not in inputs:
            raise self._ctx.error(f"suite task {task.task_id!r} (index {index}) has no "
                                  "'input' in its inputs: the agent is asked inputs['input']")
        line = {"id": str(task.task_id), "input": dict(inputs),
                "expected": task.reference_outputs, "tags": list(task.tags),
                "metadata": dict(task.metadata)}
        try:
            canonical_json(line)
        except (TypeError, ValueError, PydanticSerializationError) as exc:
            raise self._ctx.error(f"suite task {task.task_id!r} (index {index}) is not JSON "
                                  f"data: {exc}") from None
        return line

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Ag2Suite:
        options = Ag2SuiteOptions.model_validate(args)
        where = ctx.at("ag2")
        _ag2.require("the ag2 task source", where.error)
        suite_class = _ag2.module("ag2.eval").Suite
        if options.jsonl is not None:
            return cls(_from_jsonl(ctx.base_dir / options.jsonl, suite_class), where)
        assert options.target is not None
        found, _ = import_target(options.target, ctx.base_dir, where=where,
                                 require_callable=False)
        if not isinstance(found, suite_class) and callable(found):
            try:
                found = found()
            except Exception as exc:  # the user's code failing is bad input: one line
                raise where.error(f"{options.target}() raised {type(exc).__name__}: "
                                  f"{exc}") from None
        if not isinstance(found, suite_class):
            raise where.error(f"{options.target} is a {type(found).__name__}, expected an "
                              "ag2.eval.Suite or a function returning one")
        return cls(found, where)


def _from_jsonl(path: Path, suite_class: Any) -> Any:
    items: list[Any] = []
    for line, value in read_jsonl(path, BenchError):
        if not isinstance(value, dict):
            raise BenchError("expected a JSON object per line (an AG2 suite task)",
                             file=path, line=line)
        items.append(value)
    try:
        return suite_class.from_list(items, name=path.stem)
    except (TypeError, ValueError) as exc:  # AG2 names the task by its index
        raise BenchError(str(exc).replace("inline: ", ""), file=path) from None
