"""Append-only JSONL in gzip members: whole members read, a torn last one dropped and
cut, damage anywhere else refused with the file and the line or byte."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge.errors import JournalError
from forge.journal.gzjsonl import GzipJsonlAppender, cut_torn_member, read_gzip_jsonl_tolerant


def write(path: Path, batches: list[list[dict[str, int]]]) -> list[int]:
    """Append each batch as one member; the file's size after each."""
    out = GzipJsonlAppender(path, error=JournalError, what="x")
    ends = []
    with out:
        for batch in batches:
            out.append([json.dumps(row) for row in batch])
            ends.append(path.stat().st_size)
    return ends


def read(path: Path) -> list[dict[str, int]]:
    return [value for _, value in read_gzip_jsonl_tolerant(path, JournalError, what="x")[0]]


BATCHES = [[{"b": b, "i": i} for i in range(n)] for b, n in enumerate([3, 1, 7, 2])]


def test_each_append_is_a_member_and_the_file_is_one_gzip_stream(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl.gz"
    write(path, BATCHES)
    rows = [row for batch in BATCHES for row in batch]
    assert read(path) == rows
    # What zcat shows: every member, in order.
    text = gzip.decompress(path.read_bytes()).decode()
    assert [json.loads(line) for line in text.splitlines()] == rows
    numbers = [n for n, _ in read_gzip_jsonl_tolerant(path, JournalError, what="x")[0]]
    assert numbers == list(range(1, len(rows) + 1))  # numbered as zcat shows the lines


@given(cut=st.integers(min_value=0, max_value=10_000), zeros=st.booleans())
@settings(max_examples=150, deadline=None)
def test_a_file_cut_anywhere_reads_its_whole_members_and_the_next_append_cuts_the_rest(
        tmp_path_factory: pytest.TempPathFactory, cut: int, zeros: bool) -> None:
    path = tmp_path_factory.mktemp("cut") / "a.jsonl.gz"
    ends = write(path, BATCHES)
    cut %= ends[-1] + 1
    original = path.read_bytes()
    data = original[:cut] + (b"\0" * 4096 if zeros else b"")  # a power cut's block
    path.write_bytes(data)
    # Whole: the members whose bytes are all there (the zeros may restore a cut trailer's).
    whole = sum(1 for end in ends if data[:end] == original[:end])
    assert read(path) == [row for batch in BATCHES[:whole] for row in batch]
    GzipJsonlAppender(path, error=JournalError, what="x").append([json.dumps({"new": 1})])
    assert read(path)[-1] == {"new": 1}
    assert len(read(path)) == sum(len(b) for b in BATCHES[:whole]) + 1
    gzip.decompress(path.read_bytes())  # one valid stream again: nothing torn left inside


def test_a_member_damaged_before_a_whole_one_is_refused_naming_its_byte(
        tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl.gz"
    ends = write(path, BATCHES)
    data = bytearray(path.read_bytes())
    data[ends[0] + 15] ^= 0x55  # inside the second member's compressed data
    path.write_bytes(bytes(data))
    with pytest.raises(JournalError) as info:
        read(path)
    assert f"the gzip member at byte {ends[0]:,} cannot be read" in str(info.value)
    assert f"the file goes on at byte {ends[1]:,}" in str(info.value)
    assert str(info.value).startswith(f"{path}: damaged record: ")


def test_a_bad_line_inside_a_whole_member_is_damage_even_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl.gz"
    write(path, BATCHES[:1])
    with path.open("ab") as fh:
        fh.write(gzip.compress(b'{"a": 1}\n{"cut in ha\n'))
    with pytest.raises(JournalError) as info:
        read(path)
    assert info.value.line == 5 and "damaged record" in info.value.message
    path.write_bytes(gzip.compress(b'{"a": 1}\n{"a": 2}'))  # whole, but its line unended
    with pytest.raises(JournalError, match=":2: damaged record: a gzip member does not end"):
        read(path)


def test_each_append_is_fsynced_and_a_cut_is_too(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.jsonl.gz"
    synced: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(len(read(path)))  # the member is whole on file already
        real(fd)

    monkeypatch.setattr("forge.journal.jsonl.os.fsync", fsync)
    write(path, BATCHES[:2])
    assert synced == [3, 4]
    monkeypatch.setattr("forge.journal.gzjsonl.os.fsync", fsync)
    with path.open("ab") as fh:
        fh.write(gzip.compress(b'{"torn": 1}\n')[:-3])
    cut_torn_member(path, read_gzip_jsonl_tolerant(path, JournalError, what="x")[1].end)
    assert synced == [3, 4, 4]
    cut_torn_member(tmp_path / "missing.gz", 0)  # nothing to cut: nothing made
    assert not (tmp_path / "missing.gz").exists()
