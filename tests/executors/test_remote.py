"""Executors: the same seeds, scores and decisions in-process, in worker processes and
on Ray; failures inside workers become unscored attempts with their reason."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ARITH, CPU_BOUND_HARNESS, MakeBench, default_tasks
from typer.testing import CliRunner

from forge.bench.loader import load_bench
from forge.cli import app
from forge.errors import UserError
from forge.evaluation.evaluate import evaluate
from forge.executors import ExecutorSettings, WorkItem, check_executor
from forge.executors.remote import LaneQueue
from forge.results.model import EvalResult
from forge.search.launch import launch_search

ROOT = Path(__file__).resolve().parents[2]
WALKSAT = ROOT / "benches" / "walksat"
#: A walksat subset small enough for the suite: a few formulas of the dev split.
WALKSAT_TASKS = [json.loads(line)["id"] for line in
                 (WALKSAT / "tasks" / "dev.jsonl").read_text().splitlines()[:6]]

PROCESS = ExecutorSettings("process", workers=2)


def comparable(result: EvalResult) -> dict[str, Any]:
    """Everything of a result except what the clock decides (latency, durations, dates)."""
    data = result.model_dump(mode="json")
    for key in ("duration_s", "started_at"):
        data.pop(key)
    for task in data["tasks"]:
        for a in task["attempts"]:
            a.pop("duration_s")
            a["metrics"].pop("latency")
    return data


def summary_without_latency(result: EvalResult) -> dict[str, Any]:
    s = result.summary()
    s["metrics"] = {k: v for k, v in s["metrics"].items() if not k.startswith("latency")}
    return s


def test_process_gives_the_local_result_on_arith() -> None:
    bench = load_bench(ARITH)
    config = bench.registry.with_values(bench.defaults, {"effort": 3, "temperature": 0.9})
    local = evaluate(bench, config, split="dev")
    remote = evaluate(bench, config, split="dev", executor=PROCESS)
    assert comparable(remote) == comparable(local)
    assert summary_without_latency(remote) == summary_without_latency(local)


def test_process_gives_the_local_result_on_a_walksat_subset() -> None:
    bench = load_bench(WALKSAT)
    local = evaluate(bench, bench.defaults, k=2, task_ids=WALKSAT_TASKS)
    remote = evaluate(bench, bench.defaults, k=2, task_ids=WALKSAT_TASKS, executor=PROCESS)
    assert comparable(remote) == comparable(local)
    assert local.summary()["n_scored"] == len(WALKSAT_TASKS) * 2


def _decisions(folder: Path) -> list[dict[str, Any]]:
    """The search's journal without clocks: what it tried and what it decided."""
    out = []
    for line in (folder / "journal.jsonl").read_text().splitlines():
        record = json.loads(line)
        out.append(_drop_clock(record))
    return out


_CLOCK_KEYS = {"ts", "time", "at", "elapsed_s", "duration_s", "wall_time_s", "latency",
               "latency_p50", "latency_p95", "created_at", "run_id"}


def _drop_clock(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_clock(v) for k, v in value.items()
                if k not in _CLOCK_KEYS and "latency" not in k}
    if isinstance(value, list):
        return [_drop_clock(v) for v in value]
    return value


def test_a_search_decides_the_same_in_worker_processes(tmp_path: Path) -> None:
    outcomes = {}
    for name in ("local", "process"):
        outcomes[name] = launch_search(ARITH, max_steps=2, budget_rollouts=3000, k=2,
                                       run_id=name, journals=tmp_path,
                                       executor=ExecutorSettings(name, workers=2))
    local, remote = outcomes["local"], outcomes["process"]
    assert remote.promotions == local.promotions
    assert remote.final_config == local.final_config
    assert remote.rollouts_used == local.rollouts_used
    assert (remote.dev, remote.val, remote.test) == (local.dev, local.val, local.test)
    assert _decisions(tmp_path / "process") == _decisions(tmp_path / "local")
    run = json.loads((tmp_path / "process" / "run.json").read_text())
    assert run["options"]["executor"] == {"name": "process", "workers": 2, "ray_address": None}


