"""Holding back a confirmation the rollout budget left cannot buy: selection only.

A candidate that passed screening is confirmed at once, unless the budget left is less
than what its confirmation projects to need even at its whole screening effect
(:func:`confirmation_cost`): a confirmation that cannot finish spends the rest of the
budget and proves nothing. Such a candidate is held back (:class:`Deferrals`, its
record's ``deferred`` saying why) while the search screens the incumbent's other moves,
one of which may be worth enough to be proven with what is left, and it is confirmed

- when the incumbent has no untried move left, or ``max_steps`` or ``patience`` would
  stop the search after this step: every held candidate (it waited for every other
  move);
- when its projection has come to fit (the incumbent has run more of the attempts a
  confirmation reads since) and one more chunk of screening would leave too little for
  it: every held candidate that fits, the largest screening effect first;

and it is journaled as skipped, with its screening and its rollouts, when another
candidate is promoted first or the search stops before it. Which candidate is
confirmed, and when, is selection: the held candidate's confirmation reads attempts no
selection read, at the level of its place in the spending sequence whenever it runs,
so holding it back costs no error guarantee. With no rollout budget nothing is held.

The projection is the improvement test's alone (paired t over tasks): the tasks ``n``
at which the screening effect reaches the level's z, ``n = (z sd / (effect -
min_effect))^2`` with ``sd`` the screening's spread of a task's delta, each task run on
``attempts`` attempts by the candidate and by the incumbent where it has not run them
yet. It leaves out the looks' spending, val and the tolerances, so it is optimistic: a
candidate held back would most likely have run out of budget unproven.

Projecting at a share of the screening effect instead (the best screen of a step
overstates its effect) was measured and not kept: at one half, closedform (40 seeds)
rose from 0.408 / 0.461 / 0.687 to 0.416 / 0.470 / 0.685 at 2k / 5k / 20k, but walksat
at 2k fell from 0.999 to 0.964 (10 seeds): in 4 searches `max_flips` 4096 -> 16384
(screened +0.058, 1,053 rollouts projected at half its effect, 935 left) was held back,
and when its turn came its expansion and confirmation, some 800 rollouts before, no
longer fit (benchmarks/quality.py's run_forge).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from statistics import NormalDist

from forge.config.registry import Config
from forge.core.task import Task
from forge.journal.records import CandidateRecord
from forge.search.attempt_cache import AttemptCache
from forge.search.screening import Screen

__all__ = ["Deferrals", "confirmation_cost", "unrun_share"]

_NORMAL = NormalDist()


def confirmation_cost(screen: Screen, *, level: float, min_effect: float, attempts: int,
                      unrun: float = 1.0) -> float:
    """The rollouts the improvement test of ``screen``'s candidate needs to reach
    ``level`` if its effect is the screening's: ``attempts`` a task of the candidate, and
    of the incumbent the ``unrun`` share of them not run before; infinite where that
    effect is no more than ``min_effect``."""
    gain = screen.test.effect - min_effect
    if gain <= 0 or not math.isfinite(gain):
        return math.inf
    sd = screen.se * math.sqrt(max(1, screen.tasks))
    z = _NORMAL.inv_cdf(1.0 - level)
    return (1.0 + unrun) * attempts * (z * sd / gain) ** 2


def unrun_share(rollouts: AttemptCache, incumbent: Config, dev: Sequence[Task],
                val: Sequence[Task], attempts: range) -> float:
    """The share of ``incumbent``'s ``attempts`` on the ``dev`` and ``val`` tasks a
    confirmation reads first that no screening or confirmation has run yet."""
    total = len(attempts) * (len(dev) + len(val))
    if not total:
        return 1.0
    return (rollouts.unrequested(incumbent, "dev", dev, attempts)
            + rollouts.unrequested(incumbent, "val", val, attempts)) / total


#: A deferred candidate with the head of its record, ``deferred`` set to why.
Held = tuple[Screen, "partial[CandidateRecord]"]
#: A confirmation's projected rollouts for a screened candidate.
Cost = Callable[[Screen], float]


@dataclass
class Deferrals:
    """The incumbent's candidates held back from confirmation."""

    items: list[Held] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.items)

    def hold(self, screen: Screen, cost: Cost, left: int | None) -> str | None:
        """Why ``screen``'s candidate is to wait, where the budget ``left`` is less than
        its confirmation's ``cost``; else None."""
        if left is None:
            return None
        need = cost(screen)
        if need <= left:
            return None
        return (f"its confirmation projects to need {need:,.0f} rollouts at its screening "
                f"effect ({screen.test.effect:+.3f}) and {left:,} are left: the "
                "incumbent's other moves are screened first")

    def add(self, screen: Screen, head: partial[CandidateRecord], why: str) -> None:
        self.items.append((screen, partial(head, deferred=why)))

    def due(self, cost: Cost, left: int | None, chunk: int) -> list[Held]:
        """The candidates to confirm now, taken from the queue: when one's ``cost`` fits
        the budget ``left`` but would not after one more ``chunk`` of screening, every one
        it fits. One it does not fit waits for the incumbent's last move."""
        if not self.items or left is None:
            return []
        need = [cost(screen) for screen, _ in self.items]
        if not any(left - chunk < n <= left for n in need):
            return []
        taken = [item for item, n in zip(self.items, need, strict=True) if n <= left]
        self.items = [item for item, n in zip(self.items, need, strict=True) if n > left]
        return taken

    def take(self) -> list[Held]:
        """Every deferred candidate, the queue left empty."""
        items, self.items = self.items, []
        return items
