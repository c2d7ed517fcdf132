"""The ``ag2`` harness: a real ``ag2.Agent`` per attempt, its model scripted by
``ag2.testing.TestConfig`` (tests/ag2_support.py), everything else real."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ag2_support import require_ag2, tasks, write_ag2_bench
from conftest import stored_rows

from forge.bench.loader import load_bench
from forge.core.spec import BuildContext, Spec
from forge.core.task import Task
from forge.errors import BenchError
from forge.evaluation.evaluate import evaluate
from forge.harness import HARNESSES, AttemptContext, AttemptTimeout
from forge.harness.ag2 import Ag2Harness
from forge.results.model import AttemptResult, EvalResult

pytestmark = pytest.mark.usefixtures("_ag2")

WEATHER = {"weather in Lima?": "sunny", "weather in Oslo?": "rain",
           "weather in Atlantis?": "unknown", "weather in both?": "sunny, rain",
           "just guess": "sunny"}


@pytest.fixture
def _ag2() -> None:
    require_ag2()


@pytest.fixture
def agents() -> Iterator[Any]:
    """The ``agents`` module the bench loaded, its event log emptied for the test."""
    yield None
    module = sys.modules.get("agents")
    if module is not None:
        module.EVENTS.clear()
        module.CONFIGS.clear()


def run(bench: Path, **kwargs: Any) -> EvalResult:
    loaded = load_bench(bench)
    return evaluate(loaded, loaded.defaults, split="dev", **kwargs)


def by_input(result: EvalResult, bench: Path) -> dict[str, AttemptResult]:
    inputs = {t.id: t.input for t in load_bench(bench).tasks("dev")}
    return {inputs[t.task_id]: t.attempts[0] for t in result.tasks}


def test_an_attempt_records_the_answer_executed_tool_calls_usage_and_cost(
        tmp_path: Path) -> None:
    bench = write_ag2_bench(
        tmp_path, {"dev": tasks("weather in Lima?", "weather in both?", "just guess",
                                expected=WEATHER)},
        harness='{ag2: {target: "agents:make_agent", '
                'prices: {input_per_mtok: 1000000, output_per_mtok: 2000000}}}')
    result = run(bench)
    assert result.n_scored == 3 and result.pass_rate == 1.0
    got = by_input(result, bench)

    lima = got["weather in Lima?"].output
    assert lima is not None and lima.output == "sunny"
    [call] = lima.tool_calls
    assert (call.name, call.args, call.ok, call.error) == ("lookup", {"city": "Lima"}, True, None)
    assert call.result == {"city": "Lima", "sky": "sunny", "temp": 21}
    assert (lima.usage.input_tokens, lima.usage.output_tokens) == (30, 4)
    assert lima.cost == pytest.approx(30 * 1.0 + 4 * 2.0)
    assert lima.metrics == {"llm_calls": 2.0, "tool_errors": 0.0}
    assert lima.signals == []
    turns = lima.trace["ag2_turns"]
    assert [t["tool_calls"] for t in turns] == [1, 0] and turns[-1]["content"] == "sunny"
    assert lima.trace["agent"] == "weather"

    both = got["weather in both?"].output
    assert both is not None
    assert [(c.name, c.args["city"]) for c in both.tool_calls] == [("lookup", "Lima"),
                                                                    ("lookup", "Oslo")]
    guess = got["just guess"].output
    assert guess is not None and guess.tool_calls == [] and guess.usage.input_tokens == 8
    # forge's own metrics come from what the harness recorded.
    assert got["weather in both?"].metrics["tool_calls"] == 2.0
    assert got["weather in both?"].metrics["input_tokens"] == 50.0


def test_a_tool_that_raises_is_a_failed_call_and_the_run_goes_on(tmp_path: Path) -> None:
    """With a model that takes the error back (as a real provider does), the attempt
    completes: the call is recorded ok=False with the tool's error."""
    bench = write_ag2_bench(tmp_path, {"dev": tasks("weather in Atlantis?", expected=WEATHER)})
    attempt = run(bench).tasks[0].attempts[0]
    assert attempt.stop_reason == "completed" and attempt.passed
    assert attempt.output is not None
    [call] = attempt.output.tool_calls
    assert call.ok is False and call.name == "lookup" and call.args == {"city": "Atlantis"}
    assert call.error == "KeyError: 'no such city: Atlantis'"
    assert "tool_error" in attempt.output.signals
    assert attempt.output.metrics["tool_errors"] == 1.0


def test_a_tool_error_the_model_client_re_raises_ends_the_attempt_naming_the_tool(
        tmp_path: Path) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks("weather in Atlantis?", "weather in Lima?",
                                                    expected=WEATHER)})
    loaded = load_bench(bench)
    config = loaded.registry.with_values(loaded.defaults, {"raise_tool_errors": True})
    result = evaluate(loaded, config, split="dev")
    got = by_input(result, bench)
    failed = got["weather in Atlantis?"]
    assert failed.stop_reason == "error" and not failed.scored
    assert failed.error == ("AgentToolError: tool 'lookup' raised KeyError: "
                            "'no such city: Atlantis'")
    assert got["weather in Lima?"].passed  # the evaluation went on
    assert result.summary()["unscored_by_reason"] == {
        "error: AgentToolError: tool 'lookup' raised KeyError: 'no such city: Atlantis'": 1}


