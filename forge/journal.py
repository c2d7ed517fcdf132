"""The search journal: one folder per run, an append-only record of every decision.

``journals/<run-id>/`` holds ``run.json`` (what was searched and how),
``journal.jsonl`` (one record per event, appended and fsynced before the search
moves on), ``attempts.jsonl`` (every attempt, see :mod:`forge.store`) and
``optuna.journal`` (the Optuna study of evaluated configs).

Resume replays: the search runs again from the start with the same seed, served
from the attempt store, and :class:`JournalWriter` checks that each record it is
asked to write equals the one already on disk (timestamps aside) before appending
anything new. A run that diverges from its own journal is refused.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forge._files import atomic_write_text
from forge.errors import JournalError, UserError
from forge.secrets import redact
from forge.store import iter_jsonl_tolerant, truncate_torn_tail

__all__ = [
    "JOURNAL_FORMAT_VERSION",
    "JournalError",
    "JournalWriter",
    "RunInfo",
    "load_run",
    "read_records",
    "run_dir",
]

JOURNAL_FORMAT_VERSION = 1
_VOLATILE = {"at", "elapsed_s"}  # differ between a run and its replay


class RunInfo(BaseModel):
    """``run.json``: what a run searched, from where, and with which options."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format_version: int = JOURNAL_FORMAT_VERSION
    run_id: str
    bench: str
    bench_path: str
    bench_digest: str
    registry_digest: str
    seed: int
    start_config: dict[str, Any]
    start_fingerprint: str
    options: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime


def run_dir(root: Path, run_id: str) -> Path:
    return root / run_id


def new_run_id(bench: str) -> str:
    return f"{bench}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S-%f')}"


def load_run(folder: Path) -> RunInfo:
    path = folder / "run.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise JournalError("no such run (run.json not found)", file=path) from None
    except json.JSONDecodeError as exc:
        raise JournalError(f"malformed JSON: {exc.msg}", file=path, line=exc.lineno) from None
    version = data.get("format_version") if isinstance(data, dict) else None
    if version != JOURNAL_FORMAT_VERSION or isinstance(version, bool):
        raise JournalError(f"format_version {version!r} is not readable by this forge, which "
                           f"reads {JOURNAL_FORMAT_VERSION}", file=path, field="format_version")
    try:
        return RunInfo.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise JournalError(f"damaged run.json: {first['msg']}", file=path,
                           field=".".join(str(p) for p in first["loc"])) from None


def write_run(folder: Path, info: RunInfo) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "run.json", redact(info.model_dump_json(indent=2)) + "\n")


def read_records(folder: Path) -> list[dict[str, Any]]:
    path = folder / "journal.jsonl"
    if not path.exists():
        raise JournalError("no journal in this run folder", file=path)
    try:
        return list(iter_jsonl_tolerant(path))
    except ValueError as exc:
        raise JournalError(str(exc)) from None


def _stable(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in _VOLATILE}


class JournalWriter:
    """Appends records to ``journal.jsonl``; in replay, verifies instead of appending."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "journal.jsonl"
        truncate_torn_tail(self.path)
        self._existing = read_records(folder) if self.path.exists() else []
        self._position = 0

    @property
    def replaying(self) -> bool:
        return self._position < len(self._existing)

    def write(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append ``record`` (with a timestamp); returns the record as stored."""
        record = {**record, "at": datetime.now(UTC).isoformat()}
        # Round-trip through JSON so the comparison sees what a reader would see,
        # secrets redacted as they are on disk.
        record = json.loads(redact(json.dumps(record, allow_nan=False, default=str)))
        if self._position < len(self._existing):
            old = self._existing[self._position]
            if _stable(old) != _stable(record):
                raise UserError(f"{self.path}: resume diverged at record {self._position + 1} "
                                f"({record.get('kind')}): the bench, its code or forge changed "
                                "since this run was written")
            self._position += 1
            return old
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._position += 1
        return record
