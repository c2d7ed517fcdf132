"""The records of a search journal (``journal.jsonl``): one frozen, versioned model per kind.

A search writes, in order: one ``start`` (the start config evaluated); per step, a
``proposal_invalid`` for each offer refused (a reply its proposer refused; a proposer's
error, wrong shape or non-finite value; a move whose place was tried), then a
``candidate`` for each
move tried, with its verdict; one ``stop``; a ``test`` once the test split has been
evaluated; one ``end``. Every line is one record, read back by :func:`parse_record`
(through :func:`forge.journal.run.read_journal`) and written by
:class:`forge.journal.run.JournalWriter`.

**Shapes.** How far a candidate got decides which fields it has: a move refused as
illegal has no config fingerprint, one skipped as already tried spent nothing, one
refused on screening, or skipped after passing it (its step confirmed another), has no
confirmation block. A field the search does not set is not
written, and a record read back keeps exactly the fields its line had (pydantic's
*fields set*: :meth:`JournalRecordBase.journal_json` dumps with ``exclude_unset``), so
a journal keeps its shape through a read and a write. Readers see an absent field as
its default (None, an empty list, 0).

**Versions.** Each record carries ``format_version``; a line without one was written
before records were typed and reads as version 1; another version is refused, naming
the file, the line and the version. A new optional field is one field with a default
here; a new kind is one class here, added to :data:`JournalRecord`.

Gates: the search decides with :class:`forge.gates.checks.GateResult` (whose ``details`` feed
the blocks beside it: ``dev``, ``val``, ``aux``) and journals a :class:`GateRecord`, the
``{name, passed, reason}`` that ``forge journal show --json`` promises; only the test
record's start-to-final checks (:class:`AuxCheck`) keep their details, which no other
block repeats.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, cast, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    model_validator,
)

from forge._util.files import validation_problem
from forge.config.moves import Move
from forge.config.registry import Scalar
from forge.errors import JournalError
from forge.results.unscored import UnscoredCounts

if TYPE_CHECKING:
    from forge.gates.checks import GateResult
    from forge.stats.paired import PairedTest

__all__ = [
    "JOURNAL_FORMAT_VERSION",
    "READABLE_VERSIONS",
    "VOLATILE",
    "AnyRecord",
    "AuxCheck",
    "AuxDetails",
    "CandidateRecord",
    "ConfirmBlock",
    "DevBlock",
    "EndRecord",
    "FirstFailure",
    "GateRecord",
    "JournalRecord",
    "JournalRecordBase",
    "PairedStats",
    "PromotedMove",
    "ProposalInvalidRecord",
    "ScreenBlock",
    "SplitDelta",
    "StartRecord",
    "StepVerdict",
    "StopReason",
    "StopRecord",
    "TestRecord",
    "UnscoredCounts",
    "ValBlock",
    "parse_record",
]

JOURNAL_FORMAT_VERSION: Literal[2] = 2
#: The versions this forge reads: 1, journals of the search before its confirmations
#: became sequential (reviewed, reported and promoted as before; not resumed), and 2.
READABLE_VERSIONS = (1, 2)

#: Fields that differ between a run and its replay (the clock): left out of the check
#: that a resumed search reaches the same decisions.
VOLATILE = frozenset({"at", "elapsed_s"})

#: A number as journaled: a smart union keeps an int an int and a float a float, so a
#: record reads back and writes out type for type (pydantic's ``float`` makes 0 into 0.0).
Number = int | float

StepVerdict = Literal["promoted", "rejected", "skipped"]
#: ``start_failed``: every attempt of the start config's first evaluation failed (no
#: score to improve on); journals from before it never hold it.
StopReason = Literal["max_steps", "patience", "budget_rollouts", "budget_cost",
                     "budget_wall_time", "local_optimum", "start_failed"]


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- blocks ------------------------------------------------------------------------------------

class GateRecord(_Block):
    """One gate's verdict as a candidate record keeps it."""

    name: str
    passed: bool
    reason: str

    @classmethod
    def of(cls, result: GateResult, *, reason: str | None = None) -> GateRecord:
        return cls(name=result.name, passed=result.passed,
                   reason=result.reason if reason is None else reason)


class AuxCheck(GateRecord):
    """An auxiliary tolerance checked from the start config to the final one on test."""

    details: dict[str, Number | str | None] = Field(default_factory=dict)

    @classmethod
    def of_result(cls, result: GateResult) -> AuxCheck:
        return cls(name=result.name, passed=result.passed, reason=result.reason,
                   details=dict(result.details))


