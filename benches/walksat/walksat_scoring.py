"""The walksat bench's scorer: pass only if the returned assignment satisfies the formula.

Used as ``scorer: {code: "walksat_scoring:satisfied"}``. The check is done here,
against the task's own clauses, and trusts nothing the harness says about itself:
a malformed assignment, a wrong one, or none at all scores 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from walksat_solver import check_assignment

from forge.scorers import Score

if TYPE_CHECKING:
    from forge import RunOutput, Task

__all__ = ["satisfied"]


def satisfied(task: Task, output: RunOutput) -> Score:
    """1 and passed when ``output.output`` satisfies every clause of ``task.input``."""
    formula = task.input
    assignment = output.output
    if assignment is None:
        return Score(value=0.0, passed=False,
                     explanation="no assignment (flip budget exhausted)")
    ok, unsat, reason = check_assignment(formula["clauses"], int(formula["n_vars"]), assignment)
    return Score(value=1.0 if ok else 0.0, passed=ok, explanation=reason,
                 details={"unsatisfied_clauses": unsat})
