"""Shared fixtures: a build context in a temp bench folder and helpers to build and score."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from forge.core.spec import BuildContext
from forge.scorers import SCORERS, Scorer

from ._helpers import Build, WriteModule


@pytest.fixture
def ctx(tmp_path: Path) -> BuildContext:
    return BuildContext(base_dir=tmp_path, file=Path("bench.yaml"), field="scorer")


@pytest.fixture
def build(ctx: BuildContext) -> Build:
    """Parse a scorer's YAML form and build it, as a bench load does."""

    def make(value: Any) -> Scorer:
        return SCORERS.build(SCORERS.parse(value, ctx), ctx)

    return make


@pytest.fixture
def write_module(tmp_path: Path) -> WriteModule:
    """Write ``name.py`` into the bench folder."""

    def write(name: str, source: str) -> Path:
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(source), encoding="utf-8")
        return path

    return write
