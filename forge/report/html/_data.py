"""What the HTML report shows, read from a run folder: ``run.json``, the journal, and
the attempt store (read once: the per-step scores, every config's unscored attempts
(:mod:`forge.journal.review_failures`) and the viewer's answers (:mod:`._viewer`) from the
same pass).

The journal says what was decided; the attempt store says how well each incumbent
did. Per-step scores come from the store rather than the journal because the
journal records means on the *confirmation* streams (fresh seeds per segment), which
differ from one incumbent to the next; the screening stream ``dev`` and the ``val``
stream use the same seeds for every config, so their means line up across steps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from forge.config.moves import Move
from forge.errors import JournalError
from forge.journal import RunInfo
from forge.journal.records import (
    CandidateRecord,
    EndRecord,
    ProposalInvalidRecord,
    StartRecord,
    StopRecord,
    TestRecord,
)
from forge.journal.review import load_run_records
from forge.journal.review_failures import FailureCounter, RunFailures, kept_failures
from forge.journal.store import (
    StoredAttempt,
    read_attempts,
    read_for_review,
    review_configs,
    review_test_k,
    store_file,
)
from forge.report.html._viewer import ViewerData
from forge.stats.paired import Interval, mean_interval

__all__ = ["Incumbent", "RunReport", "ZoneTask", "load_report", "number"]

# (fingerprint, stream) -> task id -> attempt index -> (score value, passed)
_Scores = dict[tuple[str, str], dict[str, dict[int, tuple[float, bool]]]]


def number(value: float | None) -> float | None:
    """``value`` as a finite float, or None (journals write None for unknown bounds, and
    a hand-edited one may hold a NaN that no chart can place)."""
    return None if value is None or not math.isfinite(value) else float(value)


@dataclass(frozen=True)
class Incumbent:
    """One incumbent of the run, from the step that promoted it (0: the start config)."""

    step: int
    fingerprint: str
    move: Move | None
    dev: Interval | None
    val: Interval | None


@dataclass(frozen=True)
class ZoneTask:
    """A dev task the final incumbent passes sometimes but not always."""

    task_id: str
    passed: int
    scored: int


@dataclass(frozen=True)
class RunReport:
    """Everything the page shows, already read and checked."""

    folder: Path
    info: RunInfo
    start: StartRecord
    decisions: list[CandidateRecord]
    stop: StopRecord | None
    test: TestRecord | None
    end: EndRecord | None
    incumbents: list[Incumbent]
    last_step: int
    final_fingerprint: str
    has_attempts: bool
    zone: list[ZoneTask]
    dev_tasks_final: int
    k: int
    #: ``proposal_invalid`` records: replies a proposer refused (no move, no rollouts).
    invalid: list[ProposalInvalidRecord] = field(default_factory=list)
    #: Every config's unscored attempts (none known without a whole store: ``missing``).
    failures: RunFailures = field(default_factory=lambda: RunFailures(missing="not read"))
    #: The start's and the final config's answers (None without an attempt store).
    viewer: ViewerData | None = None

    @property
    def promoted(self) -> list[CandidateRecord]:
        return [d for d in self.decisions if d.verdict == "promoted"]


def load_report(folder: Path) -> RunReport:
    """Read a run folder; a missing or damaged run raises :class:`JournalError`."""
    run = load_run_records(folder)
    if run.start is None:
        raise JournalError("no start record: the run has not evaluated its start config yet",
                           file=folder / "journal.jsonl")
    info, decisions = run.info, run.candidates
    chain = run.incumbents
    final = run.final_fingerprint or chain[-1][1]
    k = info.options.k

    attempts_path = store_file(folder)
    has_attempts = attempts_path.exists()
    # The counts pruned.json kept, or (none kept) counted in the same pass as the scores.
    failures = kept_failures(folder)
    counter = FailureCounter() if failures is None else None
    # Attempt indices the viewer reads a stream: k, and on test what the test ran.
    viewer = ViewerData(chain[0][1], final, {"dev": k, "val": k, "test": review_test_k(run)}
                        ) if has_attempts else None
    readers = [r.add for r in (counter, viewer) if r is not None]
    scores = _read_scores(attempts_path, review_configs(run), k, readers)
    if counter is not None:
        failures = counter.finish(run)
    assert failures is not None

    incumbents = [Incumbent(step=step, fingerprint=fp, move=move,
                            dev=_interval(scores.get((fp, "dev"))),
                            val=_interval(scores.get((fp, "val"))))
                  for step, fp, move in chain]
    last_step = max([0, *(d.step for d in decisions),
                     *([run.stop.step] if run.stop is not None else [])])
    final_dev = scores.get((final, "dev"), {})
    zone = [ZoneTask(task_id, passed, scored)
            for task_id, passed, scored in (_counts(task_id, items)
                                            for task_id, items in final_dev.items())
            if 0 < passed < scored]
    zone.sort(key=lambda z: (z.passed / z.scored, z.task_id))
    return RunReport(folder=folder, info=info, start=run.start, decisions=decisions,
                     stop=run.stop, test=run.test, end=run.end, incumbents=incumbents,
                     last_step=last_step, final_fingerprint=final, has_attempts=has_attempts,
                     zone=zone, dev_tasks_final=len(final_dev), k=k, invalid=run.invalid,
                     failures=failures, viewer=viewer)


def _read_scores(path: Path, wanted: set[str], k: int,
                 readers: Sequence[Callable[[StoredAttempt], None]] = ()) -> _Scores:
    """Scored attempts of the ``wanted`` configs on the shared-seed streams; every row
    is handed to each of ``readers`` too (one pass over the store).

    Only attempt indices below ``k`` count: the search's own means use those, and
    the extra blocks racing adds for close calls exist for a few configs only.
    Unscored attempts are left out (never counted as 0), as everywhere in forge.
    """
    out: _Scores = defaultdict(lambda: defaultdict(dict))
    for row in read_attempts(path):
        for reader in readers:
            reader(row)
        a = row.result
        if not read_for_review(row, wanted, k) or not a.scored or a.score is None:
            continue
        value = number(a.score.value)
        if value is None:
            continue
        # Later lines win, as in the store itself.
        out[(row.config, row.stream)][a.task_id][a.attempt] = (value, a.score.passed)
    return out


def _interval(tasks: dict[str, dict[int, tuple[float, bool]]] | None) -> Interval | None:
    """95% t-interval of the mean over tasks of each task's mean score."""
    if not tasks:
        return None
    means = [math.fsum(v for v, _ in items.values()) / len(items)
             for items in tasks.values() if items]
    return mean_interval(means, 0.95)


def _counts(task_id: str, items: dict[int, tuple[float, bool]]) -> tuple[str, int, int]:
    return task_id, sum(1 for _, ok in items.values() if ok), len(items)
