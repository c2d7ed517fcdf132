"""One writer per run, and a disk that refuses writes: real ``forge`` processes at once,
a full disk, a read-only one. Whatever happens, the run folder stays one consistent run
that a resume finishes with the decisions of an uninterrupted run."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_user_error, run_forge, search_tasks, stored_rows, write_search_bench

import forge.journal.jsonl as jsonl_module
from forge.search.launch import launch_search

#: boost raises the success probability from 0.5 to 0.8. Each attempt takes a few ms,
#: so that a run lasts long enough for a second process to come while it is written.
SLOW = """
def run(config, task, ctx):
    time.sleep(0.004)
    ok = random.Random(ctx.seed).random() < (0.8 if config["boost"] else 0.5)
    return {"output": task.expected if ok else "wrong"}
"""

_VOLATILE = {"at", "elapsed_s", "run_id"}


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    return write_search_bench(tmp_path / "bench", SLOW, tasks=search_tasks(16, 12, 12),
                              search={"max_steps": 3, "patience": 3})


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


def stable(folder: Path) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in _VOLATILE} for r in records(folder)]


def attempt_keys(folder: Path) -> Counter[tuple[Any, ...]]:
    rows = stored_rows(folder)
    return Counter((r["config"], r["stream"], r["result"]["task_id"], r["result"]["attempt"])
                   for r in rows)


def assert_one_consistent_run(folder: Path, reference: Path) -> None:
    """One end record, no record or attempt twice, the decisions of ``reference``."""
    kinds = [r["kind"] for r in records(folder)]
    assert kinds.count("start") == 1 and kinds.count("end") == 1, kinds
    assert max(attempt_keys(folder).values()) == 1
    assert stable(folder) == stable(reference)


def one_error_line(code: int, err: str, *fragments: str) -> str:
    """Exit 2 and one ``forge: error:`` line on stderr naming ``fragments`` (stdout may
    show the decisions made before the failure)."""
    assert code == 2, err
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1 and lines[0].startswith("forge: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def forge_process(*args: object, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "forge", *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def reference(bench: Path, tmp_path: Path) -> Path:
    """The same search, run once without interruption."""
    launch_search(bench, journals=tmp_path / "reference", run_id="ref", seed=5)
    return tmp_path / "reference" / "ref"


# -- one writer ---------------------------------------------------------------------------


def _locked(path: Path) -> bool:
    """Whether another process holds the flock on ``path`` now (the file outlives a
    killed holder, its lock does not)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@pytest.mark.slow
def test_a_resume_while_the_run_is_written_is_refused_and_writes_nothing(
        bench: Path, tmp_path: Path, reference: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    journals = tmp_path / "journals"
    folder = journals / "r"
    first = forge_process("search", bench, "--journals", journals, "--run-id", "r",
                          "--seed", 5, cwd=tmp_path)
    try:
        wait_for(lambda: (folder / "journal.jsonl").exists(),
                 "the first search to write its journal")
        code, out, err = run_forge(capsys, "search", "--resume", "r", "--journals", journals)
        line = assert_user_error(code, out, err, f"{folder}: run r is being written by "
                                                 "another forge process")
        assert f"pid {first.pid}" in line
        code, out, err = run_forge(capsys, "search", bench, "--run-id", "r", "--journals",
                                   journals)
        assert_user_error(code, out, err, "run 'r'")
    finally:
        _, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err
    assert_one_consistent_run(folder, reference)
    assert not (folder / ".lock").exists()


@pytest.mark.slow
def test_two_resumes_of_one_run_at_once_one_is_refused(
        bench: Path, tmp_path: Path, reference: Path) -> None:
    journals = tmp_path / "journals"
    folder = journals / "r"
    first = forge_process("search", bench, "--journals", journals, "--run-id", "r",
                          "--seed", 5, cwd=tmp_path)
    wait_for(lambda: any(r["kind"] == "candidate" for r in records(folder))
             if (folder / "journal.jsonl").exists() else False, "a first decision")
    first.send_signal(signal.SIGKILL)  # a run killed mid-search, to be resumed
    first.communicate()
    # The first resume is stopped while it holds the run (SIGSTOP), so the second comes
    # while it is being written however fast or slow the machine is.
    first = forge_process("search", "--resume", "r", "--journals", journals, cwd=tmp_path)
    try:
        wait_for(lambda: _locked(folder / ".lock"), "the first resume to hold the run")
        first.send_signal(signal.SIGSTOP)
        second = forge_process("search", "--resume", "r", "--journals", journals,
                               cwd=tmp_path)
        _, refused = second.communicate(timeout=300)
    finally:
        first.send_signal(signal.SIGCONT)
    _, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err
    assert second.returncode == 2, refused
    lines = refused.strip().splitlines()
    assert len(lines) == 1 and "is being written by another forge process" in lines[0], refused
    assert_one_consistent_run(folder, reference)


# -- a disk that refuses writes -------------------------------------------------------------


class _FullDisk:
    """``os`` for forge.journal.jsonl, whose ``write`` fails with ENOSPC after ``room`` writes."""

    def __init__(self, room: int) -> None:
        self.room = room

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def write(self, fd: int, data: Any) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= 1
        return os.write(fd, data)


@pytest.mark.parametrize("room", [0, 3, 12])
def test_a_full_disk_under_a_search_is_one_line_and_the_run_resumes(
        bench: Path, tmp_path: Path, reference: Path, room: int,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    journals = tmp_path / "journals"
    with monkeypatch.context() as m:
        m.setattr(jsonl_module, "os", _FullDisk(room))
        code, _, err = run_forge(capsys, "search", bench, "--journals", journals,
                                   "--run-id", "r", "--seed", 5)
    line = one_error_line(code, err, "No space left on device", "forge search --resume r")
    assert "journals/r/" in line
    # What was written is whole; with room, the resume finishes as if nothing happened.
    code, _, err = run_forge(capsys, "search", "--resume", "r", "--journals", journals)
    assert code == 0, err
    assert_one_consistent_run(journals / "r", reference)


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A small tmpfs at ``where`` (root only; the test is skipped where it cannot mount)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def remount(where: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(where)], check=True)


@pytest.mark.slow
def test_a_real_full_then_read_only_disk(bench: Path, tmp_path: Path, reference: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    # The whole run takes about 52 kB (its attempts compressed): 32k fills up mid-run.
    with tmpfs(tmp_path / "disk", "32k") as disk:
        journals = disk / "journals"
        code, _, err = run_forge(capsys, "search", bench, "--journals", journals,
                                   "--run-id", "r", "--seed", 5)
        one_error_line(code, err, "No space left on device", "--resume r")
        remount(disk, "ro")
        code, _, err = run_forge(capsys, "search", "--resume", "r", "--journals", journals)
        one_error_line(code, err, "journals/r", "Read-only file system")
        code, _, err = run_forge(capsys, "search", bench, "--journals", journals,
                                   "--run-id", "other")
        one_error_line(code, err, "journals/other", "Read-only file system")
        remount(disk, "rw,size=64m")
        code, _, err = run_forge(capsys, "search", "--resume", "r", "--journals", journals)
        assert code == 0, err
        assert_one_consistent_run(journals / "r", reference)
