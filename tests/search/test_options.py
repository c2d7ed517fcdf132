"""A search's options survive its journal: a resume runs with what the run ran with.

``run.json`` keeps :class:`~forge.search.options.SearchOptions` as ``RunOptions``; a
run journaled before an option existed resumes with the behaviour it had then, not
today's default, so the replay of an old journal does not diverge.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from forge.bench import BudgetSettings
from forge.executors import ExecutorSettings
from forge.journal import RunOptions
from forge.search.options import SearchOptions

K = 4


def test_every_option_a_run_started_with_is_the_one_its_resume_runs_with() -> None:
    # Every field off its default, so that one dropped on the way would show.
    options = SearchOptions(
        max_steps=7, patience=3, budget=BudgetSettings(rollouts=1234, cost=2.5), k=3,
        seed=11, concurrency=2, timeout_s=9.0, candidates_per_step=5, chunks=4,
        screen_alpha=0.1, jumps=False, precision_rounds=1, selection="first",
        near_values=False, near_copy_records=False, enum_choices=False, hint_jumps=False,
        pooled_improvement=False, test_k=8, expansion=False, room_recall=False,
        tolerance_extension=False, netted_tolerances=False, deferral=False, floors_ahead=False,
        start_check=False, run_test=False,
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
        "candidates_per_step", "chunks", "screen_alpha", "jumps", "precision_rounds",
        "selection", "near_values", "near_copy_records", "enum_choices", "hint_jumps",
        "pooled_improvement", "test_k", "expansion", "room_recall", "tolerance_extension",
        "netted_tolerances", "deferral", "floors_ahead", "start_check", "run_test",
        "executor"}


def test_a_resume_told_another_executor_runs_there() -> None:
    options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=K, seed=1,
                            concurrency=1, timeout_s=1.0)
    journaled = options.journal_form(proposer="auto", proposer_info=None, first_moves=[])
    there = ExecutorSettings("process", workers=2)
    assert SearchOptions.from_journal(journaled, seed=1, concurrency=1, timeout_s=1.0,
                                      executor=there).executor == there


def test_a_run_journaled_before_best_selection_resumes_confirming_the_first() -> None:
    options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=K, seed=1,
                            concurrency=1, timeout_s=1.0)
    new = options.journal_form(proposer="sweep", proposer_info=None, first_moves=[])
    assert (new.selection, new.near_values) == ("best", True)
    old = RunOptions.model_validate({k: v for k, v in new.model_dump(mode="json").items()
                                     if k not in {"selection", "near_values"}})
    assert "selection" not in old.model_dump(mode="json")  # written back as it was
    resumed = [SearchOptions.from_journal(o, seed=1, concurrency=1, timeout_s=1.0)
               for o in (new, old)]
    assert [(o.selection, o.near_values) for o in resumed] == [("best", True),
                                                               ("first", False)]
    # Nor did it journal a proposer's near copies: resumed, it drops them silently again.
    older = RunOptions.model_validate({k: v for k, v in new.model_dump(mode="json").items()
                                       if k != "near_copy_records"})
    assert new.near_copy_records is True
    assert SearchOptions.from_journal(older, seed=1, concurrency=1,
                                      timeout_s=1.0).near_copy_records is False


@pytest.mark.parametrize("field", ["enum_choices", "hint_jumps", "pooled_improvement",
                                   "expansion", "room_recall", "tolerance_extension",
                                   "netted_tolerances", "deferral", "floors_ahead"])
def test_a_run_journaled_before_an_option_resumes_without_it(field: str) -> None:
    # enum_choices absent: one choice of an enum a step; hint_jumps absent: a hint's
    # step before its jump; pooled_improvement absent: the improvement gate on dev's
    # tasks alone; expansion absent: no farther value screened beside a passing move;
    # room_recall absent: a move a tolerance refused is not offered by the memory;
    # tolerance_extension absent: a tolerance spends its whole level on its looks;
    # netted_tolerances absent: a sparse 0/1 tolerance is read by the exact count alone;
    # deferral absent: a candidate that passed screening is confirmed at once;
    # floors_ahead absent: the floors are run once every other gate has passed.
    # Either way the replay of an old journal does not diverge.
    options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=K, seed=1,
                            concurrency=1, timeout_s=1.0)
    new = options.journal_form(proposer="auto", proposer_info=None, first_moves=[])
    assert getattr(new, field) is True
    old = RunOptions.model_validate({k: v for k, v in new.model_dump(mode="json").items()
                                     if k != field})
    assert field not in old.model_dump(mode="json")
    resumed = SearchOptions.from_journal(old, seed=1, concurrency=1, timeout_s=1.0)
    assert getattr(resumed, field) is False
    assert getattr(SearchOptions.from_journal(new, seed=1, concurrency=1, timeout_s=1.0),
                   field) is True


def test_a_run_journaled_before_test_k_runs_its_test_split_at_k() -> None:
    options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=K, seed=1,
                            concurrency=1, timeout_s=1.0)
    new = options.journal_form(proposer="auto", proposer_info=None, first_moves=[])
    assert new.test_k == 20
    old = RunOptions.model_validate({k: v for k, v in new.model_dump(mode="json").items()
                                     if k != "test_k"})
    assert "test_k" not in old.model_dump(mode="json")
    assert SearchOptions.from_journal(old, seed=1, concurrency=1, timeout_s=1.0).test_k == K
    assert SearchOptions.from_journal(new, seed=1, concurrency=1, timeout_s=1.0).test_k == 20


def test_a_run_journaled_before_the_start_check_resumes_searching_on() -> None:
    options = SearchOptions(max_steps=1, patience=1, budget=BudgetSettings(), k=K, seed=1,
                            concurrency=1, timeout_s=1.0)
    new = options.journal_form(proposer="sweep", proposer_info=None, first_moves=[])
    assert new.start_check is True
    old = RunOptions.model_validate({k: v for k, v in new.model_dump(mode="json").items()
                                     if k != "start_check"})
    assert "start_check" not in old.model_dump(mode="json")
    assert SearchOptions.from_journal(old, seed=1, concurrency=1,
                                      timeout_s=1.0).start_check is False
