"""The ``agno`` scorer: an Agno scorer judges forge's attempts.

Bench syntax::

    scorer: {agno: "scorers:EXACT"}        # anything with ascore(run, expected)
    scorer: {agno: "envs:SUPPORT"}         # an agno Environment: its scorer

``target`` names, in the bench's folder, an object with ``ascore(run, expected)``
(``agno.scorer``: ``CodeScorer``, ``ToolCallScorer``, ``JudgeScorer``, or your own),
or an ``agno.environments.Environment``, whose ``scorer`` is then used. forge awaits
``ascore(run, task.expected)`` and keeps its verdict: ``Score.value`` (in [0, 1]) as
the value, ``passed``, ``reason`` as the explanation and ``detail`` as the details.
A scorer that raises, or returns something that is not a Score, leaves the attempt
unscored with the reason, as any forge scorer does.

``run`` is an ``agno.run.agent.RunOutput``: under the ``agno`` harness, the agent's
own run as forge recorded it (content, tool executions, messages, metrics); under
any other harness, one built from forge's record of the attempt: ``content`` the
output, ``tools`` one execution per tool call (``tool_call_error`` for a failed
one), ``metrics`` the token usage and cost, ``status`` completed. So an Agno
``ToolCallScorer`` checks the tool calls of a ``python`` or ``openai`` harness too.

The digest covers the spec, the source of the module (and the bench's code), and the
scorer's own ``digest()`` when it has one (Agno's scorers do).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import Field
from pydantic_core import to_jsonable_python

from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness.agno_run import agno_run
from forge.harness.agno_sdk import require_agno
from forge.harness.base import RunOutput
from forge.harness.tools import import_value
from forge.scorers._values import Options, spec_digest
from forge.scorers.base import SCORERS, Score, Scorer

__all__ = ["AgnoScorer", "to_score"]


class AgnoScorerOptions(Options):
    target: str = Field(min_length=1)


@SCORERS.register("agno", shorthand="target")
class AgnoScorer(Scorer):
    """Awaits an Agno scorer's ``ascore`` on the attempt as an Agno run."""

    name: ClassVar[str] = "agno"
    options_model = AgnoScorerOptions

    def __init__(self, options: AgnoScorerOptions, scorer: Any, identity: str,
                 env: Any = None) -> None:
        self.options = options
        self.scorer = scorer
        #: The environment the scorer came from, when ``target`` named one.
        self.env = env
        self._digest = spec_digest(self.name, options, identity=identity,
                                   own=_own_digest(scorer))

    @property
    def digest(self) -> str:
        return self._digest

    async def score(self, task: Task, output: RunOutput) -> Score:
        verdict = await self.scorer.ascore(agno_run(output), task.expected)
        return to_score(verdict)

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> AgnoScorer:
        options = AgnoScorerOptions.model_validate(args)
        where = ctx.at(cls.name)
        require_agno(where, "agno.scorer", "agno.environments")
        from agno.environments import Environment

        value, identity = import_value(options.target, where.at("target"))
        if isinstance(value, Environment):
            return cls(options, value.scorer, identity, env=value)
        if not callable(getattr(value, "ascore", None)):
            raise where.error(f"{options.target!r} is a {type(value).__name__}; expected an "
                              "agno scorer (an object with ascore(run, expected)) or an "
                              "agno.environments.Environment", "target")
        return cls(options, value, identity)


def _own_digest(scorer: Any) -> str | None:
    """The scorer's ``digest()``, None when it has none or cannot give one (Agno's
    CodeScorer over a function without retrievable source raises)."""
    digest = getattr(scorer, "digest", None)
    if not callable(digest):
        return None
    try:
        value = digest()
    except Exception:  # a scorer that cannot fingerprint itself: its source still counts
        return None
    return value if isinstance(value, str) else None


def to_score(verdict: Any) -> Score:
    """forge's Score of an Agno ``Score`` (``value``, ``passed``, ``reason``, ``detail``);
    ``ValueError`` for anything else, or a value outside [0, 1]."""
    value = getattr(verdict, "value", None)
    passed = getattr(verdict, "passed", None)
    if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(
            passed, bool):
        raise ValueError(f"the agno scorer returned {type(verdict).__name__}, not a Score "
                         "with a numeric value and a bool passed")
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"the agno scorer's Score.value is {value!r}; expected 0 to 1")
    reason = getattr(verdict, "reason", None)
    detail = getattr(verdict, "detail", None)
    details = to_jsonable_python(detail, fallback=repr) if isinstance(detail, dict) else {}
    return Score(value=float(value), passed=passed,
                 explanation=None if reason is None else str(reason), details=details)
