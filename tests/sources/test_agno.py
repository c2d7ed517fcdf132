"""The agno task source: a split's tasks from a real agno.environments.Environment."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from agno_needed import need_agno

need_agno()

from forge.bench.loader import load_bench  # noqa: E402
from forge.core.task import ExpectedTool  # noqa: E402
from forge.errors import BenchError  # noqa: E402

ENVS = '''
from agno.agent import Agent
from agno.environments import Environment, Task
from agno.scorer import CodeScorer
from agno_scripted import ScriptedModel


def exact(run, expected):
    return run.content == expected


def agent():
    return Agent(model=ScriptedModel())


def env(name, tasks):
    return Environment(name=name, tasks=tasks, scorer=CodeScorer(exact), agent=agent)


DEV = env("dev", (
    Task(input="first", expected="1", id="one",
         metadata={"tags": ["easy"], "expected_tools": [{"name": "add", "args": {"a": 1}}]}),
    Task(input="second", expected="2"),
))
SPLIT = env("all", tuple(
    Task(input=f"question {i}", expected=str(i), metadata={"split": split})
    for i, split in enumerate(["dev", "dev", "val", "test", "dev"])))
UNMARKED = env("unmarked", (Task(input="a", metadata={"split": "dev"}), Task(input="b")))
NOT_AN_ENV = [1, 2]
'''


def bench(tmp_path: Path, splits: str) -> Path:
    (tmp_path / "envs.py").write_text(ENVS, encoding="utf-8")
    (tmp_path / "harness.py").write_text(
        "def run(config, task, ctx):\n    return {'output': task.expected}\n", encoding="utf-8")
    (tmp_path / "registry.yaml").write_text(
        "name: r\nsettings:\n  x: {type: bool, default: false}\n", encoding="utf-8")
    (tmp_path / "val.jsonl").write_text('{"id": "v", "input": "v", "expected": "v"}\n',
                                        encoding="utf-8")
    path = tmp_path / "bench.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: b
        harness: {{python: "harness:run"}}
        registry: registry.yaml
        splits: {splits}
        rollouts: {{k: 1}}
    """), encoding="utf-8")
    return path


def test_an_environment_s_tasks_keep_agno_s_ids_and_forge_s_metadata_keys(
        tmp_path: Path) -> None:
    loaded = load_bench(bench(tmp_path, '{dev: {agno: "envs:DEV"}, val: val.jsonl}'))
    one, two = loaded.tasks("dev")
    # Agno's ids: the declared one, else t<position> (as run_rollouts resolves them).
    assert (one.id, two.id) == ("one", "t2")
    assert (one.input, one.expected, two.expected) == ("first", "1", "2")
    assert one.tags == ["easy"]
    assert one.expected_tools == [ExpectedTool(name="add", args={"a": 1})]
    assert one.metadata["tags"] == ["easy"]
    assert two.tags == [] and two.expected_tools is None


def test_one_environment_gives_every_split_by_a_metadata_key(tmp_path: Path) -> None:
    spec = '{agno: {env: "envs:SPLIT", split_key: split}}'
    loaded = load_bench(bench(tmp_path, f"{{dev: {spec}, val: {spec}, test: {spec}}}"))
    assert [t.id for t in loaded.tasks("dev")] == ["t1", "t2", "t5"]
    assert [t.id for t in loaded.tasks("val")] == ["t3"]
    assert [t.id for t in loaded.tasks("test")] == ["t4"]


def test_a_task_without_the_split_key_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(BenchError) as err:
        load_bench(bench(tmp_path, '{dev: {agno: {env: "envs:UNMARKED", split_key: split}}}'))
    assert err.value.field == "splits.dev"
    assert "task 't2' of environment 'unmarked' has no metadata 'split'" in str(err.value)


def test_the_same_environment_twice_without_a_split_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="task id 'one' is also in split 'dev'"):
        load_bench(bench(tmp_path, '{dev: {agno: "envs:DEV"}, val: {agno: "envs:DEV"}}'))


def test_something_else_than_an_environment_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchError) as err:
        load_bench(bench(tmp_path, '{dev: {agno: "envs:NOT_AN_ENV"}}'))
    assert err.value.field == "splits.dev.agno.env"
    assert "'envs:NOT_AN_ENV' is a list; expected an agno.environments.Environment" in str(
        err.value)
