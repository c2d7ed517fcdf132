"""The ag2 task source: a split's tasks from an ``ag2.eval.Suite``, object or JSONL file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ag2_support import require_ag2, tasks, write_ag2_bench

from forge.bench.loader import load_bench
from forge.errors import BenchError
from forge.evaluation.evaluate import evaluate

SUITES = """
from ag2.eval import Suite

DEV = Suite.from_list([
    {"task_id": "lima", "inputs": {"input": "weather in Lima?", "units": "C"},
     "reference_outputs": {"answer": "sunny"}, "tags": ["city"], "metadata": {"n": 1}},
    {"inputs": {"input": "weather in Oslo?"}, "reference_outputs": {"answer": "rain"}},
], name="dev")


def made():
    return DEV


NO_INPUT = Suite.from_list([{"task_id": "x", "inputs": {"question": "?"}}])
NOT_JSON = Suite.from_list([{"task_id": "x", "inputs": {"input": "?", "when": object()}}])
NOT_A_SUITE = [1, 2]


def broken():
    raise OSError("the suite's store is down")
"""


@pytest.fixture(autouse=True)
def _ag2() -> None:
    require_ag2()


def bench(tmp_path: Path, dev: str) -> Path:
    path = write_ag2_bench(tmp_path, {"dev": [], "val": tasks("just guess", split="val")})
    (tmp_path / "suites.py").write_text(SUITES, encoding="utf-8")
    path.write_text(path.read_text().replace("dev: tasks/dev.jsonl", f"dev: {dev}"),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("spec", ['{ag2: "suites:DEV"}', '{ag2: "suites:made"}'])
def test_a_suite_s_tasks_become_the_split_s_tasks(tmp_path: Path, spec: str) -> None:
    loaded = load_bench(bench(tmp_path, spec))
    lima, oslo = loaded.tasks("dev")
    assert lima.id == "lima" and lima.input == {"input": "weather in Lima?", "units": "C"}
    assert lima.expected == {"answer": "sunny"} and lima.tags == ["city"]
    assert lima.metadata == {"n": 1}
    assert oslo.id == "task-0001"  # AG2 numbers a task without an id by its place
    # The ag2 harness asks the agent inputs["input"].
    result = evaluate(loaded, loaded.defaults, split="dev")
    answers = {t.task_id: t.attempts[0].output.output for t in result.tasks
               if t.attempts[0].output is not None}
    assert answers == {"lima": "sunny", "task-0001": "rain"}


def test_a_suite_file_in_ag2_s_jsonl_format(tmp_path: Path) -> None:
    path = bench(tmp_path, "{ag2: {jsonl: suite.jsonl}}")
    (tmp_path / "suite.jsonl").write_text(
        json.dumps({"task_id": "a", "inputs": {"input": "weather in Lima?"},
                    "reference_outputs": {"answer": "sunny"}, "tags": "city"}) + "\n\n"
        + json.dumps({"inputs": {"input": "weather in Oslo?"}}) + "\n", encoding="utf-8")
    first, second = load_bench(path).tasks("dev")
    assert (first.id, first.tags, first.expected) == ("a", ["city"], {"answer": "sunny"})
    assert (second.id, second.expected) == ("task-0001", None)


@pytest.mark.parametrize(("spec", "message"), [
    ('{ag2: "suites:NO_INPUT"}', "suite task 'x' (index 0) has no 'input' in its inputs"),
    ('{ag2: "suites:NOT_JSON"}', "suite task 'x' (index 0) is not JSON data"),
    ('{ag2: "suites:NOT_A_SUITE"}', "suites:NOT_A_SUITE is a list, expected an ag2.eval.Suite"),
    ('{ag2: "suites:broken"}', "suites:broken() raised OSError: the suite's store is down"),
    ('{ag2: "suites:nosuch"}', "has no attribute 'nosuch'"),
    ("{ag2: {target: 'suites:DEV', jsonl: x.jsonl}}", "give one of target"),
])
def test_a_suite_that_cannot_be_read_is_one_line_naming_the_split(
        tmp_path: Path, spec: str, message: str) -> None:
    with pytest.raises(BenchError) as err:
        load_bench(bench(tmp_path, spec))
    assert message in str(err.value)
    assert str(err.value.field).startswith("splits.dev.ag2")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("content", "message", "line"), [
    ('{"inputs": {"input": "a"}}\n[1]\n', "expected a JSON object per line", 2),
    ('{"inputs": {"input": "a"}}\n{"inputs": 3}\n', "task at index 1 is missing required "
                                                      "field 'inputs'", None),
    ("{oops\n", "malformed JSON", 1),
])
def test_a_bad_suite_file_names_the_file_and_line(tmp_path: Path, content: str, message: str,
                                                  line: int | None) -> None:
    path = bench(tmp_path, "{ag2: {jsonl: suite.jsonl}}")
    (tmp_path / "suite.jsonl").write_text(content, encoding="utf-8")
    with pytest.raises(BenchError) as err:
        load_bench(path)
    assert message in str(err.value)
    assert err.value.file == str(tmp_path / "suite.jsonl") and err.value.line == line
