"""The ``forge`` process (forge.cli): ``python -m forge``, exit codes, one-line errors on
stderr, and Ctrl-C exiting 130 without saving."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import conftest
import pytest
from conftest import ARITH, MakeBench, assert_user_error

from forge.results.model import SUMMARY_KEYS, load_result

BENCH = str(ARITH)


def run_forge(*args: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "forge", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def test_python_dash_m_forge_help() -> None:
    proc = run_forge("--help")
    assert proc.returncode == 0
    for command in ("eval", "diff", "registry", "schema"):
        assert command in proc.stdout


def test_end_to_end_eval_json_and_error(tmp_path: Path) -> None:
    proc = run_forge("eval", BENCH, "--json", "-k", "1", "--save", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stderr
    assert tuple(json.loads(proc.stdout)) == (*SUMMARY_KEYS, "power")
    assert load_result(tmp_path / "r.json").k == 1

    proc = run_forge("eval", BENCH, "--set", "effort=42")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "forge: error: --set: effort: 42 is outside [1, 5]"]


SLOW_HARNESS = """
import time
from pathlib import Path

def run(config, task, ctx):
    Path(__file__).with_name("started").touch()
    time.sleep(2)
    return {"output": task.expected}
"""


@pytest.mark.timeout(60)
def test_ctrl_c_exits_130_and_saves_nothing(make_bench: MakeBench) -> None:
    path = make_bench(SLOW_HARNESS, rollouts={"k": 2, "concurrency": 1, "timeout_s": 30})
    folder = path.parent
    out = folder / "out.json"
    before = sorted(p.name for p in folder.iterdir())
    proc = subprocess.Popen([sys.executable, "-m", "forge", "eval", str(path), "--save",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 30
        while not (folder / "started").exists():  # the first attempt is running
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the evaluation never started"
            time.sleep(0.05)
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    assert time.monotonic() - t0 < 5  # it did not wait for the sleeping attempt
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    assert not out.exists()
    after = sorted(p.name for p in folder.iterdir())
    assert [n for n in after if n not in before] in (["started"],
                                                    ["__pycache__", "started"])


@pytest.mark.parametrize(("args", "expected"), [
    (["-k", "1000000000"], "Invalid value for '-k': must be less than or equal to 1000"),
    (["-k", "zero"], "Invalid value for '-k': expected an integer (got 'zero')"),
    (["--concurrency", "0"], "Invalid value for '--concurrency': must be greater than or "
                             "equal to 1"),
    (["--timeout", "abc"], "Invalid value for '--timeout': expected a number"),
])
def test_an_option_typer_checks_with_pydantic_is_refused_in_forges_words(
        capsys: pytest.CaptureFixture[str], args: list[str], expected: str) -> None:
    code, out, err = conftest.run_forge(capsys, "eval", ARITH, *args, "--task", "x")
    line = assert_user_error(code, out, err, expected)
    assert "Input should" not in line


def test_an_error_on_line_100_says_line_100(make_bench: MakeBench,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # rich reads ":100:" as an emoji code: the error named the line as a picture.
    tasks = {"dev": [{"id": f"d{i}", "input": i, "expected": i} for i in range(99)],
             "val": [{"id": "v", "input": "v"}], "test": [{"id": "t", "input": "t"}]}
    bench = make_bench(tasks=tasks)
    dev = bench.parent / "tasks" / "dev.jsonl"
    dev.write_text(dev.read_text(encoding="utf-8") + "{not json}\n", encoding="utf-8")
    code, out, err = conftest.run_forge(capsys, "eval", bench)
    assert_user_error(code, out, err, f"{dev}:100: malformed JSON")


@pytest.mark.parametrize("command", [["registry", "show"], ["registry", "show", "--json"]])
def test_running_out_of_memory_is_one_line_and_exit_1(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: list[str]) -> None:
    import forge._util.digest

    def refuse(value: object) -> str:
        # Where the report's registry ran out: its digest, as canonical JSON.
        raise MemoryError

    monkeypatch.setattr(forge._util.digest, "canonical_json", refuse)
    code, _, err = conftest.run_forge(capsys, *command, ARITH / "registry.yaml")
    assert code == 1
    assert "Traceback" not in err
    assert err.splitlines() == ["forge: out of memory: the command needed more memory than "
                                "the system would give it (MemoryError), and stopped"]
