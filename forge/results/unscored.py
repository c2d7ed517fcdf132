"""The unscored counts a journal record, ``pruned.json`` and ``--json`` carry: one shape.

An unscored attempt (an error, a timeout, a scorer that failed) is left out of every
mean, never counted as a zero; these counts are what the means leave out, so that a
config that fails where it would be wrong cannot look better than it is unseen. They
are made by :func:`forge.results.failures.unscored_counts` (and read back by review).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["UnscoredCounts"]


class UnscoredCounts(BaseModel):
    """A config's unscored attempts among some of its attempts: how many attempts, how
    many unscored, those by reason (:func:`forge.results.failures.count_reasons`: the most
    frequent first, at most :data:`forge.results.failures.JSON_REASONS` and the rest as
    ``other``, summing to ``n_unscored``), and the tasks none of whose attempts was
    scored: how many, and the first :data:`forge.results.failures.NAMED_TASKS` of them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_tasks: int = Field(ge=0)
    n_attempts: int = Field(ge=0)
    n_unscored: int = Field(ge=0)
    unscored_by_reason: dict[str, int] = Field(default_factory=dict)
    n_tasks_without_score: int = Field(default=0, ge=0)
    tasks_without_score: list[str] = Field(default_factory=list)

    @property
    def rate(self) -> float | None:
        """Unscored over attempts; None without attempts."""
        return self.n_unscored / self.n_attempts if self.n_attempts else None
