"""Why attempts failed: unscored attempts grouped by reason, counted, charged to a config.

An attempt that does not end with a score (an error, a timeout, a scorer that failed)
is data, never a zero; but a harness that fails on every attempt, or on one in five,
must not look like a search that found nothing to improve. :class:`FailureTally`
counts attempts and the unscored among them, groups the unscored by *reason* (how the
attempt stopped and its message, normalised so that the same failure on two tasks is
one reason: :func:`reason_key`) and keeps, per reason, how many attempts of each config
it took, and one example: the first attempt it was seen on, with its task and message.
:func:`unscored_counts` counts a set of attempts by reason (:func:`unscored_label`,
:func:`count_reasons`) and names its tasks never scored: the one shape
(:class:`~forge.results.unscored.UnscoredCounts`) of ``--json``, the journal and review.

:data:`FAILURE_WARN_RATE` is the share of unscored attempts above which ``forge
search`` and ``forge eval`` warn. The text kept here is the harness's own, unescaped:
whoever prints it passes it through :func:`forge._util.show.printable`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from forge.results.model import AttemptResult
from forge.results.reasons import (
    JSON_REASONS,
    OTHER_REASONS,
    count_reasons,
    failure_stop,
    reason_key,
    unscored_label,
)
from forge.results.unscored import UnscoredCounts

__all__ = ["FAILURE_WARN_RATE", "JSON_REASONS", "NAMED_TASKS", "OTHER_REASONS", "TOP_REASONS",
           "FailureReason", "FailureTally", "count_reasons", "failure_stop", "label_counts",
           "reason_key", "unscored_counts", "unscored_label"]

#: Above this share of unscored attempts (unscored / attempts run), a search or an
#: evaluation says so at its end. A working harness fails rarely (a timeout on a slow
#: call, a dropped connection): well under 1 in 20. Past that, the scores rest on the
#: attempts that happened to finish, and a config that fails more often than another is
#: compared on a different sample of seeds than the one it is paired with.
FAILURE_WARN_RATE = 0.05
#: How many reasons a report shows, the most frequent first.
TOP_REASONS = 5
#: How many tasks without a scored attempt a count names (by id, in task order).
NAMED_TASKS = 50
def unscored_counts(attempts: Mapping[str, Sequence[AttemptResult]],
                    tasks: Iterable[str] = ()) -> UnscoredCounts:
    """The :class:`~forge.journal.records.UnscoredCounts` of ``attempts`` (by task id).
    ``tasks``: the tasks that were meant to run, in order; one with no attempt at all
    counts as a task without a score too (it is never left out unsaid)."""
    return label_counts({task_id: [unscored_label(a) for a in items]
                         for task_id, items in attempts.items()}, tasks)


def label_counts(labels_by_task: Mapping[str, Sequence[str | None]],
                 tasks: Iterable[str] = ()) -> UnscoredCounts:
    """As :func:`unscored_counts`, from each attempt's :func:`unscored_label` (None: scored)."""
    order = list(dict.fromkeys([*tasks, *labels_by_task]))
    labels: list[str] = []
    without: list[str] = []
    n_attempts = 0
    for task_id in order:
        items = labels_by_task.get(task_id, ())
        n_attempts += len(items)
        mine = [label for label in items if label is not None]
        labels.extend(mine)
        if len(mine) == len(items):  # no attempt of the task was scored
            without.append(task_id)
    return UnscoredCounts(n_tasks=len(order), n_attempts=n_attempts, n_unscored=len(labels),
                          unscored_by_reason=count_reasons(labels),
                          n_tasks_without_score=len(without),
                          tasks_without_score=without[:NAMED_TASKS])


@dataclass
class FailureReason:
    """One reason attempts failed: how they stopped (``error``, ``timeout``,
    ``cancelled``, ``scorer_failed``), the normalised message, how many attempts, per
    config fingerprint how many of them, and the first attempt it was seen on."""

    stop: str
    key: str
    count: int = 0
    configs: Counter[str] = field(default_factory=Counter)
    task_id: str = ""
    attempt: int = 0
    config: str = ""
    message: str = ""

    @property
    def label(self) -> str:
        """``stop: key`` (the stop alone for a failure without a message), as
        :func:`unscored_label` names it."""
        return f"{self.stop}: {self.key}" if self.key else self.stop


class FailureTally:
    """Attempts counted, the unscored among them grouped by reason (see the module).

    Thread-safe: a search adds to it while a live view reads it."""

    def __init__(self) -> None:
        self.attempts = 0
        self.unscored = 0
        self._reasons: dict[tuple[str, str], FailureReason] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, attempts: Iterable[AttemptResult], config: str = "") -> FailureTally:
        """A tally of ``attempts``, all of the config ``config``."""
        tally = cls()
        for a in attempts:
            tally.add(a, config)
        return tally

    def add(self, attempt: AttemptResult, config: str = "") -> None:
        """Count ``attempt``, of the config whose fingerprint is ``config``."""
        with self._lock:
            self.attempts += 1
            if attempt.scored:
                return
            self.unscored += 1
            stop = failure_stop(attempt)
            key = (stop, reason_key(attempt.error, attempt.task_id))
            reason = self._reasons.get(key)
            if reason is None:
                reason = self._reasons[key] = FailureReason(
                    stop=stop, key=key[1], task_id=attempt.task_id, attempt=attempt.attempt,
                    config=config, message=attempt.error or "")
            reason.count += 1
            reason.configs[config] += 1

    @property
    def rate(self) -> float | None:
        """Unscored attempts over attempts counted; None before any."""
        return self.unscored / self.attempts if self.attempts else None

    @property
    def alarming(self) -> bool:
        """More than :data:`FAILURE_WARN_RATE` of the attempts unscored."""
        rate = self.rate
        return rate is not None and rate > FAILURE_WARN_RATE

    def reasons(self, top: int | None = TOP_REASONS) -> list[FailureReason]:
        """The reasons, the most frequent first (the first seen first among equals);
        the ``top`` ones (all with None). Copies: the tally may go on counting."""
        with self._lock:
            ranked = sorted(self._reasons.values(), key=lambda r: -r.count)
            chosen = ranked if top is None else ranked[:top]
            return [FailureReason(r.stop, r.key, r.count, Counter(r.configs), r.task_id,
                                  r.attempt, r.config, r.message) for r in chosen]

    def n_reasons(self) -> int:
        with self._lock:
            return len(self._reasons)
