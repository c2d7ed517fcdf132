"""The shipped tickets: sizes, ids, tags, family splits, and that each one is solvable."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import forget_bench_harness

# The bench's helper modules, imported from its folder as forge imports them; the folder
# leaves sys.path again right after, so other benches' modules are not shadowed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches" / "triage"))

import generate_tickets
from triage_catalog import CATALOG
from triage_db import fresh_connection
from triage_tools import call_tool

from forge.bench.loader import load_bench

BENCH = Path(__file__).resolve().parents[2] / "benches" / "triage"
sys.path.remove(str(BENCH))

SPLITS = ("dev", "val", "test")


_leave_no_harness_behind = forget_bench_harness(BENCH)


@pytest.fixture(scope="module")
def tickets() -> dict[str, list[dict[str, Any]]]:
    return {s: [json.loads(line) for line in (BENCH / "tasks" / f"{s}.jsonl").open()]
            for s in SPLITS}


def _families(rows: list[dict[str, Any]], scope: str | None = None) -> set[str]:
    return {r["metadata"]["intent"] + "/" + r["metadata"]["family"] for r in rows
            if scope is None or r["metadata"]["scope"] == scope}


def test_about_three_hundred_tickets_in_three_splits(tickets: dict[str, list[Any]]) -> None:
    sizes = {s: len(rows) for s, rows in tickets.items()}
    assert 280 <= sum(sizes.values()) <= 340
    assert all(90 <= n <= 120 for n in sizes.values()), sizes


def test_ids_and_texts_are_unique_everywhere(tickets: dict[str, list[Any]]) -> None:
    rows = [r for split in tickets.values() for r in split]
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({r["input"]["ticket"] for r in rows}) == len(rows)
    for split, split_rows in tickets.items():
        assert all(r["id"].startswith(f"{split}-") for r in split_rows)


def test_lines_have_the_task_fields(tickets: dict[str, list[Any]]) -> None:
    for row in (r for split in tickets.values() for r in split):
        assert set(row) == {"id", "input", "expected", "tags", "metadata", "expected_tools"}
        assert set(row["input"]) == {"ticket", "customer_id"}
        assert len(row["expected_tools"]) == 1
        assert row["expected_tools"][0]["name"] in CATALOG


def test_critical_tickets_in_every_split(tickets: dict[str, list[Any]]) -> None:
    for rows in tickets.values():
        critical = [r for r in rows if "critical" in r["tags"]]
        assert 5 <= len(critical) <= len(rows) // 3
        assert {r["metadata"]["intent"] for r in critical} <= {"refund", "refund_item", "cancel",
                                                                "escalate"}


def test_held_out_families_are_absent_from_dev(tickets: dict[str, list[Any]]) -> None:
    dev, val, test = tickets["dev"], tickets["val"], tickets["test"]
    heldout = _families(val, "heldout") | _families(test, "heldout")
    dev_only = _families(dev, "dev-only")
    assert heldout and dev_only
    assert not heldout & _families(dev)
    assert not dev_only & (_families(val) | _families(test))
    assert _families(val, "heldout") == _families(test, "heldout")
    # Enough of each that overfitting to dev is visible in val and test.
    assert sum(r["metadata"]["scope"] == "dev-only" for r in dev) >= 0.15 * len(dev)
    for rows in (val, test):
        assert sum(r["metadata"]["scope"] == "heldout" for r in rows) >= 0.15 * len(rows)


def test_tickets_are_roughened(tickets: dict[str, list[Any]]) -> None:
    tags = Counter(t for split in tickets.values() for r in split for t in r["tags"])
    total = sum(len(rows) for rows in tickets.values())
    assert tags["typo"] > 0.3 * total and tags["distractor"] > 0.2 * total


def test_every_gold_call_runs_and_gives_the_expected_answer(
        tickets: dict[str, list[Any]]) -> None:
    for row in (r for split in tickets.values() for r in split):
        gold = row["expected_tools"][0]
        args = dict(gold["args"])
        if "customer_id" in CATALOG[gold["name"]].args:
            args.setdefault("customer_id", row["input"]["customer_id"])
        outcome = call_tool(fresh_connection(), gold["name"], args)
        assert outcome.ok, (row["id"], outcome.error)
        assert outcome.result is not None
        assert outcome.result[CATALOG[gold["name"]].answer] == row["expected"], row["id"]


def test_the_files_are_what_the_generator_makes(tickets: dict[str, list[Any]]) -> None:
    assert generate_tickets.generate() == tickets, (
        "tasks/*.jsonl are stale: run benches/triage/generate_tickets.py")


def test_the_bench_loads() -> None:
    bench = load_bench(BENCH)
    assert bench.name == "triage" and set(bench.splits) == set(SPLITS)
    assert bench.spec.rollouts.k >= 3
    assert {"cost", "latency_ms", "harmful_actions", "tool_calls"} <= set(bench.spec.metrics)
    assert "critical" in bench.spec.gates.task_floors
