"""No process left behind under ``--executor process``: what a python harness starts in a
session of its own during an attempt is ended and reaped with the attempt (the worker
is a child subreaper); what it started at import ends with the worker; on SIGTERM to
forge mid-attempt, the killed worker's processes end too (forge is a subreaper)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import MakeBench
from reaper import assert_gone, sigterm_when, state

from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate
from forge.executors import ExecutorSettings

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="a child subreaper and /proc are Linux's")

#: Starts ``sleep 60`` in a session of its own at import and in every attempt, each pid
#: on a line of ``escaped`` labelled ``worker`` (an import in a worker), ``forge`` (the
#: import in forge's own process, which checks the harness) or ``attempt``; hangs while
#: ``hold`` exists.
HARNESS = """
import multiprocessing, subprocess, time
from pathlib import Path

HERE = Path(__file__).parent


def sleeper(label):
    pid = subprocess.Popen(["sleep", "60"], start_new_session=True).pid
    with open(HERE / "escaped", "a") as f:
        f.write(f"{label} {pid}\\n")


sleeper("worker" if multiprocessing.current_process().name == "forge-worker" else "forge")


def run(config, task, ctx):
    sleeper("attempt")
    if (HERE / "hold").exists():
        time.sleep(600)
    return {"output": task.expected}
"""


def escaped(bench: Path, label: str) -> list[int]:
    path = bench.parent / "escaped"
    lines = path.read_text().splitlines() if path.exists() else []
    return [int(line.split()[1]) for line in lines if line.split()[0] == label]


@pytest.fixture
def bystander() -> Iterator[int]:
    """A process this test starts itself, in a session of its own: not forge's to end."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture(autouse=True)
def kill_leftovers(tmp_path: Path) -> Iterator[None]:
    """A failing test must not leave sleepers behind, nor the harness's own at import."""
    yield
    for path in tmp_path.rglob("escaped"):
        for line in path.read_text().splitlines():
            pid = int(line.split()[1])
            if state(pid) not in (None, "Z"):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(120)
def test_what_an_attempt_started_in_a_worker_ends_with_the_attempt(
        make_bench: MakeBench, bystander: int) -> None:
    bench = make_bench(HARNESS, rollouts={"k": 2, "concurrency": 2})
    loaded = load_bench(bench)
    result = evaluate(loaded, loaded.defaults, executor=ExecutorSettings("process", workers=2))
    assert result.n_scored == 6, [a.error for t in result.tasks for a in t.attempts]
    attempts = escaped(bench, "attempt")
    assert len(attempts) == 6
    assert_gone(attempts, within=0.5)  # ended and reaped before each outcome came back
    assert_gone(escaped(bench, "worker"), within=0.5)  # with the workers, at the close
    # What the harness started in this process is this process's, as is the bystander.
    assert [state(pid) for pid in [bystander, *escaped(bench, "forge")]] == ["S", "S"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigterm_mid_attempt_ends_what_the_killed_workers_started(
        make_bench: MakeBench, bystander: int) -> None:
    bench = make_bench(HARNESS, rollouts={"k": 1, "concurrency": 2})
    (bench.parent / "hold").touch()
    err = bench.parent / "stderr"
    with err.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "forge", "eval", str(bench),
                                 "--executor", "process", "--workers", "2"],
                                stdout=subprocess.DEVNULL, stderr=stderr)
    # Both workers hang in an attempt.
    status = sigterm_when(proc, lambda: len(escaped(bench, "attempt")) == 2, err.read_text)
    assert status == 128 + signal.SIGTERM, err.read_text()
    assert_gone(escaped(bench, "attempt") + escaped(bench, "worker"))
    assert [state(pid) for pid in [bystander, *escaped(bench, "forge")]] == ["S", "S"]