DYING_HARNESS = """
import os

def run(config, task, ctx):
    if task.id == "dev-1" and ctx.attempt == 0:
        os._exit(1)
    return {"output": task.expected}
"""


def test_a_worker_that_dies_leaves_its_attempt_unscored(make_bench: MakeBench) -> None:
    bench = load_bench(make_bench(DYING_HARNESS))
    result = evaluate(bench, bench.defaults, executor=PROCESS)
    attempts = {(t.task_id, a.attempt): a for t in result.tasks for a in t.attempts}
    dead = attempts.pop(("dev-1", 0))
    assert dead.stop_reason == "error" and not dead.scored
    assert dead.error == "worker process died (exit code 1)"
    # Every other attempt ran and scored: the pool replaced the worker and went on.
    assert len(attempts) == result.summary()["n_attempts"] - 1
    assert all(a.scored and a.passed for a in attempts.values())


SLOW_IMPORT_HARNESS = """
import time

time.sleep(20)


def run(config, task, ctx):
    return {"output": task.expected}
"""


def test_a_harness_that_does_not_import_in_time_leaves_its_attempts_unscored(
        make_bench: MakeBench, monkeypatch: pytest.MonkeyPatch) -> None:
    # A module blocked at import (a server it waits for) must not hold the evaluation:
    # each worker gets READY_TIMEOUT_S to import it, then its attempts are lost.
    from forge.executors import process

    monkeypatch.setattr(process, "READY_TIMEOUT_S", 1.0)
    bench = load_bench(make_bench(SLOW_IMPORT_HARNESS))
    started = time.monotonic()
    result = evaluate(bench, bench.defaults, executor=PROCESS)
    assert time.monotonic() - started < 15
    attempts = [a for t in result.tasks for a in t.attempts]
    assert attempts and not any(a.scored for a in attempts)
    assert {a.error for a in attempts} == {"worker did not load the harness within 1 s"}


HANGING_HARNESS = """
import time

def run(config, task, ctx):
    if task.id == "dev-0":
        time.sleep(60)
    if task.id == "dev-2":
        raise ValueError("no answer")
    return {"output": task.expected}
"""


def test_timeouts_and_errors_in_workers_are_recorded_as_locally(make_bench: MakeBench
                                                                 ) -> None:
    bench = load_bench(make_bench(HANGING_HARNESS, rollouts={"timeout_s": 0.3, "k": 2}))
    local = evaluate(bench, bench.defaults)
    remote = evaluate(bench, bench.defaults, executor=PROCESS)
    a, b = comparable(remote), comparable(local)
    for ta, tb in zip(a["tasks"], b["tasks"], strict=True):
        for x, y in zip(ta["attempts"], tb["attempts"], strict=True):
            assert x == y
    reasons = {t.task_id: {a.stop_reason for a in t.attempts} for t in remote.tasks}
    assert reasons["dev-0"] == {"timeout"}
    assert reasons["dev-2"] == {"error"}
    assert remote.tasks[2].attempts[0].error == "ValueError: no answer"


PRINTING_HARNESS = """
import sys

print("imported")  # outside any attempt: the worker's stderr

def run(config, task, ctx):
    print("debug:", task.id, ctx.attempt)
    sys.stdout.write("{not json\\n")
    if task.id == "dev-2":
        raise ValueError("no answer")
    return {"output": task.expected}
"""


def printed_lines(result: EvalResult) -> dict[tuple[str, int], str | None]:
    return {(a.task_id, a.attempt): a.stdout for a in result.attempts}


def expected_printed(result: EvalResult) -> dict[tuple[str, int], str | None]:
    return {(a.task_id, a.attempt): f"debug: {a.task_id} {a.attempt}\n{{not json\n"
            for a in result.attempts}


