"""Harness adapters: how forge drives the program under tuning.

One :class:`PluginRegistry` by name; a bench names its harness as a spec
(``{python: "harness:run"}``) and :func:`build_harness` rebuilds it.
"""

from __future__ import annotations

from forge.harness._base import (
    AttemptContext,
    AttemptTimeout,
    Harness,
    RunOutput,
    ToolCall,
    Usage,
)
from forge.harness.command import CommandHarness
from forge.harness.http import HttpHarness
from forge.harness.openai import OpenAIHarness
from forge.harness.python import PythonHarness
from forge.spec import BuildContext, PluginRegistry, Spec

__all__ = [
    "HARNESSES",
    "AttemptContext",
    "AttemptTimeout",
    "CommandHarness",
    "Harness",
    "HttpHarness",
    "OpenAIHarness",
    "PythonHarness",
    "RunOutput",
    "ToolCall",
    "Usage",
    "build_harness",
]

HARNESSES: PluginRegistry[Harness] = PluginRegistry("harness")
HARNESSES.register("python", shorthand="target")(PythonHarness.from_args)
HARNESSES.register("command", shorthand="argv")(CommandHarness.from_args)
HARNESSES.register("http", shorthand="url")(HttpHarness.from_args)
HARNESSES.register("openai")(OpenAIHarness.from_args)


def build_harness(spec: Spec, ctx: BuildContext) -> Harness:
    return HARNESSES.build(spec, ctx)
