"""The attempt store: every attempt a search ran, keyed by (config, stream, task, attempt).

The store is what makes reuse and resume cheap: an incumbent's attempts are run
once and compared against every candidate; a config seen before is never run
again on the same seeds; and a resumed search replays from the store instead of
re-running rollouts.

On disk, in the run folder, one attempt a line, appended and fsynced after each batch:

- **format 2**, ``attempts.jsonl.gz`` (every run since it was kept): each batch is one
  gzip member (:mod:`forge.journal.gzjsonl`), and the first line of the file is the header
  ``{"format_version": 2, "kind": "attempt_store"}``. ``zcat`` reads it whole.
- **format 1**, ``attempts.jsonl`` (runs written before): plain JSONL
  (:mod:`forge.journal.jsonl`), no header. Such a run is read, resumed and appended to in
  its own format.

Either way a torn tail (a kill mid-write) is ignored on load and cut before the next
append; damage mid-file is a :class:`~forge.errors.JournalError`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from forge.errors import JournalError
from forge.journal.gzjsonl import (
    GzipJsonlAppender,
    cut_torn_member,
    gzip_member,
    read_gzip_jsonl_tolerant,
)
from forge.journal.jsonl import JsonlAppender, cut_torn_tail, read_jsonl_tolerant
from forge.journal.run import write_error
from forge.results.model import AttemptResult
from forge.secrets.masking import redact
from forge.secrets.structured import redacted

if TYPE_CHECKING:
    from forge.journal.review import RunRecords

__all__ = [
    "PLAIN_STORE_FILE",
    "REVIEW_STREAMS",
    "STORE_FILE",
    "STORE_FORMAT_VERSION",
    "AttemptStore",
    "StoredAttempt",
    "attempt_line",
    "read_attempts",
    "read_for_review",
    "review_configs",
    "review_test_k",
    "store_bytes",
    "store_file",
]

Key = tuple[str, str, str, int]

#: The store of a run written by this forge, and that of a run written before.
STORE_FILE = "attempts.jsonl.gz"
PLAIN_STORE_FILE = "attempts.jsonl"
STORE_FORMAT_VERSION: Literal[2] = 2
_KIND = "attempt_store"
_DAMAGED = "damaged record in the run's attempt store"


class StoredAttempt(BaseModel):
    """One line of the store: an attempt, the config it ran and its seed stream."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    config: str
    stream: str
    result: AttemptResult


def store_file(folder: Path) -> Path:
    """The run folder's attempt store: the compressed one, else a plain one an earlier
    forge wrote, else (a new run) where the compressed one goes."""
    compressed, plain = folder / STORE_FILE, folder / PLAIN_STORE_FILE
    return plain if plain.exists() and not compressed.exists() else compressed


def _compressed(path: Path) -> bool:
    return path.suffix == ".gz"


def _header_line() -> str:
    """The first line of a format-2 store."""
    return json.dumps({"format_version": STORE_FORMAT_VERSION, "kind": _KIND})


def _rows(path: Path) -> tuple[list[tuple[int, Any]], int | None]:
    """The store's lines after any header, and (format 2) the offset after its last
    whole member; a header of another format is refused, naming the file."""
    if not _compressed(path):
        return read_jsonl_tolerant(path, JournalError, what="the attempt store",
                                   damaged=_DAMAGED), None
    rows, members = read_gzip_jsonl_tolerant(path, JournalError, what="the attempt store",
                                             damaged=_DAMAGED)
    if not rows:
        return [], members.end
    number, head = rows[0]
    if not isinstance(head, dict) or head.get("kind") != _KIND:
        raise JournalError("not an attempt store: its first line is not the header "
                           f'{{"format_version": {STORE_FORMAT_VERSION}, "kind": "{_KIND}"}}',
                           file=path, line=number)
    version = head.get("format_version")
    if type(version) is not int or version != STORE_FORMAT_VERSION:
        raise JournalError(f"format_version {version!r} is not readable by this forge, which "
                           f"reads attempt stores of format 1 ({PLAIN_STORE_FILE}) and "
                           f"{STORE_FORMAT_VERSION} ({STORE_FILE})", file=path, line=number,
                           field="format_version")
    return rows[1:], members.end