def test_what_a_harness_prints_in_a_worker_comes_back_with_its_attempt(
        make_bench: MakeBench, capfd: pytest.CaptureFixture[str]) -> None:
    bench = load_bench(make_bench(PRINTING_HARNESS))
    local = evaluate(bench, bench.defaults)
    capfd.readouterr()
    remote = evaluate(bench, bench.defaults, executor=PROCESS)
    assert comparable(remote) == comparable(local)
    assert printed_lines(remote) == expected_printed(remote)
    assert remote.tasks[2].attempts[0].error == "ValueError: no answer"
    # Nothing of the workers on this process's descriptor 1, not even the import's line.
    out, err = capfd.readouterr()
    assert out == ""
    assert "imported" in err


def test_an_attempt_given_up_on_keeps_what_it_printed_before() -> None:
    from forge.core.task import Task
    from forge.executors.remote import run_item_bounded

    def stuck(config: dict[str, Any], task: Task, ctx: Any) -> None:
        print("started", task.id)
        time.sleep(5)

    item = WorkItem(0, {}, Task(id="t-1", input=1).model_dump_json(), 1, 0, "dev", 0.3)
    outcome, abandoned = run_item_bounded(stuck, item)
    assert abandoned and outcome.kind == "timeout"
    assert outcome.stdout == "started t-1\n"


def test_only_the_python_harness_leaves_the_process() -> None:
    from forge.core.spec import Spec

    with pytest.raises(UserError, match="only the 'python' harness"):
        check_executor(ExecutorSettings("process"), Spec(name="command", args={}))
    with pytest.raises(UserError, match="expected one of local, process, ray"):
        check_executor(ExecutorSettings("threads"), Spec(name="python", args={}))


def test_cli_eval_with_the_process_executor() -> None:
    runner = CliRunner()
    args = ["eval", str(ARITH), "--json", "-k", "2"]
    local = runner.invoke(app, args)
    remote = runner.invoke(app, [*args, "--executor", "process", "--workers", "2"])
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    a, b = json.loads(local.stdout), json.loads(remote.stdout)
    for s in (a, b):
        s["metrics"] = {k: v for k, v in s["metrics"].items() if not k.startswith("latency")}
    assert a == b
    bad = runner.invoke(app, [*args, "--executor", "threads"])
    assert bad.exit_code != 0
    assert "expected one of local, process, ray" in str(bad.exception) + bad.output


def test_a_missing_ray_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from forge.executors.ray import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(UserError, match=r"install forge\[ray\]"):
        import_ray()


# -- Ray: a local instance, started and stopped by the tests --------------------------


@pytest.fixture(scope="module")
def ray_local() -> Any:
    """A local Ray instance for this module's Ray tests. Without Ray they skip, except
    in CI (``CI`` set), which installs ``forge[ray]`` and must run them."""
    try:
        import ray
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must run the Ray tests: install forge[ray]")
        pytest.skip("ray is not installed (forge[ray])")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.ray
def test_ray_gives_the_local_result(ray_local: Any, make_bench: MakeBench) -> None:
    bench = load_bench(ARITH)
    ray_settings = ExecutorSettings("ray", workers=2)
    local = evaluate(bench, bench.defaults)
    remote = evaluate(bench, bench.defaults, executor=ray_settings)
    assert comparable(remote) == comparable(local)
    walksat = load_bench(WALKSAT)
    local = evaluate(walksat, walksat.defaults, k=2, task_ids=WALKSAT_TASKS[:3])
    remote = evaluate(walksat, walksat.defaults, k=2, task_ids=WALKSAT_TASKS[:3],
                      executor=ray_settings)
    assert comparable(remote) == comparable(local)
    # A lost actor: only the attempt that killed it is unscored, with the reason.
    dying = load_bench(make_bench(DYING_HARNESS))
    result = evaluate(dying, dying.defaults, executor=ray_settings)
    lost = [a for t in result.tasks for a in t.attempts if not a.scored]
    assert [(a.task_id, a.attempt) for a in lost] == [("dev-1", 0)]
    assert lost[0].error is not None and lost[0].error.startswith("ray task lost: ")
    assert result.summary()["n_scored"] == result.summary()["n_attempts"] - 1


