"""agno: a real agno Agent with real Python tools, only its model scripted
(tests/agno_scripted.py): what an attempt records, isolation, and hostile agents."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agno_needed import need_agno

need_agno()

from agno_scripted import HUNG, write_agno_bench  # noqa: E402
from conftest import stored_rows  # noqa: E402

from forge.bench.loader import load_bench  # noqa: E402
from forge.core.task import Task  # noqa: E402
from forge.evaluation.evaluate import evaluate  # noqa: E402
from forge.harness import AttemptContext, ToolCall, Usage  # noqa: E402
from forge.results.model import EvalResult  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "benches" / "agno-support"

PRELUDE = '''
import time

from agno.agent import Agent
from agno.tools import tool
from agno_scripted import (ScriptedModel, answer, block, call, calls, fail, hang,
                           raw_call)


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def boom(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


def stall() -> str:
    """Never answers in time."""
    time.sleep(30)
    return "late"


@tool(requires_confirmation=True)
def delete_everything() -> str:
    """Needs a person's yes."""
    return "deleted"
'''

TASKS = {"dev": [{"id": "d1", "input": "What is 2 + 3?", "expected": "5"},
                 {"id": "d2", "input": "What is 1 + 4?", "expected": "5"},
                 {"id": "d3", "input": "Slow one: 2 + 3?", "expected": "5"}],
         "val": [{"id": "v1", "input": "val", "expected": "5"}],
         "test": [{"id": "t1", "input": "test", "expected": "5"}]}


def bench_with(tmp_path: Path, factory: str, **options: Any) -> Path:
    options.setdefault("tasks", TASKS)
    return write_agno_bench(tmp_path / "bench", PRELUDE + factory, **options)


def run_dev(bench_file: Path, k: int = 1, **settings: Any) -> EvalResult:
    bench = load_bench(bench_file)
    return evaluate(bench, bench.registry.with_values(bench.defaults, settings), k=k)


ANSWERS = '''
def make_agent(config):
    model = ScriptedModel(script=[call("add", a=2, b=3), answer("5")])
    return Agent(model=model, tools=[add, boom])
'''


def test_an_attempt_keeps_the_answer_the_executed_calls_the_usage_and_the_cost(
        tmp_path: Path) -> None:
    result = run_dev(bench_with(tmp_path, ANSWERS))
    attempt = result.attempts[0]
    assert attempt.stop_reason == "completed" and attempt.score is not None
    assert attempt.score.passed
    out = attempt.output
    assert out is not None and out.output == "5"
    assert out.tool_calls == [ToolCall(name="add", args={"a": 2, "b": 3}, ok=True, result="5")]
    # Two model turns of 10 in and 5 out, at $0.001 each, as the model reported them.
    assert out.usage == Usage(input_tokens=20, output_tokens=10)
    assert out.cost == pytest.approx(0.002)
    assert out.metrics == {"tool_errors": 0.0, "total_tokens": 30.0}
    assert out.signals == []
    assert out.trace["agno_run"]["status"] == "COMPLETED"
    assert [m["role"] for m in out.trace["agno_run"]["messages"]] == [
        "user", "assistant", "tool", "assistant"]
    assert attempt.metrics["cost"] == pytest.approx(0.002)
    assert attempt.metrics["tool_calls"] == 1


def test_a_model_that_reports_no_cost_gives_none_not_zero(tmp_path: Path) -> None:
    result = run_dev(bench_with(tmp_path, '''
def make_agent(config):
    return Agent(model=ScriptedModel(script=[answer("5")], cost=None))
'''))
    out = result.attempts[0].output
    assert out is not None and out.cost is None
    assert out.usage == Usage(input_tokens=10, output_tokens=5)


def test_failed_and_refused_calls(tmp_path: Path) -> None:
    """A tool that raises is a failed execution, kept; a call past the tool-call limit
    never ran and is not recorded, but says so as a signal; the attempt is scored."""
    result = run_dev(bench_with(tmp_path, '''
def make_agent(config):
    model = ScriptedModel(script=[
        call("boom", reason="x"), call("add", a=2, b=3), call("add", a=9, b=9), answer("5")])
    return Agent(model=model, tools=[add, boom], tool_call_limit=2)
'''))
    attempt = result.attempts[0]
    assert attempt.stop_reason == "completed" and attempt.score is not None
    out = attempt.output
    assert out is not None
    boom, add = out.tool_calls
    assert (boom.name, boom.ok, boom.result) == ("boom", False, None)
    assert boom.error is not None and "boom: x" in boom.error
    assert (add.name, add.args, add.ok, add.result) == ("add", {"a": 2, "b": 3}, True, "5")
    assert out.signals == ["tool_call_limit_hit", "tool_error"]
    assert out.metrics["tool_errors"] == 1.0


def test_the_toolcall_scorer_and_the_failure_reasons_read_agno_s_executions(
        tmp_path: Path) -> None:
    tasks = {**TASKS, "dev": [{**t, "expected_tools": [{"name": "add", "args": {"a": 2}}]}
                              for t in TASKS["dev"]]}
    result = run_dev(bench_with(tmp_path, '''