class PairedStats(_Block):
    """A paired test of candidate minus incumbent (:meth:`forge.stats.PairedTest.as_dict`);
    a bound is None where it is infinite (fewer than two tasks)."""

    effect: Number
    ci_low: Number | None
    ci_high: Number | None
    p_value: Number
    n_tasks: int
    alpha: Number


class _ScreenStatus(_Block):
    # fail: version 1's "not significant"; version 2 says weak, and refuses a candidate
    # whose screening breaks a tolerance (aux) or that the memory holds back (held), and
    # an expansion that scored below the nearer value on some attempt (worse), and a
    # hasty race stopped at half its tasks, to go on only if nothing else is left (paused).
    status: Literal["pass", "fail", "weak", "futile", "budget", "aux", "held", "worse",
                    "paused"]


class ScreenBlock(PairedStats, _ScreenStatus):
    """Racing on the screening seeds (selection only: no error guarantee), and how it
    ended (``status`` comes first, as journals have always had it)."""

    @classmethod
    def of(cls, status: str, test: PairedTest) -> ScreenBlock:
        return cls.model_validate({**test.as_dict(), "status": status})


class ConfirmBlock(PairedStats):
    """The confirmation, at ``level`` of the alpha-spending sequence: on fresh seeds
    (version 1), or group-sequential on the attempts selection did not read, over
    ``looks`` looks, the last at ``nominal`` (version 2)."""

    level: Number
    index: int
    stream: str
    looks: int | None = None
    nominal: Number | None = None
    #: The splits whose tasks the test pairs: ["dev", "val"] when it pools them
    #: (as every confirmation does now); absent: dev's alone, as runs before did.
    splits: list[str] | None = None

    @classmethod
    def of(cls, test: PairedTest, *, level: float, index: int, stream: str,
           **more: Any) -> ConfirmBlock:
        return cls.model_validate({**test.as_dict(), "level": level, "index": index,
                                   "stream": stream, **more})


class ValBlock(PairedStats):
    """The val non-inferiority test and both configs' val means (version 2: over
    ``looks`` looks, the last at ``nominal``)."""

    before: Number | None
    after: Number | None
    looks: int | None = None
    nominal: Number | None = None

    @classmethod
    def of(cls, test: PairedTest, *, before: float | None, after: float | None,
           **more: Any) -> ValBlock:
        return cls.model_validate({**test.as_dict(), "before": before, "after": after,
                                   **more})


class DevBlock(_Block):
    """The dev evidence: the screen always; once confirmed, the confirmation and both
    configs' means on its seeds."""

    screen: ScreenBlock
    confirm: ConfirmBlock | None = None
    before: Number | None = None
    after: Number | None = None


class AuxDetails(_Block):
    """An auxiliary metric on the confirmation seeds; empty when a config did not report it.
    Version 2 compares with the start config (``vs: start``) on ``n_tasks`` tasks."""

    before: Number | None = None
    after: Number | None = None
    bound: Number | None = None
    allowed: Number | None = None
    direction: str | None = None
    vs: Literal["incumbent", "start"] | None = None
    n_tasks: int | None = None
    #: Set where the metric changed on too few tasks for the t-test and the exact test
    #: for a rare change read it: the paired attempts, those the candidate was worse on,
    #: the most the test allowed at that look, and the most one attempt could regress.
    attempts: int | None = None
    regressed: int | None = None
    most: int | None = None
    size: Number | None = None
    #: Set where the netted test read it (every attempt moved by 0 or ``size``, some made
    #: worse and some better): the attempts made better, and the test's p (``forge.stats.paired``'s
    #: ``net_regression_p``); ``most`` is then not set.
    improved: int | None = None
    net_p: Number | None = None
    #: Set where the extension was not run for it: the most its exact test's look on the
    #: block would allow, which at the rate of ``regressed`` the block would stay under
    #: with too small a chance (``forge.search.confirm.BLOCK_CHANCE``).
    extension_most: int | None = None


class _Delta(_Block):
    start: Number | None = None
    final: Number | None = None
    delta: Number | None = None
    ci_low: Number | None = None
    ci_high: Number | None = None


class SplitDelta(_Delta):
    """Start config against final config on one split (mean scores, the paired delta and
    its 95% bounds); empty (nothing set) when that split was not compared."""

    @property
    def compared(self) -> bool:
        """False for the empty block of a split that was not compared."""
        return bool(self.model_fields_set)

    def as_json(self) -> dict[str, Any]:
        """``{start, final, delta, ci_low, ci_high}``, or ``{}`` when not compared."""
        out: dict[str, Any] = self.model_dump(mode="json", exclude_unset=True)
        return out


