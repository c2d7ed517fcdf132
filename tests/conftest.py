"""Shared fixtures: the example ``arith`` bench and a factory for small throwaway benches.

``make_bench`` writes a complete bench (bench.yaml, registry.yaml, harness.py and
three split files) into the test's ``tmp_path``, so a test can give forge a harness
that hangs, raises or returns garbage and watch what forge does with it.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from forge.bench import Bench, load_bench
from forge.evaluate import evaluate
from forge.results import EvalResult

ROOT = Path(__file__).resolve().parent
ARITH = ROOT / "benches" / "arith"

#: The registry every ``make_bench`` bench uses.
MINI_REGISTRY = """\
name: mini
settings:
  effort: {type: int, min: 1, max: 5, default: 1, description: "how hard to try"}
  mode:   {type: enum, choices: [fast, careful], default: fast}
"""

#: A harness that answers every task correctly (for the ``exact`` scorer).
ECHO_HARNESS = """
def run(config, task, ctx):
    return {"output": task.expected}
"""


def default_tasks() -> dict[str, list[dict[str, Any]]]:
    """Three dev tasks, one val and one test; inputs distinct across splits."""
    def task(split: str, i: int) -> dict[str, Any]:
        return {"id": f"{split}-{i}", "input": {"q": f"{split} question {i}"},
                "expected": f"{split} answer {i}"}

    return {"dev": [task("dev", i) for i in range(3)], "val": [task("val", 0)],
            "test": [task("test", 0)]}


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(dict(r)) + "\n" for r in rows), encoding="utf-8")


class MakeBench(Protocol):
    def __call__(self, harness_source: str = ..., *,
                 tasks: Mapping[str, Sequence[Mapping[str, Any]]] | None = ...,
                 scorer: str = ..., rollouts: Mapping[str, Any] | None = ...,
                 folder: str = ..., name: str = ...) -> Path: ...


def write_bench(root: Path, harness_source: str = ECHO_HARNESS, *,
                tasks: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                scorer: str = "exact", rollouts: Mapping[str, Any] | None = None,
                name: str = "mini") -> Path:
    """Write a complete bench into ``root``; returns the bench file.

    ``scorer`` is written verbatim as the YAML value of ``scorer:``. The bench file
    has one field per line, in the order name, harness, registry, splits (one line),
    rollouts, scorer, so tests can point at a line.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "registry.yaml").write_text(MINI_REGISTRY, encoding="utf-8")
    (root / "harness.py").write_text(textwrap.dedent(harness_source), encoding="utf-8")
    splits = default_tasks() if tasks is None else tasks
    for split, rows in splits.items():
        write_jsonl(root / "tasks" / f"{split}.jsonl", rows)
    settings = {"k": 2, "concurrency": 4, "timeout_s": 5.0, **(rollouts or {})}
    split_map = ", ".join(f"{s}: tasks/{s}.jsonl" for s in splits)
    bench = root / "bench.yaml"
    bench.write_text(
        f"name: {name}\n"
        'harness: {python: "harness:run"}\n'
        "registry: registry.yaml\n"
        f"splits: {{{split_map}}}\n"
        f"rollouts: {json.dumps(settings)}\n"
        f"scorer: {scorer}\n",
        encoding="utf-8",
    )
    return bench


def line_of(path: Path, startswith: str) -> int:
    """1-based number of the first line of ``path`` that starts with ``startswith``."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith(startswith):
            return number
    raise AssertionError(f"no line starting with {startswith!r} in {path}")


@pytest.fixture
def make_bench(tmp_path: Path) -> MakeBench:
    """``make_bench(harness_source, tasks=..., scorer=..., rollouts=..., folder=...)``."""

    def make(harness_source: str = ECHO_HARNESS, *,
             tasks: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
             scorer: str = "exact", rollouts: Mapping[str, Any] | None = None,
             folder: str = "bench", name: str = "mini") -> Path:
        return write_bench(tmp_path / folder, harness_source, tasks=tasks, scorer=scorer,
                           rollouts=rollouts, name=name)

    return make


@pytest.fixture(scope="session")
def arith_bench_path() -> Path:
    return ARITH


@pytest.fixture
def arith_bench(arith_bench_path: Path) -> Bench:
    # Loaded per test: other tests load benches with their own ``harness`` module.
    return load_bench(arith_bench_path)


@pytest.fixture
def arith_result(arith_bench: Bench) -> EvalResult:
    """The arith bench's default config on dev, k=2 (a few hundredths of a second)."""
    return evaluate(arith_bench, arith_bench.defaults, k=2)
