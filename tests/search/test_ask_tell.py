"""The search as an ask/tell object: whoever drives it runs each request where it likes.

``Search.begin()``, then ``ask()`` for a ``RolloutRequest`` and ``tell(request,
results)`` until ``ask()`` returns None; ``run()`` is that loop on a session of its own.
A search driven by hand writes the same records as ``run()``; results that do not answer
the request are refused with one clear error, and the search is left where it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import TWO_REGISTRY, TWO_SIZES, search_tasks, write_search_bench

from forge.bench.loader import Bench, BudgetSettings, load_bench
from forge.evaluation.session import Session
from forge.executors import ExecutorSettings
from forge.journal.run_store import RunStore
from forge.proposers import SweepProposer
from forge.search.attempt_cache import RolloutRequest
from forge.search.loop import Search
from forge.search.options import SearchOptions

#: Keys of a record that differ between two runs of the same search: the clock.
VOLATILE = {"at", "elapsed_s"}


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return load_bench(write_search_bench(tmp_path / "bench", TWO_SIZES,
                                         registry=TWO_REGISTRY, k=2,
                                         tasks=search_tasks(24, 16, 8)))


def new_search(bench: Bench, folder: Path, budget: BudgetSettings | None = None) -> Search:
    folder.mkdir(parents=True)
    options = SearchOptions(max_steps=4, patience=4, budget=budget or BudgetSettings(), k=2,
                            seed=3, concurrency=2, timeout_s=10.0)
    return Search(bench, bench.defaults, SweepProposer(), options, run_id="r",
                  store=RunStore.open(folder))


def session(bench: Bench) -> Session:
    return Session(bench, ExecutorSettings(), seed=3, concurrency=2, timeout_s=10.0)


def records(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in VOLATILE} for line in lines]


def test_a_search_driven_by_ask_and_tell_writes_the_records_of_run(
        bench: Bench, tmp_path: Path) -> None:
    ran = new_search(bench, tmp_path / "run").run()
    search = new_search(bench, tmp_path / "hand")
    asked = 0
    with session(bench) as s:
        search.begin()
        while (request := search.ask()) is not None:
            assert search.ask() is request  # asked again before a tell: the same one
            search.tell(request, list(reversed(request.run(s))))  # matched by key, not order
            asked += 1
    assert asked > 1 and search.ask() is None
    assert search.outcome is not None
    assert search.outcome.promotions == ran.promotions != []
    assert search.outcome.end.test.delta == ran.end.test.delta
    assert records(tmp_path / "hand") == records(tmp_path / "run")


def test_results_that_do_not_answer_the_request_are_refused(
        bench: Bench, tmp_path: Path) -> None:
    search = new_search(bench, tmp_path / "run")
    with session(bench) as s:
        search.begin()
        request = search.ask()
        assert request is not None
        results = request.run(s)
        with pytest.raises(ValueError, match="not one for each"):
            search.tell(request, results[1:])  # one missing
        with pytest.raises(ValueError, match="not one for each"):
            search.tell(request, [*results[1:], results[1]])  # one twice, one missing
        other = type(request)(request.config, request.split, request.stream,
                              request.keys)
        with pytest.raises(ValueError, match="not the request"):
            search.tell(other, results)
        # Refused, the search is where it was: the same request, then on as before.
        assert search.ask() is request
        search.tell(request, results)
        assert search.ask() is not request


def test_the_budget_is_answered_inside_the_search_and_stops_it_by_hand_as_by_run(
        bench: Bench, tmp_path: Path) -> None:
    # The parts ask the budget for a permit before each batch; the search answers them
    # itself, so whoever drives it sees rollout requests only, and no more of them.
    budget = BudgetSettings(rollouts=150)
    ran = new_search(bench, tmp_path / "run", budget).run()
    search = new_search(bench, tmp_path / "hand", budget)
    with session(bench) as s:
        search.begin()
        while (request := search.ask()) is not None:
            assert isinstance(request, RolloutRequest)
            search.tell(request, request.run(s))
    assert search.outcome is not None and search.outcome.stop_reason == "budget_rollouts"
    assert ran.stop_reason == "budget_rollouts"
    assert records(tmp_path / "hand") == records(tmp_path / "run")
    # The search's decisions spent it to within the slack of one chunk of two configs
    # (the end check, start against final, comes after the stop and is not budgeted).
    spent = [r["rollouts_total"] for r in records(tmp_path / "hand") if "rollouts_total" in r]
    assert spent and 150 - search.budget.slack <= max(spent) <= 150 + search.budget.slack


def test_ask_before_begin_is_an_error(bench: Bench, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="begin"):
        new_search(bench, tmp_path / "run").ask()
