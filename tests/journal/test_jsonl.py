"""The JSONL layer under every append-only file forge keeps (forge.journal.jsonl): one torn-tail
rule for all of them, whole lines appended and synced, damage named by file and line."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from forge.errors import JournalError, RuntimeJournalError
from forge.journal.jsonl import JsonlAppender, cut_torn_tail, read_jsonl_tolerant


def read(path: Path, **kw: str) -> list[tuple[int, object]]:
    return read_jsonl_tolerant(path, JournalError, what="the journal", **kw)


def test_values_come_with_their_line_numbers_blank_lines_skipped(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n[1, 2]\n"s"\n', encoding="utf-8")
    assert read(path) == [(1, {"a": 1}), (3, [1, 2]), (4, "s")]


def test_a_missing_file_holds_nothing_or_is_refused(tmp_path: Path) -> None:
    assert read(tmp_path / "absent.jsonl") == []
    with pytest.raises(JournalError, match=r"absent\.jsonl: no journal here"):
        read(tmp_path / "absent.jsonl", missing="no journal here")


@pytest.mark.parametrize("tail", [b'{"c": ', b'{"c": \n', b'{"c": \xff\xfe', b"\xff\n"])
def test_a_torn_last_line_is_skipped_with_a_warning(
        tmp_path: Path, tail: bytes, caplog: pytest.LogCaptureFixture) -> None:
    # Terminated or not: a kill mid-write leaves a prefix of the line, possibly of a
    # character, and the next writer may already have ended it.
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n' + tail)
    with caplog.at_level(logging.WARNING, logger="forge.journal.jsonl"):
        assert read(path) == [(1, {"a": 1}), (2, {"b": 2})]
    assert "x.jsonl:3: ignoring a torn last line" in caplog.text


@pytest.mark.parametrize(("bad", "what"), [(b'{"c": ', "Expecting value"),
                                           (b"\xff\xfe", "not UTF-8")])
def test_damage_in_the_middle_names_the_file_and_the_line(
        tmp_path: Path, bad: bytes, what: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n' + bad + b'\n{"b": 2}\n{"c": ')
    with pytest.raises(JournalError) as err:
        read(path)
    assert str(err.value).startswith(f"{path}:2: damaged record: {what}")
    with pytest.raises(RuntimeJournalError, match=r"x\.jsonl:2: malformed JSON"):
        read_jsonl_tolerant(path, RuntimeJournalError, what="the runtime journal",
                            damaged="malformed JSON")


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="cannot read the journal: is a folder"):
        read(tmp_path)


@pytest.mark.parametrize(("content", "kept"), [
    (b'{"a": 1}\n{"b": 2}\n', b'{"a": 1}\n{"b": 2}\n'),
    (b'{"a": 1}\n{"b": 2', b'{"a": 1}\n'),
    (b'{"a": 1', b""),
    (b"", b""),
    # A torn tail longer than the chunk the cut reads backwards in.
    (b'{"a": 1}\n' + b"x" * 200_000, b'{"a": 1}\n'),
    (b"y" * 150_000 + b"\n" + b"x" * 150_000, b"y" * 150_000 + b"\n"),
])
def test_cut_torn_tail_keeps_every_whole_line(tmp_path: Path, content: bytes,
                                              kept: bytes) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    cut_torn_tail(path)
    assert path.read_bytes() == kept
    cut_torn_tail(tmp_path / "absent.jsonl")  # nothing to cut
    assert not (tmp_path / "absent.jsonl").exists()


def test_the_appender_writes_whole_lines_after_cutting_a_torn_tail_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sub" / "x.jsonl"
    out = JsonlAppender(path)
    assert not path.exists()  # nothing appended, nothing created
    path.parent.mkdir()
    path.write_bytes(b'{"a": 1}\n{"torn')
    synced: list[bytes] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(path.read_bytes())  # what is on disk when the sync is asked for
        real_fsync(fd)

    monkeypatch.setattr("forge.journal.jsonl.os.fsync", fsync)
    out.append(['{"b": 2}', '{"c": 3}'])
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n{"c": 3}\n'
    assert synced == [path.read_bytes()]
    out.close()
    out.append([])  # nothing to write: nothing opened, nothing synced
    with path.open("ab") as fh:
        fh.write(b'{"written by another process"')
    with out:  # reopened; the tail is another writer's business now, not cut again
        out.append(['{"d": 4}'])
    assert path.read_bytes().endswith(b'{"written by another process"{"d": 4}\n')


def test_appends_from_threads_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    out = JsonlAppender(path, fsync=False)
    lines = [[f'{{"thread": {t}, "n": {n}, "pad": "{"p" * 500}"}}' for n in range(3)]
             for t in range(8)]
    threads = [threading.Thread(target=lambda ls=ls: [out.append(ls) for _ in range(20)])
               for ls in lines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.close()
    rows = read(path)
    assert len(rows) == 8 * 20 * 3


@pytest.mark.parametrize("line, words", [
    (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
    (b'{"seed": ' + b"1" * 5000 + b"}", "Exceeds the limit (4300 digits)"),
    (b'{"a": "\xff"}', "not UTF-8"),
])
def test_a_hostile_middle_line_is_damage_named_by_its_line(tmp_path: Path, line: bytes,
                                                           words: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n' + line + b'\n{"a": 2}\n')
    with pytest.raises(JournalError) as info:
        read(path)
    assert info.value.line == 2 and words in info.value.message
    assert "\n" not in str(info.value)
