"""Task: one input of a split, with what a scorer needs to judge the output."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ExpectedTool", "Task"]


class ExpectedTool(BaseModel):
    """A tool the harness should call; ``args`` are matched as a subset of the real call."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class Task(BaseModel):
    """One line of a split file."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(min_length=1)
    input: Any
    expected: Any = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    expected_tools: list[ExpectedTool] | None = None
