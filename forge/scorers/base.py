"""The scorer protocol and the Score it returns.

The scorer plugins register here, each next to its class (``@SCORERS.register``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from forge.core.spec import Plugin, PluginRegistry
from forge.core.task import Task
from forge.harness.base import RunOutput

__all__ = ["SCORERS", "Score", "Scorer"]


class Score(BaseModel):
    """The verdict on one completed attempt.

    ``value`` is in [0, 1] (the mean score averages it); ``passed`` feeds the pass
    rate. ``details`` keeps what a person needs to audit the verdict (a judge's raw
    1-10 grade, which expected tool was missing, ...).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    value: float = Field(ge=0.0, le=1.0)
    passed: bool
    explanation: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class Scorer(Plugin, ABC):
    """Judges one attempt. The contract:

    - ``digest`` is a sha256 that changes whenever the verdicts could (its spec, and
      the source of any user code it calls); it goes into the env fingerprint.
    - ``score`` returns a :class:`Score`, or an awaitable of one (a judge calling a
      model). It may raise: the attempt is then unscored, with the error kept, and
      never counted as a zero.
    """

    @property
    @abstractmethod
    def digest(self) -> str: ...

    @abstractmethod
    def score(self, task: Task, output: RunOutput) -> Score | Awaitable[Score]: ...


#: Every scorer by name; a bench names its scorer as a spec (``{regex: "^\\d+$"}``).
SCORERS: PluginRegistry[Scorer] = PluginRegistry("scorer", Scorer)