def make_agent(config):
    model = ScriptedModel(script=[call("boom", reason="x"), call("add", a=2, b=3), answer("5")],
                          by_input={"1 + 4": [call("boom", reason="y"), answer("5")],
                                    "Slow": [raw_call("add", "{not json"), answer("5")]})
    return Agent(model=model, tools=[add, boom])
''', tasks=tasks, scorer="toolcall"))
    verdicts = {a.task_id: a.score.passed for a in result.attempts if a.score is not None}
    # d2's only call failed, d3's was malformed and never ran: neither executed add.
    assert verdicts == {"d1": True, "d2": False, "d3": False}
    d3 = next(a for a in result.attempts if a.task_id == "d3")
    assert d3.output is not None and d3.output.tool_calls == []


def test_each_attempt_has_a_fresh_agent_its_own_config_and_its_context(
        tmp_path: Path) -> None:
    bench_file = bench_with(tmp_path, '''
SEEN = []


def make_agent(config, ctx):
    # A config shared between attempts would carry this write into the next one.
    assert config["effort"] == 1, config
    config["effort"] = 99
    agent = Agent(model=ScriptedModel(script=[answer("5")]))
    SEEN.append((id(agent), ctx.seed, ctx.attempt))
    agent.keep_me = agent  # nothing collected before the test counts them
    return agent
''')
    result = run_dev(bench_file, k=2)
    assert result.n_scored == 6
    import harness  # the bench's module, as forge imported it

    seen = harness.SEEN
    assert len({agent for agent, _, _ in seen}) == 6
    assert sorted(seed for _, seed, _ in seen) == sorted(a.seed for a in result.attempts)


def test_a_run_that_errors_is_unscored_with_agno_s_reason_and_the_others_go_on(
        tmp_path: Path) -> None:
    result = run_dev(bench_with(tmp_path, '''
def make_agent(config):
    model = ScriptedModel(script=[answer("5")], by_input={"1 + 4": [fail("model down")]})
    return Agent(model=model)
'''), k=2)
    failed = [a for a in result.attempts if a.task_id == "d2"]
    assert {a.stop_reason for a in failed} == {"error"}
    assert {a.error for a in failed} == {"AgnoRunError: RuntimeError: model down"}
    assert result.n_scored == 4
    assert result.unscored_by_reason() == {"error: AgnoRunError: RuntimeError: model down": 2}


def test_a_factory_that_raises_or_builds_no_agent_is_an_error(tmp_path: Path) -> None:
    bench_file = bench_with(tmp_path, '''
def make_agent(config):
    if config["effort"] > 1:
        raise ValueError("no agent for this effort")
    return "an agent, honest" if config["mode"] == "careful" else Agent(
        model=ScriptedModel(script=[answer("5")]))
''')
    assert run_dev(bench_file).n_scored == 3
    raised = run_dev(bench_file, effort=2)
    assert {a.error for a in raised.attempts} == {"ValueError: no agent for this effort"}
    wrong = run_dev(bench_file, mode="careful")
    assert {a.error for a in wrong.attempts} == {
        "TypeError: the factory returned str, not an agno.agent.Agent"}


def test_a_run_that_pauses_for_a_person_is_an_error_naming_the_tool(tmp_path: Path) -> None:
    result = run_dev(bench_with(tmp_path, '''
def make_agent(config):
    model = ScriptedModel(script=[call("delete_everything"), answer("5")])
    return Agent(model=model, tools=[delete_everything])
'''))
    attempt = result.attempts[0]
    assert attempt.stop_reason == "error" and attempt.error is not None
    assert "delete_everything waits for a person" in attempt.error


def test_an_oversized_answer_is_unscored_and_nothing_of_it_is_kept(tmp_path: Path) -> None:
    result = run_dev(bench_with(tmp_path, '''
def make_agent(config):
    return Agent(model=ScriptedModel(script=[answer("x" * (17 * 2**20))],
                                     by_input={"1 + 4": [answer("5")]}))
'''))
    by_task = {a.task_id: a for a in result.attempts}
    assert by_task["d1"].stop_reason == "error" and by_task["d1"].output is None
    assert by_task["d1"].error is not None and "output too large" in by_task["d1"].error
    assert by_task["d2"].score is not None and by_task["d2"].score.passed


def test_an_agent_that_hangs_is_cancelled_at_the_timeout_and_the_others_finish(
        tmp_path: Path) -> None:
    HUNG["cancelled"].clear()
    bench_file = bench_with(tmp_path, '''
def make_agent(config):
    return Agent(model=ScriptedModel(script=[answer("5")], by_input={"Slow": [hang(60)]}))
''', rollouts={"timeout_s": 1.0})
    start = time.monotonic()
    result = run_dev(bench_file)
    assert time.monotonic() - start < 10
    by_task = {a.task_id: a for a in result.attempts}
    assert by_task["d3"].stop_reason == "timeout"
    assert result.n_scored == 2
    # The run was cancelled, not abandoned to run on.
    assert HUNG["cancelled"].wait(5)


@pytest.mark.parametrize("stuck", ["block(30)", "call('stall')"])
def test_an_agent_stuck_in_blocking_code_times_out_without_stalling_forge(
        tmp_path: Path, stuck: str) -> None:
    """A model that blocks its own event loop, or a sync tool that never returns: the
    attempt times out, the others run meanwhile, and nothing left holds the process."""
    bench_file = bench_with(tmp_path, f'''
