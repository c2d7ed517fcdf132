"""The floor gates (``floor:<tag>``): critical tasks' pass rates, whatever the
tolerances show.

Checked on every tagged dev and val task (those the looks did not reach are run for
both configs), once the improvement and non-inferiority gates have passed: a few tasks
a promotion needs, run before a tolerance's further chunks take the budget. A floor
holds for *every* tagged task: checked on the tasks an early decision happened to run,
it compared a few of them, or none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from forge.gates.checks import GateResult, floor_gate
from forge.results.model import TaskAttempts

__all__ = ["FloorGate", "SplitPair"]


class SplitPair(NamedTuple):
    """Both configs' attempts on one split's tasks, as a floor compares them."""

    split: str
    incumbent: TaskAttempts
    candidate: TaskAttempts


@dataclass(frozen=True)
class FloorGate:
    """Every task tagged ``tag`` stays at or above ``floor`` (pass rate), in each split;
    a task the incumbent already had below it fails only if the candidate does worse."""

    tag: str
    floor: float

    def check(self, pairs: Sequence[SplitPair], tags: Mapping[str, Sequence[str]]
              ) -> GateResult:
        """The verdict on ``pairs``; ``tags`` gives each task id its tags."""
        return floor_gate(self.tag, self.floor,
                          [(p.split, p.incumbent, p.candidate) for p in pairs], tags)
