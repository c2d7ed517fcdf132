"""Paired differences between two configs' attempts on shared (task, seed) keys: the
numbers every gate tests. Score deltas pair attempts by
:func:`~forge.results.model.paired_outcomes`: a failure on one side of a pair is that
side's loss (:func:`score_deltas`); a metric is compared where both completed with it; a
task with no pair is left out, never counted as zero.
"""

from __future__ import annotations

import math

from forge.bench.loader import MetricSpec
from forge.results.model import AttemptResult, TaskAttempts, paired_outcomes

__all__ = [
    "metric_deltas",
    "paired_regressions",
    "regression_allowance",
    "regressions",
    "score_deltas",
    "score_pairs",
]


def score_deltas(incumbent: TaskAttempts, candidate: TaskAttempts) -> dict[str, float]:
    """Per task: the mean over paired attempts of candidate score minus incumbent score.

    A pair where one side failed (unscored, not cancelled) and the other was scored is a
    loss for the side that failed: it scores the lowest score, 0, against the other's.
    A config cannot gain by failing on the attempts it would get wrong, and one that
    stops failing gains what its answers score. A pair where both failed compares no
    answer and is left out; so is a task with no pair left."""
    out: dict[str, float] = {}
    for task_id, pairs in paired_outcomes(incumbent, candidate).items():
        deltas = [_value(c) - _value(i) for i, c in pairs if i.scored or c.scored]
        if deltas:
            out[task_id] = math.fsum(deltas) / len(deltas)
    return out


def score_pairs(incumbent: TaskAttempts, candidate: TaskAttempts) -> int:
    """The paired attempts :func:`score_deltas` reads (scored on at least one side)."""
    return sum(1 for pairs in paired_outcomes(incumbent, candidate).values()
               for i, c in pairs if i.scored or c.scored)


def _value(attempt: AttemptResult) -> float:
    """A scored attempt's score; 0 (the lowest) for one that failed."""
    return attempt.score.value if attempt.scored and attempt.score is not None else 0.0


def metric_deltas(incumbent: TaskAttempts, candidate: TaskAttempts, metric: str
                  ) -> tuple[dict[str, float], float | None, float | None]:
    """Per-task paired deltas of a metric's mean, and both sides' means over those tasks."""
    inc = incumbent.metric_means(metric)
    cand = candidate.metric_means(metric)
    shared = [t for t in cand if t in inc]
    if not shared:
        return {}, None, None
    deltas = {t: cand[t] - inc[t] for t in shared}
    return (deltas, math.fsum(inc[t] for t in shared) / len(shared),
            math.fsum(cand[t] for t in shared) / len(shared))


def regression_allowance(spec: MetricSpec, start_mean: float) -> float:
    """How much a metric may regress: ``max_increase``, or that fraction of the start
    config's mean when the tolerance is relative."""
    return spec.max_increase * abs(start_mean) if spec.relative else spec.max_increase


def regressions(spec: MetricSpec, start: TaskAttempts, candidate: TaskAttempts, metric: str
                ) -> tuple[list[float], float | None, float | None]:
    """Per task with both: how much worse the candidate is (an increase for ``lower``
    metrics, a decrease for ``higher`` ones), and both configs' means over those tasks."""
    deltas, before, after = metric_deltas(start, candidate, metric)
    sign = 1.0 if spec.direction == "lower" else -1.0
    return [sign * d for d in deltas.values()], before, after


def paired_regressions(spec: MetricSpec, start: TaskAttempts, final: TaskAttempts, metric: str
                       ) -> list[list[float]]:
    """Per task both ran: how much worse ``final`` is on each seed both completed with
    ``metric`` (an increase for ``lower`` metrics, a decrease for ``higher`` ones)."""
    sign = 1.0 if spec.direction == "lower" else -1.0
    out: list[list[float]] = []
    for task_id, mine in start.items():
        theirs = {a.seed: a.metrics[metric] for a in final.get(task_id, ())
                  if a.stop_reason == "completed" and metric in a.metrics}
        pairs = [sign * (theirs[a.seed] - a.metrics[metric]) for a in mine
                 if a.stop_reason == "completed" and metric in a.metrics and a.seed in theirs]
        if pairs:
            out.append(pairs)
    return out
