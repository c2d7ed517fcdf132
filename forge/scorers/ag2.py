"""The ``ag2`` scorer: an ``ag2.eval`` scorer judges forge's attempts.

Bench syntax::

    scorer: {ag2: "scorers:ANSWER"}          # shorthand: the scorer
    scorer:
      ag2:
        target: "scorers:ANSWER"   # module:attr in the bench folder: an ag2.eval.Scorer
                                   # (what @scorer and the prebuilt factories make), or
                                   # a plain function, wrapped as @scorer would
        key: null                  # which Feedback to read when it gives several
        threshold: 0.5             # a numeric score in [0, 1] passes at or above it
        pass_values: []            # categorical values (Feedback.value) that pass

Needs the extra ``pip install 'forge[ag2]'``. Several AG2 scorers combine with forge's
composites: ``{all: [{ag2: "scorers:ANSWER"}, {ag2: "scorers:TOOLS"}]}``.

The scorer gets what AG2's runner gives it (:mod:`forge.harness.ag2_events`): ``inputs`` and
``reference_outputs`` of the task in AG2's terms, ``outputs`` (``body``, ``content``), a
``Trace`` rebuilt from the attempt (its tool executions, model calls and tokens), and
the ``ag2.eval.Task``. Its ``Feedback`` becomes forge's ``Score``:

- a bool ``score``: value 1 or 0, passed as given;
- a number in [0, 1]: that value, passed at or above ``threshold`` (a number outside
  [0, 1] is refused: gate it with ``ag2.eval.scorers.threshold``);
- no score but a ``value`` (a categorical label): passed when it is one of
  ``pass_values`` (refused when none are set);
- neither (the scorer raised, which AG2 records as a feedback without a score, or it
  gave no feedback): the attempt is unscored, with the reason, never a zero.

``explanation`` is the feedback's ``comment``; ``details["ag2_feedback"]`` keeps every
feedback the scorer gave (key, score, value, comment, detail), which ``forge export
ag2`` writes into the AG2 run so that ``RunDiff`` compares the same checks.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable
from typing import Any, ClassVar

from pydantic import Field
from pydantic_core import to_jsonable_python

from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness import ag2_sdk as _ag2
from forge.harness.ag2_events import outputs_of, task_of, trace_of
from forge.harness.base import RunOutput
from forge.harness.python import import_target
from forge.scorers._values import Options, spec_digest
from forge.scorers.base import SCORERS, Score, Scorer

__all__ = ["FEEDBACK_KEY", "Ag2Scorer", "Ag2ScorerOptions", "feedback_record"]

#: Where a Score keeps the AG2 feedback it was read from.
FEEDBACK_KEY = "ag2_feedback"


class Ag2ScorerOptions(Options):
    target: str = Field(min_length=1)
    key: str | None = None
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    pass_values: list[str] = Field(default_factory=list)


def feedback_record(feedback: Any) -> dict[str, Any]:
    """One ``ag2.eval.Feedback`` as JSON data, the fields ``load_run`` reads back."""
    record: dict[str, Any] = to_jsonable_python(
        {"key": feedback.key, "score": feedback.score, "value": feedback.value,
         "comment": feedback.comment, "detail": feedback.detail}, fallback=repr)
    return record


@SCORERS.register("ag2", shorthand="target")
class Ag2Scorer(Scorer):
    """An ag2.eval scorer module:attr judges the attempt; its Feedback is the score.

    See the module for how a Feedback is read."""

    name: ClassVar[str] = "ag2"
    options_model = Ag2ScorerOptions

    def __init__(self, options: Ag2ScorerOptions, scorer: Any, identity: str) -> None:
        self.options = options
        self._scorer = scorer
        self._digest = spec_digest(self.name, options, identity=identity,
                                   ag2=_ag2.version())

    @property
    def digest(self) -> str:
        return self._digest

    def score(self, task: Task, output: RunOutput) -> Awaitable[Score]:
        return self._score(task, output)

    async def _score(self, task: Task, output: RunOutput) -> Score:
        ag2_task = task_of(task)
        records = await self._scorer(inputs=ag2_task.inputs, outputs=outputs_of(output),
                                     reference_outputs=ag2_task.reference_outputs,
                                     trace=trace_of(output), task=ag2_task)
        return self._verdict(list(records))

    def _verdict(self, records: list[Any]) -> Score:
        chosen = self._chosen(records)
        kept = {FEEDBACK_KEY: [feedback_record(f) for f in records]}
        value, passed = self._read(chosen)
        return Score(value=value, passed=passed, explanation=chosen.comment, details=kept)

    def _chosen(self, records: list[Any]) -> Any:
        keys = [f.key for f in records]
        if self.options.key is not None:
            for feedback in records:
                if feedback.key == self.options.key:
                    return feedback
            raise ValueError(f"no feedback under key {self.options.key!r}; the scorer gave "
                             f"{_keys(keys)}")
        if not records:
            raise ValueError(f"{self.options.target} gave no feedback")
        if len(set(keys)) > 1:
            raise ValueError(f"{self.options.target} gave feedback under several keys "
                             f"({_keys(keys)}); name the one to judge by with key")
        return records[0]

    def _read(self, feedback: Any) -> tuple[float, bool]:
        score = feedback.score
        if isinstance(score, bool):
            return (1.0 if score else 0.0), score
        if isinstance(score, int | float):
            value = float(score)
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise ValueError(f"feedback {feedback.key!r} scored {score!r}, outside [0, 1]; "
                                 "gate it with ag2.eval.scorers.threshold")
            return value, value >= self.options.threshold
        if feedback.value is not None:
            if not self.options.pass_values:
                raise ValueError(f"feedback {feedback.key!r} is the label {feedback.value!r}; "
                                 "set pass_values to say which labels pass")
            passed = feedback.value in self.options.pass_values
            return (1.0 if passed else 0.0), passed
        why = f": {feedback.comment}" if feedback.comment else ""
        raise ValueError(f"feedback {feedback.key!r} has no score{why}")

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Ag2Scorer:
        options = Ag2ScorerOptions.model_validate(args)
        where = ctx.at(cls.name)
        _ag2.require("the ag2 scorer", where.error)
        found, identity = import_target(options.target, ctx.base_dir, where=where)
        scorer_class = _ag2.module("ag2.eval").Scorer
        if not isinstance(found, scorer_class):
            # A plain function, wrapped as @scorer wraps it; its parameters are checked
            # now (TypeError: one line naming the parameter AG2 cannot inject).
            found = scorer_class(found)
        return cls(options, found, identity)


def _keys(keys: list[str]) -> str:
    return ", ".join(repr(k) for k in dict.fromkeys(keys)) or "none"
