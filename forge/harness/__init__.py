"""Harness adapters: how forge drives the program under tuning.

Each adapter registers itself in :data:`HARNESSES` next to its class; importing this
package imports them all. A bench names its harness as a spec
(``{python: "harness:run"}``) and :func:`build_harness` rebuilds it.
"""

from __future__ import annotations

from forge.core.spec import BuildContext, Spec
from forge.harness.a2a import A2AHarness
from forge.harness.acp import AcpHarness
from forge.harness.ag2 import Ag2Harness
from forge.harness.agno import AgnoHarness
from forge.harness.base import (
    HARNESSES,
    AttemptContext,
    AttemptTimeout,
    Harness,
    RunOutput,
    ToolCall,
    Usage,
)
from forge.harness.command import CommandHarness
from forge.harness.http import HttpHarness
from forge.harness.nlip import NlipHarness
from forge.harness.openai import OpenAIHarness
from forge.harness.python import PythonHarness

__all__ = [
    "HARNESSES",
    "A2AHarness",
    "AcpHarness",
    "Ag2Harness",
    "AgnoHarness",
    "AttemptContext",
    "AttemptTimeout",
    "CommandHarness",
    "Harness",
    "HttpHarness",
    "NlipHarness",
    "OpenAIHarness",
    "PythonHarness",
    "RunOutput",
    "ToolCall",
    "Usage",
    "build_harness",
]


def build_harness(spec: Spec, ctx: BuildContext) -> Harness:
    return HARNESSES.build(spec, ctx)
