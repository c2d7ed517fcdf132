"""Reading a run's journal, and writing it again on resume: records replayed, not trusted.

Resume replays: the search runs again from the start with the same seed, served from
the attempt store, and :class:`JournalWriter` checks that each record it is asked to
write equals the one already on disk (timestamps aside) before appending anything new.
A run that diverges from its own journal is refused.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar, cast

from forge.errors import JournalError
from forge.journal.jsonl import JsonlAppender, cut_torn_tail, read_jsonl_tolerant
from forge.journal.records import AnyRecord, parse_record
from forge.journal.run import write_error
from forge.secrets.masking import redact
from forge.secrets.structured import redacted

__all__ = ["JournalWriter", "read_journal", "read_records"]

_R = TypeVar("_R", bound=AnyRecord)


def read_journal(folder: Path) -> list[tuple[int, AnyRecord]]:
    """``(line number, record)`` for each record of the run's ``journal.jsonl``, in order.

    The one reader of journals: a torn last line (a kill mid-write) is skipped; damage
    elsewhere, a record of another ``format_version`` or one that does not validate
    raises :class:`JournalError` naming the file and the line.
    """
    path = folder / "journal.jsonl"
    rows = read_jsonl_tolerant(path, JournalError, what="the journal",
                               missing="no journal in this run folder")
    return [(line, parse_record(value, file=path, line=line)) for line, value in rows]


def read_records(folder: Path) -> list[AnyRecord]:
    """The run's journal records, in order (see :func:`read_journal`)."""
    return [record for _, record in read_journal(folder)]


class JournalWriter:
    """Appends records to ``journal.jsonl``; in replay, verifies instead of appending."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "journal.jsonl"
        # Cut first, so that the records replayed are exactly those the file keeps.
        try:
            cut_torn_tail(self.path)
        except OSError as exc:
            raise write_error(exc, self.path) from None
        self._existing = read_journal(folder) if self.path.exists() else []
        self._position = 0
        self._out = JsonlAppender(self.path)

    @property
    def replaying(self) -> bool:
        return self._position < len(self._existing)

    def write(self, record: _R) -> _R:
        """Append ``record`` (with a timestamp); returns the record as stored."""
        stamped = record.model_copy(update={"at": datetime.now(UTC)})
        # Round-trip through JSON so that the comparison sees what a reader would see,
        # secrets redacted as they are on disk.
        text = json.dumps(stamped.journal_json(), allow_nan=False)
        data = json.loads(text)
        if redact(text) != text:  # masked as data: the record's own words are kept
            data = redacted(type(record), data)
        stored = cast(_R, type(record).model_validate(data))
        if self._position < len(self._existing):
            line, old = self._existing[self._position]
            if old.stable_text() != stored.stable_text():
                raise JournalError(f"resume diverged at record {self._position + 1} "
                                   f"({record.kind}): the bench, its code or forge changed "
                                   "since this run was written", file=self.path, line=line)
            self._position += 1
            return cast(_R, old)  # the same kind: its text is the same
        try:
            with self._out:
                self._out.append([json.dumps(data, ensure_ascii=False)])
        except OSError as exc:
            raise write_error(exc, self.path) from None
        self._position += 1
        return stored
