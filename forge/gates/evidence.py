"""The evidence a gate reads: two configs' attempts paired on shared (task, seed) keys.

Score pairs are formed by :func:`~forge.results.model.paired_outcomes`, a failure on one
side being that side's loss (:func:`~forge.gates.checks.score_deltas`); a task with no
pair is left out, never counted as zero. Each reading is
computed once, when a gate first asks for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from forge.bench.loader import MetricSpec
from forge.results.model import TaskAttempts
from forge.stats.pairs import paired_regressions, regressions, score_deltas, score_pairs

__all__ = ["PairedScores", "Regressions"]


@dataclass(frozen=True)
class PairedScores:
    """The score of ``candidate`` against ``baseline`` on the tasks both ran."""

    baseline: TaskAttempts
    candidate: TaskAttempts

    @cached_property
    def deltas(self) -> list[float]:
        """Per task: the mean over paired attempts of candidate minus baseline."""
        return list(score_deltas(self.baseline, self.candidate).values())

    @cached_property
    def pairs(self) -> int:
        """The paired attempts the deltas rest on."""
        return score_pairs(self.baseline, self.candidate)


@dataclass(frozen=True)
class Regressions:
    """How much worse ``candidate`` is than ``start`` on ``metric`` (an increase for a
    ``lower`` metric, a decrease for a ``higher`` one)."""

    metric: str
    spec: MetricSpec
    start: TaskAttempts
    candidate: TaskAttempts

    @cached_property
    def _by_task(self) -> tuple[list[float], float | None, float | None]:
        return regressions(self.spec, self.start, self.candidate, self.metric)

    @property
    def worse(self) -> list[float]:
        """Per task both reported it: the regression of its mean."""
        return self._by_task[0]

    @property
    def before(self) -> float | None:
        """The start's mean over those tasks (None: no task where both reported it)."""
        return self._by_task[1]

    @property
    def after(self) -> float | None:
        """The candidate's mean over those tasks."""
        return self._by_task[2]

    @cached_property
    def pairs(self) -> list[list[float]]:
        """Per task, the regression on each seed both completed with the metric."""
        return paired_regressions(self.spec, self.start, self.candidate, self.metric)

    @property
    def attempts(self) -> int:
        """The paired attempts."""
        return sum(map(len, self.pairs))

    @property
    def changed(self) -> int:
        """The tasks with any change on a paired attempt."""
        return sum(1 for attempts in self.pairs if any(d != 0 for d in attempts))

    def rare(self) -> tuple[int, float] | None:
        """The attempts it regressed on, and the most one attempt could regress (the
        largest value the metric took on either config, or the largest regression seen
        if larger). None when it took no value but 0 (nothing to scale a rare change
        by) or no attempt paired."""
        worse = [d for attempts in self.pairs for d in attempts if d > 0]
        largest = max((abs(a.metrics[self.metric]) for config in (self.start, self.candidate)
                       for attempts in config.values() for a in attempts
                       if a.stop_reason == "completed" and self.metric in a.metrics),
                      default=0.0)
        size = max([largest, *worse])
        return (len(worse), size) if size > 0 and self.pairs else None

    def net(self, size: float) -> tuple[int, int, int] | None:
        """Where every paired attempt moved by 0 or ``size`` either way (a 0/1 metric: a
        harmful action or none), some made worse and some *better*: the attempts made
        worse, made better, and in all. None otherwise: a change that made no attempt
        better has nothing to net, and one that made none worse passes the exact test's
        count of none soonest."""
        flat = [d for attempts in self.pairs for d in attempts]
        if any(d != 0 and not math.isclose(abs(d), size) for d in flat):
            return None
        worse, better = sum(d > 0 for d in flat), sum(d < 0 for d in flat)
        return (worse, better, len(flat)) if better and worse else None
