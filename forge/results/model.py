"""Results of an evaluation: attempts, tasks, the summary contract, save and load.

Only completed attempts with a score are *scored*. Everything else (errors,
timeouts, cancellations, scorer failures) is *unscored*: counted apart and never
as a zero, so a flaky harness cannot pose as a bad config.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from forge._util.files import atomic_write_text, load_versioned_json
from forge.config.registry import Scalar
from forge.errors import ResultFileError
from forge.harness.base import RunOutput
from forge.results.reasons import count_reasons, unscored_label
from forge.scorers.base import Score
from forge.secrets.structured import redacted_json

__all__ = [
    "FORMAT_VERSION",
    "SUMMARY_KEYS",
    "TASK_SUMMARY_KEYS",
    "AttemptResult",
    "EvalResult",
    "StopReason",
    "TaskAttempts",
    "TaskResult",
    "load_result",
    "paired_attempts",
    "paired_outcomes",
    "save_result",
]

FORMAT_VERSION = 1
StopReason = Literal["completed", "error", "timeout", "cancelled"]

#: The frozen keys of ``EvalResult.summary()``; scripts and CI read them.
SUMMARY_KEYS = ("bench", "split", "k", "n_tasks", "n_attempts", "n_scored", "n_unscored",
                "pass_rate", "mean_score", "metrics", "env_fingerprint", "config_fingerprint",
                "tasks", "unscored_by_reason")
TASK_SUMMARY_KEYS = ("id", "pass_rate", "mean_score", "n_unscored", "learning_zone")
_PERCENTILE_METRICS = ("latency",)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        if update:
            # pydantic copies __dict__, cached properties included: values derived from
            # the original's fields (n_scored, metrics) would describe the wrong data.
            for klass in type(self).__mro__:
                for name, value in vars(klass).items():
                    if isinstance(value, cached_property):
                        copied.__dict__.pop(name, None)
        return copied


class AttemptResult(_Frozen):
    """One attempt: how it stopped, what it produced, and its score if it has one.

    ``stdout`` is what a python harness printed during the attempt, redacted and cut
    to its last :data:`~forge._util.bounds.MAX_PRINTED_CHARS` characters
    (:class:`forge._util.printed.Printed`); absent from the JSON when it printed nothing,
    as in every file written before it was kept.
    """

    task_id: str
    attempt: int = Field(ge=0)
    seed: int
    stop_reason: StopReason
    error: str | None = None
    duration_s: float = Field(ge=0)
    output: RunOutput | None = None
    score: Score | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    stdout: str | None = None

    @model_serializer(mode="wrap")
    def _without_absent_stdout(self, handler: SerializerFunctionWrapHandler
                               ) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("stdout", "") is None:
            del out["stdout"]
        return out

    @property
    def scored(self) -> bool:
        return self.stop_reason == "completed" and self.score is not None

    @property
    def passed(self) -> bool:
        return self.scored and self.score is not None and self.score.passed

    @property
    def failed(self) -> bool:
        """Unscored through the config's own doing: an error, a timeout, or an output the
        scorer could not judge. A cancelled attempt is the search's doing (an interrupt,
        a budget), not the config's: neither scored nor failed."""
        return self.stop_reason != "cancelled" and not self.scored


class TaskResult(_Frozen):
    task_id: str
    tags: list[str] = Field(default_factory=list)
    attempts: list[AttemptResult]

    @cached_property
    def scored_attempts(self) -> list[AttemptResult]:
        return [a for a in self.attempts if a.scored]

    @property
    def n_scored(self) -> int:
        return len(self.scored_attempts)

    @property
    def n_passed(self) -> int:
        return sum(1 for a in self.scored_attempts if a.passed)

    @property
    def n_unscored(self) -> int:
        return len(self.attempts) - self.n_scored

    @property
    def pass_rate(self) -> float | None:
        return _pass_rate(self.scored_attempts)

    @property
    def mean_score(self) -> float | None:
        return _mean_score(self.scored_attempts)

    @property
    def learning_zone(self) -> bool:
        """Sometimes passes, sometimes fails: the tasks a change can still move."""
        return 0 < self.n_passed < self.n_scored

    @cached_property
    def metrics(self) -> dict[str, float]:
        """Mean of each auxiliary metric over the completed attempts."""
        return _mean_metrics([a for a in self.attempts if a.stop_reason == "completed"])

    def summary(self) -> dict[str, Any]:
        return {"id": self.task_id, "pass_rate": self.pass_rate, "mean_score": self.mean_score,
                "n_unscored": self.n_unscored, "learning_zone": self.learning_zone}


