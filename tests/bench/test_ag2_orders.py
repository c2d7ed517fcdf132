"""benches/ag2-orders: a search over a real AG2 agent promotes what matters and journals
AG2's tool calls and usage with every attempt."""

from __future__ import annotations

from pathlib import Path

import pytest
from ag2_support import require_ag2
from conftest import REPO, stored_rows

from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate
from forge.search.launch import launch_search

ORDERS = REPO / "benches" / "ag2-orders"


@pytest.fixture(autouse=True)
def _ag2() -> None:
    require_ag2()


@pytest.mark.slow
def test_a_search_promotes_the_settings_that_matter_and_journals_the_agent(
        tmp_path: Path) -> None:
    outcome = launch_search(ORDERS, journals=tmp_path, run_id="orders", max_steps=2,
                            patience=2, k=2, run_test=False)
    promoted = {(p["target"], p["after"]) for p in outcome.promotions}
    # A system message that forbids answering from memory, and a history long enough
    # to keep both orders of a question in view: each lifts the pass rate on its own.
    assert ("instructions", "grounded") in promoted
    assert any(target == "history_events" and after > 6 for target, after in promoted)
    assert outcome.as_json()["dev"]["delta"] > 0.3

    rows = stored_rows(tmp_path / "orders")
    assert rows and all(r["result"]["stop_reason"] == "completed" for r in rows)
    outputs = [r["result"]["output"] for r in rows]
    calls = [c for o in outputs for c in o["tool_calls"]]
    assert {c["name"] for c in calls} == {"find_order", "convert"}
    assert all(c["ok"] and isinstance(c["result"], dict | float) for c in calls)
    assert all(o["usage"]["input_tokens"] > 0 and o["cost"] > 0 for o in outputs)
    assert all(o["trace"]["ag2_turns"] for o in outputs)


def test_the_settings_change_what_the_agent_does(tmp_path: Path) -> None:
    """Grounded instructions make the agent look statuses up; a short history makes it
    look the first of two orders up again and give up."""
    bench = load_bench(ORDERS)
    ids = ["dev-status-00", "dev-items-00"]
    start = evaluate(bench, bench.defaults, split="dev", k=3, task_ids=ids)
    grounded = bench.registry.with_values(bench.defaults, {"instructions": "grounded",
                                                           "history_events": 24})
    better = evaluate(bench, grounded, split="dev", k=3, task_ids=ids)
    assert better.pass_rate == 1.0 and start.pass_rate is not None and start.pass_rate < 0.7
    by_task = {t.task_id: t.attempts for t in start.tasks}
    looked_again = [a.output.tool_calls for a in by_task["dev-items-00"] if a.output]
    assert all(len(calls) >= 3 for calls in looked_again)  # the first order, fetched again
    grounded_calls = {t.task_id: t.attempts for t in better.tasks}["dev-status-00"]
    assert all(a.output and [c.name for c in a.output.tool_calls] == ["find_order"]
               for a in grounded_calls)
