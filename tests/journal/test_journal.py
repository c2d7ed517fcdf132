"""The journal: append-only and fsynced, verified on replay, refused when unreadable."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from forge.bench.loader import BudgetSettings
from forge.config.moves import Move
from forge.errors import UserError
from forge.journal import (
    JOURNAL_FORMAT_VERSION,
    JournalError,
    JournalWriter,
    RunInfo,
    RunOptions,
    load_run,
    read_records,
    write_run,
)
from forge.journal.records import CandidateRecord, GateRecord, StartRecord, StopRecord
from forge.journal.run import RUN_FORMAT_VERSION
from forge.secrets.masking import clear_secrets, register_secret

MOVE = Move(target="k", before=1, after=2)


def on_disk(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


def start(n: int = 1) -> StartRecord:
    return StartRecord(config={"k": 1}, fingerprint="f", dev_mean=0.5, val_mean=None,
                       rollouts_total=n)


def candidate(step: int = 1, verdict: str = "rejected", **fields: Any) -> CandidateRecord:
    return CandidateRecord.model_validate({
        "step": step, "move": MOVE, "inverse": MOVE.inverse(), "proposer": "p",
        "reason": "r", "incumbent": "f", "verdict": verdict, **fields})


def stop() -> StopRecord:
    return StopRecord(reason="max_steps", text="reached max_steps", step=1, rollouts_total=3,
                      cost_total=0.0)


def test_write_appends_one_timestamped_line_per_record(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path)
    assert not writer.replaying
    first = writer.write(start())
    second = writer.write(stop())
    assert first.kind == "start" and first.at is not None and first.at.tzinfo is not None
    assert on_disk(tmp_path) == [first.journal_json(), second.journal_json()]
    assert on_disk(tmp_path)[0]["format_version"] == JOURNAL_FORMAT_VERSION
    assert read_records(tmp_path) == [first, second]


def test_each_record_is_on_disk_and_fsynced_before_write_returns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(len(on_disk(tmp_path)))  # flushed before the fsync
        real_fsync(fd)

    monkeypatch.setattr("forge.journal.jsonl.os.fsync", fsync)
    writer = JournalWriter(tmp_path)
    for i in range(3):
        writer.write(candidate(step=i + 1))
        assert synced == list(range(1, i + 2))


def test_records_are_stored_as_a_reader_sees_them(tmp_path: Path) -> None:
    register_secret("sk-journal-secret-1234")
    try:
        writer = JournalWriter(tmp_path)
        stored = writer.write(candidate(why="the key sk-journal-secret-1234 leaked"))
    finally:
        clear_secrets()
    assert stored.why is not None and "sk-journal-secret-1234" not in stored.why
    assert on_disk(tmp_path)[0]["why"] == stored.why
    with pytest.raises(ValueError):  # NaN is not JSON: refused, not written
        writer.write(candidate(cost_total=float("nan")))
    assert len(on_disk(tmp_path)) == 1


def test_replay_verifies_then_appends(tmp_path: Path) -> None:
    first = JournalWriter(tmp_path)
    a = first.write(start())
    b = first.write(candidate(elapsed_s=0.2))
    replay = JournalWriter(tmp_path)
    assert replay.replaying
    # Timestamps and elapsed time may differ; the returned record is the stored one.
    assert replay.write(start()) == a
    assert replay.write(candidate(elapsed_s=9.0)) == b
    assert not replay.replaying
    c = replay.write(stop())
    assert on_disk(tmp_path) == [r.journal_json() for r in (a, b, c)]


def test_replay_that_diverges_is_refused(tmp_path: Path) -> None:
    first = JournalWriter(tmp_path)
    first.write(start())
    first.write(candidate(verdict="promoted", candidate="c"))
    before = (tmp_path / "journal.jsonl").read_bytes()
    replay = JournalWriter(tmp_path)
    replay.write(start())
    with pytest.raises(UserError, match=r"resume diverged at record 2 \(candidate\)") as err:
        replay.write(candidate(verdict="rejected", candidate="c"))
    assert isinstance(err.value, JournalError) and err.value.line == 2
    assert err.value.file == str(tmp_path / "journal.jsonl")
    assert (tmp_path / "journal.jsonl").read_bytes() == before  # nothing was written


def test_replay_tells_true_from_one(tmp_path: Path) -> None:
    # A move to True and a move to 1 are different decisions, though Python's 1 == True.
    to_one, to_true = (Move(target="k", before=2, after=after) for after in (1, True))
    gates = [GateRecord(name="dev", passed=True, reason="x")]
    JournalWriter(tmp_path).write(candidate(move=to_one, inverse=to_one.inverse(), gates=gates))
    replay = JournalWriter(tmp_path)
    with pytest.raises(JournalError, match="resume diverged at record 1"):
        replay.write(candidate(move=to_true, inverse=to_true.inverse(), gates=gates))


def test_a_torn_last_line_is_cut_before_replay(tmp_path: Path) -> None:
    JournalWriter(tmp_path).write(start())
    with (tmp_path / "journal.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"kind": "cand')
    replay = JournalWriter(tmp_path)
    replay.write(start())
    assert not replay.replaying
    replay.write(candidate())
    assert [r["kind"] for r in on_disk(tmp_path)] == ["start", "candidate"]


def test_a_damaged_middle_line_is_a_journal_error(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path)
    for i in range(3):
        writer.write(candidate(step=i + 1))
    path = tmp_path / "journal.jsonl"
    rows = path.read_text().splitlines()
    rows[1] = "{garbage"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(JournalError, match=r"journal\.jsonl:2"):
        JournalWriter(tmp_path)
    with pytest.raises(JournalError):
        read_records(tmp_path)


def _info(**changes: Any) -> RunInfo:
    values: dict[str, Any] = dict(
        run_id="r1", bench="b", bench_path="/x/bench.yaml", bench_digest="d1",
        registry_digest="d2", seed=7, start_config={"k": 1}, start_fingerprint="f",
        options=RunOptions(max_steps=3, patience=2, budget=BudgetSettings(), k=2,
                           candidates_per_step=4),
        created_at=datetime(2025, 1, 2, tzinfo=UTC))
    values.update(changes)
    return RunInfo(**values)


def test_run_info_round_trip(tmp_path: Path) -> None:
    write_run(tmp_path / "r1", _info())
    assert load_run(tmp_path / "r1") == _info()


@pytest.mark.parametrize("version", [RUN_FORMAT_VERSION + 1, 0, "1", None, True])
def test_load_run_refuses_another_format_version(tmp_path: Path, version: Any) -> None:
    write_run(tmp_path, _info())
    data = json.loads((tmp_path / "run.json").read_text())
    data["format_version"] = version
    (tmp_path / "run.json").write_text(json.dumps(data))
    with pytest.raises(JournalError, match="format_version") as err:
        load_run(tmp_path)
    assert str(RUN_FORMAT_VERSION) in str(err.value)
    assert "\n" not in str(err.value)


def test_load_run_missing_or_malformed(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="no such run"):
        load_run(tmp_path / "nope")
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(JournalError, match="malformed JSON"):
        load_run(tmp_path)
    write_run(tmp_path, _info())
    data = json.loads((tmp_path / "run.json").read_text())
    del data["seed"]
    (tmp_path / "run.json").write_text(json.dumps(data))
    with pytest.raises(JournalError, match="seed"):
        load_run(tmp_path)


@pytest.mark.parametrize("executor", [{"name": "local", "workeps": 2},
                                      {"name": "local", "workers": 0}, {"name": 3}])
def test_a_bad_executor_in_run_json_is_that_files_field_in_one_line(
        tmp_path: Path, executor: dict[str, Any]) -> None:
    # A flipped bit in a key ("workers" -> "workeps") once raised a TypeError from the
    # settings' constructor; a bad value named a command-line option nobody typed.
    write_run(tmp_path, _info())
    data = json.loads((tmp_path / "run.json").read_text())
    data["options"]["executor"] = executor
    (tmp_path / "run.json").write_text(json.dumps(data))
    with pytest.raises(JournalError) as err:
        load_run(tmp_path)
    message = str(err.value)
    assert "run.json" in message and "executor" in message and "\n" not in message


def test_read_records_without_a_journal(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="no journal"):
        read_records(tmp_path)
