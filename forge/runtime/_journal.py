"""The runtime journal: one JSON object per line, appended and flushed per record.

Two kinds of record, both tagged with the run, the mode and the registry (name and
digest, so that a journal written for another registry is recognised and refused
by ``forge search --from-runtime``):

- ``signal``: a failure signal and what the mutator made of it: the rule that
  matched, the move it proposed (``{target, before, after}`` or null), the outcome
  (``observed`` / ``applied`` / ``refused`` / ``no_rule``), the inverse of a move
  that was (or, in observe mode, would have been) made, and a refusal's reason;
- ``end``: a run finished: counts per outcome, the inverses applied at the end (in
  the order they were applied; to the virtual copy in observe mode) and whether the
  config came back equal to the original.

Appends go through :class:`forge.journal.jsonl.JsonlAppender`: one ``write()`` of a whole
line on a descriptor opened with ``O_APPEND``, under a lock, then ``fsync`` (unless
turned off): a record is on disk before :meth:`RuntimeJournal.write` returns, and a
kill mid-write can only leave a torn *last* line, which readers skip and the next
writer cuts.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from forge._util.files import field_path, validation_problem
from forge.config.moves import Move
from forge.config.registry import RuntimeRule
from forge.errors import RuntimeJournalError
from forge.journal.jsonl import JsonlAppender, read_jsonl_tolerant
from forge.secrets.masking import redact

__all__ = [
    "RUNTIME_FORMAT_VERSION",
    "RuntimeEndRecord",
    "RuntimeJournal",
    "RuntimeJournalError",
    "RuntimeRecord",
    "RuntimeSignalRecord",
    "read_runtime_journal",
]

RUNTIME_FORMAT_VERSION: Literal[1] = 1

JournalOutcome = Literal["observed", "applied", "refused", "no_rule"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    format_version: Literal[1] = RUNTIME_FORMAT_VERSION
    at: datetime
    run_id: str
    mode: Literal["observe", "act"]
    registry: str
    registry_digest: str


class RuntimeSignalRecord(_Record):
    """One failure signal and the mutator's answer to it."""

    kind: Literal["signal"] = "signal"
    signal: str
    rule: RuntimeRule | None = None
    move: Move | None = None
    outcome: JournalOutcome
    inverse: Move | None = None
    reason: str | None = None


class RuntimeEndRecord(_Record):
    """The end of a run: what happened in it and how the config was restored."""

    kind: Literal["end"] = "end"
    counts: dict[str, int]
    restored: list[Move] = Field(default_factory=list)
    restored_ok: bool
    error: str | None = None


RuntimeRecord = Annotated[RuntimeSignalRecord | RuntimeEndRecord, Field(discriminator="kind")]
_RECORD: TypeAdapter[RuntimeSignalRecord | RuntimeEndRecord] = TypeAdapter(RuntimeRecord)


class RuntimeJournal:
    """Append-only JSONL writer, safe to share between threads (and tasks) of a process.

    The file is opened (and its parent folder made) at the first record, so a
    mutator that never writes leaves no file behind. ``fsync=False`` keeps the
    per-record flush to the OS (a killed process loses nothing) but not the sync to
    the disk (a power cut may).
    """

    def __init__(self, path: str | Path, *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._out = JsonlAppender(self.path, fsync=fsync)

    def write(self, record: RuntimeSignalRecord | RuntimeEndRecord) -> None:
        """Append ``record`` as one line; it is flushed (and synced) when this returns."""
        self._out.append([redact(record.model_dump_json())])

    def close(self) -> None:
        self._out.close()

    def __enter__(self) -> RuntimeJournal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def read_runtime_journal(path: str | Path) -> list[tuple[int, RuntimeSignalRecord
                                                     | RuntimeEndRecord]]:
    """``(line number, record)`` for every record of a runtime journal, in file order.

    A last line that is not valid JSON was torn by a kill mid-write and is skipped
    with a warning (:mod:`forge.journal.jsonl`); any other bad line (malformed JSON, not an object,
    another ``format_version``, a record that does not validate) raises
    :class:`RuntimeJournalError` naming the file and line.
    """
    p = Path(path)
    out: list[tuple[int, RuntimeSignalRecord | RuntimeEndRecord]] = []
    for number, value in read_jsonl_tolerant(p, RuntimeJournalError, what="the runtime journal",
                                             damaged="malformed JSON", missing="file not found"):
        if not isinstance(value, dict):
            raise RuntimeJournalError("expected a JSON object (a runtime journal record)",
                                      file=p, line=number)
        version = value.get("format_version")
        if version != RUNTIME_FORMAT_VERSION or isinstance(version, bool):
            raise RuntimeJournalError(
                f"format_version {version!r} is not readable by this forge, which reads "
                f"{RUNTIME_FORMAT_VERSION} (is this a runtime journal?)",
                file=p, line=number, field="format_version")
        try:
            out.append((number, _RECORD.validate_python(value)))
        except ValidationError as exc:
            # The first part of the error's path is the union's tag (the record's kind).
            problem = validation_problem(exc, data=value)
            where = field_path(problem.loc[1:]) or None
            raise RuntimeJournalError(f"not a runtime journal record: {problem.message}",
                                      file=p, line=number, field=where) from None
    return out
