"""Joining a Ray cluster is bounded, and a resume goes where its command line says.

Each case runs ``python -m forge`` in a subprocess with a deadline of its own, so that
a join that hangs (what forge did before the bound: 400 s of Ray's retries at an
address nothing listens at, 11 minutes in ``ray.init`` on resume) fails the test
instead of holding the suite. The clusters are real ones on loopback
(``tests/ray_cluster.py``); the address nothing answers at is a loopback port closed,
or held by a socket that accepts and never answers.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import journal_records, search_tasks, write_search_bench
from ray_loopback import Cluster, loopback

pytest.importorskip("ray")

#: Longer than any bound under test, far shorter than a join that hangs.
HANG_S = 150

HARNESS = """
import ray

HOLD = _Path(__file__).with_name("hold")  # the GCS address where attempts hang
RAN = _Path(__file__).with_name("ran")  # the GCS address of each attempt, in order


def run(config, task, ctx):
    gcs = ray.get_runtime_context().gcs_address
    with RAN.open("a") as f:
        f.write(gcs + "\\n")
    if HOLD.exists() and HOLD.read_text() == gcs:
        time.sleep(600)  # until the run is stopped
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""


def forge(*args: str, timeout: float = HANG_S) -> subprocess.CompletedProcess[str]:
    """``forge ARGS`` to its end; a hang past ``timeout`` fails the test."""
    try:
        return subprocess.run([sys.executable, "-m", "forge", *args], env=loopback(),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"forge {' '.join(args)} still running after {timeout:g} s")


def forge_line(stderr: str) -> str:
    """forge's one line on stderr (Ray may have said a little besides, no more)."""
    lines = stderr.splitlines()
    assert len(lines) <= 3, stderr
    [line] = [x for x in lines if x.startswith("forge")]
    return line


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield int(s.getsockname()[1])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench(root: Path) -> Path:
    return write_search_bench(root, HARNESS, tasks=search_tasks(4, 4, 4), k=2,
                              search={"max_steps": 2, "patience": 2})


@pytest.mark.ray
@pytest.mark.parametrize("command", ["search", "eval"])
@pytest.mark.parametrize("answer", ["refused", "silent"])
def test_an_address_nothing_answers_at_is_one_line_within_the_bound_and_writes_nothing(
        tmp_path: Path, command: str, answer: str, silent_port: int) -> None:
    port, bound = (closed_port(), []) if answer == "refused" else (
        silent_port, ["--ray-connect-timeout", "3"])
    address = f"127.0.0.1:{port}"
    journals, saved = tmp_path / "j", tmp_path / "result.json"
    where = (["--journals", str(journals), "--run-id", "r"] if command == "search"
             else ["--save", str(saved)])
    done = forge(command, str(bench(tmp_path / "b")), "--executor", "ray", "--ray-address",
                 address, *bound, *where)
    assert done.returncode == 2, done.stderr
    line = forge_line(done.stderr)
    assert line.startswith(f"forge: error: --ray-address: cannot join the Ray cluster at "
                           f"{address} within {3 if bound else 60} s: "), line
    assert "--ray-connect-timeout" in line
    assert not journals.exists() and not saved.exists()
    assert not (tmp_path / "b" / "ran").exists()  # no attempt ran anywhere


def interrupted_run(tmp_path: Path, cluster: Cluster) -> tuple[Path, Path]:
    """A search on ``cluster`` stopped by SIGTERM while its attempts hang there, the
    cluster then shut down: the bench file and the run folder."""
    bench_file = bench(tmp_path / "b")
    (bench_file.parent / "hold").write_text(cluster.address)
    journals = tmp_path / "j"
    run = subprocess.Popen([sys.executable, "-m", "forge", "search", str(bench_file),
                            "--journals", str(journals), "--run-id", "r", "--seed", "11",
                            "--proposer", "sweep", "--candidates", "1", "--executor", "ray",
                            "--ray-address", cluster.address, "--json"],
                           env=loopback(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + HANG_S
        while not (bench_file.parent / "ran").exists():
            assert run.poll() is None, run.communicate()[1]
            assert time.monotonic() < deadline, "no attempt started on the cluster"
            time.sleep(0.1)
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 128 + signal.SIGTERM, stderr
    cluster.close()
    folder = journals / "r"
    assert json.loads((folder / "run.json").read_text())["options"]["executor"][
        "ray_address"] == cluster.address
    return bench_file, folder


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_resume_whose_cluster_is_gone_is_one_line_and_leaves_the_run_as_it_was(
        tmp_path: Path, ray_cluster: Callable[[int], Cluster]) -> None:
    cluster = ray_cluster(2)
    _, folder = interrupted_run(tmp_path, cluster)
    before = snapshot(folder)
    done = forge("search", "--resume", "r", "--journals", str(folder.parent))
    assert done.returncode == 1, done.stderr  # the cluster is gone: not a typo of the user's
    line = forge_line(done.stderr)
    assert line.startswith(f"forge: cannot join the Ray cluster at {cluster.address} "
                           "within 60 s: "), line
    assert line.endswith("give its address with --ray-address, or more time with "
                         "--ray-connect-timeout"), line
    assert snapshot(folder) == before


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_resume_runs_on_the_cluster_its_ray_address_names_and_run_json_says_so(
        tmp_path: Path, ray_cluster: Callable[[int], Cluster]) -> None:
    first = ray_cluster(2)
    bench_file, folder = interrupted_run(tmp_path, first)
    ran = bench_file.parent / "ran"
    before = len(ran.read_text().splitlines())
    second = ray_cluster(2)  # the cluster's new address: another head, another port
    assert second.address != first.address
    # --ray-address alone: the run's journaled executor is ray already.
    done = forge("search", "--resume", "r", "--journals", str(folder.parent), "--json",
                 "--ray-address", second.address)
    assert done.returncode == 0, done.stderr
    assert (f"resuming r on the ray executor at {second.address} (journaled: the ray "
            f"executor at {first.address})") in done.stderr
    assert journal_records(folder)[-1]["kind"] == "end"
    after = ran.read_text().splitlines()[before:]
    assert after and set(after) == {second.address}  # every attempt since on the new one
    executor = json.loads((folder / "run.json").read_text())["options"]["executor"]
    assert executor["name"] == "ray" and executor["ray_address"] == second.address
