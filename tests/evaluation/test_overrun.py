"""An attempt whose wall time exceeds its timeout is a timeout, whatever its harness
returned: unscored, with its duration, on every executor. An attempt is charged its
own time only, never a wait for a worker or the judging of another attempt."""

from __future__ import annotations

import pytest
from conftest import CPU_BOUND_HARNESS, MakeBench, default_tasks, with_async_judge

from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate
from forge.executors import ExecutorSettings
from forge.results.model import AttemptResult, EvalResult

#: Returns 0.2 s before its deadline: just within the timeout.
JUST_WITHIN_SYNC = """
import time

def run(config, task, ctx):
    time.sleep(max(0.0, ctx.deadline - 0.2 - time.monotonic()))
    return {"output": task.expected}
"""

JUST_WITHIN_ASYNC = """
import asyncio, time

async def run(config, task, ctx):
    await asyncio.sleep(max(0.0, ctx.deadline - 0.2 - time.monotonic()))
    return {"output": task.expected}
"""

SLEEPS = """
import time

def run(config, task, ctx):
    time.sleep(0.3)
    return {"output": task.expected}
"""


def attempts(result: EvalResult) -> list[AttemptResult]:
    return [a for t in result.tasks for a in t.attempts]


def two_tasks() -> dict[str, list[dict[str, object]]]:
    tasks = default_tasks()
    return {**tasks, "dev": tasks["dev"][:2]}


@pytest.mark.timeout(60)
def test_a_cpu_bound_sync_harness_past_its_timeout_is_a_timeout_on_the_local_executor(
        make_bench: MakeBench) -> None:
    bench = load_bench(make_bench(CPU_BOUND_HARNESS, tasks=two_tasks(),
                                  rollouts={"k": 1, "timeout_s": 0.5, "concurrency": 1}))
    result = evaluate(bench, bench.defaults, executor=ExecutorSettings("local"))
    done = attempts(result)
    assert len(done) == 2
    for a in done:
        # It returned the right answer, too late: no score, never a zero.
        assert a.stop_reason == "timeout", (a.stop_reason, a.duration_s)
        # Whoever saw it first says so: the lane, when its call ended ("... overran: it
        # ended after 1.3 s"), or the monitor, once the GIL let it run.
        assert a.error is not None and a.error.startswith("no result within 0.5 s")
        assert a.score is None and a.output is None
        assert a.duration_s > 0.5  # its own measure, kept
        assert a.metrics == {"latency": a.duration_s}
    assert result.pass_rate is None
    assert result.summary()["n_unscored"] == 2


@pytest.mark.timeout(90)
def test_a_cpu_bound_sync_harness_is_killed_at_its_timeout_on_the_process_executor(
        make_bench: MakeBench) -> None:
    bench = load_bench(make_bench(CPU_BOUND_HARNESS, tasks=two_tasks(),
                                  rollouts={"k": 1, "timeout_s": 0.5, "concurrency": 1}))
    result = evaluate(bench, bench.defaults, executor=ExecutorSettings("process", workers=1))
    done = attempts(result)
    assert len(done) == 2
    for a in done:
        assert a.stop_reason == "timeout" and a.score is None and a.output is None
        assert a.error == "no result within 0.5 s"
        # Stopped at the deadline, not when its 1.2 s of work would have ended.
        assert a.duration_s == pytest.approx(0.5, abs=0.1)


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("source", "executor"), [(JUST_WITHIN_SYNC, "local"),
                                                  (JUST_WITHIN_ASYNC, "local"),
                                                  (JUST_WITHIN_SYNC, "process")],
                         ids=["sync-local", "async-local", "sync-process"])
def test_an_attempt_that_ends_just_within_its_timeout_stays_completed(
        make_bench: MakeBench, source: str, executor: str) -> None:
    bench = load_bench(make_bench(source, rollouts={"k": 1, "timeout_s": 0.6,
                                                    "concurrency": 3}))
    result = evaluate(bench, bench.defaults, executor=ExecutorSettings(executor, workers=3))
    done = attempts(result)
    assert [a.stop_reason for a in done] == ["completed"] * 3
    assert all(a.score is not None and a.error is None for a in done)
    assert all(0.3 < a.duration_s <= 0.6 for a in done), [a.duration_s for a in done]
    assert result.pass_rate == 1.0


@pytest.mark.timeout(90)
@pytest.mark.parametrize("executor", ["local", "process"])
def test_an_attempt_is_not_charged_its_wait_for_a_free_worker(
        make_bench: MakeBench, executor: str) -> None:
    # Three attempts of 0.3 s, one at a time: the third starts 0.6 s (and, for a
    # process, a worker's start-up) after the evaluation, past its 0.5 s timeout.
    bench = load_bench(make_bench(SLEEPS, rollouts={"k": 1, "timeout_s": 0.5,
                                                    "concurrency": 1}))
    result = evaluate(bench, bench.defaults, executor=ExecutorSettings(executor, workers=1))
    done = attempts(result)
    assert [a.stop_reason for a in done] == ["completed"] * 3
    assert all(0.3 <= a.duration_s < 0.5 for a in done), [a.duration_s for a in done]
    assert result.pass_rate == 1.0


QUICK_ASYNC = """
import asyncio

async def run(config, task, ctx):
    await asyncio.sleep(0.05)
    return {"output": task.expected}
"""


@pytest.mark.timeout(60)
def test_an_attempt_is_not_charged_the_judging_of_the_one_before(make_bench: MakeBench
                                                                 ) -> None:
    # An async lane starts its next call, then judges the last: a slow scorer runs
    # while the next call does, and is none of that call's time.
    bench = load_bench(with_async_judge(
        make_bench(QUICK_ASYNC, scorer='{code: "judge:grade"}',
                   rollouts={"k": 1, "timeout_s": 0.3, "concurrency": 1}), sleep_s=0.4))
    result = evaluate(bench, bench.defaults)
    done = attempts(result)
    assert [a.stop_reason for a in done] == ["completed"] * 3
    assert all(a.duration_s < 0.3 for a in done), [a.duration_s for a in done]
    assert result.pass_rate == 1.0


BLOCKS_THE_LOOP = """
import time

async def run(config, task, ctx):
    time.sleep(0.8)  # a sync call in an async harness: the event loop waits with it
    return {"output": task.expected}
"""


@pytest.mark.timeout(60)
def test_an_async_harness_that_blocks_the_loop_past_its_timeout_is_a_timeout(
        make_bench: MakeBench) -> None:
    # Nothing on the loop runs while it sleeps, the timeout's timer neither: the call
    # is done when its lane looks, 0.3 s too late.
    bench = load_bench(make_bench(BLOCKS_THE_LOOP, tasks=two_tasks(),
                                  rollouts={"k": 1, "timeout_s": 0.5, "concurrency": 1}))
    result = evaluate(bench, bench.defaults)
    done = attempts(result)
    assert [a.stop_reason for a in done] == ["timeout", "timeout"]
    for a in done:
        assert a.error is not None
        assert a.error.startswith("no result within 0.5 s (the attempt overran: it ended after ")
        assert a.score is None and a.output is None and a.duration_s >= 0.8
