"""Scorers: how forge judges one completed attempt.

Each scorer registers itself in :data:`SCORERS` next to its class; importing this
package imports them all. A bench names its scorer as a spec and
:func:`build_scorer` rebuilds it:

==============  ===========  ==========================================================
name            shorthand    options (defaults)
==============  ===========  ==========================================================
``exact``       --           case_sensitive (true), normalize_whitespace (true),
                             coerce (true)
``contains``    ``text``     text (task.expected; text or list), case_sensitive (false)
``regex``       ``pattern``  pattern (task.expected), flags ([]), mode (search|fullmatch)
``numeric``     --           abs_tol (1e-9), rel_tol (0)
``code``        ``target``   target ("module:function"), threshold (0.5)
``toolcall``    --           allow_additional (true), ordered (false)
``judge``       ``rubric``   rubric, mode (binary|scale), threshold (7, scale only, on
                             1-10), model, base_url (FORGE_OPENAI_*), api_key_env,
                             timeout_s (60), retries (2)
``all``         ``scorers``  scorers (list of specs)
``any``         ``scorers``  scorers (list of specs)
``weighted``    ``scorers``  scorers (list of {scorer, weight (1)}), threshold (0.5)
``ag2``         ``target``   target (an ``ag2.eval`` scorer, "module:attr"), key,
                             threshold (0.5), pass_values ([]); needs ``forge[ag2]``
``agno``        ``target``   target ("module:NAME": an agno scorer or Environment;
                             needs ``forge[agno]``)
==============  ===========  ==========================================================

In YAML: ``scorer: exact``, ``scorer: {regex: "^\\d+$"}``,
``scorer: {all: [toolcall, {numeric: {rel_tol: 0.01}}]}``.
"""

from __future__ import annotations

from typing import Any

from forge.core.spec import BuildContext, Spec
from forge.scorers.ag2 import Ag2Scorer
from forge.scorers.agno import AgnoScorer
from forge.scorers.base import SCORERS, Score, Scorer
from forge.scorers.code import CodeScorer
from forge.scorers.composite import AllScorer, AnyScorer, WeightedScorer
from forge.scorers.judge import JudgeScorer
from forge.scorers.numeric import NumericScorer
from forge.scorers.text import ContainsScorer, ExactScorer, RegexScorer
from forge.scorers.toolcall import ToolCallScorer

__all__ = [
    "SCORERS",
    "Ag2Scorer",
    "AgnoScorer",
    "AllScorer",
    "AnyScorer",
    "CodeScorer",
    "ContainsScorer",
    "ExactScorer",
    "JudgeScorer",
    "NumericScorer",
    "RegexScorer",
    "Score",
    "Scorer",
    "ToolCallScorer",
    "WeightedScorer",
    "build_scorer",
    "parse_scorer",
]


def parse_scorer(value: Any, ctx: BuildContext) -> Spec:
    """A scorer spec from its YAML form; an unknown name is a one-line ``BenchError``."""
    return SCORERS.parse(value, ctx)


def build_scorer(spec: Spec, ctx: BuildContext) -> Scorer:
    """The scorer ``spec`` names; bad arguments are a one-line ``BenchError``."""
    return SCORERS.build(spec, ctx)
