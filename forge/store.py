"""The attempt store: every attempt a search ran, keyed by (config, stream, task, attempt).

The store is what makes reuse and resume cheap: an incumbent's attempts are run
once and compared against every candidate; a config seen before is never run
again on the same seeds; and a resumed search replays from the store instead of
re-running rollouts. On disk it is an append-only JSONL file (see :mod:`forge._jsonl`),
one attempt a line, flushed and fsynced after each batch; a torn last line (a kill
mid-write) is ignored on load, damage mid-file is a :class:`~forge.errors.JournalError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from forge._jsonl import JsonlAppender, cut_torn_tail, read_jsonl_tolerant
from forge.errors import JournalError
from forge.journal import write_error
from forge.results import AttemptResult
from forge.secrets import redact

__all__ = ["AttemptStore", "StoredAttempt", "read_attempts"]

Key = tuple[str, str, str, int]


class StoredAttempt(BaseModel):
    """One line of the store: an attempt, the config it ran and its seed stream."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    config: str
    stream: str
    result: AttemptResult


def read_attempts(path: Path) -> Iterator[StoredAttempt]:
    """The attempts of a store file, in file order (a missing file holds none).

    A torn last line is skipped; damage mid-file raises :class:`JournalError` naming the
    file and the line. A line of another shape is not an attempt this forge can reuse:
    it is left out (the attempt is run again rather than trusted).
    """
    for _, value in read_jsonl_tolerant(path, JournalError, what="the attempt store",
                                        damaged="damaged record in the run's attempt store"):
        try:
            yield StoredAttempt.model_validate(value)
        except ValidationError:
            continue


class AttemptStore:
    """Attempts by (config fingerprint, seed stream, task id, attempt index)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._data: dict[Key, AttemptResult] = {}
        self._out = None if path is None else JsonlAppender(path)
        if path is not None:
            # Cut a torn tail first, so that memory holds exactly what the file does.
            try:
                cut_torn_tail(path)
            except OSError as exc:
                raise write_error(exc, path) from None
            for row in read_attempts(path):
                self._data[(row.config, row.stream, row.result.task_id,
                            row.result.attempt)] = row.result

    def __len__(self) -> int:
        return len(self._data)

    def get(self, config: str, stream: str, task_id: str, attempt: int) -> AttemptResult | None:
        return self._data.get((config, stream, task_id, attempt))

    def add(self, config: str, stream: str, results: Iterable[AttemptResult]) -> None:
        """Keep ``results`` (cancelled attempts are not kept: they say nothing)."""
        lines: list[str] = []
        for r in results:
            if r.stop_reason == "cancelled":
                continue
            self._data[(config, stream, r.task_id, r.attempt)] = r
            lines.append(redact(json.dumps({"config": config, "stream": stream,
                                            "result": r.model_dump(mode="json")})))
        if self._out is not None and lines:
            try:
                with self._out:
                    self._out.append(lines)
            except OSError as exc:
                raise write_error(exc, self._out.path) from None
