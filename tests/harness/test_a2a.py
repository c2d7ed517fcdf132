"""a2a: forge as an A2A client of a real a2a-sdk agent on 127.0.0.1; failures are data.

The agent (``a2a_agent.py``) runs in a process of its own, started by the tests or by
forge itself (``serve``); its brain is scripted, its server and protocol are the SDK's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_process import (
    HERE,
    AgentProcess,
    alive,
    eval_without,
    hostile,
    need_sdk,
    questions,
    run_eval,
    search_through_failures,
    write_protocol_bench,
)
from conftest import (
    REPO,
    assert_user_error,
    run_forge,
    stored_results,
)

from forge.bench.loader import load_bench
from forge.results.model import load_result
from forge.secrets.masking import clear_secrets

AGENT = str(HERE / "a2a_agent.py")


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    yield
    clear_secrets()


@pytest.fixture(scope="module")
def streaming_agent() -> Iterator[AgentProcess]:
    need_sdk("a2a.server", "a2a")
    with AgentProcess("a2a_agent.py") as agent:
        yield agent


@pytest.fixture(scope="module")
def polling_agent() -> Iterator[AgentProcess]:
    need_sdk("a2a.server", "a2a")
    with AgentProcess("a2a_agent.py", "--no-streaming") as agent:
        yield agent


@pytest.fixture(params=["streaming", "polling"])
def agent(request: pytest.FixtureRequest) -> AgentProcess:
    running: AgentProcess = request.getfixturevalue(f"{request.param}_agent")
    return running


def write_a2a_bench(root: Path, args: dict[str, Any], tasks: list[dict[str, Any]],
                    **options: Any) -> Path:
    return write_protocol_bench(root, {"a2a": args}, tasks, **options)


# -- answers, and the config on its way -----------------------------------------------------------


def test_eval_sends_the_config_in_the_metadata_and_keeps_the_agents_report(
        tmp_path: Path, agent: AgentProcess, capsys: pytest.CaptureFixture[str]) -> None:
    bench = write_a2a_bench(tmp_path / "b", {"url": agent.url},
                            questions(1, 2, 3, effort=3, mode="careful"), k=2)
    seen_before = len(agent.log()["metadata"])
    code, out, err = run_forge(capsys, "eval", bench, "--json", "--set", "effort=3",
                               "--set", "mode=careful", "--save", tmp_path / "r.json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["n_attempts"], summary["n_scored"], summary["pass_rate"]) == (6, 6, 1.0)

    result = load_result(tmp_path / "r.json")
    sent = agent.log()["metadata"][seen_before:]
    assert len(sent) == 6
    by_seed = {m["seed"]: m for m in sent}
    for attempt in result.attempts:
        meta = by_seed[attempt.seed % 2**53]  # doubles in a protobuf Struct
        assert meta["config"] == {"effort": 3, "mode": "careful"}
        assert (meta["task_id"], meta["attempt"], meta["split"]) == (
            attempt.task_id, attempt.attempt, "dev")
        output = attempt.output
        assert output is not None
        # What the agent reported of its run is the attempt's, as from any harness.
        n = int(attempt.task_id[1:])
        assert [c.name for c in output.tool_calls] == ["multiply"]
        assert output.tool_calls[0].args == {"a": n, "b": 3}
        assert output.usage.input_tokens == 30 and output.usage.output_tokens == 2
        assert output.signals == ["thought_hard"]
        assert output.metrics["effort_seen"] == 3
        assert output.metrics["a2a_events"] >= 2 and output.metrics["response_bytes"] > 100
        assert output.trace["states"][-1] == "completed"
        assert output.trace["artifacts"] == ["answer"]
    # Each attempt its own context: nothing of one conversation reaches another.
    contexts = {a.output.trace["context_id"] for a in result.attempts if a.output}
    assert len(contexts) == 6


def test_streaming_follows_the_agent_card(tmp_path: Path, streaming_agent: AgentProcess,
                                          polling_agent: AgentProcess) -> None:
    tasks = questions(1)
    streamed = run_eval(write_a2a_bench(tmp_path / "s", {"url": streaming_agent.url}, tasks))
    polled = run_eval(write_a2a_bench(tmp_path / "p", {"url": polling_agent.url}, tasks))
    off = run_eval(write_a2a_bench(tmp_path / "o", {"url": streaming_agent.url,
                                                   "streaming": False}, tasks))
    outputs = [r["q1"].output for r in (streamed, polled, off)]
    assert [o.trace["streaming"] for o in outputs if o is not None] == [True, False, False]
    assert all(r["q1"].score and r["q1"].score.passed for r in (streamed, polled, off))


def test_an_agent_that_answers_with_a_message(tmp_path: Path, agent: AgentProcess) -> None:
    results = run_eval(write_a2a_bench(tmp_path / "b", {"url": agent.url},
                                       [{"id": "m", "input": "a message", "expected": "x"}]))
    output = results["m"].output
    assert output is not None and output.output == "a direct answer"
    assert output.trace["answered_with"] == "message"


# -- task states that are no answer ---------------------------------------------------------------


def test_failed_rejected_and_waiting_tasks_are_unscored_with_their_reason(
        tmp_path: Path, agent: AgentProcess) -> None:
    bench = write_a2a_bench(tmp_path / "b", {"url": agent.url},
                            questions(1, 2) + hostile("fail", "reject", "ask"))
    cancelled_before = len(agent.log()["cancelled"])
    results = run_eval(bench)
    assert results["q1"].score and results["q1"].score.passed
    assert results["q2"].score and results["q2"].score.passed
    for name in ("fail", "reject", "ask"):
        assert results[name].stop_reason == "error" and results[name].score is None
    assert results["fail"].error == ("A2AAttemptError: the agent's task ended failed: "
                                     "the tool backend is down")
    assert results["reject"].error == ("A2AAttemptError: the agent's task ended rejected: "
                                       "not my kind of question")
    assert results["ask"].error == (
        "A2AAttemptError: the agent's task stopped for input-required: which one?; forge "
        "sends one message an attempt; sent tasks/cancel: the task is now canceled")
    # The task left waiting for input was cancelled, so the agent holds nothing open.
    assert len(agent.log()["cancelled"]) == cancelled_before + 1


def test_a_task_that_never_ends_is_cancelled_and_the_attempt_times_out(
        tmp_path: Path, agent: AgentProcess) -> None:
    bench = write_a2a_bench(tmp_path / "b", {"url": agent.url},
                            questions(1, 2) + hostile("hang"), timeout_s=1.5)
    cancelled_before = len(agent.log()["cancelled"])
    results = run_eval(bench)
    hang = results["hang"]
    assert hang.stop_reason == "timeout" and hang.score is None
    assert hang.error == ("AttemptTimeout: the agent's task did not end within 1.5 s (its "
                          "state: working); sent tasks/cancel: the task is now canceled")
    assert hang.duration_s < 1.5  # ended by the harness, before the engine's deadline
    assert results["q1"].score and results["q2"].score  # the evaluation went on
    log = agent.log()
    assert len(log["cancelled"]) == cancelled_before + 1
    assert log["running"] == 0  # the agent's work on it stopped


# -- a hostile boundary ---------------------------------------------------------------------------


def test_malformed_answers_and_broken_streams_are_errors(
        tmp_path: Path, streaming_agent: AgentProcess) -> None:
    tricks = ("garbage", "bad-result", "rpc-error", "cut-stream", "bad-event", "error-event",
              "other-task")
    bench = write_a2a_bench(tmp_path / "b", {"url": streaming_agent.url},
                            questions(1, 2) + hostile(*tricks))
    results = run_eval(bench)
    assert results["q1"].score and results["q2"].score
    errors = {name: results[name].error or "" for name in tricks}
    assert all(results[name].stop_reason == "error" for name in tricks)
    assert "Invalid JSON-RPC response in SSE stream" in errors["garbage"]
    assert "a malformed answer from the agent" in errors["bad-result"]
    assert "A2A error from the agent: the agent's database is locked" in errors["rpc-error"]
    assert "the event stream ended before the task did (its state: working)" in (
        errors["cut-stream"])
    assert "Invalid JSON-RPC response in SSE stream" in errors["bad-event"]
    assert "A2A error from the agent: stream broke" in errors["error-event"]
    assert "an event of another task ('t-2') came in the stream of task 't-1'" in (
        errors["other-task"])
    # A task the agent had begun is cancelled however its stream broke.
    for name in ("cut-stream", "bad-event", "error-event", "other-task"):
        assert "sent tasks/cancel: " in errors[name]


def test_malformed_answers_when_polling(tmp_path: Path, polling_agent: AgentProcess) -> None:
    tricks = ("garbage", "bad-result", "rpc-error")
    results = run_eval(write_a2a_bench(tmp_path / "b", {"url": polling_agent.url},
                                       questions(1) + hostile(*tricks)))
    assert results["q1"].score and results["q1"].score.passed
    assert "JSON Decode Error" in (results["garbage"].error or "")
    assert "a malformed answer from the agent" in (results["bad-result"].error or "")
    assert "the agent's database is locked" in (results["rpc-error"].error or "")


def test_an_oversized_answer_is_refused_as_it_arrives(tmp_path: Path,
                                                      agent: AgentProcess) -> None:
    results = run_eval(write_a2a_bench(tmp_path / "b", {"url": agent.url},
                                       questions(1) + hostile("big"), timeout_s=20))
    assert results["q1"].score and results["q1"].score.passed
    big = results["big"]
    assert big.stop_reason == "error" and big.output is None
    assert (big.error or "").startswith(
        "A2AAttemptError: the agent's answer exceeds 16 MiB (at most 16 MiB per response); "
        "nothing of it is kept")


def test_a_search_goes_on_through_every_kind_of_failure(
        tmp_path: Path, streaming_agent: AgentProcess, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """The agent answers right only at effort 2; a third of the dev tasks fail in every
    way the boundary can. The search promotes effort 2 all the same, each failure is
    journaled with its reason, and the agent is left with nothing running."""
    outcome = search_through_failures(tmp_path, {"a2a": {"url": streaming_agent.url}},
                                      ["fail", "hang", "garbage", "cut-stream", "ask"], capsys)
    assert [(p["target"], p["before"], p["after"]) for p in outcome["promotions"]] == [
        ("effort", 1, 2)]
    reasons = outcome["unscored"]["dev"]["start"]["unscored_by_reason"]
    assert sum(reasons.values()) == 10  # 5 failing tasks, 2 attempts each
    assert any(r.startswith("timeout: AttemptTimeout: the agent's task did not end")
               for r in reasons)
    assert streaming_agent.log()["running"] == 0


# -- a served agent -------------------------------------------------------------------------------


def served(pid_file: Path, *args: str) -> dict[str, Any]:
    return {"url": "http://127.0.0.1:{port}/",
            "serve": {"argv": ["{python}", AGENT, "--port", "{port}", *args],
                      "env": {"AGENT_PID_FILE": str(pid_file)}}}


def test_forge_starts_the_served_agent_and_stops_it(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    need_sdk("a2a.server", "a2a")
    pids = tmp_path / "pids"
    bench = write_a2a_bench(tmp_path / "b", served(pids), questions(1, 2, 3) + hostile("hang"),
                            timeout_s=1.5)
    code, out, err = run_forge(capsys, "eval", bench, "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["n_scored"], summary["n_unscored"]) == (3, 1)
    (pid,) = [int(p) for p in pids.read_text().split()]
    assert not alive(pid)  # stopped (and reaped) when the evaluation closed


def test_a_served_agent_that_dies_is_started_again_before_the_next_batch(
        tmp_path: Path) -> None:
    need_sdk("a2a.server", "a2a")
    from forge.evaluation.session import Session
    from forge.executors import AttemptKey, ExecutorSettings

    pids = tmp_path / "pids"
    bench = load_bench(write_a2a_bench(tmp_path / "b", served(pids),
                                       questions(1) + hostile("crash")))
    tasks = {t.id: t for t in bench.tasks("dev")}
    with Session(bench, ExecutorSettings(), seed=1, concurrency=1, timeout_s=5) as session:
        first = session.attempts(bench.defaults, [AttemptKey(tasks["crash"], 0)], split="dev")
        second = session.attempts(bench.defaults, [AttemptKey(tasks["q1"], 0)], split="dev")
    assert first[0].stop_reason == "error"
    assert "the served agent" in (first[0].error or "") and "exit code 3" in (
        first[0].error or "")
    assert second[0].score and second[0].score.passed
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2 and not any(alive(p) for p in started)


def test_a_served_agent_that_cannot_start_is_one_error_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = write_a2a_bench(tmp_path / "b", {
        "url": "http://127.0.0.1:{port}/",
        "serve": ["{python}", "-c", "import sys; print('no such model'); sys.exit(4)"]},
        questions(1))
    code, out, err = run_forge(capsys, "eval", bench)
    line = assert_user_error(code, out, err, "harness.a2a.serve",
                             "the served agent did not start", "exit code 4", "no such model")
    assert str(bench) in line


# -- the example bench ----------------------------------------------------------------------------


def test_the_example_bench_search_promotes_a_setting_that_matters(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """benches/a2a-orders, as a user runs it: forge serves the agent, the search
    promotes the tool rounds the questions need, every attempt's tool calls and tokens
    are journaled, and the agent is gone at the end."""
    need_sdk("a2a.server", "a2a")
    # One step: the promotion that matters comes first (the whole search: README.md).
    code, out, err = run_forge(capsys, "search", REPO / "benches" / "a2a-orders",
                               "--journals", tmp_path / "j", "--json", "--max-steps", "1")
    assert code == 0, err
    outcome = json.loads(out)
    promoted = {p["target"]: (p["before"], p["after"]) for p in outcome["promotions"]}
    assert promoted["max_steps"][0] == 1 and promoted["max_steps"][1] >= 3
    assert outcome["test"]["final"] > outcome["test"]["start"] + 0.5
    assert outcome["test"]["ci_low"] > 0
    rows = stored_results(tmp_path / "j" / outcome["run_id"])
    assert rows and all(r["stop_reason"] == "completed" for r in rows)
    assert all(r["output"]["tool_calls"] and r["output"]["usage"]["input_tokens"] > 0
               and r["output"]["cost"] > 0 for r in rows)
    assert {c["name"] for r in rows for c in r["output"]["tool_calls"]} == {
        "lookup_order", "add", "compare"}


# -- bad benches ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("harness", "fragments"), [
    ({"url": "http://user:pw@127.0.0.1:1/"}, ["harness.a2a.url", "credentials in the url"]),
    ({"url": "http://127.0.0.1:{port}/"}, ["harness.a2a.url", "{port}"]),
    ({"url": "http://10.1.2.3:{port}/", "serve": ["{python}", AGENT]},
     ["harness.a2a.url", "listens on 127.0.0.1"]),
    ({"url": "http://127.0.0.1:1/", "headers_from_env": {"Authorization": "NOPE_UNSET_VAR"}},
     ["harness.a2a.headers_from_env.Authorization", "NOPE_UNSET_VAR is not set"]),
    ({"url": "http://127.0.0.1:1/", "streaming": "often"}, ["harness.a2a.streaming"]),
    ({"url": "http://127.0.0.1:{port}/", "serve": ["no-such-program-here", "x"]},
     ["harness.a2a.serve.argv", "not found on PATH"]),
])
def test_a_bad_harness_spec_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        harness: dict[str, Any], fragments: list[str]) -> None:
    need_sdk("a2a.client", "a2a")
    bench = write_a2a_bench(tmp_path / "b", harness, questions(1))
    assert_user_error(*run_forge(capsys, "eval", bench), *fragments)


def test_an_agent_card_that_cannot_be_read_is_one_line(
        tmp_path: Path, streaming_agent: AgentProcess,
        capsys: pytest.CaptureFixture[str]) -> None:
    bench = write_a2a_bench(tmp_path / "b", {"url": streaming_agent.base + "/nowhere/"},
                            questions(1))
    assert_user_error(*run_forge(capsys, "eval", bench), "harness.a2a.url",
                      "cannot read the agent card", "404")


def test_a_bearer_token_comes_from_the_environment_and_is_redacted(
        tmp_path: Path, streaming_agent: AgentProcess, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    token = "a2a-secret-token-0123456789"
    monkeypatch.setenv("FORGE_TEST_A2A_TOKEN", f"Bearer {token}")
    bench = write_a2a_bench(tmp_path / "b", {
        "url": streaming_agent.url, "headers_from_env": {"Authorization": "FORGE_TEST_A2A_TOKEN"}},
        [{"id": "auth", "input": "echo-auth", "expected": "x"}])
    code, _, err = run_forge(capsys, "eval", bench, "--save", tmp_path / "r.json")
    assert code == 0, err
    assert streaming_agent.log()["headers"][-1]["authorization"] == f"Bearer {token}"
    saved = (tmp_path / "r.json").read_text(encoding="utf-8")
    assert token not in saved and '"output":"***"' in saved
    assert "FORGE_TEST_A2A_TOKEN" in load_result(tmp_path / "r.json").env["harness"]


# -- the extra ------------------------------------------------------------------------------------

def test_without_the_extra_the_bench_names_the_pip_install(tmp_path: Path) -> None:
    bench = write_a2a_bench(tmp_path / "b", {"url": "http://127.0.0.1:1/"}, questions(1))
    code, stderr = eval_without(["a2a", "a2a.client"], bench)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in stderr, stderr
    assert "harness.a2a" in lines[0] and "pip install 'forge[a2a]'" in lines[0]


def test_forge_imports_no_protocol_sdk_until_a_bench_uses_it() -> None:
    code = ("import sys, forge, forge.harness, forge.bench.loader\n"
            "from forge.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'a2a', 'nlip_sdk', 'nlip_server', 'google', 'uvicorn', 'starlette'}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]"

