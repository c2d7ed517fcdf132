"""The typed journal records (forge.journal.records): what they read, what they refuse, what they
write back.

The journal of before issue 13 (``tests/data/journal_v1``) is the reference for shapes:
every one of its lines must read into a typed record and write back as the same JSON
object, key for key and type for type.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forge.config.moves import Move
from forge.errors import JournalError
from forge.journal import read_journal, read_records
from forge.journal.records import (
    AuxCheck,
    CandidateRecord,
    ConfirmBlock,
    DevBlock,
    EndRecord,
    GateRecord,
    PromotedMove,
    ProposalInvalidRecord,
    ScreenBlock,
    StartRecord,
    StopRecord,
    TestRecord,
    ValBlock,
    parse_record,
)

OLD = Path(__file__).resolve().parents[1] / "data" / "journal_v1" / "verdicts"
MOVE = Move(target="knob", before=2, after=3)
HERE = Path("journal.jsonl")


def old_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (OLD / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def candidate(**fields: Any) -> CandidateRecord:
    return CandidateRecord.model_validate({
        "step": 1, "move": MOVE, "inverse": MOVE.inverse(), "proposer": "sweep",
        "reason": "r", "incumbent": "i", "verdict": "rejected", **fields})


def write_journal(folder: Path, lines: list[Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "journal.jsonl").write_text("".join(json.dumps(v) + "\n" for v in lines),
                                          encoding="utf-8")
    return folder


# -- a journal of before ---------------------------------------------------------------------

def test_an_old_journal_reads_into_typed_records() -> None:
    rows = read_journal(OLD)
    assert [line for line, _ in rows] == list(range(1, len(old_lines()) + 1))
    records = [r for _, r in rows]
    assert [type(r) for r in records if not isinstance(r, CandidateRecord)] == [
        StartRecord, ProposalInvalidRecord, StopRecord, TestRecord, EndRecord]
    assert all(r.at is not None for r in records)
    candidates = [r for r in records if isinstance(r, CandidateRecord)]
    promoted = next(r for r in candidates if r.verdict == "promoted")
    assert isinstance(promoted.dev, DevBlock) and isinstance(promoted.dev.screen, ScreenBlock)
    assert isinstance(promoted.dev.confirm, ConfirmBlock) and isinstance(promoted.val, ValBlock)
    assert promoted.move == Move(target="boost", before=False, after=True)
    assert promoted.inverse == promoted.move.inverse()
    assert [g.name for g in promoted.gates] == ["dev", "aux:cost", "val"]
    assert all(isinstance(g, GateRecord) and g.passed for g in promoted.gates)
    assert promoted.aux["cost"].direction == "lower"
    test = next(r for r in records if isinstance(r, TestRecord))
    assert test.aux and all(isinstance(a, AuxCheck) and a.details for a in test.aux)
    end = next(r for r in records if isinstance(r, EndRecord))
    assert end.promotions == [PromotedMove.of(promoted.step, promoted.move)]
    invalid = next(r for r in records if isinstance(r, ProposalInvalidRecord))
    assert (invalid.proposer, invalid.category) == ("llm", "not_json")


def test_every_old_line_writes_back_as_it_was() -> None:
    for number, line in enumerate(old_lines(), start=1):
        record = parse_record(line, file=HERE, line=number)
        written = record.journal_json()
        written.pop("format_version")  # none on disk; see the test below
        assert canonical(written) == canonical(line), number


def test_an_old_line_without_a_version_reads_as_version_1() -> None:
    # A line written before records carried a version is of version 1; read and written
    # back, it must not claim the shape of version 2.
    for number, line in enumerate(old_lines(), start=1):
        assert "format_version" not in line
        record = parse_record(line, file=HERE, line=number)
        assert record.format_version == 1, number
        assert record.journal_json()["format_version"] == 1, number


# -- refusals ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "fragments"), [
    ({"format_version": 3, "kind": "stop"},
     ["journal.jsonl:2: format_version: format_version 3 is not readable", "reads 1 and 2"]),
    ({"format_version": True, "kind": "stop"}, ["journal.jsonl:2: format_version", "True"]),
    ({"kind": "verdict"}, ["journal.jsonl:2: kind: unknown record kind 'verdict'",
                           "candidate"]),
    ({"kind": "candidate", "step": 1, "move": {"target": "k", "before": 1}, "inverse": {},
      "proposer": "p", "reason": "r", "incumbent": "i", "verdict": "rejected"},
     ["journal.jsonl:2: move.after: damaged candidate record: required field is missing"]),
    ({"kind": "candidate", "step": 1, "move": MOVE.model_dump(),
      "inverse": MOVE.inverse().model_dump(), "proposer": "p", "reason": "r",
      "incumbent": "i", "verdict": "promoted"},
     ["journal.jsonl:2: damaged candidate record", "names no candidate config"]),
    ([1, 2], ["journal.jsonl:2: expected a JSON object"]),
])
def test_a_line_that_is_no_record_of_this_forge_is_refused_naming_its_line(
        tmp_path: Path, line: Any, fragments: list[str]) -> None:
    first = StopRecord(reason="max_steps", text="t", step=0, rollouts_total=0, cost_total=0)
    folder = write_journal(tmp_path, [first.journal_json(), line,
                                      first.journal_json()])
    with pytest.raises(JournalError) as err:
        read_records(folder)
    message = str(err.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


# -- what is written ---------------------------------------------------------------------------

def test_a_field_the_search_did_not_set_is_not_written_and_null_is_kept() -> None:
    skipped = candidate(verdict="skipped", gates=[], why="already tried")
    assert set(skipped.journal_json()) == {
        "format_version", "kind", "step", "move", "inverse", "proposer", "reason",
        "incumbent", "verdict", "gates", "why"}
    assert skipped.rollouts is None and skipped.dev is None and skipped.aux == {}
    # A confirmed candidate whose val was not run says so with a null.
    confirmed = candidate(val=None)
    assert confirmed.journal_json()["val"] is None
    again = parse_record(confirmed.journal_json(), file=HERE, line=1)
    assert "val" in again.journal_json() and "dev" not in again.journal_json()


def test_numbers_and_values_keep_their_type() -> None:
    flip = Move(target="flag", before=True, after=False)
    record = candidate(move=flip, inverse=flip.inverse(), cost_total=0, elapsed_s=0.0,
                       rollouts_total=3)
    written = record.journal_json()
    assert canonical(written["move"]) == '{"after": false, "before": true, "target": "flag"}'
    assert type(written["cost_total"]) is int and type(written["elapsed_s"]) is float
    read = parse_record(json.loads(json.dumps(written)), file=HERE, line=1)
    assert canonical(read.journal_json()) == canonical(written)


def test_the_keys_come_in_one_order_kind_first_at_last() -> None:
    record = candidate(rollouts=4, gates=[GateRecord(name="dev", passed=False, reason="x")])
    stamped = record.model_copy(update={"at": parse_record(
        old_lines()[0], file=HERE, line=1).at})
    keys = list(stamped.journal_json())
    assert keys[:2] == ["format_version", "kind"] and keys[-1] == "at"
    assert stamped.journal_json()["at"].endswith("+00:00")  # as journals have always had it


def test_a_replay_compares_everything_but_the_clock() -> None:
    a = candidate(elapsed_s=1.0, rollouts_total=3)
    assert a.stable_text() == candidate(elapsed_s=2.5, rollouts_total=3).stable_text()
    assert a.stable_text() != candidate(elapsed_s=1.0, rollouts_total=4).stable_text()