class FirstFailure(_Block):
    """The first failed attempt of a search stopped on ``start_failed``: its task and
    attempt index, how it stopped (``error``, ``timeout``, ``cancelled``, or
    ``scorer_failed`` for one that completed and was not scored) and its message (as
    the attempt store keeps it: redacted, clipped); of ``unscored`` attempts, every one."""

    task_id: str
    attempt: int
    stop: str
    error: str | None = None
    unscored: int


class PromotedMove(_Block):
    """One promotion of a run: its step and its move."""

    step: int
    target: str
    before: Scalar
    after: Scalar

    @classmethod
    def of(cls, step: int, move: Move) -> PromotedMove:
        return cls(step=step, target=move.target, before=move.before, after=move.after)

    def as_move(self) -> Move:
        return Move(target=self.target, before=self.before, after=self.after)


# -- records -----------------------------------------------------------------------------------

class JournalRecordBase(_Block):
    """What every record has: its version, its kind, and when it was written (set by
    the journal writer)."""

    format_version: Literal[1, 2] = JOURNAL_FORMAT_VERSION
    kind: str
    at: datetime | None = None
    #: Fields derived from what a replay checks already, left out of its check.
    DESCRIPTIVE: ClassVar[frozenset[str]] = frozenset()

    @field_serializer("at")
    def _at_text(self, at: datetime | None) -> str | None:
        # As journals have always written it (``+00:00``, not pydantic's ``Z``).
        return None if at is None else at.isoformat()

    def journal_json(self) -> dict[str, Any]:
        """The record's line as a JSON object: ``format_version`` and ``kind`` first, the
        fields it has, ``at`` last."""
        body = self.model_dump(mode="json", exclude_unset=True,
                               exclude={"format_version", "kind", "at"})
        out: dict[str, Any] = {"format_version": self.format_version, "kind": self.kind,
                               **body}
        if self.at is not None:
            out["at"] = self.at.isoformat()
        return out

    def stable_text(self) -> str:
        """What a replay must reproduce: every field but the clock and what is derived
        from the rest (``DESCRIPTIVE``), type for type."""
        data = {k: v for k, v in self.journal_json().items()
                if k not in VOLATILE and k not in self.DESCRIPTIVE and k != "format_version"}
        return json.dumps(data, sort_keys=True, allow_nan=False)


class StartRecord(JournalRecordBase):
    """The start config, evaluated on dev (and val) before the first step."""

    kind: Literal["start"] = "start"
    config: dict[str, Scalar]
    fingerprint: str
    dev_mean: Number | None
    val_mean: Number | None
    rollouts_total: int
    #: Version 2: the dev tasks ``dev_mean`` is over (the screening tasks; the rest of
    #: the start's evaluation runs when confirmations need it).
    dev_tasks: int | None = None
    #: Version 2, later: the dev split's size, and what the bench can detect, estimated
    #: from those first tasks (:class:`forge.stats.power.Power`, as JSON). Both describe
    #: the bench, and a replay does not compare them: a run journaled before them resumes.
    dev_split_tasks: int | None = None
    power: dict[str, Number | None] | None = None

    DESCRIPTIVE: ClassVar[frozenset[str]] = frozenset({"dev_split_tasks", "power"})


class ProposalInvalidRecord(JournalRecordBase):
    """An offer no move came of: a reply the proposer refused (an LLM's unusable reply),
    or what the search refused of the proposer's output (``proposer_error``,
    ``bad_shape``, ``illegal_value``, ``already_tried``). No move, no rollouts; not a
    step of ``forge journal show --json``."""

    kind: Literal["proposal_invalid"] = "proposal_invalid"
    proposer: str
    category: str
    reason: str
    reply: str | None = None
    endpoint: str | None = None
    step: int
    incumbent: str


