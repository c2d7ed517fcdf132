"""Unscored attempts of a search run, per config, read back from its attempt store.

The journal says what was decided; the attempt store says which attempts went unscored
and why. Review (``forge journal show``, the HTML report) shows it for the start
config, each candidate and the final config: how many of a config's attempts were not
scored and which tasks it never scored (:class:`~forge.journal.records.UnscoredCounts`),
its reasons with an example each (:mod:`forge.results.failures`); and for each candidate, its
unscored attempts beside the incumbent's *on the same keys* (seed stream, task,
attempt index: the same seeds, since a seed never depends on the config), so that the
two shares compare as the gates compare scores.

Counting reads the whole store; ``forge journal prune`` cuts the store down, so it
keeps the counts (:class:`FailureSummary`, in ``pruned.json``) and review reads them
from there: a pruned run shows what it showed before. What cannot be known is said,
not guessed: without an attempt store, with a damaged one, or pruned by a forge that
did not keep the counts, :attr:`RunFailures.missing` says why and nothing is counted.
Cancelled attempts are the search's own (racing stopped what it no longer needed): the
store does not keep them, and they are never counted here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.errors import JournalError
from forge.journal.pruned import (
    ConfigFailures,
    FailureSummary,
    ReasonExample,
    StepUnscored,
    load_pruned,
)
from forge.journal.records import CandidateRecord, UnscoredCounts
from forge.journal.review import RunRecords, step_records
from forge.journal.store import StoredAttempt, read_attempts, store_file
from forge.results.failures import (
    TOP_REASONS,
    FailureTally,
    label_counts,
    unscored_label,
)

__all__ = ["ConfigFailures", "FailureCounter", "FailureSummary", "ReasonExample",
           "RunFailures", "StepUnscored", "kept_failures", "load_run_failures",
           "step_records_with_unscored"]

# (seed stream, task id, attempt index): one attempt of a config.
_Key = tuple[str, str, int]


@dataclass(frozen=True)
class RunFailures:
    """A run's unscored attempts per config and per candidate (see the module); empty,
    with :attr:`missing` saying why, when they cannot be known."""

    configs: dict[str, ConfigFailures] = field(default_factory=dict)
    pairs: dict[tuple[str, str], StepUnscored] = field(default_factory=dict)
    #: Why there are no counts (no attempt store, a damaged one, ...); None when there are.
    missing: str | None = None

    def config(self, fingerprint: str) -> ConfigFailures | None:
        """Every attempt of the config (every stream it ran); None for one with none."""
        return self.configs.get(fingerprint)

    def step(self, record: CandidateRecord) -> StepUnscored | None:
        """The candidate's and the incumbent's unscored attempts on the keys both ran; None
        for a move that ran nothing (or no counts: :attr:`missing`)."""
        if record.candidate is None:
            return None
        return self.pairs.get((record.candidate, record.incumbent))

    def total(self) -> tuple[int, int]:
        """(attempts, unscored) over every config."""
        return (sum(c.counts.n_attempts for c in self.configs.values()),
                sum(c.counts.n_unscored for c in self.configs.values()))

    def summary(self) -> FailureSummary:
        """What ``pruned.json`` keeps of it."""
        return FailureSummary(configs=self.configs, steps=list(self.pairs.values()))

    @classmethod
    def of_summary(cls, summary: FailureSummary) -> RunFailures:
        return cls(configs=dict(summary.configs),
                   pairs={(s.candidate, s.incumbent): s for s in summary.steps})


class FailureCounter:
    """Counts a store's rows one by one (:meth:`add`), so that a reader making one pass
    over the store (the HTML report) can feed it beside its own use of them; then
    :meth:`finish` for the run's candidates."""

    def __init__(self) -> None:
        self._tallies: dict[str, FailureTally] = {}
        self._labels: dict[str, dict[_Key, str | None]] = defaultdict(dict)

    def add(self, row: StoredAttempt) -> None:
        """Count one stored attempt (once: a key seen before is not counted again)."""
        a = row.result
        labels = self._labels[row.config]
        key = (row.stream, a.task_id, a.attempt)
        if key in labels:
            return
        labels[key] = unscored_label(a)
        self._tallies.setdefault(row.config, FailureTally()).add(a, row.config)

    def extend(self, rows: Iterable[StoredAttempt]) -> FailureCounter:
        for row in rows:
            self.add(row)
        return self

    def finish(self, run: RunRecords) -> RunFailures:
        """The counts of every config, and of each candidate of ``run`` beside its
        incumbent."""
        configs = {fp: ConfigFailures(counts=_counts(labels.items()),
                                      reasons=[ReasonExample.of(r)
                                               for r in self._tallies[fp].reasons(TOP_REASONS)],
                                      n_reasons=self._tallies[fp].n_reasons())
                   for fp, labels in self._labels.items()}
        pairs: dict[tuple[str, str], StepUnscored] = {}
        for record in run.candidates:
            if record.candidate is None:
                continue
            step = self._paired(record.candidate, record.incumbent)
            if step is not None:
                pairs[(record.candidate, record.incumbent)] = step
        return RunFailures(configs=configs, pairs=pairs)

    def _paired(self, candidate: str, incumbent: str) -> StepUnscored | None:
        cand, inc = self._labels.get(candidate), self._labels.get(incumbent)
        if not cand or not inc:
            return None
        shared = [key for key in cand if key in inc]
        if not shared:
            return None
        return StepUnscored(candidate=candidate, incumbent=incumbent,
                            candidate_counts=_counts((k, cand[k]) for k in shared),
                            incumbent_counts=_counts((k, inc[k]) for k in shared))


