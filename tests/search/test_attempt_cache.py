"""The attempt cache as the search's ledger, and the permits its parts ask the budget for
(``forge.search.attempt_cache``).

Each attempt a search asks for counts once toward rollouts and cost, whether it ran now
or came from the store; the wall time is counted from the cache's making. A part of the
search never holds the budget: it yields a permit, and whoever drives it answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import search_tasks, write_search_bench

from forge.bench.loader import Bench, BudgetSettings, load_bench
from forge.config.registry import Config
from forge.evaluation.session import Session
from forge.executors import ExecutorSettings
from forge.journal.store import AttemptStore
from forge.search.attempt_cache import AttemptCache, Fetch, Permit, allowed, drive
from forge.search.budget import Budget

HARNESS = """
def run(config, task, ctx):
    record(config, task, ctx)
    return {"output": task.expected, "cost": 0.25}
"""


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return load_bench(write_search_bench(tmp_path / "bench", HARNESS, k=2,
                                         tasks=search_tasks(6, 2, 2)))


@pytest.fixture
def session(bench: Bench) -> Iterator[Session]:
    with Session(bench, ExecutorSettings(), seed=7, concurrency=2, timeout_s=10.0) as s:
        yield s


def test_the_ledger_counts_each_attempt_once_stored_or_run_and_the_time_since_it_began(
        bench: Bench, session: Session, tmp_path: Path) -> None:
    store = AttemptStore(tmp_path / "attempts.jsonl")
    clock = Clock()
    cache = AttemptCache(bench, store, clock=clock)
    config: Config = bench.defaults
    tasks = bench.tasks("dev")[:3]
    drive(session, cache.fetch(config, "dev", "dev", tasks, range(2)))
    drive(session, cache.fetch(config, "dev", "dev", tasks, range(2)))  # asked again
    clock.now += 7.5
    assert cache.totals() == {"rollouts_total": 6, "cost_total": pytest.approx(1.5),
                              "elapsed_s": 7.5}
    # A resumed search finds them in the store and counts them as the first one did,
    # running nothing.
    again = AttemptCache(bench, AttemptStore(tmp_path / "attempts.jsonl"), clock=clock)
    drive(session, again.fetch(config, "dev", "dev", tasks, range(2)))
    assert (again.used, again.cost, again.executed) == (6, pytest.approx(1.5), 0)
    assert again.elapsed() == 0.0


def test_a_permit_is_asked_only_for_new_rollouts_and_answered_by_the_driver() -> None:
    def part(need: int, *, whole: bool = False) -> Fetch[bool]:
        return (yield from allowed(need, whole=whole))

    nothing = part(0)
    with pytest.raises(StopIteration) as done:
        next(nothing)  # nothing new always may: the budget is not asked
    assert done.value.value is True
    some = part(12, whole=True)
    assert next(some) == Permit(12, whole=True)
    with pytest.raises(StopIteration) as refused:
        some.send(False)
    assert refused.value.value is False


def test_a_batch_the_budget_refuses_is_not_run_and_spends_it(
        bench: Bench, session: Session) -> None:
    cache = AttemptCache(bench, AttemptStore())
    budget = Budget(BudgetSettings(rollouts=4), cache, slack=0)
    tasks = bench.tasks("dev")[:3]

    def part() -> Fetch[int]:
        if not (yield from allowed(cache.unrequested(bench.defaults, "dev", tasks, range(2)))):
            return -1
        got = yield from cache.fetch(bench.defaults, "dev", "dev", tasks, range(2))
        return sum(len(v) for v in got.values())

    assert drive(session, part(), budget) == -1  # six new rollouts, four left
    assert cache.used == 0 and budget.spent and budget.stop_reason() == "budget_rollouts"
    assert drive(session, part()) == 6  # without a budget every batch may run
