"""The ``code`` scorer: a user function ``module:function`` from the bench's folder judges."""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from pydantic import Field

from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness.base import RunOutput
from forge.harness.python import import_target
from forge.scorers._values import Options, quote, spec_digest
from forge.scorers.base import SCORERS, Score, Scorer

__all__ = ["CodeScorer"]


class CodeOptions(Options):
    target: str = Field(min_length=1)
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)


@SCORERS.register("code", shorthand="target")
class CodeScorer(Scorer):
    """Calls ``fn(task, output)`` and reads its verdict.

    ``fn`` is imported like a ``python`` harness, with the bench's folder first on the
    import path, and may be sync or async (then ``score`` returns an awaitable). A
    sync ``fn`` runs inline, so it should be quick; one that calls a model belongs in
    an ``async def``. What ``fn`` returns:

    - a bool: value 1 or 0, passed as returned;
    - a number in [0, 1]: that value, passed when ``value >= threshold`` (default
      0.5, the midpoint, so a score that is "more right than wrong" passes);
    - a :class:`Score`, or a dict of its fields: taken as is;
    - anything else, or a number outside [0, 1]: ``ValueError``, the attempt is
      unscored. Exceptions ``fn`` raises propagate the same way.

    The digest covers the spec and the module's source, so editing the scorer file
    makes old results incomparable with new ones.
    """

    name: ClassVar[str] = "code"
    options_model = CodeOptions

    def __init__(self, options: CodeOptions, fn: Callable[..., Any], identity: str) -> None:
        self.options = options
        self._fn = fn
        self._is_async = inspect.iscoroutinefunction(fn)
        self.identity = identity
        self._digest = spec_digest(self.name, options, identity=identity)

    @property
    def digest(self) -> str:
        return self._digest

    def score(self, task: Task, output: RunOutput) -> Score | Awaitable[Score]:
        if self._is_async:
            # The user's coroutine is only made when ours is awaited: a composite that
            # drops our awaitable (a sibling raised) then leaves nothing un-awaited.
            return self._score_async(task, output)
        result = self._fn(task, output)
        if inspect.isawaitable(result):
            return self._finish(result)
        return self._to_score(result)

    async def _score_async(self, task: Task, output: RunOutput) -> Score:
        return self._to_score(await self._fn(task, output))

    async def _finish(self, pending: Awaitable[Any]) -> Score:
        return self._to_score(await pending)

    def _to_score(self, result: Any) -> Score:
        if isinstance(result, Score):
            return result
        if isinstance(result, dict):
            return Score.model_validate(result)
        # numpy scalars (np.bool_, np.float64 from np.mean) are common returns;
        # .item() gives the plain Python value.
        item = getattr(result, "item", None)
        if callable(item) and not isinstance(result, bool | int | float):
            result = item()
        if isinstance(result, bool):
            return Score(value=1.0 if result else 0.0, passed=result)
        if isinstance(result, numbers.Real):
            value = float(result)
            if not 0.0 <= value <= 1.0:  # NaN fails this too
                raise ValueError(f"{self.options.target} returned {value!r}; "
                                 "a numeric score must be in [0, 1]")
            return Score(value=value, passed=value >= self.options.threshold)
        raise ValueError(f"{self.options.target} returned {type(result).__name__} "
                         f"{quote(result, 40)}; expected a bool, a number in [0, 1], "
                         "a Score or a dict of Score fields")

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> CodeScorer:
        options = CodeOptions.model_validate(args)
        fn, identity = import_target(options.target, ctx.base_dir, where=ctx.at(cls.name))
        return cls(options, fn, identity)
