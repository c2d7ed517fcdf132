"""Hasty races and their resumption through whole searches (forge/search/candidates.py).

Outside the precision rounds a race is hasty: from half the dev tasks on, it stops a
candidate whose estimate as it stands cannot reach alpha though one standard error
better could (``paused``), and journals it as skipped. Its race goes on, patiently and
on the attempts it already ran, only once its incumbent has nothing else left to
screen; a promotion of another candidate first leaves it where it stopped.

Outcomes are fixed by the task, not the seed: the incumbent passes the even tasks;
``slow`` passes three odd ones too (a gain too sparse to show by half the tasks in most
task orders), ``fast`` every fourth (a gain that passes early). 40 dev tasks, chunks of
7, so the hasty rule first applies at the look after 21 tasks. The seed fixes the task
order; seed 7 orders them so that ``slow`` pauses at that look.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import search_tasks, write_search_bench

from forge.bench.loader import BudgetSettings, load_bench
from forge.journal.run_store import RunStore
from forge.proposers import SweepProposer
from forge.report.html import render_html
from forge.search.launch import launch_search
from forge.search.loop import Search
from forge.search.options import SearchOptions

HARNESS = """
SLOW = {1, 15, 29}
def run(config, task, ctx):
    record(config, task, ctx)
    i = int(task.id.split("-")[1])
    ok = (i % 2 == 0 or (config["slow"] and i in SLOW)
          or (config.get("fast", False) and i % 4 == 1))
    return {"output": task.expected if ok else "wrong"}
"""
SLOW_ONLY = "name: s\nsettings:\n  slow: {type: bool, default: false}\n"
SLOW_AND_FAST = SLOW_ONLY + "  fast: {type: bool, default: false}\n"
N_DEV = 40
SEED = 7


def candidates(tmp_path: Path, registry: str) -> list[dict[str, Any]]:
    """The candidate records of a seeded search on the bench with ``registry``; its run
    folder is ``tmp_path / "run"``."""
    path = write_search_bench(tmp_path / "bench", HARNESS, registry=registry, k=2,
                              tasks=search_tasks(N_DEV, N_DEV, 4))
    bench = load_bench(path)
    folder = tmp_path / "run"
    folder.mkdir()
    options = SearchOptions(max_steps=3, patience=2, budget=BudgetSettings(), k=2,
                            seed=SEED, concurrency=2, timeout_s=10.0, run_test=False)
    outcome = Search(bench, bench.defaults, SweepProposer(), options, run_id="r",
                     store=RunStore.open(folder)).run()
    return [r for r in outcome.records if r["kind"] == "candidate"]


def test_a_paused_race_goes_on_where_it_stopped_once_nothing_else_is_left(
        tmp_path: Path) -> None:
    first, resumed, *_ = candidates(tmp_path, SLOW_ONLY)
    # Paused at the first look from half the tasks on: journaled as skipped, not refused.
    assert (first["step"], first["move"]["target"], first["verdict"]) == (1, "slow", "skipped")
    assert first["dev"]["screen"]["status"] == "paused"
    assert first["tasks_screened"] == 21 >= N_DEV / 2
    assert "paused after 21 screening tasks" in first["why"]
    assert first["dev"]["screen"]["effect"] > 0
    # Its 21 tasks at K = 2, and the incumbent's past its first chunk (run at the start).
    assert first["rollouts"] == 21 * 2 + (21 - 7) * 2
    # The step screened the incumbent's only move: its race goes on in the same step,
    # on the 21 tasks' attempts it has (only the other 19 tasks are run), and passes.
    assert (resumed["step"], resumed["move"]["target"]) == (1, "slow")
    assert "nothing else is left to screen" in resumed["reason"]
    assert resumed["dev"]["screen"]["status"] == "pass"
    assert resumed["tasks_screened"] == N_DEV
    assert resumed["screening_rollouts"] == (N_DEV - 21) * 2 * 2  # both configs, K = 2
    assert resumed["verdict"] == "promoted"


def test_a_paused_race_stays_where_it_stopped_when_another_move_is_promoted(
        tmp_path: Path) -> None:
    records = candidates(tmp_path, SLOW_AND_FAST)
    step1 = [(r["move"]["target"], r["verdict"], r["dev"]["screen"]["status"])
             for r in records if r["step"] == 1]
    assert step1 == [("slow", "skipped", "paused"), ("fast", "promoted", "pass")]
    # Against the new incumbent slow is a new candidate, raced from its first task.
    later = [r for r in records if r["step"] == 2 and r["move"]["target"] == "slow"]
    assert later and later[0]["incumbent"] != records[0]["incumbent"]


def test_the_report_says_a_paused_candidate_was_paused_not_dropped(tmp_path: Path) -> None:
    path = write_search_bench(tmp_path / "bench", HARNESS, registry=SLOW_AND_FAST, k=2,
                              tasks=search_tasks(N_DEV, N_DEV, 4))
    out = launch_search(path, journals=tmp_path / "journals", run_id="r", proposer="sweep",
                        seed=SEED, max_steps=3, patience=2, run_test=False)
    assert any(r["kind"] == "candidate" and (r["dev"] or {}).get("screen", {}).get("status")
               == "paused" for r in out.records)
    page = render_html(tmp_path / "journals" / "r")
    assert "paused at screening: raced on only if nothing else is left to screen" in page
