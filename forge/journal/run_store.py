"""A run's storage, given to its search: the journal, the attempt store, and who reads.

The search opens no file. Whoever decides the run folder (:mod:`forge.search.launch`,
a test, a benchmark) opens a :class:`RunStore` there and hands it over: its
:class:`~forge.journal.replay.JournalWriter` (which cuts a torn tail and, on resume,
verifies the records replayed instead of appending them), its
:class:`~forge.journal.store.AttemptStore` (every attempt, so a resume runs nothing
twice), and the records written so far. Each record written goes, as stored, to the
store's subscribers in the order they subscribed: the run's Optuna study
(:class:`forge.report.dashboard.DashboardStudy`), a live view
(:class:`forge.report.live.LiveView`), a test's probe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from forge.journal.records import AnyRecord
from forge.journal.replay import JournalWriter
from forge.journal.store import AttemptStore, store_file

__all__ = ["RunStore", "Subscriber"]

_R = TypeVar("_R", bound=AnyRecord)

#: Told every record a run writes, as stored (a replayed one as it was first written).
Subscriber = Callable[[AnyRecord], None]


class RunStore:
    """Where one search run keeps what it did: its journal and its attempts."""

    def __init__(self, journal: JournalWriter, attempts: AttemptStore,
                 subscribers: Iterable[Subscriber] = ()) -> None:
        self.journal = journal
        self.attempts = attempts
        self.subscribers = list(subscribers)
        #: Every record written (or replayed) so far, as stored, in journal order.
        self.records: list[AnyRecord] = []

    @classmethod
    def open(cls, folder: Path, subscribers: Iterable[Subscriber] = ()) -> RunStore:
        """The store of the run folder ``folder``: its journal opened (a torn tail cut,
        the records there read for replay), then its attempt store. A damaged line mid
        file raises :class:`~forge.errors.JournalError`: not something to run over."""
        journal = JournalWriter(folder)
        return cls(journal, AttemptStore(store_file(folder)), subscribers)

    def subscribe(self, subscriber: Subscriber) -> None:
        """Tell ``subscriber`` every record written from now on, after the others."""
        self.subscribers.append(subscriber)

    def write(self, record: _R) -> _R:
        """Journal ``record`` (in replay, verify it), then tell the subscribers; the
        record as stored."""
        stored = self.journal.write(record)
        self.records.append(stored)
        for subscriber in self.subscribers:
            subscriber(stored)
        return stored
