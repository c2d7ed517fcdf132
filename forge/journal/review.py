"""Reading finished, interrupted and damaged search runs back for review.

A run folder (see :mod:`forge.journal`) holds ``run.json`` and ``journal.jsonl``;
this module turns them into plain data that any front end can render: the console
tables of ``forge journal``, an HTML report, a promotion check. Nothing here
prints or imports rich.

Three levels, from cheap to detailed:

- :func:`list_runs` summarizes every run folder under a journals root, one
  :class:`RunSummary` each, and never raises for one bad folder: the problem is
  put on that folder's summary so the other runs still show.
- :func:`load_run_records` reads one run into :class:`RunRecords`, its typed
  records (:mod:`forge.journal.records`) split by kind (``start``, ``candidate``,
  ``proposal_invalid``, ``stop``, ``test``, ``end``).
- :func:`step_records` gives the candidate records in the shape that
  ``forge journal show RUN --json`` promises (DESIGN.md, CLI); :func:`dev_delta`,
  :func:`val_delta`, :func:`aux_changes` and :func:`failing_gates` pick out what a
  person reads in a step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from forge.config.moves import Move
from forge.errors import JournalError
from forge.journal import RunInfo, load_run, read_records
from forge.journal.records import (
    AnyRecord,
    CandidateRecord,
    EndRecord,
    GateRecord,
    PairedStats,
    PromotedMove,
    ProposalInvalidRecord,
    SplitDelta,
    StartRecord,
    StopRecord,
    TestRecord,
)

__all__ = [
    "NO_SUCH_RUN",
    "STEP_KEYS",
    "UNFINISHED",
    "AuxChange",
    "Delta",
    "RunRecords",
    "RunSummary",
    "aux_changes",
    "dev_delta",
    "failing_gates",
    "json_safe",
    "list_runs",
    "load_run_records",
    "resolve_run",
    "run_records",
    "step_records",
    "summarize_run",
    "val_delta",
]

#: The keys every step record of ``forge journal show RUN --json`` has (DESIGN.md, CLI).
STEP_KEYS = ("step", "move", "inverse", "proposer", "reason", "verdict", "rollouts", "gates")

#: A run without an ``end`` record: still running, or killed (and resumable).
UNFINISHED = "running/interrupted"

#: A run folder without ``run.json``, in the words of :func:`forge.journal.load_run`
#: (which ``--resume`` reads through): one wording in every command.
NO_SUCH_RUN = "no such run (run.json not found)"

#: Record fields ``step_records`` leaves out: every step is a candidate, and the version
#: is the file's business (a journal of before issue 13 has none).
_NOT_SHOWN = ("kind", "format_version")


# -- one run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecords:
    """One run folder read back: ``run.json`` and its journal records split by kind.

    A run that was killed (or is still running) simply lacks the later records:
    ``stop``, ``test`` and ``end`` are None and ``candidates`` holds the steps so far.
    """

    folder: Path
    info: RunInfo
    start: StartRecord | None = None
    candidates: list[CandidateRecord] = field(default_factory=list)
    #: ``proposal_invalid`` records: what a proposer refused to offer (an LLM's unusable
    #: reply), with its reason; they are not steps of the ``--json`` contract.
    invalid: list[ProposalInvalidRecord] = field(default_factory=list)
    stop: StopRecord | None = None
    test: TestRecord | None = None
    end: EndRecord | None = None

    @property
    def run_id(self) -> str:
        """The id ``run.json`` records (the folder's name unless it was copied)."""
        return self.info.run_id

    @property
    def incumbents(self) -> list[tuple[int, str, Move | None]]:
        """``(step, fingerprint, move)`` of each incumbent: the start config at step 0 (no
        start record yet: none), then each promoted candidate."""
        if self.start is None:
            return []
        # A promoted record always names its candidate config (forge.journal.records checks it).
        return [(0, self.start.fingerprint, None)] + [
            (d.step, d.candidate, d.move) for d in self.candidates
            if d.verdict == "promoted" and d.candidate is not None]

    @property
    def final_fingerprint(self) -> str | None:
        """The config the run ended on, or (unfinished) its incumbent so far."""
        if self.end is not None:
            return self.end.final_fingerprint
        chain = self.incumbents
        return chain[-1][1] if chain else None

    @property
    def finished(self) -> bool:
        """True once the ``end`` record is on disk: nothing more will be appended."""
        return self.end is not None

    @property
    def steps(self) -> int:
        """Steps taken: from the ``end``/``stop`` record, else the last step journaled."""
        if self.end is not None:
            return self.end.steps
        if self.stop is not None:
            return self.stop.step
        return max([r.step for r in self.candidates] + [r.step for r in self.invalid],
                   default=0)

    @property
    def promotions(self) -> list[PromotedMove]:
        """Each promotion, in order.

        Read from the candidate records rather than the ``end`` record, so that an
        interrupted run shows the promotions it made before it stopped.
        """
        return [PromotedMove.of(r.step, r.move) for r in self.candidates
                if r.verdict == "promoted"]

    @property
    def stop_reason(self) -> str | None:
        """Why the search stopped (``max_steps``, ``patience``, ...); None until it has."""
        if self.end is not None:
            return self.end.stop_reason
        return None if self.stop is None else self.stop.reason

    @property
    def rollouts_used(self) -> int | None:
        """Rollouts spent: the ``end`` total (test split included) or the latest running
        total a record carries (None before the ``start`` record)."""
        if self.end is not None:
            return self.end.rollouts_used
        totals = [r.rollouts_total for r in (self.start, *self.candidates, self.stop)
                  if r is not None and r.rollouts_total is not None]
        return totals[-1] if totals else None

    @property
    def saved_by_racing(self) -> int:
        """Rollouts racing did not have to spend, summed over every screened candidate."""
        return sum(r.saved_by_racing or 0 for r in self.candidates)


def resolve_run(run: str, journals: Path) -> Path:
    """The folder of ``run``: a run id under ``journals``, or a path to a run folder.

    The id is tried first, as ``forge search --run-id`` names runs that way; a path
    lets a person review a run copied elsewhere. Raises :class:`JournalError` (one
    line, exit 2 in the CLI) when neither holds a ``run.json``, worded as
    ``forge search --resume`` words it (:func:`forge.journal.load_run`), so every
    command says a run is missing the same way; it names the place meant: the id
    under ``journals``, or the path when ``run`` is one.
    """
    by_id = journals / run
    if (by_id / "run.json").is_file():
        return by_id
    as_path = Path(run)
    if (as_path / "run.json").is_file():
        return as_path
    meant = as_path if len(as_path.parts) > 1 else by_id
    raise JournalError(NO_SUCH_RUN, file=meant / "run.json")


def load_run_records(folder: Path) -> RunRecords:
    """Read ``folder`` into :class:`RunRecords`.

    Raises :class:`JournalError` for an unreadable ``run.json`` or a journal damaged
    mid-file. A torn last line (a kill mid-write) is skipped, and a missing
    ``journal.jsonl`` reads as no records: a search writes ``run.json`` first and
    its first record only after evaluating the start config.
    """
    # run.json first: a run whose run.json is damaged is refused for that, whatever
    # its journal holds.
    info = load_run(folder)
    records = read_records(folder) if (folder / "journal.jsonl").exists() else []
    return run_records(folder, info, records)


def run_records(folder: Path, info: RunInfo, records: Sequence[AnyRecord]) -> RunRecords:
    """``records``, the run's journal as read, split by kind into :class:`RunRecords`."""
    candidates = [r for r in records if isinstance(r, CandidateRecord)]
    invalid = [r for r in records if isinstance(r, ProposalInvalidRecord)]
    # One of each in a run; the last one wins if not.
    start = _last(records, StartRecord)
    stop = _last(records, StopRecord)
    test = _last(records, TestRecord)
    end = _last(records, EndRecord)
    return RunRecords(folder=folder, info=info, start=start, candidates=candidates,
                      invalid=invalid, stop=stop, test=test, end=end)


_K = TypeVar("_K")


def _last(records: Sequence[object], kind: type[_K]) -> _K | None:
    found = [r for r in records if isinstance(r, kind)]
    return found[-1] if found else None


# -- the --json contract ---------------------------------------------------------------


def step_records(run: RunRecords) -> list[dict[str, Any]]:
    """One JSON object per candidate record, in journal order.

    Each has :data:`STEP_KEYS` first (a record that spent nothing, such as a move
    skipped as already tried or refused as illegal, has ``rollouts`` 0 and may have
    ``gates`` []), then the rest of the journal record (``dev``, ``val``, ``aux``,
    ``why``, running totals, ...) so that a script loses nothing the journal has.
    """
    out: list[dict[str, Any]] = []
    for r in run.candidates:
        step: dict[str, Any] = {
            "step": r.step, "move": r.move.model_dump(mode="json"),
            "inverse": r.inverse.model_dump(mode="json"), "proposer": r.proposer,
            "reason": r.reason, "verdict": r.verdict, "rollouts": r.rollouts or 0,
            "gates": [g.model_dump(mode="json") for g in r.gates]}
        step.update({k: v for k, v in r.journal_json().items()
                     if k not in step and k not in _NOT_SHOWN})
        out.append(json_safe(step))
    return out


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as None: strict JSON has no NaN or infinity, and a
    hand-edited journal can hold them even though forge never writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


# -- what a person reads in a step -----------------------------------------------------


@dataclass(frozen=True)
class Delta:
    """A paired score difference (candidate minus incumbent) and its confidence bounds.

    ``stage`` is ``"confirm"`` (fresh dev seeds: the one the dev gate decides on),
    ``"screen"`` (racing on the screening seeds: selection only, no guarantee) or
    ``"val"``.
    """

    effect: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n_tasks: int | None
    stage: str


def _delta(block: PairedStats | None, stage: str) -> Delta | None:
    if block is None:
        return None
    return Delta(effect=float(block.effect), ci_low=block.ci_low, ci_high=block.ci_high,
                 p_value=block.p_value, n_tasks=block.n_tasks, stage=stage)


def dev_delta(record: CandidateRecord) -> Delta | None:
    """The confirmation effect when the candidate was confirmed, else its screening effect
    (None for a move that was never evaluated)."""
    if record.dev is None:
        return None
    return _delta(record.dev.confirm, "confirm") or _delta(record.dev.screen, "screen")


def val_delta(record: CandidateRecord) -> Delta | None:
    """The val non-inferiority test, when val was opened for this candidate."""
    return _delta(record.val, "val")


@dataclass(frozen=True)
class AuxChange:
    """An auxiliary metric's mean before and after a move (on the confirmation seeds)."""

    metric: str
    before: float
    after: float
    direction: str | None

    @property
    def change(self) -> float:
        """``after - before``, in the metric's own unit."""
        return self.after - self.before

    @property
    def relative(self) -> float | None:
        """The change as a fraction of ``before``; None when ``before`` is 0."""
        return None if self.before == 0 else self.change / abs(self.before)


def aux_changes(record: CandidateRecord) -> list[AuxChange]:
    """The auxiliary metrics a confirmed candidate journaled, in journal order.

    Candidates refused before confirmation carry no ``aux`` block (their aux gate's
    reason says what broke); they give [], as does a metric one config did not report.
    """
    return [AuxChange(metric, float(d.before), float(d.after), d.direction)
            for metric, d in record.aux.items() if d.before is not None and d.after is not None]


def failing_gates(record: CandidateRecord) -> list[GateRecord]:
    """The gates this candidate failed, in journal order."""
    return [g for g in record.gates if not g.passed]


# -- every run -------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSummary:
    """One row of ``forge journal list``.

    ``run_id`` is the folder's name, which is what ``forge journal show`` and
    ``forge search --resume`` take (it equals ``run.json``'s id unless the folder was
    copied under another name).

    ``status`` is ``"finished"``, ``"running/interrupted"`` (no ``end`` record yet)
    or ``"damaged"``, in which case ``problem`` says what is wrong and the fields
    that could not be read are None.
    """

    run_id: str
    folder: Path
    status: str
    bench: str | None = None
    created_at: datetime | None = None
    steps: int | None = None
    candidates: int | None = None
    promotions: int | None = None
    stop_reason: str | None = None
    rollouts_used: int | None = None
    test: SplitDelta | None = None
    problem: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The row as one object of ``forge journal list --json``."""
        out: dict[str, Any] = json_safe({
            "run_id": self.run_id, "folder": str(self.folder), "status": self.status,
            "bench": self.bench,
            "created_at": None if self.created_at is None else self.created_at.isoformat(),
            "steps": self.steps, "candidates": self.candidates, "promotions": self.promotions,
            "stop_reason": self.stop_reason, "rollouts_used": self.rollouts_used,
            "test": None if self.test is None else self.test.model_dump(mode="json"),
            "problem": self.problem})
        return out


def summarize_run(folder: Path) -> RunSummary:
    """The :class:`RunSummary` of one run folder; a damaged folder gives a summary with
    ``problem`` set instead of raising, so one bad run does not hide the others."""
    try:
        run = load_run_records(folder)
    except (JournalError, OSError) as exc:
        # OSError: a folder or file this user cannot read, a disk error; the row says so
        # and the listing goes on.
        problem = str(exc) if isinstance(exc, JournalError) else \
            f"{folder}: cannot read: {exc.strerror or exc}"
        info = _info_or_none(folder)
        return RunSummary(run_id=folder.name, folder=folder,
                          status="damaged", bench=info.bench if info else None,
                          created_at=info.created_at if info else None, problem=problem)
    test = None
    if run.test is not None:
        test = SplitDelta(start=run.test.start, final=run.test.final, delta=run.test.delta,
                          ci_low=run.test.ci_low, ci_high=run.test.ci_high)
    return RunSummary(run_id=folder.name, folder=folder,
                      status="finished" if run.finished else UNFINISHED,
                      bench=run.info.bench, created_at=run.info.created_at, steps=run.steps,
                      candidates=len(run.candidates), promotions=len(run.promotions),
                      stop_reason=run.stop_reason, rollouts_used=run.rollouts_used, test=test)


def _is_run_folder(folder: Path) -> bool:
    """A folder holding ``run.json`` (even a damaged one, or one this user cannot read),
    or one that lost it but keeps a journal: it is shown, damaged, not hidden."""
    try:
        return folder.is_dir() and any((folder / name).exists() or (folder / name).is_symlink()
                                       for name in ("run.json", "journal.jsonl"))
    except OSError:  # a folder that cannot even be looked into: shown as damaged
        return True


def _info_or_none(folder: Path) -> RunInfo | None:
    try:
        return load_run(folder)
    except (JournalError, OSError):
        return None


def list_runs(journals: Path) -> list[RunSummary]:
    """Every run folder (a folder with ``run.json``) directly under ``journals``, oldest
    first; an absent ``journals`` folder has no runs.

    A run whose ``run.json`` cannot be read has no start time; it is placed by the
    file's modification time, which ``forge search`` sets when the run starts.
    """
    if not journals.is_dir():
        return []
    try:
        entries = sorted(journals.iterdir())
    except OSError as exc:
        raise JournalError(f"cannot read the journals folder: {exc.strerror or exc}",
                           file=journals) from None
    summaries = [summarize_run(folder) for folder in entries if _is_run_folder(folder)]

    def started(s: RunSummary) -> tuple[datetime, str]:
        when = s.created_at
        if when is None:
            try:
                when = datetime.fromtimestamp((s.folder / "run.json").stat().st_mtime, UTC)
            except OSError:  # unreadable or gone: first, with the other undated ones
                when = datetime.fromtimestamp(0, UTC)
        elif when.tzinfo is None:  # a naive time in run.json is taken as UTC, as written
            when = when.replace(tzinfo=UTC)
        return when, s.run_id

    return sorted(summaries, key=started)
