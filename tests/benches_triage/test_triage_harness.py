"""The triage harness through forge: it evaluates, is deterministic, and its settings matter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import forget_bench_harness

from forge.bench.loader import Bench, load_bench
from forge.core.task import Task
from forge.evaluation.evaluate import evaluate
from forge.harness.base import AttemptContext, RunOutput
from forge.harness.python import import_target

BENCH = Path(__file__).resolve().parents[2] / "benches" / "triage"


_leave_no_harness_behind = forget_bench_harness(BENCH)


@pytest.fixture(scope="module")
def bench() -> Bench:
    return load_bench(BENCH)


def _fn(name: str) -> Any:
    # Through forge's importer: another bench's ``harness`` module may be loaded already.
    return import_target(f"harness:{name}", BENCH)[0]


def _ctx(seed: int) -> AttemptContext:
    return AttemptContext(seed=seed, attempt=0, split="dev", timeout_s=10, deadline=1e12)


def _mean(bench: Bench, split: str = "dev", k: int = 2, tags: set[str] | None = None,
          **settings: Any) -> float:
    result = evaluate(bench, bench.registry.with_values(bench.defaults, settings),
                      split=split, k=k)
    wanted = {t.id for t in bench.tasks(split) if tags is None or tags & set(t.tags)}
    rows = [t for t in result.summary()["tasks"] if t["id"] in wanted]
    return sum(t["mean_score"] for t in rows) / len(rows)


def test_default_config_evaluates_with_every_attempt_scored(bench: Bench) -> None:
    summary = evaluate(bench, bench.defaults, split="dev", k=1).summary()
    assert summary["n_tasks"] == len(bench.tasks("dev"))
    assert summary["n_scored"] == summary["n_attempts"] == summary["n_tasks"]
    assert 0.3 < summary["mean_score"] < 0.8  # mediocre: room to improve, not hopeless
    for metric in ("cost", "latency_ms", "harmful_actions", "tool_calls", "escalated"):
        assert metric in summary["metrics"]


def test_same_seed_same_outcome(bench: Bench) -> None:
    run = _fn("run")
    config = dict(bench.defaults.values)
    for task in bench.tasks("val")[:20]:
        first = RunOutput.model_validate(run(dict(config), task, _ctx(7)))
        again = RunOutput.model_validate(run(dict(config), task, _ctx(7)))
        assert first == again


def test_the_output_speaks_the_protocol(bench: Bench) -> None:
    out = RunOutput.model_validate(_fn("run")(dict(bench.defaults.values),
                                              bench.tasks("dev")[0], _ctx(1)))
    assert out.cost is not None and out.cost > 0
    assert out.usage.input_tokens > 0 and out.tool_calls
    assert {"harmful_actions", "latency_ms", "escalated", "iterations"} <= set(out.metrics)
    assert all(isinstance(s, str) for s in out.signals)


def test_more_retries_help(bench: Bench) -> None:
    assert _mean(bench, max_iterations=3) > _mean(bench, max_iterations=1) + 0.05


def test_a_demanding_judge_hurts(bench: Bench) -> None:
    assert _mean(bench, judge_threshold=0.8) < _mean(bench) - 0.1


def test_a_tiny_search_width_hurts_a_greedy_planner(bench: Bench) -> None:
    assert (_mean(bench, search_width=1, temperature=0.0)
            < _mean(bench, search_width=4, temperature=0.0) - 0.05)


def test_hybrid_retrieval_reads_through_typos(bench: Bench) -> None:
    typo = {"typo"}
    assert _mean(bench, tags=typo, retrieval="hybrid") > _mean(bench, tags=typo) + 0.03


def test_the_keyword_router_overfits_dev(bench: Bench) -> None:
    slang, heldout = {"dev-only"}, {"heldout"}
    assert _mean(bench, tags=slang, keyword_router=True) > _mean(bench, tags=slang) + 0.3
    assert (_mean(bench, "val", tags=heldout, keyword_router=True)
            < _mean(bench, "val", tags=heldout) - 0.1)


def test_harmful_actions_count_wrong_writes_only() -> None:
    harmful = _fn("harmful_actions")
    expected = [Task(id="t", input={}, expected_tools=[
        {"name": "refund_item", "args": {"order_id": 1, "sku": "SKU-1001"}}]).expected_tools[0]]
    right = {"name": "refund_item", "args": {"order_id": 1, "sku": "SKU-1001"}, "ok": True}
    wrong_tool = {"name": "refund_order", "args": {"order_id": 1}, "ok": True}
    wrong_order = {"name": "refund_item", "args": {"order_id": 2, "sku": "SKU-1001"}, "ok": True}
    refused = {"name": "cancel_order", "args": {"order_id": 1}, "ok": False}
    read = {"name": "get_order_status", "args": {"order_id": 2}, "ok": True}
    escalation = {"name": "escalate_to_human", "args": {"customer_id": 3}, "ok": True}
    assert harmful([right, read, refused, escalation], expected) == 0
    assert harmful([wrong_tool], expected) == 1
    assert harmful([wrong_order, wrong_tool, right], expected) == 2


def test_a_misrouted_refund_is_reported_as_harmful(bench: Bench) -> None:
    run = _fn("run")
    traps = [t for t in bench.tasks("val") if t.metadata["family"] in ("charged", "gone")]
    assert traps

    def harm(**settings: Any) -> float:
        config = {**bench.defaults.values, **settings}
        return sum(run(dict(config), t, _ctx(seed))["metrics"]["harmful_actions"]
                   for t in traps for seed in range(4))

    routed, planned = harm(keyword_router=True), harm()
    assert routed > planned + 4, (routed, planned)  # 14 against 6 when written
