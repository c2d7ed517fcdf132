"""A run folder's ``run.json``: what a run searched, from where, with which options.

``journals/<run-id>/`` holds ``run.json`` (:class:`RunInfo`), ``journal.jsonl`` (one
record per event, :mod:`forge.journal.records`, read and replayed by
:mod:`forge.journal.replay`), ``attempts.jsonl.gz`` (every attempt,
:mod:`forge.journal.store`) and ``optuna.journal`` (the study optuna-dashboard opens,
:mod:`forge.dashboard`). One process writes a run at a time (:func:`lock_run`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from forge._files import atomic_write_text, load_versioned_json
from forge.bench import BudgetSettings
from forge.bounds import MAX_CONCURRENCY, MAX_K
from forge.errors import JournalError
from forge.executors import ExecutorSettings
from forge.journal.lock import exclusive
from forge.journal.records import JOURNAL_FORMAT_VERSION, READABLE_VERSIONS
from forge.moves import Move
from forge.secrets import redact

__all__ = [
    "JOURNAL_FORMAT_VERSION",
    "JournalError",
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

class RunOptions(BaseModel):
    """How a run searches (``run.json``'s ``options``); a resume searches the same way."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    max_steps: int
    patience: int
    budget: BudgetSettings
    k: int = Field(ge=1, le=MAX_K)
    candidates_per_step: int
    chunks: int
    #: Version 1's racing (extra attempt blocks, futility level); absent from version 2.
    max_blocks: int | None = None
    futility_level: float | None = None
    #: Version 2: the screening level that selects, and whether moves may jump.
    screen_alpha: float | None = None
    jumps: bool | None = None
    #: Version 2, later: precision rounds at a local optimum (absent: none, as before).
    precision_rounds: int | None = Field(default=None, ge=0, le=8)
    #: Later still: which passing candidate of a step is confirmed ("best": the largest
    #: screening effect; absent: the first, as before), and whether a value off the
    #: candidate moves is tried in the place of the nearest one (absent: no).
    selection: Literal["first", "best"] | None = None
    near_values: bool | None = None
    #: Later again: whether a proposer's move whose place was tried is journaled as it
    #: is dropped (absent: dropped without a record, as before).
    near_copy_records: bool | None = None
    #: And whether a step covering an enum setting screens each of its other choices
    #: (absent: one, as before).
    enum_choices: bool | None = None
    #: And whether a hint leads with its jump (absent: with its step, as before).
    hint_jumps: bool | None = None
    #: And whether the improvement gate pairs the val tasks too (absent: dev's alone).
    pooled_improvement: bool | None = None
    #: And how many attempts a test task gets at the end (absent: k).
    test_k: int | None = Field(default=None, ge=1, le=MAX_K)
    #: And whether a numeric move that passes screening has the farthest value of its
    #: setting the same way run on its screening attempts, confirmed first where it
    #: scores no worse on any (absent: no).
    expansion: bool | None = None
    #: And whether the memory offers a move a tolerance refused, first, at an incumbent
    #: that has made room under that tolerance since (absent: no).
    room_recall: bool | None = None
    #: And whether a tolerance left open by a confirmation's last look is tested once more
    #: on a block of fresh attempts, at a reserved share of its level (absent: no).
    tolerance_extension: bool | None = None
    #: And whether a sparse 0/1 tolerance with attempts made worse and better is read by
    #: the netted test, the net rate of attempts made worse (absent: the exact count, as
    #: before).
    netted_tolerances: bool | None = None
    #: And whether a candidate that passed screening waits while other moves are
    #: screened when the budget left cannot buy its confirmation (absent: no).
    deferral: bool | None = None
    #: And whether a confirmation runs its floors once dev and val have passed, before a
    #: tolerance's further chunks (absent: when every other gate has passed).
    floors_ahead: bool | None = None
    #: And whether a search whose start config's first evaluation scored no attempt
    #: stops there (``start_failed``; absent: it searched on, as before).
    start_check: bool | None = None
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
        for key in ("proposer_info", "max_blocks", "futility_level", "screen_alpha", "jumps",
                    "precision_rounds", "selection", "near_values", "near_copy_records",
                    "enum_choices", "hint_jumps", "pooled_improvement", "test_k",
                    "expansion", "room_recall", "tolerance_extension", "netted_tolerances",
                    "deferral", "floors_ahead", "start_check", "run_test"):
            if out.get(key) is None:
                out.pop(key, None)
        return out


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
    options: RunOptions
    created_at: datetime


def run_dir(root: Path, run_id: str) -> Path:
    return root / run_id


def new_run_id(bench: str) -> str:
    return f"{bench}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S-%f')}"


def load_run(folder: Path) -> RunInfo:
    return load_versioned_json(folder / "run.json", RunInfo, error=JournalError,
                               version=READABLE_VERSIONS, what="run.json",
                               missing="no such run (run.json not found)")


def write_run(folder: Path, info: RunInfo) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "run.json", redact(info.model_dump_json(indent=2)) + "\n")
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
