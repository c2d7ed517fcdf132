"""The Ray executor on a cluster that loses a worker node mid-search.

Each case starts a real cluster on loopback (``tests/ray_cluster.py``: a head and a
worker node, each a raylet of its own), runs ``forge search --executor ray
--ray-address`` under ``tests/reaper.py``, waits until one attempt hangs in an actor
on the worker node, SIGKILLs that node's raylet and counts what is left once forge
exited. The hang is one-shot and only on the worker node, so the same bench run
without faults (on the local executor: results do not depend on where attempts
run) is the baseline.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    journal_records,
    search_tasks,
    stable_records,
    stored_results,
    write_search_bench,
)
from ray_loopback import Cluster, loopback
from reaper import descendants

from forge.cli import main

pytest.importorskip("ray")

TESTS = Path(__file__).parents[1]
SEED = 11

HARNESS = """
import os
import time

import ray

HOLD = _Path(__file__).with_name("hold")  # names the node where one attempt hangs


def held_here():
    \"\"\"Whether this attempt takes the hold: the first to find it on that node.\"\"\"
    if not HOLD.exists() or HOLD.read_text() != ray.get_runtime_context().get_node_id():
        return False
    try:
        os.rename(HOLD, HOLD.with_name(f"held-{os.getpid()}"))
    except FileNotFoundError:
        return False
    return True


def run(config, task, ctx):
    if config["boost"] and held_here():
        time.sleep(600)  # until the node is lost under it
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""


def write_bench(root: Path, hold_on: str | None) -> Path:
    # 4 dev tasks x k=2: chunks of one attempt each, so the node's loss hits few. The
    # attempts' timeout outlasts the GCS's finding the node dead (some 15 s): the attempt
    # held is lost with its node, not timed out on it.
    bench = write_search_bench(root, HARNESS, tasks=search_tasks(4, 4, 4), k=2,
                               search={"max_steps": 2, "patience": 2})
    text = bench.read_text(encoding="utf-8")
    bench.write_text(text.replace('"timeout_s": 10.0', '"timeout_s": 100.0'), encoding="utf-8")
    if hold_on is not None:
        (root / "hold").write_text(hold_on)
    return bench


def search(bench: Path, journals: Path, *extra: str) -> list[str]:
    return ["search", str(bench), "--journals", str(journals), "--run-id", "r",
            "--seed", str(SEED), "--proposer", "sweep", "--candidates", "1", *extra]


def baseline(tmp_path: Path) -> list[dict[str, Any]]:
    bench = write_bench(tmp_path / "base", None)
    assert main([*search(bench, tmp_path / "bj"), "--json"]) == 0
    return stable_records(journal_records(tmp_path / "bj" / "r"))


class Forge:
    """``python -m forge ARGS`` under the reaper, in the loopback environment."""

    def __init__(self, out: Path, args: list[str]) -> None:
        out.mkdir(parents=True)
        self.out = out
        self.proc = subprocess.Popen([sys.executable, str(TESTS / "reaper.py"), str(out), "--",
                                      sys.executable, "-m", "forge", *args], env=loopback())

    def stderr(self) -> str:
        path = self.out / "stderr"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait(self, timeout: float) -> dict[str, Any]:
        """The reaper's report (forge's exit status, the processes it left) and stderr."""
        assert self.proc.wait(timeout=timeout) == 0
        report: dict[str, Any] = json.loads((self.out / "report.json").read_text())
        report["stderr"] = self.stderr()
        return report

    def stop(self) -> None:
        """End forge if it is still running (the reaper then ends what it left)."""
        if self.proc.poll() is None and (self.out / "pid").exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int((self.out / "pid").read_text()), signal.SIGKILL)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def forge_run(tmp_path: Path) -> Iterator[Callable[[str, list[str]], Forge]]:
    """Start forge runs (a folder name under tmp_path, the arguments); each is ended
    with the test, before its cluster."""
    runs: list[Forge] = []

    def start(name: str, args: list[str]) -> Forge:
        runs.append(Forge(tmp_path / name, args))
        return runs[-1]

    try:
        yield start
    finally:
        for run in runs:
            run.stop()


