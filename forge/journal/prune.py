"""Pruning finished runs: the attempt store cut down to what review reads.

A run folder's attempt store holds every attempt the search ran, with its output,
score and metrics: what resuming and reusing need, and by far the largest file of a
run. Once a run has ended, review (``forge journal show``, ``forge report``,
``forge promote``) reads only the journal, ``run.json`` and, for the report's
per-step scores, the incumbents' first K attempts on the shared-seed streams, and for
its viewer the start's and the final config's test attempts
(:func:`forge.journal.store.read_for_review`). :func:`prune_run` rewrites the store to those
attempts and records what it did in ``pruned.json`` (:class:`PruneRecord`), with each
config's unscored attempts counted before the rest go
(:class:`forge.journal.review_failures.FailureSummary`: what review shows of them); nothing
else in the folder is touched, nor any promoted config or its provenance, which live
beside the config they describe.

A pruned run can no longer be resumed (``forge search --resume`` says so): its journal
would be replayed against attempts that are gone. So a run that has not ended is
pruned only when asked with ``force``, and a run being written (its lock held) never.

Crash safety: ``pruned.json`` is written first, then the new store replaces the old
one by an atomic rename, then a plain ``attempts.jsonl`` of an earlier forge is
removed. A kill between two of these leaves a run marked pruned whose store is still
whole or still plain beside the new one (which readers prefer); pruning it again
finishes the work.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from forge._util.files import atomic_write_bytes, atomic_write_text
from forge.errors import JournalError
from forge.journal.lock import held_by
from forge.journal.pruned import PRUNED_FILE, PruneRecord, load_pruned
from forge.journal.review import RunRecords, load_run_records
from forge.journal.review_failures import FailureCounter, kept_failures
from forge.journal.run import lock_run, run_lock_file
from forge.journal.store import (
    PLAIN_STORE_FILE,
    STORE_FILE,
    StoredAttempt,
    attempt_line,
    read_attempts,
    read_for_review,
    review_configs,
    review_test_k,
    store_bytes,
    store_file,
)

__all__ = ["PRUNED_FILE", "PruneOutcome", "PruneRecord", "load_pruned", "prune_run",
           "prune_runs"]

Action = Literal["pruned", "would prune", "skipped"]


@dataclass(frozen=True)
class PruneOutcome:
    """What pruning one run did, or would do (``dry_run``), or why it was left alone."""

    folder: Path
    action: Action
    #: Why a run was skipped (still running, unfinished, already pruned, ...).
    reason: str = ""
    attempts_before: int = 0
    attempts_kept: int = 0
    bytes_before: int = 0
    bytes_after: int = 0

    @property
    def run_id(self) -> str:
        return self.folder.name

    @property
    def freed(self) -> int:
        return self.bytes_before - self.bytes_after if self.action != "skipped" else 0

    def as_json(self) -> dict[str, object]:
        return {"run_id": self.run_id, "folder": str(self.folder), "action": self.action,
                "reason": self.reason or None, "attempts_before": self.attempts_before,
                "attempts_kept": self.attempts_kept, "bytes_before": self.bytes_before,
                "bytes_after": self.bytes_after, "bytes_freed": self.freed}


def _store_files(folder: Path) -> list[Path]:
    return [p for p in (folder / STORE_FILE, folder / PLAIN_STORE_FILE) if p.exists()]


def _still_running(holder: str) -> str:
    return f"still running ({holder}): a run is pruned once its search has ended"


def _refusal(run: RunRecords, holder: str | None, *, force: bool) -> str | None:
    """Why the run may not be pruned now (its lock held, not ended), or None."""
    if holder is not None:
        return _still_running(holder)
    if not run.finished and not force:
        return ("not finished (no end record): a pruned run cannot be resumed; --force "
                "prunes it anyway")
    return None


def prune_run(folder: Path, *, dry_run: bool, force: bool = False) -> PruneOutcome:
    """Prune one run folder's attempt store (see the module docstring); ``dry_run``
    computes the same figures and changes nothing.

    A run that is running or (without ``force``) unfinished is refused with a
    :class:`JournalError`; one with nothing to prune is an outcome ``skipped``.
    """
    refused = f"cannot prune run {folder.name}: "
    with contextlib.nullcontext() if dry_run else lock_run(
            folder, busy=lambda holder: refused + _still_running(holder)):
        # Read under the lock (nobody else writes the run now); a dry run takes no lock,
        # so it asks who holds it.
        run = load_run_records(folder)
        why = _refusal(run, held_by(run_lock_file(folder)) if dry_run else None,
                       force=force)
        if why is not None:
            raise JournalError(refused + why, file=folder)
        return _plan(folder, run, dry_run=dry_run)


def _plan(folder: Path, run: RunRecords, *, dry_run: bool) -> PruneOutcome:
    files = _store_files(folder)
    if not files:
        return PruneOutcome(folder, "skipped", "no attempt store")
    configs, k = review_configs(run), run.info.options.k
    rows = list(read_attempts(store_file(folder)))
    kept = [row for row in rows if read_for_review(row, configs, k, review_test_k(run))]
    before = sum(p.stat().st_size for p in files)
    if _already_pruned(folder, files, dropped=len(rows) - len(kept)):
        return PruneOutcome(folder, "skipped", "already pruned", len(rows), len(kept),
                            before, before)
    data = store_bytes([attempt_line(r.config, r.stream, r.result) for r in kept])
    outcome = PruneOutcome(folder, "would prune" if dry_run else "pruned", "", len(rows),
                           len(kept), before, len(data))
    if not dry_run:
        _write_pruned(folder, _prune_record(folder, run, outcome, rows, files), data)
    return outcome


def _already_pruned(folder: Path, files: list[Path], *, dropped: int) -> bool:
    """Pruned before, and nothing has been added since that a prune would drop."""
    return load_pruned(folder) is not None and files == [folder / STORE_FILE] and not dropped


def _prune_record(folder: Path, run: RunRecords, outcome: PruneOutcome,
                  rows: list[StoredAttempt], files: list[Path]) -> PruneRecord:
    # Counting needs every attempt: what review shows of them is kept here, before they go.
    failures = kept_failures(folder)  # a second prune keeps what the first kept
    if failures is None:
        failures = FailureCounter().extend(rows).finish(run)
    return PruneRecord(pruned_at=datetime.now(UTC), attempts_before=outcome.attempts_before,
                       attempts_kept=outcome.attempts_kept, bytes_before=outcome.bytes_before,
                       bytes_after=outcome.bytes_after, files=[p.name for p in files],
                       failures=None if failures.missing else failures.summary())


def _write_pruned(folder: Path, record: PruneRecord, data: bytes) -> None:
    """``pruned.json`` first, then the new store, then the plain store gone (see the module)."""
    try:
        atomic_write_text(folder / PRUNED_FILE, record.model_dump_json(indent=2) + "\n")
        atomic_write_bytes(folder / STORE_FILE, data)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder / PLAIN_STORE_FILE)
    except OSError as exc:
        raise JournalError(f"cannot write: {exc.strerror or exc}; run the prune again once "
                           "it can be written", file=exc.filename or folder) from None


def prune_runs(folders: Sequence[Path], *, dry_run: bool, force: bool = False, keep: int = 0,
               named: bool = False) -> list[PruneOutcome]:
    """Prune each of ``folders`` but the ``keep`` newest of those that may be pruned; an
    outcome per folder, in order.

    ``named``: the runs were named one by one, so one that may not be pruned (running,
    unfinished without ``force``, unreadable) is refused with a :class:`JournalError`
    before any is pruned. Otherwise (every run under a journals folder) it is skipped,
    with the reason on its outcome.
    """
    skipped, allowed = _triage(folders, force=force, named=named)
    allowed.sort(key=lambda item: (item[0], item[1].name))
    for _, folder in allowed[len(allowed) - keep:] if keep else []:
        skipped[folder] = f"one of the {keep} newest runs (--keep {keep})"
    return [_prune_unless_skipped(folder, skipped.get(folder), dry_run=dry_run, force=force,
                                  named=named) for folder in folders]


def _triage(folders: Sequence[Path], *, force: bool, named: bool
            ) -> tuple[dict[Path, str], list[tuple[datetime, Path]]]:
    """The folders that may not be pruned, with why, and (creation time, folder) of
    those that may; with ``named``, a folder that may not is a :class:`JournalError`."""
    skipped: dict[Path, str] = {}
    allowed: list[tuple[datetime, Path]] = []
    for folder in folders:
        try:
            holder = held_by(run_lock_file(folder))
            run = load_run_records(folder)
        except JournalError as exc:
            if named:
                raise
            skipped[folder] = f"cannot be read: {exc}"
            continue
        why = _refusal(run, holder, force=force)
        created = run.info.created_at
        if why is not None:
            if named:
                raise JournalError(f"cannot prune run {folder.name}: {why}", file=folder)
            skipped[folder] = why
            continue
        allowed.append((created if created.tzinfo else created.replace(tzinfo=UTC), folder))
    return skipped, allowed


def _prune_unless_skipped(folder: Path, skipped: str | None, *, dry_run: bool, force: bool,
                          named: bool) -> PruneOutcome:
    if skipped is not None:
        return PruneOutcome(folder, "skipped", skipped)
    try:
        return prune_run(folder, dry_run=dry_run, force=force)
    except JournalError as exc:  # started running since it was looked at
        if named:
            raise
        reason = exc.message.removeprefix(f"cannot prune run {folder.name}: ")
        return PruneOutcome(folder, "skipped", reason)