def test_an_unknown_tool_is_a_failed_call_with_its_signal(tmp_path: Path) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks("unknown tool", expected={"unknown tool":
                                                                              "ok"})})
    attempt = run(bench).tasks[0].attempts[0]
    assert attempt.output is not None and attempt.passed
    [call] = attempt.output.tool_calls
    assert call.name == "nope" and not call.ok and "ToolNotFoundError" in str(call.error)
    assert {"tool_error", "tool_not_found"} <= set(attempt.output.signals)


def test_a_tool_that_hangs_times_out_and_is_cancelled_the_others_scored(
        tmp_path: Path, agents: None) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks("hang in a tool", "weather in Lima?",
                                                    expected=WEATHER)},
                            rollouts={"timeout_s": 1.0})
    began = time.monotonic()
    result = run(bench)
    assert time.monotonic() - began < 4.0
    got = by_input(result, bench)
    hung = got["hang in a tool"]
    assert hung.stop_reason == "timeout" and not hung.scored and hung.error
    assert got["weather in Lima?"].passed
    # The agent's run was cancelled, its tool with it: nothing is left running.
    deadline = time.monotonic() + 2.0
    events = sys.modules["agents"].EVENTS
    while "slow cancelled" not in events and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "slow started" in events and "slow cancelled" in events


def test_a_blocking_tool_times_out_without_holding_the_evaluation(tmp_path: Path) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks("block in a tool", "just guess",
                                                    expected=WEATHER)},
                            rollouts={"timeout_s": 0.5})
    began = time.monotonic()
    result = run(bench)
    assert time.monotonic() - began < 2.5  # the tool sleeps 3 s
    got = by_input(result, bench)
    assert got["block in a tool"].stop_reason == "timeout"
    assert got["just guess"].passed


@pytest.mark.parametrize(("question", "reason"), [
    ("model fails", "RuntimeError: model endpoint down"),
    ("huge answer", "output too large"),
])
def test_a_failing_or_oversized_run_is_an_error_with_its_reason(
        tmp_path: Path, question: str, reason: str) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks(question, "just guess", expected=WEATHER)})
    got = by_input(run(bench), bench)
    assert got[question].stop_reason == "error" and reason in str(got[question].error)
    assert got["just guess"].passed


@pytest.mark.parametrize(("target", "reason"), [
    ("agents:make_nothing", "agents:make_nothing returned dict, expected an ag2.Agent"),
    ("agents:make_broken", "ValueError: the factory is broken"),
])
def test_a_factory_that_fails_leaves_the_attempt_unscored_with_its_reason(
        tmp_path: Path, target: str, reason: str) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks("just guess", "weather in Lima?")},
                            target=target)
    result = run(bench)
    assert result.n_scored == 0 and result.n_attempts == 2
    assert all(reason in str(a.error) for a in result.attempts)


def test_a_reply_that_does_not_fit_the_response_schema_is_an_error(tmp_path: Path) -> None:
    bench = write_ag2_bench(
        tmp_path, {"dev": [{"id": "good", "input": "forecast", "expected": None},
                           {"id": "bad", "input": "bad forecast", "expected": None}]},
        target="agents:make_structured")
    loaded = load_bench(bench)
    harness = HARNESSES.build(loaded.harness_spec, BuildContext(base_dir=bench.parent))
    good = _run_one(harness, loaded.tasks("dev")[0])
    assert good.output == {"sky": "sunny", "temp": 21}
    with pytest.raises(ValueError, match="does not fit the agent's response_schema"):
        _run_one(harness, loaded.tasks("dev")[1])


def test_each_attempt_gets_a_fresh_agent_from_a_private_config(tmp_path: Path,
                                                              agents: None) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks("weather in Lima?", "just guess",
                                                    expected=WEATHER)},
                            rollouts={"k": 3})
    result = run(bench)
    assert result.n_scored == 6
    configs = sys.modules["agents"].CONFIGS
    # One factory call per attempt, each with the config as forge has it: the factory
    # scribbling on its copy reached no other attempt.
    assert len(configs) == 6
    assert all(c == {"tools": True, "raise_tool_errors": False} for c in configs)


def test_an_async_factory_and_one_taking_ctx(tmp_path: Path) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks("just guess", expected=WEATHER)},
                            target="agents:make_agent_async")
    assert run(bench).pass_rate == 1.0
    seeded = write_ag2_bench(tmp_path / "seeded", {"dev": tasks("just guess")},
                             target="agents:make_seeded", rollouts={"k": 2})
    result = run(seeded)
    outputs = [a.output.output for a in result.attempts if a.output is not None]
    assert outputs == [f"seed {a.seed} attempt {a.attempt}" for a in result.attempts]


