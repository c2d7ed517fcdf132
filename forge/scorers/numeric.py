"""The ``numeric`` scorer: the output's number against the expected one, within a tolerance."""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field

from forge.core.task import Task
from forge.harness.base import RunOutput
from forge.scorers._values import Options, OptionScorer, last_number, parse_number, quote
from forge.scorers.base import SCORERS, Score

__all__ = ["NumericScorer"]


class NumericOptions(Options):
    abs_tol: float = Field(default=1e-9, ge=0.0, allow_inf_nan=False)
    rel_tol: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)


@SCORERS.register("numeric")
class NumericScorer(OptionScorer[NumericOptions]):
    """Passes when ``|output - expected| <= abs_tol`` or ``<= rel_tol * |expected|``.

    The output is a number, or text whose *last* number is the answer ("... so the
    total is 1,234." reads 1234). An output with no number is a wrong answer
    (value 0, not passed). ``task.expected`` must be a number or text that is exactly
    one number; anything else raises ``ValueError``, so the attempt is unscored: the
    task, not the harness, is at fault. Value is 1 or 0.
    """

    name: ClassVar[str] = "numeric"
    options_model = NumericOptions

    def score(self, task: Task, output: RunOutput) -> Score:
        parsed_expected = parse_number(task.expected)
        if parsed_expected is None or not math.isfinite(float(parsed_expected)):
            raise ValueError(f"task {task.id!r}: 'expected' must be a number for 'numeric', "
                             f"got {quote(task.expected)}")
        expected = float(parsed_expected)
        parsed = last_number(output.output)
        # Text can spell numbers no float holds ("1e999"): that is no usable answer.
        if parsed is None or not math.isfinite(float(parsed)):
            return Score(value=0.0, passed=False,
                         explanation=f"no number in output {quote(output.output)}",
                         details={"expected": expected})
        actual = float(parsed)
        diff = abs(actual - expected)
        passed = diff <= self.options.abs_tol or diff <= self.options.rel_tol * abs(expected)
        return Score(
            value=1.0 if passed else 0.0,
            passed=passed,
            explanation=None if passed else
            f"expected {_fmt(expected)}, got {_fmt(actual)} (off by {_fmt(diff)})",
            details={"expected": expected, "actual": actual, "diff": diff},
        )



def _fmt(value: float) -> str:
    return f"{value:.12g}"
