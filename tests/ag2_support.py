"""What the tests of forge's AG2 plugins share: the package check, and a bench whose
harness is a real ``ag2.Agent`` with real tools and a model scripted by
``ag2.testing.TestConfig``.

The agents (``AGENTS``, written into each test bench as ``agents.py``) answer weather
questions; ``TestConfig`` scripts the model, one script per question (``SCRIPTS``), so
every task of a bench gets its own turns: tool calls, answers, a failing model call.
Only the model is scripted: the agent, its tools, its stream and AG2's tool execution
are the real ones.
"""

from __future__ import annotations

import importlib.util
import json
import os
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import write_bench


def require_ag2() -> None:
    """Skip without AG2, except in CI, which installs ``forge[ag2]``: there it fails."""
    if importlib.util.find_spec("ag2") is not None:
        return
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail("CI is set but ag2 is not installed; run.py test installs forge[ag2]")
    pytest.skip("ag2 is not installed (pip install 'forge[ag2]'); CI runs this test")


REGISTRY = """\
name: ag2-tests
settings:
  tools:             {type: bool, default: true, description: "give the agent its tools"}
  raise_tool_errors: {type: bool, default: false,
                      description: "the model client re-raises a tool's error"}
"""

AGENTS = '''
"""Agents for forge's tests: ag2.Agent with real tools, the model scripted per question."""

import asyncio
import json
import time

from ag2 import Agent
from ag2.config import ModelConfig, ModelProvider
from ag2.events import ModelMessage, ModelRequest, ModelResponse, TextInput, ToolCallEvent, Usage
from ag2.testing import TestConfig
from pydantic import BaseModel

#: What the tools did, in this process: "slow started", "slow cancelled", ...
EVENTS = []
#: Every config a factory was called with (the copies forge handed it).
CONFIGS = []


def lookup(city: str) -> dict:
    """The weather in a city."""
    EVENTS.append(f"lookup {city}")
    if city == "Atlantis":
        raise KeyError("no such city: Atlantis")
    return {"city": city, "sky": "sunny" if city == "Lima" else "rain", "temp": 21}


async def slow(seconds: float) -> str:
    """Waits, cooperatively."""
    EVENTS.append("slow started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        EVENTS.append("slow cancelled")
        raise
    return "done"


def blocking(seconds: float) -> str:
    """Blocks its thread."""
    EVENTS.append("blocking started")
    time.sleep(seconds)
    return "done"


def said(text, prompt=10, completion=3):
    return ModelResponse(ModelMessage(text), model="scripted", finish_reason="stop",
                         usage=Usage(prompt_tokens=prompt, completion_tokens=completion))


def call(name, **arguments):
    return ToolCallEvent(name, arguments=json.dumps(arguments))


SCRIPTS = {
    "weather in Lima?": [call("lookup", city="Lima"), said("sunny", 30, 4)],
    "weather in Oslo?": [call("lookup", city="Oslo"), said("rain", 30, 4)],
    "weather in Atlantis?": [call("lookup", city="Atlantis"), said("unknown", 30, 4)],
    "weather in both?": [[call("lookup", city="Lima"), call("lookup", city="Oslo")],
                         said("sunny, rain", 50, 6)],
    "just guess": [said("sunny", 8, 2)],
    "hang in a tool": [call("slow", seconds=60), said("late")],
    "block in a tool": [call("blocking", seconds=3), said("late")],
    "model fails": [RuntimeError("model endpoint down")],
    "huge answer": [said("x" * (17 * 2**20))],
    "unknown tool": [call("nope"), said("ok")],
    "forecast": [said(\'{"sky": "sunny", "temp": 21}\')],
    "bad forecast": [said("it will be sunny")],
}


class PerQuestion(ModelConfig):
    """TestConfig, its script chosen by the question the agent is asked."""

    def __init__(self, raise_tool_errors=False):
        self.raise_tool_errors = raise_tool_errors

    @property
    def provider(self):
        return ModelProvider.OPENAI

    @property
    def model(self):
        return "scripted"

    def copy(self):
        return self

    def create(self):
        return _Dispatch(self.raise_tool_errors)


class _Dispatch:
    def __init__(self, raise_tool_errors):
        self.raise_tool_errors = raise_tool_errors
        self.client = None

    async def __call__(self, messages, context, **kwargs):
        if self.client is None:
            request = next(m for m in messages if isinstance(m, ModelRequest))
            question = " ".join(p.content for p in request.parts if isinstance(p, TextInput))
            script = SCRIPTS[question]
            self.client = TestConfig(*script, raise_tool_errors=self.raise_tool_errors).create()
        return await self.client(messages, context, **kwargs)


def make_agent(config):
    CONFIGS.append(dict(config))
    config["tools"] = "scribbled"  # forge's copy is private: the next attempt never sees it
    return Agent("weather", "You answer weather questions.",
                 config=PerQuestion(raise_tool_errors=config["raise_tool_errors"]),
                 tools=[lookup, slow, blocking])


async def make_agent_async(config):
    await asyncio.sleep(0)
    return make_agent(config)


def make_seeded(config, ctx):
    return Agent("seeded", config=TestConfig(said(f"seed {ctx.seed} attempt {ctx.attempt}")))


class Forecast(BaseModel):
    sky: str
    temp: int


def make_structured(config):
    return Agent("forecaster", config=PerQuestion(), response_schema=Forecast)


def make_nothing(config):
    return {"not": "an agent"}


def make_broken(config):
    raise ValueError("the factory is broken")
'''


def tasks(*questions: str, split: str = "dev", expected: Mapping[str, Any] | None = None
          ) -> list[dict[str, Any]]:
    """One task per question, ids ``<split>-0`` ..; expected answers from ``expected``."""
    answers = expected or {}
    return [{"id": f"{split}-{i}", "input": q, "expected": answers.get(q)}
            for i, q in enumerate(questions)]


def write_ag2_bench(root: Path, splits: Mapping[str, Sequence[Mapping[str, Any]]], *,
                    target: str = "agents:make_agent", scorer: str = "exact",
                    rollouts: Mapping[str, Any] | None = None,
                    harness: str | None = None) -> Path:
    """A bench in ``root`` (``write_bench``'s, K = 1) whose harness is ``{ag2: target}``
    over ``agents.py``, or ``harness`` as written."""
    bench = write_bench(root, tasks=splits, scorer=scorer, rollouts={"k": 1, **(rollouts or {})},
                        name="ag2-tests")
    (root / "registry.yaml").write_text(REGISTRY, encoding="utf-8")
    (root / "agents.py").write_text(textwrap.dedent(AGENTS), encoding="utf-8")
    bench.write_text(bench.read_text(encoding="utf-8").replace(
        'harness: {python: "harness:run"}',
        f"harness: {harness or json.dumps({'ag2': target})}"), encoding="utf-8")
    return bench
