"""Helpers to make tasks and outputs and to score them as the rollout engine does."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from forge.core.spec import BuildContext
from forge.core.task import ExpectedTool, Task
from forge.harness import RunOutput, ToolCall
from forge.scorers import SCORERS, Score, Scorer

Build = Callable[[Any], Scorer]
WriteModule = Callable[[str, str], Path]

# For scorers that import nothing (hypothesis tests cannot use the tmp_path fixtures).
PLAIN = BuildContext(base_dir=Path.cwd(), file=Path("bench.yaml"), field="scorer")


def make(value: Any) -> Scorer:
    """Build a scorer from its YAML form in :data:`PLAIN`."""
    return SCORERS.build(SCORERS.parse(value, PLAIN), PLAIN)


def judge(scorer: Scorer, task: Task, output: RunOutput) -> Score:
    """Score one attempt the way the rollout engine does: await the verdict if needed."""
    result = scorer.score(task, output)
    if inspect.isawaitable(result):
        result = asyncio.run(_wait(result))
    assert isinstance(result, Score)
    return result


async def _wait(pending: Awaitable[Score]) -> Score:
    return await pending


def task(expected: Any = None, *, tools: list[dict[str, Any]] | None = None) -> Task:
    return Task(id="t1", input="question", expected=expected,
                expected_tools=None if tools is None else [ExpectedTool(**t) for t in tools])


def out(output: Any = None, *, calls: list[dict[str, Any]] | None = None) -> RunOutput:
    return RunOutput(output=output, tool_calls=[ToolCall(**c) for c in calls or []])
