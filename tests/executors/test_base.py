"""Executors as plugins (forge.executors.base): one settings model for the bench, the
command line and run.json, every executor registered, option errors in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ARITH, MakeBench, assert_user_error, run_forge

from forge.bench.loader import load_bench
from forge.core.spec import Spec
from forge.errors import BenchError, OptionError
from forge.executors import (
    EXECUTORS,
    ExecutorSettings,
    LocalExecutor,
    ProcessExecutor,
    RayExecutor,
    check_executor,
)


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


def test_a_journaled_executor_is_the_settings_shape(tmp_path: Path) -> None:
    from forge.search.launch import launch_search

    launch_search(ARITH, max_steps=0, k=1, run_id="r", journals=tmp_path,
                  executor=ExecutorSettings("local", workers=2))
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["options"]["executor"] == {"name": "local", "workers": 2, "ray_address": None}


def test_the_bench_may_name_its_executor(make_bench: MakeBench) -> None:
    path = make_bench()
    text = path.read_text()
    path.write_text(text + "executor: process\n")
    assert load_bench(path).executor_settings() == ExecutorSettings("process")
    path.write_text(text + "executor: {name: process, workers: 2}\n")
    bench = load_bench(path)
    assert bench.executor_settings() == ExecutorSettings("process", workers=2)
    # The command line overrides the bench, part by part.
    assert bench.executor_settings("local") == ExecutorSettings("local", workers=2)
    path.write_text(text + "executor: threads\n")
    with pytest.raises(BenchError):
        load_bench(path)
