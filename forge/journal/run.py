"""A run folder's ``run.json``: what a run searched, from where, with which options.

``journals/<run-id>/`` holds ``run.json`` (:class:`RunInfo`), ``journal.jsonl`` (one
record per event, :mod:`forge.journal.records`, read and replayed by
:mod:`forge.journal.replay`), ``attempts.jsonl.gz`` (every attempt,
:mod:`forge.journal.store`) and ``optuna.journal`` (the study optuna-dashboard opens,
:mod:`forge.report.dashboard`). One process writes a run at a time (:func:`lock_run`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from forge._util.bounds import MAX_CONCURRENCY, MAX_K
from forge._util.files import atomic_write_text, load_versioned_json
from forge.bench.loader import BudgetSettings
from forge.config.moves import Move
from forge.errors import JournalError
from forge.executors import ExecutorSettings
from forge.journal.lock import exclusive
from forge.journal.records import JOURNAL_FORMAT_VERSION, READABLE_VERSIONS
from forge.secrets.structured import redacted_json

__all__ = [
    "DEFAULT_JOURNALS",
    "JOURNAL_FORMAT_VERSION",
    "READABLE_RUN_VERSIONS",
    "RUN_FORMAT_VERSION",
    "JournalError",
    "JournaledFlags",
    "RunInfo",
    "RunOptions",
    "load_run",
    "lock_run",
    "new_run_id",
    "run_dir",
    "run_lock_file",
    "write_error",
    "write_run",
]

#: Where run folders go when no ``--journals`` / ``journals=`` says otherwise.
DEFAULT_JOURNALS = Path("journals")
#: ``run.json``'s version. 3: ``options`` holds only what a user sets; 2 and 1 also held
#: a field per search behaviour (:class:`JournaledFlags`), which this forge reads for
#: review and checks on resume. The journal's records keep their own version.
RUN_FORMAT_VERSION: Literal[3] = 3
#: The ``run.json`` versions this forge reads.
READABLE_RUN_VERSIONS = (*READABLE_VERSIONS, RUN_FORMAT_VERSION)


class RunOptions(BaseModel):
    """How a run searches (``run.json``'s ``options``): what its user set. A resume
    searches the same way."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    max_steps: int
    patience: int
    budget: BudgetSettings
    k: int = Field(ge=1, le=MAX_K)
    candidates_per_step: int
    #: False when the run leaves the test split alone (a library caller's choice; the
    #: CLI always runs it); absent: it runs it, as every run did before this was kept.
    run_test: bool | None = None
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings)
    proposer: str = "auto"
    #: What the proposer says about itself (the llm proposer: its endpoint and model);
    #: absent from the file for a proposer that says nothing.
    proposer_info: dict[str, Any] | None = None
    first_moves: list[Move] = Field(default_factory=list)
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)

    @model_serializer(mode="wrap")
    def _without_absent_info(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key in ("proposer_info", "run_test"):
            if out.get(key) is None:
                out.pop(key, None)
        return out


class JournaledFlags(BaseModel):
    """The search behaviours a ``run.json`` before version 3 journaled in its ``options``,
    one field each as they were added (absent: the run searched as before that field);
    this forge always searches as each one's last default did, and resumes such a run
    only where they agree (:func:`forge.search.options.check_flags`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    chunks: int
    #: Version 1's racing (extra attempt blocks, futility level).
    max_blocks: int | None = None
    futility_level: float | None = None
    screen_alpha: float | None = None
    jumps: bool | None = None
    precision_rounds: int | None = Field(default=None, ge=0, le=8)
    selection: Literal["first", "best"] | None = None
    near_values: bool | None = None
    near_copy_records: bool | None = None
    enum_choices: bool | None = None
    hint_jumps: bool | None = None
    pooled_improvement: bool | None = None
    test_k: int | None = Field(default=None, ge=1, le=MAX_K)
    expansion: bool | None = None
    room_recall: bool | None = None
    tolerance_extension: bool | None = None
    netted_tolerances: bool | None = None
    deferral: bool | None = None
    floors_ahead: bool | None = None
    start_check: bool | None = None


_FLAGS = frozenset(JournaledFlags.model_fields)


class RunInfo(BaseModel):
    """``run.json``: what a run searched, from where, and with which options."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format_version: int = RUN_FORMAT_VERSION
    run_id: str
    bench: str
    bench_path: str
    bench_digest: str
    registry_digest: str
    seed: int
    start_config: dict[str, Any]
    start_fingerprint: str
    options: RunOptions
    #: An older ``run.json``'s flags, read out of its ``options`` (None: version 3).
    flags: JournaledFlags | None = None
    created_at: datetime

    @model_validator(mode="before")
    @classmethod
    def _flags_apart(cls, data: Any) -> Any:
        """An older shape's flags, out of ``options`` into :attr:`flags`."""
        if not isinstance(data, dict) or data.get("format_version") == RUN_FORMAT_VERSION:
            return data
        options = data.get("options")
        if not isinstance(options, dict):
            return data
        flags = {k: v for k, v in options.items() if k in _FLAGS}
        return {**data, "options": {k: v for k, v in options.items() if k not in _FLAGS},
                "flags": flags}

    @model_serializer(mode="wrap")
    def _without_flags(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("flags") is None:
            out.pop("flags", None)
        return out


def run_dir(root: Path, run_id: str) -> Path:
    return root / run_id


def new_run_id(bench: str) -> str:
    return f"{bench}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S-%f')}"


def load_run(folder: Path) -> RunInfo:
    return load_versioned_json(folder / "run.json", RunInfo, error=JournalError,
                               version=READABLE_RUN_VERSIONS, what="run.json",
                               missing="no such run (run.json not found)")


def write_run(folder: Path, info: RunInfo) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "run.json", redacted_json(info, indent=2) + "\n")
    except OSError as exc:
        raise JournalError(f"cannot write: {exc.strerror or exc}",
                           file=exc.filename or folder / "run.json") from None


def run_lock_file(folder: Path) -> Path:
    """The lock file of a run folder, held by the one process writing the run."""
    return folder / ".lock"


def lock_run(folder: Path, *, busy: Callable[[str], str] | None = None
             ) -> contextlib.AbstractContextManager[None]:
    """Hold the run folder's lock while writing it (a new run, a resume, a prune): a
    second writer of the same run is refused with one line, before it writes anything.
    ``busy`` words that line for the lock's holder (default: a search writing it)."""

    def refused(holder: str) -> JournalError:
        text = (busy(holder) if busy is not None else
                f"run {folder.name} is being written by another forge process ({holder}); "
                "wait for it to end, then resume it if needed")
        return JournalError(text, file=folder)

    def cannot(reason: str) -> JournalError:
        return JournalError(f"cannot lock the run folder: {reason}", file=folder)

    return exclusive(run_lock_file(folder), busy=refused, cannot=cannot)


def write_error(exc: OSError, path: Path) -> JournalError:
    """A write to a run folder that failed (a full or read-only disk) as one line: what
    is on disk is whole (every append is whole lines), so the run can be resumed."""
    folder = path.parent
    return JournalError(f"cannot write: {exc.strerror or exc}; what was written is kept: "
                        f"`forge search --resume {folder.name}` continues the run once "
                        "it can be written", file=exc.filename or path)
