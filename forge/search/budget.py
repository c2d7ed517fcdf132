"""The budget of a search: what it may still spend, asked in one place.

A search spends rollouts, cost and wall time (:class:`~forge.bench.loader.BudgetSettings`);
every rollout it asks for counts once, whether it ran now or came from the attempt store,
in the attempt cache's ledger (:class:`~forge.search.attempt_cache.AttemptCache`). A
batch (a screening chunk, a confirmation look) runs only if it fits what is left to
within :attr:`Budget.slack`, one chunk of two configs' attempts, so that the last
decision may finish a chunk rather than leave it half read. The budget is the one thing
that says it is spent: a batch it refuses (:meth:`Budget.allows`) cuts the decision that
asked short and marks it :attr:`~Budget.spent`. The parts that run batches ask it
through the search that drives them (each yields a
:class:`~forge.search.attempt_cache.Permit`, answered by :meth:`Budget.grants`); the
step runner and the loop read it (:attr:`Budget.spent`, :meth:`Budget.stop_reason`),
and the search stops there, as ``budget_rollouts``.
"""

from __future__ import annotations

from forge.bench.loader import BudgetSettings
from forge.journal.records import StopReason
from forge.search.attempt_cache import AttemptCache, Permit

__all__ = ["Budget"]


class Budget:
    """What a search may still spend; ``rollouts`` counts what it has spent."""

    def __init__(self, settings: BudgetSettings, rollouts: AttemptCache, *, slack: int) -> None:
        self.settings = settings
        self.rollouts = rollouts
        #: The rollouts a batch may run past what is left (one chunk of two configs).
        self.slack = slack
        self._refused = False  # a batch did not fit what was left

    @property
    def spent(self) -> bool:
        """Whether a batch was refused (:meth:`allows`): the decision that asked for it
        was cut short, and the search stops at its next check."""
        return self._refused

    def left(self) -> int | None:
        """AttemptCache left (None: no rollout budget)."""
        cap = self.settings.rollouts
        return None if cap is None else max(0, cap - self.rollouts.used)

    def allows(self, need: int) -> bool:
        """Whether a batch of ``need`` new rollouts may run: nothing new always may; else
        some must be left, and ``need`` within what is left plus :attr:`slack`. A batch
        refused marks the budget :attr:`spent`."""
        left = self.left()
        if left is None or not need or (left > 0 and need <= left + self.slack):
            return True
        self._refused = True
        return False

    def grants(self, permit: Permit) -> bool:
        """The answer to a part's :class:`~forge.search.attempt_cache.Permit`:
        :meth:`holds` for a block run whole, else :meth:`allows`."""
        return self.holds(permit.need) if permit.whole else self.allows(permit.need)

    def holds(self, need: int) -> bool:
        """Whether ``need`` new rollouts fit what is left, with no slack (a block that is
        run whole or not at all)."""
        left = self.left()
        return left is None or need <= left

    def stop_reason(self) -> StopReason | None:
        """Why the search must stop now, if the budget says so."""
        b = self.settings
        if self.spent or (b.rollouts is not None and self.rollouts.used >= b.rollouts):
            return "budget_rollouts"
        if b.cost is not None and self.rollouts.cost >= b.cost:
            return "budget_cost"
        if b.wall_time_s is not None and self.rollouts.elapsed() >= b.wall_time_s:
            return "budget_wall_time"
        return None
