"""No process left behind: what a command harness's child starts in a session of its own
(``setsid``, out of the attempt's process group) ends with the attempt, is reaped, and
is gone after ``forge eval`` exits, on SIGTERM too; what forge did not start through an
attempt survives (Linux: forge is a child subreaper and the child's processes are tagged).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from conftest import MINI_REGISTRY, write_jsonl
from reaper import assert_gone, sigterm_when, state

from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="a child subreaper and /proc are Linux's")

#: A command child that starts ``sleep 60`` in a session of its own (its pid in
#: ``escaped``), through a parent that exits at once when ``orphan`` is in the task id
#: (the sleeper is re-parented while the attempt runs), and hangs while ``hold`` exists.
#: The ``orphan`` attempt outlasts the other one, whose end must not end its sleeper:
#: it answers ``killed early`` if it did.
AGENT = """
import json, os, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).parent
START = ("import subprocess as s; g = s.Popen(['sleep', '60'], start_new_session=True, "
         "stdout=s.DEVNULL, stderr=s.DEVNULL); print(g.pid)")


def escape(orphan):
    if orphan:
        pid = subprocess.run([sys.executable, "-c", START], capture_output=True, text=True,
                             check=True).stdout.strip()
    else:
        pid = subprocess.Popen(["sleep", "60"], start_new_session=True).pid
    with open(HERE / "escaped", "a") as f:
        f.write(f"{pid}\\n")
    return int(pid)


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def attempt(req):
    orphan = "orphan" in req["task"]["id"]
    pid = escape(orphan)
    if (HERE / "hold").exists():
        time.sleep(600)
    done = HERE / f"done-{req['task']['id'].split('-')[0]}"
    if orphan:  # after the other attempt's end, and its sleeper's
        until = time.monotonic() + 10
        while not done.exists() and time.monotonic() < until:
            time.sleep(0.02)
        time.sleep(0.5)
    else:
        done.touch()
    reply = {"output": req["task"]["expected"] if running(pid) else "killed early"}
    if "id" in req:
        reply["id"] = req["id"]
    return json.dumps(reply)


if {worker}:
    for line in sys.stdin:
        print(attempt(json.loads(line)), flush=True)
else:
    print(attempt(json.load(sys.stdin)))
"""


def write_bench(root: Path, *, worker: bool = False) -> Path:
    root.mkdir(parents=True)
    (root / "registry.yaml").write_text(MINI_REGISTRY, encoding="utf-8")
    (root / "agent.py").write_text(textwrap.dedent(AGENT).replace("{worker}", str(worker)),
                                   encoding="utf-8")
    tasks = {split: [{"id": f"{split}-{kind}", "input": f"{split} {kind}",
                      "expected": f"{split} {kind}"} for kind in ("direct", "orphan")]
             for split in ("dev", "val", "test")}
    for split, rows in tasks.items():
        write_jsonl(root / "tasks" / f"{split}.jsonl", rows)
    spec = {"argv": [sys.executable, "agent.py"], "worker": worker, "cancel_timeout_s": 0.5}
    bench = root / "bench.yaml"
    bench.write_text(
        "name: cmd\n"
        f"harness: {json.dumps({'command': spec})}\n"
        "registry: registry.yaml\n"
        f"splits: {json.dumps({s: f'tasks/{s}.jsonl' for s in tasks})}\n"
        'rollouts: {"k": 1, "concurrency": 4, "timeout_s": 20}\n'
        "scorer: exact\n", encoding="utf-8")
    return bench


def escaped(bench: Path) -> list[int]:
    path = bench.parent / "escaped"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.fixture
def bystanders() -> Iterator[list[int]]:
    """Processes this test starts itself, outside any attempt: a child in a session of
    its own, and an orphan (its parent exits at once: it is re-parented to init, or to
    this process once forge made it a subreaper). Neither may be ended."""
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    orphan = int(subprocess.run(
        [sys.executable, "-c", "import subprocess as s; print(s.Popen(['sleep', '60'], "
         "start_new_session=True, stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"],
        capture_output=True, text=True, check=True).stdout)
    pids = [child.pid, orphan]
    yield pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    child.wait()


@pytest.fixture(autouse=True)
def kill_leftovers(tmp_path: Path) -> Iterator[None]:
    """A failing test must not leave sleepers behind."""
    yield
    for path in tmp_path.rglob("escaped"):
        for pid in path.read_text().split():
            if state(int(pid)) not in (None, "Z"):
                os.kill(int(pid), signal.SIGKILL)


def alive(pid: int) -> bool:
    return state(pid) not in (None, "Z", "X")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("worker", [False, True], ids=["per-attempt", "worker"])
def test_a_grandchild_in_a_session_of_its_own_ends_with_its_attempt(
        tmp_path: Path, bystanders: list[int], worker: bool) -> None:
    bench = write_bench(tmp_path / "b", worker=worker)
    loaded = load_bench(bench)
    result = evaluate(loaded, loaded.defaults)
    # Each attempt's sleeper ran while it did: the other attempt's end left it alone.
    assert [a.output.output for t in result.tasks for a in t.attempts if a.output] == [
        "dev direct", "dev orphan"]
    pids = escaped(bench)
    assert len(pids) == 2  # one started by the child, one re-parented during the attempt
    # Ended and reaped by the time the evaluation returns (a worker's with the worker).
    assert_gone(pids, within=0.5)
    assert all(alive(pid) for pid in bystanders), [state(p) for p in bystanders]


def forge_eval(bench: Path, stderr: IO[bytes] | int = subprocess.PIPE
               ) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "forge", "eval", str(bench), "--json"],
                            stdout=subprocess.PIPE, stderr=stderr)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_nothing_an_attempt_started_outlives_forge_eval(
        tmp_path: Path, bystanders: list[int]) -> None:
    bench = write_bench(tmp_path / "b")
    proc = forge_eval(bench)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err.decode()
    assert json.loads(out)["n_scored"] == 2
    assert_gone(escaped(bench))
    assert all(alive(pid) for pid in bystanders)


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("worker", [False, True], ids=["per-attempt", "worker"])
def test_sigterm_mid_attempt_ends_what_left_the_group(
        tmp_path: Path, bystanders: list[int], worker: bool) -> None:
    bench = write_bench(tmp_path / "b", worker=worker)
    (bench.parent / "hold").touch()
    err = bench.parent / "stderr"
    with err.open("wb") as stderr:
        proc = forge_eval(bench, stderr)
    # Both attempts hang, each having left a sleeper.
    status = sigterm_when(proc, lambda: len(escaped(bench)) == 2, err.read_text)
    assert status == 128 + signal.SIGTERM, err.read_text()
    assert err.read_text().strip().splitlines() == [
        "forge: interrupted by SIGTERM; nothing was saved"], err.read_text()
    assert_gone(escaped(bench))
    assert all(alive(pid) for pid in bystanders)
