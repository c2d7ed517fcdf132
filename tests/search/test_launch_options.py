"""A new search's options (forge.search.launch.search_options): given as one object or
as keywords, each a field of SearchOptions, the bench's settings filling in the rest;
a name that is no option or a value out of its field's bounds is refused before the
run folder exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import COIN_HARNESS, read_calls, search_tasks, write_search_bench

from forge.bench.loader import BudgetSettings, load_bench
from forge.errors import OptionError
from forge.search.launch import launch_search, search_options


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    return write_search_bench(tmp_path / "bench", COIN_HARNESS, tasks=search_tasks(12, 12, 12))


def _options(folder: Path) -> dict[str, object]:
    options: dict[str, object] = json.loads(
        (folder / "run.json").read_text(encoding="utf-8"))["options"]
    return options


def test_the_options_object_and_its_keywords_start_the_same_run(bench: Path,
                                                                tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    given = {"max_steps": 0, "k": 2, "candidates_per_step": 3, "budget_rollouts": 500}
    launch_search(bench, run_id="kw", journals=journals, **given)
    launch_search(bench, run_id="obj", journals=journals,
                  options=search_options(load_bench(bench), **given))
    assert _options(journals / "kw") == _options(journals / "obj")
    options = search_options(load_bench(bench), **given)
    spec = load_bench(bench).spec
    # What was given, and the bench's for the rest (its budget's other parts kept).
    assert (options.max_steps, options.k, options.candidates_per_step) == (0, 2, 3)
    assert options.patience == spec.search.patience
    assert options.budget == BudgetSettings(rollouts=500, cost=spec.search.budget.cost,
                                            wall_time_s=spec.search.budget.wall_time_s)
    assert options.concurrency == spec.rollouts.concurrency


def test_a_keyword_that_is_no_option_or_out_of_bounds_writes_nothing(
        bench: Path, tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    with pytest.raises(TypeError, match="no search option 'patiense'"):
        launch_search(bench, run_id="r", journals=journals, patiense=2)
    with pytest.raises(OptionError) as info:
        launch_search(bench, run_id="r", journals=journals, patience=0)
    assert info.value.option == "patience"
    assert "greater than or equal to 1, got 0" in info.value.message
    loaded = load_bench(bench)
    with pytest.raises(TypeError, match="options given, and k besides"):
        launch_search(loaded, run_id="r", journals=journals,
                      options=search_options(loaded), k=2)
    assert not journals.exists()
    assert read_calls(bench) == []
