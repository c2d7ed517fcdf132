"""Executors as plugins: one settings model for the bench, the command line and run.json,
the local lanes as an executor like the others, and option errors in one line."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import ARITH, MakeBench, assert_user_error, run_forge

from forge.bench import load_bench
from forge.errors import OptionError
from forge.evaluate import evaluate
from forge.executors import (
    EXECUTORS,
    ExecutorSettings,
    LocalExecutor,
    ProcessExecutor,
    RayExecutor,
    check_executor,
)
from forge.harness import RunOutput
from forge.spec import Spec


def test_the_three_executors_are_registered_plugins() -> None:
    assert EXECUTORS.names() == ["local", "process", "ray"]
    assert [EXECUTORS.get(n) for n in EXECUTORS.names()] == [LocalExecutor, ProcessExecutor,
                                                             RayExecutor]


def test_bench_field_command_line_and_journal_build_the_same_settings(
        make_bench: MakeBench) -> None:
    path = make_bench()
    path.write_text(path.read_text(encoding="utf-8")
                    + "executor: {name: process, workers: 3}\n", encoding="utf-8")
    from_bench = load_bench(path).spec.executor
    from_cli = ExecutorSettings("process", workers=3)
    journaled = from_cli.journal_form()
    assert journaled == {"name": "process", "workers": 3, "ray_address": None}
    assert from_bench == from_cli == ExecutorSettings.model_validate(journaled)
    assert ExecutorSettings.model_validate("ray") == ExecutorSettings("ray")
    # The command line overrides the bench part by part.
    assert from_bench.override(ray_address="ray://head:10001") == ExecutorSettings(
        "process", workers=3, ray_address="ray://head:10001")


def test_bad_settings_are_option_errors_in_the_words_of_the_option() -> None:
    with pytest.raises(OptionError) as err:
        ExecutorSettings("process", workers=0)
    assert err.value.option == "--workers"
    assert str(err.value).startswith("--workers: ")
    with pytest.raises(OptionError) as err:
        check_executor(ExecutorSettings("threads"), Spec(name="python"))
    assert str(err.value) == "--executor: expected one of local, process, ray, got 'threads'"


def test_an_unknown_executor_on_the_command_line_is_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_forge(capsys, "search", ARITH, "--executor", "threads")
    assert_user_error(code, out, err, "--executor: expected one of local, process, ray")
    code, out, err = run_forge(capsys, "search", ARITH, "--proposer", "greedy")
    assert_user_error(code, out, err, "--proposer: expected one of auto, llm, optuna")


THREAD_NAME = """
import threading

def run(config, task, ctx):
    return {"output": task.expected, "trace": threading.current_thread().name}
"""

ASYNC_THREAD_NAME = """
import threading

async def run(config, task, ctx):
    return {"output": task.expected, "trace": threading.current_thread().name}
"""


@pytest.mark.parametrize(("source", "lane"), [(THREAD_NAME, "forge-lane-"),
                                              (ASYNC_THREAD_NAME, "MainThread")],
                         ids=["sync-on-thread-lanes", "async-on-the-loop"])
def test_the_local_executor_picks_its_lanes_by_the_harness(make_bench: MakeBench, source: str,
                                                           lane: str) -> None:
    bench = load_bench(make_bench(source))
    result = evaluate(bench, bench.defaults, executor=ExecutorSettings("local"))
    traces = {a.output.trace for t in result.tasks for a in t.attempts if a.output}
    assert traces and all(str(name).startswith(lane) for name in traces)
    assert result.pass_rate == 1.0


def test_a_sync_harness_with_an_async_scorer_is_judged_on_the_loop(
        make_bench: MakeBench) -> None:
    bench_path = make_bench(THREAD_NAME, scorer='{code: "judge:grade"}')
    (bench_path.parent / "judge.py").write_text(
        "import asyncio\n\nasync def grade(task, output):\n"
        "    await asyncio.sleep(0)\n    return output.output == task.expected\n",
        encoding="utf-8")
    bench = load_bench(bench_path)
    result = evaluate(bench, bench.defaults)
    assert result.pass_rate == 1.0 and result.summary()["n_unscored"] == 0


@pytest.mark.parametrize(("value", "message"), [
    ({"output": 1, "usage": {"input_tokens": -1}}, "invalid output: usage.input_tokens: "),
    ({"output": 1, "bogus": True}, "invalid output: bogus: unknown field"),
    ([1], "invalid output: expected RunOutput or dict, got list"),
    ({"metrics": {"m": float("nan")}}, "invalid output: metric 'm' is nan"),
    ({"output": threading.Lock()}, "output cannot be serialised"),
])
def test_run_output_coerce_says_what_is_wrong(value: Any, message: str) -> None:
    with pytest.raises(ValueError) as err:
        RunOutput.coerce(value)
    assert str(err.value).startswith(message)


def test_run_output_coerce_keeps_a_valid_output() -> None:
    out = RunOutput.coerce({"output": "x", "metrics": {"m": 1.0}})
    assert out == RunOutput(output="x", metrics={"m": 1.0})
    assert RunOutput.coerce(out) is out


def test_a_journaled_executor_is_the_settings_shape(tmp_path: Path) -> None:
    from forge.launch import launch_search

    launch_search(ARITH, max_steps=0, k=1, run_id="r", journals=tmp_path,
                  executor=ExecutorSettings("local", workers=2))
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["options"]["executor"] == {"name": "local", "workers": 2, "ray_address": None}