def read_attempts(path: Path) -> Iterator[StoredAttempt]:
    """The attempts of a store file of either format, in file order (a missing file
    holds none).

    A torn tail is skipped; damage mid-file raises :class:`JournalError` naming the
    file and the line. A line of another shape is not an attempt this forge can reuse:
    it is left out (the attempt is run again rather than trusted).
    """
    for _, value in _rows(path)[0]:
        try:
            yield StoredAttempt.model_validate(value)
        except ValidationError:
            continue


#: The attempt streams whose seeds every config shares, so that their means compare
#: across steps: what review reads of the store (the report's per-step scores), with
#: the test split's (the start's and the final config's answers, side by side).
REVIEW_STREAMS = ("dev", "val")
TEST_STREAM = "test"


def review_configs(run: RunRecords) -> set[str]:
    """The configs whose attempts review reads: every incumbent, and the final config."""
    configs = {fingerprint for _, fingerprint, _ in run.incumbents}
    final = run.final_fingerprint
    return configs | ({final} if final is not None else set())


def review_test_k(run: RunRecords) -> int:
    """The attempts a test task the run's test split ran (0: it was not opened)."""
    return 0 if run.test is None else run.test.k or run.info.options.k


def read_for_review(row: StoredAttempt, configs: Collection[str], k: int,
                    test_k: int = 0) -> bool:
    """Whether review reads ``row``: one of ``configs`` on a shared-seed stream, one of
    the first ``k`` attempts of its task (the search's own means read those; the extra
    blocks racing adds for close calls exist for a few configs only), or one of the
    first ``test_k`` on the test split (only the start and the final config run it)."""
    if row.config not in configs:
        return False
    if row.stream == TEST_STREAM:
        return row.result.attempt < test_k
    return row.stream in REVIEW_STREAMS and row.result.attempt < k


def store_bytes(lines: Sequence[str]) -> bytes:
    """A whole format-2 store holding ``lines`` (from :func:`attempt_line`): its header
    and the lines in one gzip member."""
    return gzip_member([_header_line(), *lines])


def attempt_line(config: str, stream: str, result: AttemptResult) -> str:
    """One stored attempt as the store writes it (secrets redacted)."""
    line = json.dumps({"config": config, "stream": stream,
                       "result": result.model_dump(mode="json")})
    if redact(line) == line:
        return line
    # Masked as data, so that the line still loads (forge.secrets.structured).
    return json.dumps({"config": redact(config), "stream": redact(stream),
                       "result": redacted(AttemptResult, result.model_dump(mode="json"))})


class AttemptStore:
    """Attempts by (config fingerprint, seed stream, task id, attempt index).

    ``path`` names the file and so its format (:func:`store_file` picks it for a run
    folder); None keeps the attempts in memory only.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._data: dict[Key, AttemptResult] = {}
        self._out: JsonlAppender | None = None
        self._header = False  # a header is owed before the first attempt written
        if path is None:
            return
        # Cut a torn tail first, so that memory holds exactly what the file does.
        rows, end = self._load(path)
        for _, value in rows:
            try:
                row = StoredAttempt.model_validate(value)
            except ValidationError:
                continue
            self._data[(row.config, row.stream, row.result.task_id,
                        row.result.attempt)] = row.result
        if end is None:
            self._out = JsonlAppender(path, cut=True)
        else:
            self._out = GzipJsonlAppender(path, error=JournalError, what="the attempt store",
                                          cut=True)
            self._header = end == 0

    @staticmethod
    def _load(path: Path) -> tuple[list[tuple[int, Any]], int | None]:
        try:
            if not _compressed(path):
                cut_torn_tail(path)
            rows, end = _rows(path)
            if end is not None:
                cut_torn_member(path, end)
        except OSError as exc:
            raise write_error(exc, path) from None
        return rows, end

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
            lines.append(attempt_line(config, stream, r))
        if self._out is None or not lines:
            return
        if self._header:
            lines.insert(0, _header_line())  # in the same member: whole, or torn with it
        try:
            with self._out:
                self._out.append(lines)
        except OSError as exc:
            raise write_error(exc, self._out.path) from None
        self._header = False