def test_cancelling_an_attempt_cancels_the_agent_s_run(tmp_path: Path, agents: None) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks("hang in a tool")})
    loaded = load_bench(bench)
    harness = HARNESSES.build(loaded.harness_spec, BuildContext(base_dir=bench.parent))
    task = loaded.tasks("dev")[0]

    async def cancel_soon() -> None:
        running = asyncio.ensure_future(harness.run(dict(loaded.defaults.values), task,
                                                    _ctx(timeout_s=30.0)))
        events = sys.modules["agents"].EVENTS
        while "slow started" not in events:
            await asyncio.sleep(0.01)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        for _ in range(200):
            if "slow cancelled" in events:
                break
            await asyncio.sleep(0.01)
        await harness.aclose()

    asyncio.run(asyncio.wait_for(cancel_soon(), 10))
    assert "slow cancelled" in sys.modules["agents"].EVENTS


def test_the_harness_times_out_at_the_attempt_s_deadline(tmp_path: Path) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks("hang in a tool")})
    loaded = load_bench(bench)
    harness = HARNESSES.build(loaded.harness_spec, BuildContext(base_dir=bench.parent))
    with pytest.raises(AttemptTimeout, match=r"no reply from the agent within 0.3 s; "
                                              r"cancelled with 0 tool calls done, 1 running"):
        _run_one(harness, loaded.tasks("dev")[0], timeout_s=0.3)


def test_the_identity_names_ag2_s_version_and_follows_the_agent_s_source(
        tmp_path: Path) -> None:
    import ag2

    bench = write_ag2_bench(tmp_path, {"dev": tasks("just guess")})
    first = load_bench(bench).harness_identity
    harness = HARNESSES.build(Spec(name="ag2", args={"target": "agents:make_agent"}),
                              BuildContext(base_dir=tmp_path))
    assert isinstance(harness, Ag2Harness) and f"ag2={ag2.__version__}" in harness.identity
    agents = tmp_path / "agents.py"
    agents.write_text(agents.read_text() + "\n# changed\n", encoding="utf-8")
    assert load_bench(bench).harness_identity != first


def test_a_search_over_hostile_attempts_records_each_reason_and_goes_on(tmp_path: Path) -> None:
    from forge.search.launch import launch_search

    bench = write_ag2_bench(
        tmp_path, {"dev": tasks("hang in a tool", "model fails", "huge answer",
                                "weather in Atlantis?", "weather in Lima?", "just guess",
                                expected=WEATHER),
                   "val": tasks("weather in Oslo?", split="val", expected=WEATHER),
                   "test": tasks("weather in both?", split="test", expected=WEATHER)},
        rollouts={"timeout_s": 0.5})
    outcome = launch_search(bench, journals=tmp_path / "journals", run_id="hostile",
                            max_steps=1, patience=1, run_test=False)
    assert outcome.stop_reason != "start_failed" and outcome.steps == 1
    assert [r["kind"] for r in outcome.records][-1] == "end"
    # Every failed attempt the search ran is journaled with its reason, charged to the
    # config that ran it; the others were scored.
    rows = [r["result"] for r in stored_rows(tmp_path / "journals" / "hostile")]
    failed = [r for r in rows if r["stop_reason"] != "completed"]
    assert failed and len(failed) < len(rows)
    expected = ("timeout: no result within", "timeout: AttemptTimeout: no reply from the agent",
                "error: RuntimeError: model endpoint down", "error: output too large",
                "error: AgentToolError: tool 'lookup' raised")
    assert all(f"{r['stop_reason']}: {r['error']}".startswith(expected) for r in failed)
    labels = {reason.label for reason in outcome.failures.reasons(top=None)}
    assert len(labels) >= 2 and all(label.startswith(expected) for label in labels)


def test_a_bad_target_is_one_line_naming_the_field(tmp_path: Path) -> None:
    bench = write_ag2_bench(tmp_path, {"dev": tasks("just guess")}, target="agents:nosuch")
    with pytest.raises(BenchError) as err:
        load_bench(bench)
    assert err.value.field == "harness.ag2" and "has no attribute 'nosuch'" in str(err.value)


def _ctx(timeout_s: float = 5.0) -> AttemptContext:
    return AttemptContext(seed=7, attempt=0, split="dev", timeout_s=timeout_s,
                          deadline=time.monotonic() + timeout_s)


def _run_one(harness: Any, task: Task, timeout_s: float = 5.0) -> Any:
    async def once() -> Any:
        try:
            return await harness.run({"tools": True, "raise_tool_errors": False}, task,
                                     _ctx(timeout_s))
        finally:
            await harness.aclose()

    return asyncio.run(once())
