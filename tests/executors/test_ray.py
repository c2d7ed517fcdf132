"""The Ray executor, faulted mid-search: a worker killed, the local instance stopped.

Each case runs a real ``forge search --executor ray`` (which starts a local Ray
instance of its own) under ``tests/reaper.py``, waits until one attempt of the
better config hangs in its actor, then either SIGKILLs that actor's process or the
instance's GCS and raylet (found among forge's descendants), and counts what is left
once forge exited. The hang is one-shot (the attempt that takes the ``hold`` file
hangs; none after it), so the same bench run without faults is the baseline.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
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
from reaper import descendants

from forge.cli import main

pytest.importorskip("ray")

REAPER = Path(__file__).parents[1] / "reaper.py"
SEED = 11

HARNESS = """
import os
import random
import time

HERE = _Path(__file__).parent


def run(config, task, ctx):
    if config["boost"]:
        try:  # one attempt takes the hold, and hangs until it is faulted
            os.rename(HERE / "hold", HERE / f"held-{os.getpid()}")
        except FileNotFoundError:
            pass
        else:
            time.sleep(600)
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""


def write_bench(root: Path) -> Path:
    # 4 dev tasks x k=2 on 2 workers: every chunk is one attempt, so the faulted one
    # is exactly the attempt that hung.
    bench = write_search_bench(root, HARNESS, tasks=search_tasks(4, 4, 4), k=2,
                               search={"max_steps": 2, "patience": 2})
    (root / "hold").touch()
    return bench


def search(bench: Path, journals: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "forge", "search", str(bench), "--journals", str(journals),
            "--run-id", "r", "--seed", str(SEED), "--proposer", "sweep", "--candidates", "1",
            *extra]


def faulted(out: Path, bench: Path, command: list[str],
            fault: Callable[[int, int], None]) -> dict[str, Any]:
    """Run ``command`` under the reaper; once an attempt hangs, ``fault(forge pid, the
    hanging actor's pid)``; the reaper's report with forge's stderr."""
    out.mkdir(parents=True)
    reaper = subprocess.Popen([sys.executable, str(REAPER), str(out), "--", *command])
    try:
        deadline = time.monotonic() + 180
        while not ((out / "pid").exists() and list(bench.parent.glob("held-*"))):
            if reaper.poll() is not None:
                pytest.fail("forge ended before the fault: "
                            + (out / "stderr").read_text(errors="replace"))
            assert time.monotonic() < deadline, "no attempt got to hang"
            time.sleep(0.1)
        actor = int(next(bench.parent.glob("held-*")).name.split("-")[1])
        fault(int((out / "pid").read_text()), actor)
        assert reaper.wait(timeout=120) == 0
    finally:
        if reaper.poll() is None:
            reaper.kill()
            reaper.wait()
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    report["stderr"] = (out / "stderr").read_text(errors="replace")
    return report


def forge_lines(stderr: str) -> list[str]:
    """What forge wrote on stderr (Ray prints a notice of its own when it starts)."""
    return [line for line in stderr.splitlines() if line.startswith("forge")]


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_killed_worker_loses_only_its_attempt_and_the_search_goes_on(tmp_path: Path) -> None:
    bench = write_bench(tmp_path / "bench")
    journals = tmp_path / "j"
    report = faulted(tmp_path / "run", bench, search(bench, journals, "--executor", "ray",
                                                      "--workers", "2"),
                     lambda forge, actor: os.kill(actor, signal.SIGKILL))
    assert report["returncode"] == 0, report["stderr"]
    assert report["survivors"] == []
    assert forge_lines(report["stderr"]) == []
    folder = journals / "r"
    written = journal_records(folder)
    assert written[-1]["kind"] == "end"
    results = stored_results(folder)
    kinds = collections.Counter(r["stop_reason"] for r in results)
    assert kinds == {"completed": len(results) - 1, "error": 1}
    [lost] = [r for r in results if r["stop_reason"] == "error"]
    assert lost["error"].startswith("ray task lost: ActorDiedError")
    # The resume replays the lost attempt from the store and agrees with every record.
    assert main(["search", "--resume", "r", "--journals", str(journals), "--json"]) == 0
    assert journal_records(folder) == written


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_stopped_ray_instance_stops_the_search_with_one_line_and_it_resumes(
        tmp_path: Path) -> None:
    baseline = write_bench(tmp_path / "base")
    (baseline.parent / "hold").unlink()
    assert main([*search(baseline, tmp_path / "bj")[3:], "--json"]) == 0

    def stop_ray(forge: int, actor: int) -> None:
        core = [pid for pid, cmd in descendants(forge).items()
                if "gcs_server" in cmd or "raylet" in cmd]
        assert len(core) == 2, descendants(forge)
        for pid in core:
            os.kill(pid, signal.SIGKILL)

    bench = write_bench(tmp_path / "bench")
    journals = tmp_path / "j"
    started = time.monotonic()
    report = faulted(tmp_path / "run", bench, search(bench, journals, "--executor", "ray",
                                                      "--workers", "2"), stop_ray)
    # Before Ray ends the driver itself (a minute without its GCS, with a line of its own).
    assert time.monotonic() - started < 120
    assert report["returncode"] == 1, report["stderr"]
    assert report["survivors"] == []
    assert forge_lines(report["stderr"]) == [
        "forge: the local Ray instance stopped (gcs_server, raylet exited); "
        f"resume with: forge search --resume r --journals {journals}"]
    folder = journals / "r"
    written = journal_records(folder)
    assert written[-1]["kind"] != "end"
    # Nothing lost to the stopped instance is kept: a resume runs it again.
    assert all(r["stop_reason"] == "completed" for r in stored_results(folder))

    assert main(["search", "--resume", "r", "--journals", str(journals), "--executor", "ray",
                 "--workers", "2", "--json"]) == 0
    after = journal_records(folder)
    assert after[:len(written)] == written
    assert stable_records(after) == stable_records(journal_records(tmp_path / "bj" / "r"))