def _counts(items: Iterable[tuple[_Key, str | None]]) -> UnscoredCounts:
    by_task: dict[str, list[str | None]] = defaultdict(list)
    for (_, task_id, _), label in items:
        by_task[task_id].append(label)
    return label_counts(dict(sorted(by_task.items())))


def load_run_failures(folder: Path, run: RunRecords) -> RunFailures:
    """The counts of ``run`` (read from ``folder``): from ``pruned.json`` once it was
    pruned, else from its attempt store in one pass; empty with
    :attr:`RunFailures.missing` set when neither can tell (the journal can be reviewed
    all the same)."""
    kept = kept_failures(folder)
    if kept is not None:
        return kept
    try:
        return FailureCounter().extend(read_attempts(store_file(folder))).finish(run)
    except JournalError as exc:
        return RunFailures(missing=f"the attempt store cannot be read: {exc}")


def kept_failures(folder: Path) -> RunFailures | None:
    """The counts where the store is not to be counted from: those ``pruned.json`` kept,
    or none (with the reason) for a run without a store or pruned without them; None
    when the store is there to be counted."""
    try:
        pruned = load_pruned(folder)
    except JournalError as exc:
        return RunFailures(missing=f"its record of the prune cannot be read: {exc}")
    if pruned is not None:
        if pruned.failures is None:
            return RunFailures(missing="the attempt store was pruned by a forge that did "
                                       "not keep the counts")
        return RunFailures.of_summary(pruned.failures)
    if not store_file(folder).exists():
        return RunFailures(missing="the run folder has no attempt store")
    return None


def step_records_with_unscored(run: RunRecords, failures: RunFailures) -> list[dict[str, Any]]:
    """:func:`forge.journal.review.step_records`, each with ``unscored_attempts``: the candidate's
    and the incumbent's unscored attempts on the keys both ran
    (:meth:`StepUnscored.as_json`), or None when the step ran nothing or the counts
    cannot be known (:attr:`RunFailures.missing`)."""
    steps = step_records(run)
    for step, record in zip(steps, run.candidates, strict=True):
        found = failures.step(record)
        step["unscored_attempts"] = None if found is None else found.as_json()
    return steps
