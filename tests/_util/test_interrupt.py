"""SIGTERM and SIGINT end everything forge started, and a resume reaches the same decisions.

Each case starts a real ``forge`` process under ``reaper.py`` (a child subreaper, so
whatever forge leaves behind is still found after it exits, however it was
started), waits until attempts hang in its harness (command children that ignore
SIGTERM and leave a grandchild, worker pools, ``--executor process`` workers),
signals it as ``kill`` does (SIGTERM to the pid) or as a terminal's Ctrl-C does
(SIGINT to its process group), and counts the processes left once it exited. The
searches hang only while a ``hold`` file exists, so that the same search run
without it is the uninterrupted baseline a resume must reproduce.
"""

from __future__ import annotations

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
from conftest import search_tasks, stored_rows, write_search_bench

from forge._util.interrupt import Interrupted, cancelling, handling
from forge.cli import main
from forge.errors import RunInterrupted

REAPER = Path(__file__).resolve().parents[1] / "reaper.py"
SEED = 11
#: Two steps of one candidate each: the least that has decisions to reproduce.
SEARCH = ["--proposer", "sweep", "--candidates", "1"]
_VOLATILE = {"at", "elapsed_s", "run_id"}

#: The outcome of an attempt: boost is a real gain. While ``hold`` exists, attempts of
#: any config but the start (boost off, knob 2) hang instead, recording their pids.
DECIDE = """
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(seed).random() < p
    answer = {"output": expected if ok else "wrong"}
"""

PYTHON_HARNESS = """
import os
import time

HERE = _Path(__file__).parent


def run(config, task, ctx):
    if (config["boost"] or config["knob"] != 2) and (HERE / "hold").exists():
        with open(HERE / "held", "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(600)
    seed, expected = ctx.seed, task.expected
""" + DECIDE + """
    return answer
"""

#: A command child: one attempt per process, or (``WORKER``) one per line. A held
#: attempt ignores SIGTERM and leaves a grandchild in its process group.
COMMAND_AGENT = """
import json, os, random, signal, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).parent
WORKER = {worker}


def attempt(req):
    config = req["config"]
    if (config["boost"] or config["knob"] != 2) and (HERE / "hold").exists():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(HERE / "held", "a") as f:
            f.write(f"{os.getpid()} {g.pid}\\n")
        time.sleep(600)
    seed, expected = req["ctx"]["seed"], req["task"]["expected"]
""" + DECIDE + """
    if WORKER:
        answer["id"] = req["id"]
    return json.dumps(answer)


if WORKER:
    for line in sys.stdin:
        print(attempt(json.loads(line)), flush=True)
else:
    print(attempt(json.load(sys.stdin)))
"""


def write_bench(root: Path, kind: str) -> Path:
    """A search bench whose harness is ``python`` (run by ``--executor process``),
    ``command`` (a process per attempt) or ``worker`` (a command worker pool)."""
    bench = write_search_bench(root, PYTHON_HARNESS, tasks=search_tasks(8, 4, 4), k=2,
                               search={"max_steps": 2, "patience": 2})
    if kind != "python":
        (root / "agent.py").write_text(COMMAND_AGENT.replace("{worker}", str(kind == "worker")),
                                       encoding="utf-8")
        spec = {"argv": [sys.executable, "agent.py"], "worker": kind == "worker",
                "cancel_timeout_s": 0.5}
        text = bench.read_text(encoding="utf-8").replace(
            'harness: {python: "harness:run"}', f"harness: {json.dumps({'command': spec})}")
        bench.write_text(text, encoding="utf-8")
    return bench


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


def stable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in _VOLATILE} for r in rows]


def forge(*args: object) -> list[str]:
    return [sys.executable, "-m", "forge", *(str(a) for a in args)]


def signalled(out: Path, command: list[str], ready: Callable[[], bool], sig: signal.Signals,
              *, group: bool) -> dict[str, Any]:
    """Run ``command`` under the reaper, signal it once ``ready()``, and return the
    reaper's report (exit status, survivors) with forge's stdout and stderr."""
    out.mkdir(parents=True)
    reaper = subprocess.Popen([sys.executable, str(REAPER), str(out), "--", *command])
    try:
        deadline = time.monotonic() + 90
        while not ((out / "pid").exists() and ready()):
            if reaper.poll() is not None:
                pytest.fail("forge ended before the signal: "
                            + (out / "stderr").read_text(errors="replace"))
            assert time.monotonic() < deadline, "the harness never got to hang"
            time.sleep(0.05)
        time.sleep(0.3)  # the other lanes reach their hang too
        pid = int((out / "pid").read_text())
        if group:
            os.killpg(pid, sig)  # a terminal's Ctrl-C reaches the whole foreground group
        else:
            os.kill(pid, sig)
        assert reaper.wait(timeout=60) == 0
    finally:
        if reaper.poll() is None:
            reaper.kill()
            reaper.wait()
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    report["stdout"] = (out / "stdout").read_text(errors="replace")
    report["stderr"] = (out / "stderr").read_text(errors="replace")
    return report


