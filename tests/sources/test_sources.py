"""A split's tasks from a task source (forge.sources): built from the bench's spec, and
checked like a JSONL file's lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from forge.bench.loader import load_bench
from forge.core.spec import BuildContext
from forge.errors import BenchError
from forge.sources import SOURCES, TaskSource


class _Counted(BaseModel):
    n: int
    repeat_id: bool = False


@SOURCES.register("counted-for-tests")
class Counted(TaskSource):
    """``n`` tasks a split, ids prefixed by the split (or all the same id)."""

    options_model = _Counted

    def __init__(self, options: _Counted) -> None:
        self.options = options

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Counted:
        return cls(_Counted.model_validate(args))

    def tasks(self, split: str) -> Sequence[Mapping[str, Any]]:
        return [{"id": f"{split}-{0 if self.options.repeat_id else i}",
                 "input": {"q": f"{split} {i}"}, "expected": "ok"}
                for i in range(self.options.n)]


def bench(tmp_path: Path, dev: str) -> Path:
    (tmp_path / "registry.yaml").write_text(
        "name: r\nsettings:\n  x: {type: bool, default: false}\n", encoding="utf-8")
    (tmp_path / "harness.py").write_text(
        "def run(config, task, ctx):\n    return {'output': 'ok'}\n", encoding="utf-8")
    (tmp_path / "val.jsonl").write_text(
        '{"id": "v1", "input": "x", "expected": "ok"}\n', encoding="utf-8")
    path = tmp_path / "bench.yaml"
    path.write_text(f"name: b\nharness: {{python: 'harness:run'}}\nregistry: registry.yaml\n"
                    f"splits: {{dev: {dev}, val: val.jsonl}}\nrollouts: {{k: 1}}\n",
                    encoding="utf-8")
    return path


def test_a_split_named_by_a_task_source_loads_its_tasks_beside_a_file(tmp_path: Path) -> None:
    loaded = load_bench(bench(tmp_path, "{counted-for-tests: {n: 3}}"))
    assert [t.id for t in loaded.tasks("dev")] == ["dev-0", "dev-1", "dev-2"]
    assert [t.id for t in loaded.tasks("val")] == ["v1"]


def test_a_source_s_tasks_are_checked_like_a_file_s_lines(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="duplicate task id 'dev-0'"):
        load_bench(bench(tmp_path, "{counted-for-tests: {n: 2, repeat_id: true}}"))


def test_an_unknown_source_is_refused_naming_the_split(tmp_path: Path) -> None:
    with pytest.raises(BenchError) as err:
        load_bench(bench(tmp_path, "{nosuch: x}"))
    assert "unknown task source 'nosuch'" in str(err.value)
    assert err.value.field == "splits.dev"


def test_a_split_that_is_neither_a_path_nor_a_source_is_refused_in_the_bench_s_words(
        tmp_path: Path) -> None:
    with pytest.raises(BenchError) as err:
        load_bench(bench(tmp_path, "[1, 2]"))
    assert ("split 'dev': expected a JSONL file path or a task source such as "
            "{agno: 'envs:support'}, got [1, 2]") in str(err.value)
