"""The attempt store: what makes reuse and resume cheap, and survives a kill mid-write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from forge.errors import JournalError
from forge.harness import RunOutput
from forge.results import AttemptResult, StopReason
from forge.scorers import Score
from forge.store import AttemptStore, read_attempts


def att(task: str, i: int, stop: StopReason = "completed", value: float = 1.0
        ) -> AttemptResult:
    done = stop == "completed"
    return AttemptResult(task_id=task, attempt=i, seed=100 + i, stop_reason=stop,
                         duration_s=0.25, error=None if done else "boom",
                         output=RunOutput(output="42", cost=0.5) if done else None,
                         score=Score(value=value, passed=value == 1.0) if done else None,
                         metrics={"cost": 0.5, "latency": 0.25} if done else {})


def test_round_trip_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    store = AttemptStore(path)
    batch = [att("t1", 0), att("t1", 1, value=0.0), att("t2", 0, "timeout"),
             att("t2", 1, "error")]
    store.add("cfgA", "dev", batch)
    store.add("cfgB", "dev#confirm0", [att("t1", 0, value=0.0)])
    again = AttemptStore(path)
    assert len(again) == 5
    for a in batch:
        assert again.get("cfgA", "dev", a.task_id, a.attempt) == a
    assert again.get("cfgB", "dev#confirm0", "t1", 0) == att("t1", 0, value=0.0)
    # keys are (config, stream, task, attempt): nothing leaks across any of them
    assert again.get("cfgB", "dev", "t1", 0) is None
    assert again.get("cfgA", "dev#confirm0", "t1", 0) is None
    assert again.get("cfgA", "dev", "t3", 0) is None
    assert again.get("cfgA", "dev", "t1", 2) is None


def test_cancelled_attempts_are_not_stored(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    store = AttemptStore(path)
    store.add("cfg", "dev", [att("t1", 0), att("t1", 1, "cancelled")])
    assert store.get("cfg", "dev", "t1", 1) is None
    assert len(store) == 1
    assert len(path.read_text().splitlines()) == 1
    store.add("cfg", "dev", [att("t2", 0, "cancelled")])
    assert len(path.read_text().splitlines()) == 1  # an all-cancelled batch writes nothing
    assert AttemptStore(path).get("cfg", "dev", "t1", 1) is None


def test_each_batch_is_fsynced_after_it_is_written(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "attempts.jsonl"
    seen: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        seen.append(len(path.read_text().splitlines()))  # the batch is flushed already
        real_fsync(fd)

    monkeypatch.setattr("forge._jsonl.os.fsync", fsync)
    store = AttemptStore(path)
    store.add("cfg", "dev", [att("t1", 0), att("t1", 1)])
    store.add("cfg", "dev", [att("t2", 0)])
    assert seen == [2, 3]


def test_a_torn_last_line_is_ignored_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    AttemptStore(path).add("cfg", "dev", [att("t1", 0), att("t1", 1)])
    whole = path.read_bytes()
    with path.open("ab") as fh:
        fh.write(b'{"config": "cfg", "stream": "dev", "result": {"task_id": "t2", "att')
    store = AttemptStore(path)
    assert len(store) == 2
    assert path.read_bytes() == whole  # the next append starts on a fresh line
    store.add("cfg", "dev", [att("t2", 0)])
    assert len(AttemptStore(path)) == 3


def test_an_unterminated_last_line_is_dropped_from_memory_and_file_alike(
        tmp_path: Path) -> None:
    # Killed after the JSON but before its newline: memory must hold what the file holds.
    path = tmp_path / "attempts.jsonl"
    AttemptStore(path).add("cfg", "dev", [att("t1", 0), att("t1", 1)])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    store = AttemptStore(path)
    store.add("cfg", "dev", [att("t2", 0)])
    reloaded = AttemptStore(path)
    assert len(reloaded) == len(store)
    for key in (("t1", 0), ("t1", 1), ("t2", 0)):
        assert (reloaded.get("cfg", "dev", *key) is None) == (store.get("cfg", "dev", *key)
                                                               is None)


def test_a_damaged_middle_line_raises(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    AttemptStore(path).add("cfg", "dev", [att("t1", 0), att("t1", 1), att("t1", 2)])
    rows = path.read_text().splitlines()
    rows[1] = rows[1][:20]
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(JournalError, match=r"attempts\.jsonl:2: damaged record"):
        AttemptStore(path)


def test_a_store_without_a_path_keeps_attempts_in_memory(tmp_path: Path) -> None:
    store = AttemptStore()
    store.add("cfg", "dev", [att("t1", 0)])
    assert store.get("cfg", "dev", "t1", 0) == att("t1", 0)
    assert list(tmp_path.iterdir()) == []


def test_read_attempts_leaves_out_lines_of_another_shape(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    assert list(read_attempts(path)) == []  # a missing store holds nothing
    AttemptStore(path).add("cfg", "dev", [att("t1", 0)])
    with path.open("a", encoding="utf-8") as fh:
        fh.write('[1, 2]\n{"config": "cfg", "stream": "dev"}\n')
    AttemptStore(path).add("cfg", "dev", [att("t1", 1)])
    assert [(r.config, r.result.attempt) for r in read_attempts(path)] == [
        ("cfg", 0), ("cfg", 1)]