def lose_the_worker(tmp_path: Path, cluster: Cluster,
                    forge_run: Callable[[str, list[str]], Forge]) -> tuple[Forge, str, float]:
    """Add a worker node (2 CPUs), start the search on the cluster, and once an attempt
    hangs on that node SIGKILL its raylet: the run, the node's id, when it was killed."""
    worker = cluster.add(2)
    bench = write_bench(tmp_path / "bench", worker["node_id"])
    run = forge_run("run", search(bench, tmp_path / "j", "--executor", "ray",
                                  "--ray-address", cluster.address, "--json"))
    deadline = time.monotonic() + 150
    while not list(bench.parent.glob("held-*")):
        if run.proc.poll() is not None:
            pytest.fail("forge ended before the fault: " + run.stderr())
        assert time.monotonic() < deadline, "no attempt got to hang"
        time.sleep(0.1)
    held = int(next(bench.parent.glob("held-*")).name.split("-")[1])
    assert held in descendants(worker["raylet"])  # the work is on the worker node
    os.kill(worker["raylet"], signal.SIGKILL)
    return run, worker["node_id"], time.monotonic()


def seen(run: Forge, pattern: str, since: float, limit: float) -> float:
    """Seconds from ``since`` until forge's stderr has a line matching ``pattern``."""
    while not re.search(pattern, run.stderr(), re.MULTILINE):
        ended = run.proc.poll() is not None
        assert not ended and time.monotonic() - since < limit, \
            f"no {pattern!r} in: {run.stderr()}"
        time.sleep(0.1)
    return time.monotonic() - since


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_attempts_lost_with_a_node_run_again_on_the_live_nodes(
        tmp_path: Path, ray_cluster: Callable[[int], Cluster],
        forge_run: Callable[[str, list[str]], Forge]) -> None:
    expected = baseline(tmp_path)
    cluster = ray_cluster(1)  # the head runs one actor, the worker two
    run, worker, killed = lose_the_worker(tmp_path, cluster, forge_run)
    detected = seen(run, rf"^ray executor: node {worker[:8]} .*lost", killed, 60)
    report = run.wait(timeout=120)
    print(f"loss to detection {detected:.1f} s, loss to the search's end "
          f"{time.monotonic() - killed:.1f} s")
    assert report["returncode"] == 0, report["stderr"]
    assert report["survivors"] == []
    folder = tmp_path / "j" / "r"
    # Nothing is charged to the configs: every attempt completed, the decisions are
    # those of the run that lost no node.
    assert collections.Counter(r["stop_reason"] for r in stored_results(folder)) == {
        "completed": len(stored_results(folder))}
    assert stable_records(journal_records(folder)) == expected


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_no_live_node_stops_the_search_with_one_line_and_it_resumes(
        tmp_path: Path, ray_cluster: Callable[[int], Cluster],
        forge_run: Callable[[str, list[str]], Forge]) -> None:
    expected = baseline(tmp_path)
    cluster = ray_cluster(0)  # only the worker node runs actors
    run, worker, killed = lose_the_worker(tmp_path, cluster, forge_run)
    journals = tmp_path / "j"
    report = run.wait(timeout=60)
    stopped = time.monotonic() - killed
    print(f"loss to stop {stopped:.1f} s")
    assert report["returncode"] == 1, report["stderr"]
    assert report["survivors"] == []
    [line] = [x for x in report["stderr"].splitlines() if x.startswith("forge")]
    assert re.fullmatch(
        rf"forge: no live node of the Ray cluster at {cluster.address} can run an actor "
        rf"\(1 CPU\); lost: node {worker[:8]} at 127\.0\.0\.1; "
        rf"resume with: forge search --resume r --journals {re.escape(str(journals))}",
        line), line
    folder = journals / "r"
    written = journal_records(folder)
    assert written[-1]["kind"] != "end"
    assert all(r["stop_reason"] == "completed" for r in stored_results(folder))

    cluster.add(2)  # the node back (a new raylet: a new node id)
    resumed = forge_run("resume", ["search", "--resume", "r", "--journals",
                                          str(journals), "--json"])
    report = resumed.wait(timeout=120)
    assert report["returncode"] == 0, report["stderr"]
    after = journal_records(folder)
    assert after[:len(written)] == written
    assert stable_records(after) == expected