@pytest.mark.ray
def test_ray_brings_back_what_a_harness_prints(ray_local: Any, make_bench: MakeBench) -> None:
    bench = load_bench(make_bench(PRINTING_HARNESS))
    local = evaluate(bench, bench.defaults)
    remote = evaluate(bench, bench.defaults, executor=ExecutorSettings("ray", workers=2))
    assert comparable(remote) == comparable(local)
    assert printed_lines(remote) == expected_printed(remote)


@pytest.mark.ray
def test_ray_records_a_cpu_bound_attempt_past_its_timeout_as_a_timeout(
        ray_local: Any, make_bench: MakeBench) -> None:
    # In the actor, the attempt's thread holds the GIL past the join that bounds it:
    # its result comes back, late, and is discarded.
    tasks = default_tasks()
    bench = load_bench(make_bench(CPU_BOUND_HARNESS, tasks={**tasks, "dev": tasks["dev"][:2]},
                                  rollouts={"k": 1, "timeout_s": 0.5}))
    result = evaluate(bench, bench.defaults, executor=ExecutorSettings("ray", workers=2))
    done = [a for t in result.tasks for a in t.attempts]
    assert [a.stop_reason for a in done] == ["timeout", "timeout"]
    for a in done:
        assert a.error is not None and a.error.startswith("no result within 0.5 s")
        assert a.score is None and a.output is None and a.duration_s >= 0.5
    assert result.pass_rate is None


SLOW_HARNESS = """
import time

def run(config, task, ctx):
    time.sleep(0.2)
    return {"output": task.expected}
"""


def test_cancelling_stops_the_workers_and_ends_attempts_cancelled(make_bench: MakeBench
                                                                  ) -> None:
    import asyncio
    import threading

    from forge.evaluation.evaluate import evaluate_async
    from forge.evaluation.rollout import RolloutEngine

    # 4 tasks x k 20 x 0.2 s on 2 workers is 8 s of work, so the cancel at 1.5 s lands
    # mid-run on a fast machine too (with k 4, 1.6 s: one finished before the cancel).
    bench = load_bench(make_bench(SLOW_HARNESS, rollouts={"k": 20}))
    engines: list[RolloutEngine] = []

    async def main() -> Any:
        threading.Timer(1.5, lambda: engines[0].cancel()).start()
        return await evaluate_async(bench, bench.defaults, executor=PROCESS,
                                    on_engine=engines.append)

    from forge.errors import EvaluationInterrupted

    with pytest.raises(EvaluationInterrupted) as caught:
        asyncio.run(main())
    attempts = [a for t in caught.value.partial.tasks for a in t.attempts]
    reasons = {a.stop_reason for a in attempts}
    assert "cancelled" in reasons and reasons <= {"completed", "cancelled"}


def lane_items(n: int) -> list[WorkItem]:
    return [WorkItem(i, {}, "{}", i, 0, "dev", 1.0) for i in range(n)]


def test_a_lane_queue_holds_its_last_lanes_until_every_chunk_is_settled() -> None:
    # A lane that ends early gives its chunk back: a lane that found the queue empty
    # meanwhile must still be there to take it.
    queue = LaneQueue(lane_items(2), workers=2, cancelled=lambda: False, poll_s=0.01)
    first, second = queue.take(), queue.take()
    assert first is not None and second is not None
    taken: list[list[WorkItem] | None] = []
    waiting = threading.Thread(target=lambda: taken.append(queue.take()))
    waiting.start()
    time.sleep(0.1)
    assert taken == []  # empty, but a chunk is out
    queue.settle(second)  # that lane ends: its chunk goes back
    waiting.join(timeout=5)
    assert taken == [second]
    queue.settle()
    queue.settle()
    assert queue.take() is None  # empty and nothing out: the lanes end


def test_a_lane_queue_gives_back_singly_and_stops_on_cancel() -> None:
    cancelled = threading.Event()
    queue = LaneQueue(lane_items(8), workers=1, cancelled=cancelled.is_set, poll_s=0.01)
    chunk = queue.take()
    assert chunk is not None and len(chunk) == 2
    queue.settle(chunk, singly=True)
    assert queue.take() == chunk[:1]
    assert queue.take() == chunk[1:]
    cancelled.set()
    assert queue.take() is None  # two chunks out, three queued: cancelled all the same
