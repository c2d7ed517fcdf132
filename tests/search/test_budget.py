"""What a search may still spend, asked in one place (``forge.search.budget.Budget``).

A batch runs only while some rollouts are left and it overshoots them by at most the
slack (one chunk of two configs); a block run whole or not at all must fit with no
slack; a batch refused spends the budget; cost and wall time stop the search too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import pytest

from forge.bench.loader import BudgetSettings
from forge.search.attempt_cache import AttemptCache
from forge.search.budget import Budget


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Spent:
    """What the budget reads of the attempt cache's ledger: rollouts, cost and time."""

    used: int = 0
    cost: float = 0.0
    clock: Clock = field(default_factory=Clock)

    def __post_init__(self) -> None:
        self.t0 = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.t0


def budget(spent: Spent, *, rollouts: int | None = None, cost: float | None = None,
           wall_time_s: float | None = None, slack: int = 0) -> Budget:
    settings = BudgetSettings(rollouts=rollouts, cost=cost, wall_time_s=wall_time_s)
    return Budget(settings, cast(AttemptCache, spent), slack=slack)


def test_without_a_rollout_budget_everything_is_allowed() -> None:
    b = budget(Spent(used=10**6))
    assert b.left() is None and b.allows(10**6) and b.holds(10**6)
    assert b.stop_reason() is None


def test_a_batch_runs_while_some_is_left_and_overshoots_by_at_most_the_slack() -> None:
    spent = Spent(used=90)
    b = budget(spent, rollouts=100, slack=20)
    assert b.left() == 10
    assert b.allows(30) and not b.allows(31)  # 10 left + 20 slack
    assert not b.holds(11) and b.holds(10)  # a block run whole: no slack
    spent.used = 100
    assert b.left() == 0 and not b.allows(1) and b.allows(0)  # nothing new always may
    spent.used = 120
    assert b.left() == 0  # never below nothing
    assert b.stop_reason() == "budget_rollouts"


def test_a_batch_refused_spends_the_budget_and_stops_the_search() -> None:
    b = budget(Spent(used=1), rollouts=100)
    assert b.allows(99) and not b.holds(100)  # a block that does not fit spends nothing
    assert b.stop_reason() is None and not b.spent
    assert not b.allows(100)
    assert b.spent and b.stop_reason() == "budget_rollouts"


@pytest.mark.parametrize(("used", "cost", "elapsed", "reason"), [
    (99, 4.9, 59.0, None),
    (100, 0.0, 0.0, "budget_rollouts"),
    (0, 5.0, 0.0, "budget_cost"),
    (0, 0.0, 60.0, "budget_wall_time"),
    (100, 5.0, 60.0, "budget_rollouts"),  # rollouts are named first
])
def test_the_stop_reason_names_the_first_budget_spent(
        used: int, cost: float, elapsed: float, reason: str | None) -> None:
    spent = Spent(used=used, cost=cost)
    b = budget(spent, rollouts=100, cost=5.0, wall_time_s=60.0)
    spent.clock.now += elapsed
    assert b.stop_reason() == reason
