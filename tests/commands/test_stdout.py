"""``--json`` stays one JSON value whatever a python harness prints, with every executor;
what an attempt printed is kept with it, bounded (forge.commands._stdout, forge._util.printed).

Each case runs ``python -m forge`` as a process: what is at stake is the process's
descriptor 1, which an in-process run under capsys never shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import search_tasks, stored_results, write_bench, write_search_bench

from forge._util.bounds import MAX_PRINTED_CHARS
from forge.results.model import SUMMARY_KEYS, load_result

#: Everything a harness can do to stdout: print when imported, print and write text
#: that is not JSON in an attempt, print past the bound, write below sys.stdout (to
#: descriptor 1, from a child process that inherits it) and from a thread of its own.
PRINTING = """
import os
import subprocess
import sys
import threading

print("harness imported")

def run(config, task, ctx):
    print("debug:", task.id, ctx.attempt)
    sys.stdout.write("{not json\\n")
    if task.id.endswith("1"):
        print("x" * 20000)
    os.write(1, b"raw descriptor 1\\n")
    # The interpreter, not `echo` from PATH: in an activated virtualenv a package's
    # console script may be named echo (nlip-server 0.1.3 installs a broken one).
    subprocess.run([sys.executable, "-c", "print('from a child')"], check=True)
    t = threading.Thread(target=print, args=("from a thread of its own",))
    t.start()
    t.join()
    return {"output": task.expected}
"""

#: The same from an async harness (the local executor's coroutine lanes).
ASYNC_PRINTING = PRINTING.replace("def run(", "async def run(")

EXECUTORS = ["local", "process", pytest.param("ray", marks=[pytest.mark.ray, pytest.mark.slow])]


def need_ray(executor: str) -> None:
    """Without Ray a Ray case skips, except in CI, which installs forge[ray]."""
    if executor != "ray":
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must run the Ray tests: install forge[ray]")
        pytest.skip("ray is not installed (forge[ray])")


def forge(*args: object, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "forge", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def one_json_value(stdout: str) -> Any:
    """The whole of stdout as one JSON value (json.loads refuses anything around it)."""
    return json.loads(stdout)


def check_printed(attempt: dict[str, Any]) -> None:
    """An attempt's stdout: what the harness printed through sys.stdout, bounded."""
    text = attempt["stdout"]
    start = f"debug: {attempt['task_id']} {attempt['attempt']}\n{{not json\n"
    if attempt["task_id"].endswith("1"):
        whole = start + "x" * 20000 + "\n"
        assert text == (f"[{len(whole) - MAX_PRINTED_CHARS} earlier bytes dropped]\n"
                        + whole[-MAX_PRINTED_CHARS:])
    else:
        assert text == start
    # Below sys.stdout, or outside the attempt: not the attempt's, and not on stdout.
    for other in ("raw descriptor 1", "from a child", "from a thread", "imported"):
        assert other not in text


@pytest.mark.parametrize("executor", EXECUTORS)
def test_eval_json_is_one_value_whatever_the_harness_prints(tmp_path: Path,
                                                            executor: str) -> None:
    need_ray(executor)
    bench = write_bench(tmp_path / "bench", PRINTING)
    saved = tmp_path / "result.json"
    proc = forge("eval", bench, "--json", "--executor", executor, "--workers", "2",
                 "--save", saved)
    assert proc.returncode == 0, proc.stderr
    summary = one_json_value(proc.stdout)
    assert tuple(summary) == (*SUMMARY_KEYS, "power")
    assert summary["n_scored"] == summary["n_attempts"] == 6
    attempts = json.loads(saved.read_text(encoding="utf-8"))["tasks"]
    for task in attempts:
        for attempt in task["attempts"]:
            check_printed(attempt)
    assert load_result(saved).attempts[0].stdout is not None
    assert "forge: 6 of 6 attempts printed on stdout; what each printed is in" in proc.stderr
    if executor != "ray":  # a Ray actor's own output goes to Ray's log files
        assert proc.stderr.count("raw descriptor 1") == 6
        assert proc.stderr.count("from a child") == 6
        assert proc.stderr.count("from a thread of its own") == 6
        assert "harness imported" in proc.stderr


def test_an_async_harness_that_prints_keeps_eval_json_one_value(tmp_path: Path) -> None:
    bench = write_bench(tmp_path / "bench", ASYNC_PRINTING)
    saved = tmp_path / "result.json"
    proc = forge("eval", bench, "--json", "--save", saved)
    assert proc.returncode == 0, proc.stderr
    assert one_json_value(proc.stdout)["n_scored"] == 6
    for attempt in load_result(saved).attempts:
        check_printed(attempt.model_dump(mode="json"))
    assert proc.stderr.count("raw descriptor 1") == 6


def test_without_json_the_table_is_not_mixed_with_what_attempts_print(tmp_path: Path) -> None:
    bench = write_bench(tmp_path / "bench", PRINTING)
    proc = forge("eval", bench)
    assert proc.returncode == 0, proc.stderr
    assert "pass rate" in proc.stdout
    assert "debug:" not in proc.stdout and "not json" not in proc.stdout
    assert "--save FILE keeps what each printed" in proc.stderr


SEARCH_PRINTING = """
import os

print("harness imported")

def run(config, task, ctx):
    print("debug:", task.id, ctx.attempt, config["boost"])
    os.write(1, b"raw descriptor 1\\n")
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_search_json_is_one_value_whatever_the_harness_prints(tmp_path: Path,
                                                              executor: str) -> None:
    need_ray(executor)
    bench = write_search_bench(tmp_path / "bench", SEARCH_PRINTING, tasks=search_tasks(4, 4, 4),
                               k=2, search={"max_steps": 1, "patience": 1})
    journals = tmp_path / "j"
    proc = forge("search", bench, "--json", "--journals", journals, "--run-id", "r",
                 "--seed", "1", "--proposer", "sweep", "--candidates", "1",
                 "--executor", executor, "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    outcome = one_json_value(proc.stdout)
    assert outcome["run_id"] == "r"
    results = stored_results(journals / "r")
    assert results
    for r in results:
        assert r["stdout"].startswith(f"debug: {r['task_id']} {r['attempt']} ")
        assert "raw descriptor 1" not in r["stdout"]
    if executor != "ray":
        assert "raw descriptor 1" in proc.stderr and "harness imported" in proc.stderr
