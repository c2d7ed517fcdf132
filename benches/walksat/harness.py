"""The walksat bench's harness: one attempt = one run of the WalkSAT-family solver.

``run(config, task, ctx)`` reads the formula from ``task.input`` (``n_vars`` and
``clauses``, DIMACS-style signed literals), runs :func:`walksat_solver.solve` with
the config's settings, and returns the assignment it found (or None). Its only
randomness is ``random.Random(ctx.seed)``, so the same config and seed give the same
flips, the same assignment and the same verdict; and since forge gives incumbent and
candidate the same seeds, their comparisons are paired run for run.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from walksat_solver import solve

if TYPE_CHECKING:
    from forge import AttemptContext, Task

__all__ = ["run"]

#: Emitted when the solver stopped without a solution (every try used max_flips).
SIGNAL_BUDGET = "flip_budget_exhausted"
#: Emitted, alongside the above, when the last try stopped improving early: its best
#: unsatisfied-clause count was reached in the first half of the try and never beaten.
#: That is the classic symptom of a walk too greedy to leave one local minimum. What
#: makes the walk more random depends on the pick rule, so the signal names it: the
#: registry's hints map ``stagnation`` to more ``noise`` and ``stagnation_probsat`` to
#: a lower ``cb`` (probSAT ignores noise).
SIGNAL_STAGNATION = "stagnation"
SIGNAL_STAGNATION_PROBSAT = "stagnation_probsat"


def run(config: dict[str, Any], task: Task, ctx: AttemptContext) -> dict[str, Any]:
    """Solve ``task``'s formula once with ``config``; see the module docstring."""
    formula = task.input
    result = solve(formula["clauses"], int(formula["n_vars"]),
                   algorithm=config["algorithm"], noise=float(config["noise"]),
                   cb=float(config["cb"]), max_flips=int(config["max_flips"]),
                   restarts=int(config["restarts"]), tie_breaking=config["tie_breaking"],
                   rng=random.Random(ctx.seed))
    signals: list[str] = []
    if not result.solved:
        signals.append(SIGNAL_BUDGET)
        if result.stagnated:
            signals.append(SIGNAL_STAGNATION_PROBSAT if config["algorithm"] == "probsat"
                           else SIGNAL_STAGNATION)
    return {
        "output": result.assignment,
        "metrics": {"flips": float(result.flips), "restarts_used": float(result.tries - 1),
                    "min_unsat": float(result.min_unsat)},
        "signals": signals,
        # Flips are the solver's unit of work (a million flips is 3-6 CPU-seconds of
        # this pure-Python solver); cost in millions of flips is machine-independent.
        "cost": result.flips / 1e6,
    }