def held(bench: Path) -> list[int]:
    path = bench.parent / "held"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def assert_clean_exit(report: dict[str, Any], sig: signal.Signals, then: str) -> None:
    assert report["survivors"] == [], report["survivors"]
    assert report["returncode"] == 128 + sig
    lines = report["stderr"].strip().splitlines()
    # One line: no traceback, no asyncio noise, no worker's KeyboardInterrupt.
    assert lines == [f"forge: interrupted by {sig.name}; {then}"], report["stderr"]


CASES = [("command", signal.SIGTERM, False), ("python", signal.SIGINT, True)]


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Each kind of bench searched without interruption (here: a forge process takes
    seconds to import on a busy machine): its journal records."""
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in sorted({kind for kind, _, _ in CASES}):
        root = tmp_path_factory.mktemp(f"base-{kind}")
        bench = write_bench(root / "bench", kind)
        extra = ["--executor", "process", "--workers", "2"] if kind == "python" else []
        assert main(["search", str(bench), "--journals", str(root / "j"), "--run-id", "b",
                     "--seed", str(SEED), *SEARCH, *extra, "--json"]) == 0
        out[kind] = records(root / "j" / "b")
        assert sum(r["kind"] == "candidate" for r in out[kind]) == 2
    return out


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("kind", "sig", "group"), CASES,
                         ids=[f"{k}-{s.name}{'-group' if g else ''}" for k, s, g in CASES])
def test_a_signalled_search_leaves_nothing_running_and_resumes_to_the_same_decisions(
        tmp_path: Path, baselines: dict[str, list[dict[str, Any]]], kind: str,
        sig: signal.Signals, group: bool) -> None:
    bench = write_bench(tmp_path / "bench", kind)
    (bench.parent / "hold").touch()
    journals = tmp_path / "j"
    extra = ["--executor", "process", "--workers", "2"] if kind == "python" else []
    report = signalled(tmp_path / "run", forge("search", bench, "--journals", journals,
                                                "--run-id", "r", "--seed", SEED,
                                                *SEARCH, *extra),
                       lambda: bool(held(bench)), sig, group=group)
    assert_clean_exit(report, sig, f"resume with: forge search --resume r --journals {journals}")
    assert held(bench)  # attempts were hanging when the signal came
    folder = journals / "r"
    written = records(folder)
    assert written and not any(r["kind"] == "end" for r in written)
    stored = stored_rows(folder)
    assert stored and all(a["result"]["stop_reason"] == "completed" for a in stored)

    (bench.parent / "hold").unlink()
    assert main(["search", "--resume", "r", "--journals", str(journals), "--json"]) == 0
    after = records(folder)
    assert after[:len(written)] == written  # nothing already written was rewritten
    assert stable(after) == stable(baselines[kind])


#: With the search cases, each kind of harness and each signal once.
EVAL_CASES = [("worker", signal.SIGINT, True), ("python", signal.SIGTERM, False)]


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("kind", "sig", "group"), EVAL_CASES,
                         ids=[f"{k}-{s.name}{'-group' if g else ''}" for k, s, g in EVAL_CASES])
def test_a_signalled_eval_leaves_nothing_running_and_saves_nothing(
        tmp_path: Path, kind: str, sig: signal.Signals, group: bool) -> None:
    bench = write_bench(tmp_path / "bench", kind)
    (bench.parent / "hold").touch()
    save = tmp_path / "result.json"
    extra = ["--executor", "process", "--workers", "2"] if kind == "python" else []
    report = signalled(tmp_path / "run", forge("eval", bench, "--set", "boost=true",
                                                "--save", save, *extra),
                       lambda: len(held(bench)) >= 2, sig, group=group)
    assert_clean_exit(report, sig, "nothing was saved")
    assert not save.exists()
    assert report["stdout"] == ""


# -- the pieces, in this process ---------------------------------------------------------------

def test_the_exit_line_and_status_name_the_signal() -> None:
    term = RunInterrupted(signal.SIGTERM, "forge search --resume r")
    assert (str(term), term.exit_status) == (
        "interrupted by SIGTERM; resume with: forge search --resume r", 143)
    interrupted = RunInterrupted(signal.SIGINT)
    assert (str(interrupted), interrupted.exit_status) == (
        "interrupted by SIGINT; nothing was saved", 130)


def test_handling_raises_once_then_calls_on_second_and_restores_the_handlers() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    seconds: list[int] = []
    with handling(on_second=lambda: seconds.append(1)):
        with pytest.raises(Interrupted) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs here, in the main thread
        assert caught.value.signum == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGINT)  # the cleanup of the first is under way
        time.sleep(0.1)
        assert seconds == [1]
    assert {s: signal.getsignal(s) for s in before} == before


def test_cancelling_takes_the_first_signal_on_the_loop_and_hands_the_next_back() -> None:
    import asyncio

    cancelled: list[bool] = []

    async def main() -> str:
        done = asyncio.Event()

        def cancel() -> None:
            cancelled.append(True)
            done.set()

        async def run() -> str:
            os.kill(os.getpid(), signal.SIGTERM)
            await done.wait()
            # The first was taken; the handler before (handling's) has the next.
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
            return "stopped"

        return await cancelling(cancel, run())

    with handling():
        assert asyncio.run(main()) == "stopped"
    assert cancelled == [True]
