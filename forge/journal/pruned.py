"""``pruned.json``: what ``forge journal prune`` kept of a run whose attempt store it cut.

Review counts a run's unscored attempts from its store
(:mod:`forge.journal.review_failures`); a pruned store no longer holds them, so the prune
keeps the counts here (:class:`FailureSummary`) and review reads them back. The shapes
live apart from the pruning and the counting so that both can read them.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forge._util.files import load_versioned_json
from forge.errors import JournalError
from forge.results.failures import FailureReason
from forge.results.unscored import UnscoredCounts

__all__ = ["PRUNED_FILE", "ConfigFailures", "FailureSummary", "PruneRecord", "ReasonExample",
           "StepUnscored", "load_pruned"]

PRUNED_FILE = "pruned.json"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReasonExample(_Model):
    """One reason a config's attempts went unscored: how they stopped, the normalised
    message, how many, and the first attempt it was seen on (its message as the store
    keeps it: redacted, clipped)."""

    stop: str
    key: str
    count: int
    task_id: str
    attempt: int
    message: str

    @property
    def label(self) -> str:
        """As :attr:`forge.results.failures.FailureReason.label`."""
        return f"{self.stop}: {self.key}" if self.key else self.stop

    @classmethod
    def of(cls, reason: FailureReason) -> ReasonExample:
        return cls(stop=reason.stop, key=reason.key, count=reason.count,
                   task_id=reason.task_id, attempt=reason.attempt, message=reason.message)


class ConfigFailures(_Model):
    """Every attempt of one config: its counts, its :data:`~forge.results.failures.TOP_REASONS`
    most frequent reasons with an example each, and how many reasons there were."""

    counts: UnscoredCounts
    reasons: list[ReasonExample]
    n_reasons: int


class StepUnscored(_Model):
    """A candidate's unscored attempts and its incumbent's, on the keys both ran."""

    candidate: str
    incumbent: str
    candidate_counts: UnscoredCounts
    incumbent_counts: UnscoredCounts

    def as_json(self) -> dict[str, Any]:
        """``{candidate, incumbent}``, each config's counts (``forge journal show --json``)."""
        return {"candidate": self.candidate_counts.model_dump(mode="json"),
                "incumbent": self.incumbent_counts.model_dump(mode="json")}


class FailureSummary(_Model):
    """What review shows of a run's unscored attempts, kept where the store is not:
    each config's, and each candidate's beside its incumbent's."""

    format_version: Literal[1] = 1
    configs: dict[str, ConfigFailures]
    steps: list[StepUnscored]


class PruneRecord(BaseModel):
    """``pruned.json``: when a run's attempt store was pruned, and what it kept."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format_version: Literal[1] = 1
    pruned_at: datetime
    attempts_before: int = Field(ge=0)
    attempts_kept: int = Field(ge=0)
    bytes_before: int = Field(ge=0)
    bytes_after: int = Field(ge=0)
    #: The store files that were replaced or removed, by name.
    files: list[str]
    #: What review shows of the unscored attempts, which needs the attempts pruned
    #: (absent: pruned by a forge before it was kept).
    failures: FailureSummary | None = None


def load_pruned(folder: Path) -> PruneRecord | None:
    """The run's ``pruned.json``, or None if it was never pruned."""
    path = folder / PRUNED_FILE
    if not path.exists():
        return None
    return load_versioned_json(path, PruneRecord, error=JournalError, version=1,
                               what="pruned.json")