class CandidateRecord(JournalRecordBase):
    """One move tried against the incumbent: the evidence, every gate, the verdict."""

    kind: Literal["candidate"] = "candidate"
    step: int = Field(ge=1)
    move: Move
    inverse: Move
    #: Version 2: ``step`` (a neighbour of ``before``) or ``jump`` (any other legal value).
    move_kind: Literal["step", "jump"] | None = None
    proposer: str
    reason: str
    incumbent: str
    verdict: StepVerdict
    candidate: str | None = None
    dev: DevBlock | None = None
    val: ValBlock | None = None
    aux: dict[str, AuxDetails] = Field(default_factory=dict)
    #: What screening (and confirming) it cost; None for a move that ran nothing.
    rollouts: int | None = None
    saved_by_racing: int | None = None
    reused: int | None = None
    blocks: int | None = None
    tasks_screened: int | None = None
    #: Version 2: of ``rollouts``, what screening cost, and the confirmation's looks.
    screening_rollouts: int | None = None
    looks: int | None = None
    #: Version 2, later: the precision round of a close move screened again on
    #: 2^round·K attempts a task (absent: round 0).
    precision_round: int | None = Field(default=None, ge=1)
    #: Version 2, later: why a candidate that passed screening was held back from its
    #: confirmation while other moves were screened (:mod:`forge.search.deferral`; absent: it
    #: was confirmed when it passed).
    deferred: str | None = None
    gates: list[GateRecord] = Field(default_factory=list)
    gates_not_run: list[str] = Field(default_factory=list)
    why: str | None = None
    rollouts_total: int | None = None
    cost_total: Number | None = None
    elapsed_s: Number | None = None

    @model_validator(mode="after")
    def _promoted_names_its_config(self) -> CandidateRecord:
        if self.verdict == "promoted" and self.candidate is None:
            raise ValueError("a promoted candidate names no candidate config")
        return self


class StopRecord(JournalRecordBase):
    """Why the search stopped, before the test split was opened."""

    kind: Literal["stop"] = "stop"
    reason: StopReason
    text: str
    step: int
    rollouts_total: int
    cost_total: Number
    #: Set on ``start_failed`` alone: the first of the start's failed attempts.
    failure: FirstFailure | None = None


class TestRecord(JournalRecordBase, _Delta):
    """The start config against the final one on the test split, opened once at the end,
    with every auxiliary tolerance checked over the whole way (for the reviewer)."""

    __test__ = False  # not a pytest test class, whatever its name says

    kind: Literal["test"] = "test"
    confidence: Number
    n_tasks: int
    #: Attempts a test task, each config (absent from a journal before the search ran
    #: more than k: k).
    k: int | None = None
    p_value_two_sided: Number
    aux: list[AuxCheck] = Field(default_factory=list)
    #: Later: each config's unscored attempts on test (its tasks never scored are not
    #: in ``n_tasks``); absent from journals written before.
    unscored_start: UnscoredCounts | None = None
    unscored_final: UnscoredCounts | None = None


class EndRecord(JournalRecordBase):
    """The run's result, as ``forge search --json`` prints it, and its final config."""

    kind: Literal["end"] = "end"
    run_id: str
    stop_reason: StopReason
    steps: int
    promotions: list[PromotedMove]
    start_config: dict[str, Scalar]
    final_config: dict[str, Scalar]
    rollouts_used: int
    dev: SplitDelta
    val: SplitDelta
    test: SplitDelta
    final_fingerprint: str
    cost_total: Number


AnyRecord = (StartRecord | ProposalInvalidRecord | CandidateRecord | StopRecord | TestRecord
             | EndRecord)
#: Every kind of record, discriminated on ``kind``.
JournalRecord = Annotated[AnyRecord, Field(discriminator="kind")]

_KINDS: dict[str, type[JournalRecordBase]] = {
    get_args(cls.model_fields["kind"].annotation)[0]: cls for cls in get_args(AnyRecord)}


def parse_record(value: Any, *, file: Path, line: int) -> AnyRecord:
    """The record of one journal line (its parsed JSON); anything else raises
    :class:`JournalError` naming the file, the line and, where there is one, the field."""
    if not isinstance(value, dict):
        raise JournalError("expected a JSON object (a journal record)", file=file, line=line)
    version = value.get("format_version", 1)
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise JournalError(f"format_version {version!r} is not readable by this forge, which "
                           f"reads {' and '.join(str(v) for v in READABLE_VERSIONS)}",
                           file=file, line=line, field="format_version")
    kind = value.get("kind")
    model = _KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise JournalError(f"unknown record kind {kind!r}; this forge reads "
                           f"{', '.join(_KINDS)}", file=file, line=line, field="kind")
    try:
        # A line written before records carried a version is of version 1: it must not
        # take the model's default, today's version, and be written back as that shape.
        record = cast("AnyRecord", model.model_validate({**value, "format_version": version}))
    except ValidationError as exc:
        problem = validation_problem(exc, data=value)
        raise JournalError(f"damaged {kind} record: {problem.message}", file=file, line=line,
                           field=problem.field or None) from None
    return record
