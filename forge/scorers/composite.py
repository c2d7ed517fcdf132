"""Composite scorers: ``all``, ``any`` and ``weighted`` combine the verdicts of child scorers.

Children are written as any other scorer spec and built through the same registry,
so composites nest (``{all: [toolcall, {any: [exact, numeric]}]}``).

Sync or async: a composite calls every child; if none returned an awaitable, it
returns its :class:`Score` directly, otherwise it returns an awaitable that awaits
the pending children concurrently. So a tree of sync scorers stays sync, and a judge
anywhere in it makes the whole verdict awaitable. Every child is always scored (no
short-circuit), so ``details`` shows each verdict. If any child raises, the
composite raises: one unjudgeable part leaves the attempt unscored, never a zero.
"""

from __future__ import annotations

import asyncio
import inspect
from abc import abstractmethod
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from pydantic import Field

from forge._util.digest import digest_of
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness.base import RunOutput
from forge.scorers._values import Options
from forge.scorers.base import SCORERS, Score, Scorer

__all__ = ["AllScorer", "AnyScorer", "Child", "WeightedScorer"]


@dataclass(frozen=True)
class Child:
    """A built child scorer, the name it was written with, and its weight."""

    name: str
    scorer: Scorer
    weight: float = 1.0

    @classmethod
    def build(cls, raw: Any, ctx: BuildContext, weight: float = 1.0) -> Child:
        """The child ``raw`` (any scorer spec) written at ``ctx``: its errors name that place,
        e.g. ``scorer.all[1].regex.pattern``."""
        spec = SCORERS.parse(raw, ctx)
        return cls(spec.name, SCORERS.build(spec, ctx), weight)


class _ListOptions(Options):
    scorers: list[Any] = Field(min_length=1)


class _Composite(Scorer):
    """Scores every child, then :meth:`combine` turns their scores into one."""

    name: ClassVar[str] = "composite"
    options_model: ClassVar[type[Options]] = _ListOptions
    _weighted = False

    def __init__(self, children: Sequence[Child], **digest_fields: Any) -> None:
        if not children:
            raise ValueError("needs at least one scorer")
        self.children = tuple(children)
        self._digest = digest_of({"scorer": self.name, **digest_fields,
                                  "children": [c.scorer.digest for c in self.children]})

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        listed = _ListOptions.model_validate(args)
        return cls([Child.build(raw, ctx.at(cls.name, i)) for i, raw in enumerate(listed.scorers)])

    @property
    def digest(self) -> str:
        return self._digest

    def secret_envs(self) -> tuple[str, ...]:
        return tuple(name for c in self.children for name in c.scorer.secret_envs())
    def score(self, task: Task, output: RunOutput) -> Score | Awaitable[Score]:
        results: list[Score | Awaitable[Score]] = []
        try:
            for child in self.children:
                results.append(child.scorer.score(task, output))
        except BaseException:
            _discard(results)
            raise
        if any(inspect.isawaitable(r) for r in results):
            return self._gather(results)
        return self._finish(_checked(results, self.children))

    async def _gather(self, results: list[Score | Awaitable[Score]]) -> Score:
        # return_exceptions: every child finishes before we raise, so no task is left
        # running behind an unscored attempt.
        done = await asyncio.gather(*(_resolved(r) for r in results), return_exceptions=True)
        for item in done:
            if isinstance(item, BaseException):
                raise item
        return self._finish(_checked(done, self.children))

    def _finish(self, scores: list[Score]) -> Score:
        score = self.combine(scores)
        details = dict(score.details)
        details["children"] = [
            {"scorer": c.name, "value": s.value, "passed": s.passed,
             "explanation": s.explanation, "details": s.details,
             **({"weight": c.weight} if self._weighted else {})}
            for c, s in zip(self.children, scores, strict=True)]
        return score.model_copy(update={"details": details})

    @abstractmethod
    def combine(self, scores: list[Score]) -> Score: ...

    def _failures(self, scores: list[Score]) -> str:
        return "; ".join(f"{c.name}: {s.explanation or 'failed'}"
                         for c, s in zip(self.children, scores, strict=True) if not s.passed)


@SCORERS.register("all", shorthand="scorers")
class AllScorer(_Composite):
    """Passes iff every child passes; value is the *lowest* child value.

    The minimum (not the mean) keeps value consistent with the verdict: an attempt
    that fails any part never scores as if it were mostly right.
    """

    name = "all"

    def combine(self, scores: list[Score]) -> Score:
        passed = all(s.passed for s in scores)
        return Score(value=min(s.value for s in scores), passed=passed,
                     explanation=None if passed else self._failures(scores))


@SCORERS.register("any", shorthand="scorers")
class AnyScorer(_Composite):
    """Passes iff some child passes; value is the highest child value."""

    name = "any"

    def combine(self, scores: list[Score]) -> Score:
        passed = any(s.passed for s in scores)
        return Score(value=max(s.value for s in scores), passed=passed,
                     explanation=None if passed else self._failures(scores))


class _WeightedItem(Options):
    scorer: Any
    weight: float = Field(default=1.0, ge=0.0, allow_inf_nan=False)


class _WeightedOptions(Options):
    scorers: list[_WeightedItem] = Field(min_length=1)
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)


@SCORERS.register("weighted", shorthand="scorers")
class WeightedScorer(_Composite):
    """Value is the weighted mean of the children's values; passed iff value >= threshold.

    A child's own pass/fail is not used, only its value. Weights are >= 0 and not all 0.
    """

    name = "weighted"
    options_model = _WeightedOptions
    _weighted = True

    def __init__(self, children: Sequence[Child], threshold: float = 0.5) -> None:
        if sum(c.weight for c in children) <= 0:
            raise ValueError("the weights must not all be 0")
        super().__init__(children, weights=[c.weight for c in children], threshold=threshold)
        self.threshold = threshold

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        options = _WeightedOptions.model_validate(args)
        return cls([Child.build(item.scorer, ctx.at(cls.name, "scorers", i, "scorer"), item.weight)
                    for i, item in enumerate(options.scorers)], options.threshold)

    def combine(self, scores: list[Score]) -> Score:
        total = sum(c.weight for c in self.children)
        mean = sum(c.weight * s.value for c, s in zip(self.children, scores, strict=True)) / total
        value = min(1.0, max(0.0, mean))  # rounding can leave [0, 1] by an ulp
        passed = value >= self.threshold
        return Score(value=value, passed=passed,
                     explanation=None if passed else
                     f"weighted score {value:.3g} < threshold {self.threshold:g}"
                     + (f" ({self._failures(scores)})" if not all(s.passed for s in scores)
                        else ""))


async def _resolved(result: Score | Awaitable[Score]) -> Score:
    return await result if inspect.isawaitable(result) else result


def _checked(results: Sequence[object], children: Sequence[Child]) -> list[Score]:
    scores = []
    for child, result in zip(children, results, strict=True):
        if not isinstance(result, Score):
            raise TypeError(f"scorer {child.name!r} returned {type(result).__name__}, not a Score")
        scores.append(result)
    return scores


def _discard(results: Sequence[object]) -> None:
    """Close coroutines a failed composite will never await (no "never awaited" warning)."""
    for result in results:
        close = getattr(result, "close", None)
        if inspect.iscoroutine(result) and callable(close):
            close()
