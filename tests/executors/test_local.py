"""The ``local`` executor: its lanes follow the harness (threads for a sync one, the event
loop for an async one), and an async scorer is still judged on the loop."""

from __future__ import annotations

import pytest
from conftest import MakeBench, with_async_judge

from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate
from forge.executors import ExecutorSettings

THREAD_NAME = """
import threading

def run(config, task, ctx):
    return {"output": task.expected, "trace": threading.current_thread().name}
"""

ASYNC_THREAD_NAME = """
import threading

async def run(config, task, ctx):
    return {"output": task.expected, "trace": threading.current_thread().name}
"""


@pytest.mark.parametrize(("source", "lane"), [(THREAD_NAME, "forge-lane-"),
                                              (ASYNC_THREAD_NAME, "MainThread")],
                         ids=["sync-on-thread-lanes", "async-on-the-loop"])
def test_the_local_executor_picks_its_lanes_by_the_harness(make_bench: MakeBench, source: str,
                                                           lane: str) -> None:
    bench = load_bench(make_bench(source))
    result = evaluate(bench, bench.defaults, executor=ExecutorSettings("local"))
    traces = {a.output.trace for t in result.tasks for a in t.attempts if a.output}
    assert traces and all(str(name).startswith(lane) for name in traces)
    assert result.pass_rate == 1.0


def test_a_sync_harness_with_an_async_scorer_is_judged_on_the_loop(
        make_bench: MakeBench) -> None:
    bench = load_bench(with_async_judge(make_bench(THREAD_NAME, scorer='{code: "judge:grade"}')))
    result = evaluate(bench, bench.defaults)
    assert result.pass_rate == 1.0 and result.summary()["n_unscored"] == 0
