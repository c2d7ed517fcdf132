"""A search's options survive its journal: a resume runs with what the run ran with.

``run.json`` keeps :class:`~forge.search.options.SearchOptions` as ``RunOptions``: only
what a user sets. An older ``run.json`` journaled a flag per search behaviour; a resume
checks them against today's search (:func:`~forge.search.options.check_flags`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from forge.bench.loader import BudgetSettings
from forge.errors import JournalError
from forge.executors import ExecutorSettings
from forge.journal import RunOptions
from forge.journal.run import JournaledFlags
from forge.search.options import SearchOptions, check_flags

K = 4


def test_every_option_a_run_started_with_is_the_one_its_resume_runs_with() -> None:
    # Every field off its default, so that one dropped on the way would show.
    options = SearchOptions(
        max_steps=7, patience=3, budget=BudgetSettings(rollouts=1234, cost=2.5), k=3,
        seed=11, concurrency=2, timeout_s=9.0, candidates_per_step=5, run_test=False,
        executor=ExecutorSettings("process", workers=2))
    journaled = options.journal_form(proposer="auto", proposer_info=None, first_moves=[])
    # Through the file: run.json is JSON, and a resume reads it back from there.
    read = RunOptions.model_validate(json.loads(json.dumps(journaled.model_dump(mode="json"))))
    resumed = SearchOptions.from_journal(read, seed=11, concurrency=1, timeout_s=9.0)
    assert resumed == options
    # Run with the test split, as the CLI always is, run.json says nothing of it: as before.
    default = dataclasses.replace(options, run_test=True).journal_form(
        proposer="auto", proposer_info=None, first_moves=[])
    assert "run_test" not in default.model_dump(mode="json")
    assert SearchOptions.from_journal(default, seed=11, concurrency=1, timeout_s=9.0).run_test
    # None of the fields is left out of this test: one added later must be added here.
    assert {f.name for f in dataclasses.fields(SearchOptions)} == {
        "max_steps", "patience", "budget", "k", "seed", "concurrency", "timeout_s",
        "candidates_per_step", "run_test", "executor"}


def test_a_resume_told_another_executor_runs_there() -> None:
    options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=K, seed=1,
                            concurrency=1, timeout_s=1.0)
    journaled = options.journal_form(proposer="auto", proposer_info=None, first_moves=[])
    there = ExecutorSettings("process", workers=2)
    assert SearchOptions.from_journal(journaled, seed=1, concurrency=1, timeout_s=1.0,
                                      executor=there).executor == there


def test_the_test_split_runs_twenty_attempts_a_task_never_fewer_than_k() -> None:
    def options(k: int) -> SearchOptions:
        return SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=k, seed=1,
                             concurrency=1, timeout_s=1.0)
    assert (options(K).test_attempts, options(30).test_attempts) == (20, 30)


#: The flags of a version-2 run.json that searched as this forge does.
TODAY: dict[str, Any] = {
    "chunks": 6, "screen_alpha": 0.05, "jumps": True, "precision_rounds": 2,
    "selection": "best", "near_values": True, "near_copy_records": True,
    "enum_choices": True, "hint_jumps": True, "pooled_improvement": True, "test_k": 20,
    "expansion": True, "room_recall": True, "tolerance_extension": True,
    "netted_tolerances": True, "deferral": True, "floors_ahead": True, "start_check": True}


def test_an_older_run_json_with_todays_flags_may_resume() -> None:
    check_flags(JournaledFlags.model_validate(TODAY), k=K, file=Path("run.json"), run_id="r")
    check_flags(None, k=K, file=Path("run.json"), run_id="r")  # today's shape: no flags
    # A k of 20 or more ran its test split at k, test_k or not.
    without = {k: v for k, v in TODAY.items() if k != "test_k"}
    check_flags(JournaledFlags.model_validate(without), k=20, file=Path("run.json"),
                run_id="r")


@pytest.mark.parametrize("field", [f for f in TODAY if f not in {"chunks", "screen_alpha",
                                                                    "jumps"}])
def test_an_older_run_json_without_a_flag_searched_as_before_it_and_is_refused(
        field: str) -> None:
    # Absent: the run searched as before that flag existed (no precision rounds, the
    # first to pass confirmed, exact values, test at k, ...), which this forge does not.
    flags = JournaledFlags.model_validate({k: v for k, v in TODAY.items() if k != field})
    with pytest.raises(JournalError) as err:
        check_flags(flags, k=K, file=Path("run.json"), run_id="r")
    assert err.value.field == f"options.{field}"
    assert "cannot resume r" in str(err.value) and f"{field} absent" in str(err.value)


@pytest.mark.parametrize(("field", "value"), [("chunks", 5), ("screen_alpha", 0.1),
                                              ("jumps", False), ("selection", "first")])
def test_an_older_run_json_with_another_flag_value_is_refused(field: str, value: Any) -> None:
    flags = JournaledFlags.model_validate({**TODAY, field: value})
    with pytest.raises(JournalError) as err:
        check_flags(flags, k=K, file=Path("run.json"), run_id="r")
    assert err.value.field == f"options.{field}"
    # Absent, the first two searched as today's (their defaults were never changed).
    if field in {"screen_alpha", "jumps"}:
        check_flags(JournaledFlags.model_validate(
            {k: v for k, v in TODAY.items() if k != field}), k=K, file=Path("run.json"),
            run_id="r")
