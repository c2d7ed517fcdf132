"""The journal: what a search did, on disk, append-only, and how it is read back.

A run folder holds ``run.json`` (:mod:`~forge.journal.run`: what was searched, how),
``journal.jsonl`` (:mod:`~forge.journal.records`: one typed, versioned record per
event; :mod:`~forge.journal.replay`: read, and verified record by record on resume)
and ``attempts.jsonl.gz`` (:mod:`~forge.journal.store`: every attempt, so a resume runs
nothing twice). Underneath, one JSONL layer (:mod:`~forge.journal.jsonl`, gzip members
in :mod:`~forge.journal.gzjsonl`): append, flush, fsync, a torn last line tolerated;
and one writer a run (:mod:`~forge.journal.lock`). :mod:`~forge.journal.prune` drops
the attempts of finished runs that a review never reads.
"""

from __future__ import annotations

from forge.errors import JournalError
from forge.journal.records import JOURNAL_FORMAT_VERSION
from forge.journal.replay import JournalWriter, read_journal, read_records
from forge.journal.run import (
    RunInfo,
    RunOptions,
    load_run,
    lock_run,
    new_run_id,
    run_dir,
    run_lock_file,
    write_error,
    write_run,
)

__all__ = [
    "JOURNAL_FORMAT_VERSION",
    "JournalError",
    "JournalWriter",
    "RunInfo",
    "RunOptions",
    "load_run",
    "lock_run",
    "new_run_id",
    "read_journal",
    "read_records",
    "run_dir",
    "run_lock_file",
    "write_error",
    "write_run",
]