def make_agent(config):
    model = ScriptedModel(script=[answer("5")], by_input={{"Slow": [{stuck}, answer("5")]}})
    return Agent(model=model, tools=[stall])
''', rollouts={"timeout_s": 1.0})
    start = time.monotonic()
    result = run_dev(bench_file)
    assert time.monotonic() - start < 10
    by_task = {a.task_id: a for a in result.attempts}
    assert by_task["d3"].stop_reason == "timeout"
    assert by_task["d1"].duration_s < 1.0 and by_task["d1"].score is not None
    # What is still stuck is on daemon threads: nothing holds the interpreter at exit.
    assert all(t.daemon for t in threading.enumerate() if t is not threading.main_thread())


def test_a_cancelled_attempt_cancels_its_run(tmp_path: Path) -> None:
    HUNG["cancelled"].clear()
    HUNG["started"].clear()
    bench = load_bench(bench_with(tmp_path, '''
def make_agent(config):
    return Agent(model=ScriptedModel(script=[hang(60)]))
'''))
    harness = bench.build_harness()
    ctx = AttemptContext(seed=1, attempt=0, split="dev", timeout_s=60,
                         deadline=time.monotonic() + 60)

    async def cancel_it() -> None:
        call = asyncio.ensure_future(harness.run(dict(bench.defaults.values),
                                                 Task(id="x", input="hi"), ctx))
        await asyncio.to_thread(HUNG["started"].wait, 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await harness.aclose()

    asyncio.run(cancel_it())
    assert HUNG["cancelled"].wait(5)


def test_runs_on_many_event_loops_share_agno_s_cancellation_manager(tmp_path: Path) -> None:
    """Every Agno run registers with one process-wide manager under one asyncio lock;
    forge's attempts each have a loop of their own, and none may fail ("bound to a
    different event loop") or hang on it. Thread switches as often as Python allows
    make the contention that a long search meets now and then."""
    import sys
    import uuid

    from agno.run.cancel import get_cancellation_manager

    load_bench(bench_with(tmp_path, ANSWERS))  # building the agno harness prepares it
    manager = get_cancellation_manager()
    errors: list[str] = []

    async def runs() -> None:
        for _ in range(1000):
            run_id = uuid.uuid4().hex
            try:
                await manager.aregister_run(run_id)
                await manager.ais_cancelled(run_id)
                await manager.acleanup_run(run_id)
            except RuntimeError as exc:
                errors.append(str(exc))
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=asyncio.run, args=(runs(),), daemon=True)
                   for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert not any(thread.is_alive() for thread in threads)


def test_a_search_goes_on_past_a_config_whose_agent_fails(tmp_path: Path) -> None:
    from forge.search.launch import launch_search

    bench_file = bench_with(tmp_path, '''
def make_agent(config):
    if config["mode"] == "careful":
        return Agent(model=ScriptedModel(script=[fail("careful mode is broken")]))
    return Agent(model=ScriptedModel(script=[answer("5")]))
''')
    outcome = launch_search(bench_file, journals=tmp_path / "journals", run_id="r", k=2,
                            max_steps=3, patience=3, budget_rollouts=2000)
    kinds = [r["kind"] for r in outcome.records]
    assert kinds[0] == "start" and kinds[-1] == "end"
    careful = [r for r in outcome.records if r["kind"] == "candidate"
               and r["move"]["target"] == "mode"]
    assert careful and all(r["verdict"] != "promoted" for r in careful)
    rows = stored_rows(tmp_path / "journals" / "r")
    errors = {r["result"]["error"] for r in rows if r["result"]["stop_reason"] == "error"}
    assert errors == {"AgnoRunError: RuntimeError: careful mode is broken"}


def test_a_search_of_the_example_bench_promotes_a_setting_that_matters(
        tmp_path: Path) -> None:
    """benches/agno-support: its Agno agent fails refund questions at the default
    tool_call_limit of 2 (they need three tools); the search raises it, and journals
    every attempt with Agno's tool executions and token usage."""
    from forge.search.launch import launch_search

    outcome = launch_search(SUPPORT, journals=tmp_path, run_id="support", max_steps=1,
                            patience=1, run_test=False)
    assert [(p["target"], p["before"]) for p in outcome.promotions] == [
        ("tool_call_limit", 2)]
    assert outcome.final_config["tool_call_limit"] >= 3
    rows = stored_rows(tmp_path / "support")
    assert rows and all(r["result"]["stop_reason"] == "completed" for r in rows)
    outputs = [r["result"]["output"] for r in rows]
    assert all(o["usage"]["input_tokens"] > 0 and o["cost"] > 0 for o in outputs)
    names = {c["name"] for o in outputs for c in o["tool_calls"]}
    assert names == {"lookup_order", "return_policy", "compute_refund"}
    assert any("tool_call_limit_hit" in o["signals"] for o in outputs)