class EvalResult(_Frozen):
    """A config evaluated on one split, K attempts per task. Saved as JSON."""

    format_version: int = FORMAT_VERSION
    bench: str
    split: str
    k: int
    seed: int
    config: dict[str, Scalar]
    config_fingerprint: str
    env_fingerprint: str | None
    env: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime
    duration_s: float
    tasks: list[TaskResult]

    @property
    def attempts(self) -> list[AttemptResult]:
        return [a for t in self.tasks for a in t.attempts]

    @property
    def n_scored(self) -> int:
        return sum(t.n_scored for t in self.tasks)

    @property
    def n_attempts(self) -> int:
        return sum(len(t.attempts) for t in self.tasks)

    @property
    def pass_rate(self) -> float | None:
        """Mean of the per-task pass rates (each task weighs the same); None if none scored."""
        return _mean_over_tasks(t.pass_rate for t in self.tasks)

    @property
    def mean_score(self) -> float | None:
        return _mean_over_tasks(t.mean_score for t in self.tasks)

    @property
    def by_task(self) -> TaskAttempts:
        return TaskAttempts({t.task_id: t.attempts for t in self.tasks})

    @cached_property
    def metrics(self) -> dict[str, float]:
        completed = [a for a in self.attempts if a.stop_reason == "completed"]
        out = _mean_metrics(completed)
        for name in _PERCENTILE_METRICS:
            values = [a.metrics[name] for a in completed if name in a.metrics]
            if values:
                p50, p95 = np.percentile(values, [50, 95])
                out[f"{name}_p50"] = float(p50)
                out[f"{name}_p95"] = float(p95)
        return out

    def stop_reasons(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for a in self.attempts:
            counts[a.stop_reason] = counts.get(a.stop_reason, 0) + 1
        return counts

    def summary(self) -> dict[str, Any]:
        """The frozen summary contract (``SUMMARY_KEYS``), as ``forge eval --json`` prints it."""
        n_attempts = self.n_attempts
        n_scored = self.n_scored
        return {
            "bench": self.bench,
            "split": self.split,
            "k": self.k,
            "n_tasks": len(self.tasks),
            "n_attempts": n_attempts,
            "n_scored": n_scored,
            "n_unscored": n_attempts - n_scored,
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "metrics": self.metrics,
            "env_fingerprint": self.env_fingerprint,
            "config_fingerprint": self.config_fingerprint,
            "tasks": [t.summary() for t in self.tasks],
            "unscored_by_reason": self.unscored_by_reason(),
        }

    def unscored_by_reason(self) -> dict[str, int]:
        """The unscored attempts by reason (:func:`forge.results.reasons.count_reasons`): they
        add up to ``n_unscored``."""
        return count_reasons(label for a in self.attempts
                             if (label := unscored_label(a)) is not None)


class TaskAttempts(Mapping[str, Sequence[AttemptResult]]):
    """One config's attempts grouped by task id: what the search collects and gates.

    A task's mean score and pass rate are those of :class:`TaskResult` and the overall
    mean score is that of :class:`EvalResult` (a mean over tasks), so a search reports
    the numbers ``forge eval`` would.
    """

    __slots__ = ("_by_task",)

    def __init__(self, by_task: Mapping[str, Sequence[AttemptResult]] | None = None) -> None:
        self._by_task = {task_id: tuple(items) for task_id, items in (by_task or {}).items()}

    def __getitem__(self, task_id: str) -> Sequence[AttemptResult]:
        return self._by_task[task_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_task)

    def __len__(self) -> int:
        return len(self._by_task)

    def __repr__(self) -> str:
        return f"TaskAttempts({self._by_task!r})"

    def merged(self, more: Mapping[str, Sequence[AttemptResult]]) -> TaskAttempts:
        """These attempts and then ``more``'s, task by task (a new task goes last)."""
        out = {task_id: list(items) for task_id, items in self._by_task.items()}
        for task_id, items in more.items():
            out.setdefault(task_id, []).extend(items)
        return TaskAttempts(out)

    @property
    def mean_score(self) -> float | None:
        """Mean over tasks of each task's mean score; None if nothing was scored."""
        return _mean_over_tasks(_mean_score(items) for items in self._by_task.values())

    def pass_rates(self) -> dict[str, float]:
        """Per task with something scored: passed / scored."""
        return {task_id: rate for task_id, items in self._by_task.items()
                if (rate := _pass_rate(items)) is not None}

    def metric_means(self, metric: str) -> dict[str, float]:
        """Per task that reports ``metric``: its mean over the completed attempts."""
        out: dict[str, float] = {}
        for task_id, items in self._by_task.items():
            values = [a.metrics[metric] for a in items
                      if a.stop_reason == "completed" and metric in a.metrics]
            if values:
                # fsum, unlike the running sums of ``_mean_metrics``: these means feed
                # the auxiliary gates, whose journaled numbers must not move.
                out[task_id] = math.fsum(values) / len(values)
        return out


def paired_attempts(a: Mapping[str, Sequence[AttemptResult]],
                    b: Mapping[str, Sequence[AttemptResult]]
                    ) -> dict[str, list[tuple[AttemptResult, AttemptResult]]]:
    """Attempts of ``a`` and ``b`` paired on shared (task id, seed) keys, scored on both.

    Every task in both is a key, in ``a``'s order, its pairs in ``a``'s attempt order
    (none when no seed was scored on both sides). The seed derives from (run seed,
    stream, task id, attempt index), so within one seed stream this pairs attempt
    index with attempt index, and across two saved results the same draws.
    """
    out: dict[str, list[tuple[AttemptResult, AttemptResult]]] = {}
    for task_id, mine in a.items():
        theirs = b.get(task_id)
        if theirs is None:
            continue
        by_seed = {x.seed: x for x in theirs if x.scored}
        out[task_id] = [(x, by_seed[x.seed]) for x in mine if x.scored and x.seed in by_seed]
    return out


def paired_outcomes(a: Mapping[str, Sequence[AttemptResult]],
                    b: Mapping[str, Sequence[AttemptResult]]
                    ) -> dict[str, list[tuple[AttemptResult, AttemptResult]]]:
    """Attempts of ``a`` and ``b`` paired on shared (task id, seed) keys where neither was
    cancelled: scored on both, or failed on one side or on both (what a comparison of
    failures reads, and a score comparison where a failure is a loss). Ordered as
    :func:`paired_attempts`."""
    out: dict[str, list[tuple[AttemptResult, AttemptResult]]] = {}
    for task_id, mine in a.items():
        theirs = b.get(task_id)
        if theirs is None:
            continue
        by_seed = {x.seed: x for x in theirs if x.stop_reason != "cancelled"}
        out[task_id] = [(x, by_seed[x.seed]) for x in mine
                        if x.stop_reason != "cancelled" and x.seed in by_seed]
    return out


def _mean_score(attempts: Iterable[AttemptResult]) -> float | None:
    values = [a.score.value for a in attempts if a.scored and a.score is not None]
    return sum(values) / len(values) if values else None


def _pass_rate(attempts: Iterable[AttemptResult]) -> float | None:
    scored = [a for a in attempts if a.scored]
    return sum(1 for a in scored if a.passed) / len(scored) if scored else None


def _mean_over_tasks(values: Iterable[float | None]) -> float | None:
    """Each task weighs the same; a task with nothing measured is left out."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _mean_metrics(attempts: list[AttemptResult]) -> dict[str, float]:
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for a in attempts:
        for name, value in a.metrics.items():
            sums[name] = sums.get(name, 0.0) + value
            counts[name] = counts.get(name, 0) + 1
    return {name: sums[name] / counts[name] for name in sorted(sums)}


def save_result(result: EvalResult, path: str | Path) -> None:
    """Write the full result atomically: the old file stays whole until the new one is."""
    atomic_write_text(path, redacted_json(result) + "\n")


def load_result(path: str | Path) -> EvalResult:
    """A result saved by :func:`save_result`; another ``format_version``, a damaged file or
    one that is not a result raises :class:`ResultFileError` naming the file and field."""
    return load_versioned_json(path, EvalResult, error=ResultFileError,
                               version=FORMAT_VERSION, what="forge result")
