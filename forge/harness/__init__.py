"""Harness adapters: how forge drives the program under tuning.

One :class:`PluginRegistry` by name; a bench names its harness as a spec
(``{python: "harness:run"}``) and :func:`build_harness` rebuilds it.
"""

from __future__ import annotations

from forge.harness._base import AttemptContext, Harness, RunOutput, ToolCall, Usage
from forge.harness.python import PythonHarness
from forge.spec import BuildContext, PluginRegistry, Spec

__all__ = [
    "HARNESSES",
    "AttemptContext",
    "Harness",
    "PythonHarness",
    "RunOutput",
    "ToolCall",
    "Usage",
    "build_harness",
]

HARNESSES: PluginRegistry[Harness] = PluginRegistry("harness")
HARNESSES.register("python", shorthand="target")(PythonHarness.from_args)


def build_harness(spec: Spec, ctx: BuildContext) -> Harness:
    return HARNESSES.build(spec, ctx)
