"""Results of an evaluation: attempts, tasks, the summary contract, save and load.

Only completed attempts with a score are *scored*. Everything else (errors,
timeouts, cancellations, scorer failures) is *unscored*: counted apart and never
as a zero, so a flaky harness cannot pose as a bad config.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from forge._files import atomic_write_text, load_versioned_json
from forge.errors import ResultFileError
from forge.harness._base import RunOutput
from forge.registry import Scalar
from forge.scorers._base import Score
from forge.secrets import redact

__all__ = [
    "FORMAT_VERSION",
    "SUMMARY_KEYS",
    "TASK_SUMMARY_KEYS",
    "AttemptResult",
    "EvalResult",
    "StopReason",
    "TaskResult",
    "load_result",
    "save_result",
]

FORMAT_VERSION = 1
StopReason = Literal["completed", "error", "timeout", "cancelled"]

#: The frozen keys of ``EvalResult.summary()``; scripts and CI read them.
SUMMARY_KEYS = ("bench", "split", "k", "n_tasks", "n_attempts", "n_scored", "n_unscored",
                "pass_rate", "mean_score", "metrics", "env_fingerprint", "config_fingerprint",
                "tasks")
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
    """One attempt: how it stopped, what it produced, and its score if it has one."""

    task_id: str
    attempt: int = Field(ge=0)
    seed: int
    stop_reason: StopReason
    error: str | None = None
    duration_s: float = Field(ge=0)
    output: RunOutput | None = None
    score: Score | None = None
    metrics: dict[str, float] = Field(default_factory=dict)

    @property
    def scored(self) -> bool:
        return self.stop_reason == "completed" and self.score is not None

    @property
    def passed(self) -> bool:
        return self.scored and self.score is not None and self.score.passed


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
        return self.n_passed / self.n_scored if self.n_scored else None

    @property
    def mean_score(self) -> float | None:
        scored = self.scored_attempts
        if not scored:
            return None
        return sum(a.score.value for a in scored if a.score is not None) / len(scored)

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
        rates = [t.pass_rate for t in self.tasks if t.pass_rate is not None]
        return sum(rates) / len(rates) if rates else None

    @property
    def mean_score(self) -> float | None:
        means = [t.mean_score for t in self.tasks if t.mean_score is not None]
        return sum(means) / len(means) if means else None

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
        }


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
    atomic_write_text(path, redact(result.model_dump_json()) + "\n")


def load_result(path: str | Path) -> EvalResult:
    """A result saved by :func:`save_result`; another ``format_version``, a damaged file or
    one that is not a result raises :class:`ResultFileError` naming the file and field."""
    return load_versioned_json(path, EvalResult, error=ResultFileError,
                               version=FORMAT_VERSION, what="forge result")
