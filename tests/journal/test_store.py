"""The attempt store: what makes reuse and resume cheap, and survives a kill mid-write."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from conftest import ARITH

from forge.errors import JournalError
from forge.harness import RunOutput
from forge.journal.store import STORE_FILE, AttemptStore, attempt_line, read_attempts, store_file
from forge.results.model import AttemptResult, StopReason
from forge.scorers import Score
from forge.search.launch import launch_search


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


def test_what_an_attempt_printed_is_stored_with_it(tmp_path: Path) -> None:
    store = AttemptStore(tmp_path / STORE_FILE)
    printed = att("t1", 0).model_copy(update={"stdout": "debug: t1\n"})
    store.add("cfg", "dev", [printed, att("t1", 1)])
    assert AttemptStore(tmp_path / STORE_FILE).get("cfg", "dev", "t1", 0) == printed
    lines = [json.loads(line) for line in
             gzip.decompress((tmp_path / STORE_FILE).read_bytes()).decode().splitlines()[1:]]
    assert [row["result"].get("stdout") for row in lines] == ["debug: t1\n", None]
    assert "stdout" not in lines[1]["result"]  # a line as before it was kept


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

    monkeypatch.setattr("forge.journal.jsonl.os.fsync", fsync)
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


# -- format 2: attempts.jsonl.gz ------------------------------------------------------------


def test_a_new_run_folder_gets_the_compressed_store_and_an_old_one_keeps_its_plain_one(
        tmp_path: Path) -> None:
    assert store_file(tmp_path) == tmp_path / STORE_FILE
    (tmp_path / "attempts.jsonl").write_text("")
    assert store_file(tmp_path) == tmp_path / "attempts.jsonl"
    (tmp_path / STORE_FILE).write_bytes(b"")
    assert store_file(tmp_path) == tmp_path / STORE_FILE


def test_the_compressed_store_is_a_header_then_a_gzip_member_a_batch(tmp_path: Path) -> None:
    path = tmp_path / STORE_FILE
    store = AttemptStore(path)
    store.add("cfgA", "dev", [att("t1", 0), att("t1", 1, value=0.0), att("t2", 0, "timeout")])
    store.add("cfgB", "dev", [att("t1", 0), att("t1", 1, "cancelled")])
    store.add("cfgB", "dev", [att("t9", 0, "cancelled")])  # nothing to write
    again = AttemptStore(path)
    assert len(again) == 4 and again.get("cfgA", "dev", "t1", 1) == att("t1", 1, value=0.0)
    assert [(r.config, r.result.task_id) for r in read_attempts(path)] == [
        ("cfgA", "t1"), ("cfgA", "t1"), ("cfgA", "t2"), ("cfgB", "t1")]
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()  # what zcat shows
    assert json.loads(lines[0]) == {"format_version": 2, "kind": "attempt_store"}
    assert len(lines) == 5
    assert path.read_bytes().count(b"\x1f\x8b\x08\x00") == 2  # two batches, two members
    again.add("cfgC", "dev", [att("t1", 0)])  # a resumed search: no second header
    assert gzip.decompress(path.read_bytes()).count(b"attempt_store") == 1


def test_a_torn_batch_is_dropped_and_cut_and_a_torn_first_one_takes_its_header(
        tmp_path: Path) -> None:
    path = tmp_path / STORE_FILE
    AttemptStore(path).add("cfg", "dev", [att("t1", 0), att("t1", 1)])
    whole = path.read_bytes()
    member = gzip.compress(b'{"config": "cfg", "stream": "dev", "result": {}}\n' * 9)
    path.write_bytes(whole + member[:-4])  # killed before the member's last bytes
    store = AttemptStore(path)
    assert len(store) == 2
    assert path.read_bytes() == whole  # cut before anything is appended after it
    store.add("cfg", "dev", [att("t2", 0)])
    assert len(AttemptStore(path)) == 3
    path.write_bytes(whole[:len(whole) // 2])  # the first batch torn, header and all
    store = AttemptStore(path)
    assert len(store) == 0 and path.read_bytes() == b""
    store.add("cfg", "dev", [att("t3", 0)])
    assert [r.result.task_id for r in read_attempts(path)] == ["t3"]  # the header again


@pytest.mark.parametrize(("first", "message"), [
    ({"format_version": 3, "kind": "attempt_store"},
     "format_version 3 is not readable by this forge, which reads attempt stores of "
     "format 1 (attempts.jsonl) and 2 (attempts.jsonl.gz)"),
    ({"format_version": True, "kind": "attempt_store"}, "format_version True is not"),
    ({"config": "cfg", "stream": "dev", "result": {}}, "not an attempt store: its first line"),
])
def test_a_compressed_store_of_another_format_is_refused_naming_the_file(
        tmp_path: Path, first: dict[str, object], message: str) -> None:
    path = tmp_path / STORE_FILE
    path.write_bytes(gzip.compress((json.dumps(first) + "\n").encode()))
    with pytest.raises(JournalError) as info:
        AttemptStore(path)
    assert str(info.value).startswith(f"{path}:1: ") and message in str(info.value)
    assert path.read_bytes() == gzip.compress((json.dumps(first) + "\n").encode())


def test_a_small_search_stores_its_attempts_several_times_smaller_than_plain_json(
        tmp_path: Path) -> None:
    launch_search(ARITH, journals=tmp_path, run_id="r", seed=3, max_steps=2, k=2)
    path = tmp_path / "r" / STORE_FILE
    rows = list(read_attempts(path))
    plain = sum(len(attempt_line(r.config, r.stream, r.result)) + 1 for r in rows)
    assert len(rows) > 300
    assert path.stat().st_size * 6 < plain  # measured: 10x on this search
    assert not (tmp_path / "r" / "attempts.jsonl").exists()
