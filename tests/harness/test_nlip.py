"""nlip: forge as an NLIP client of a real nlip-server agent on 127.0.0.1; failures are data.

The agent (``nlip_agent.py``) runs in a process of its own, started by the tests or by
forge itself (``serve``); its brain is scripted, its server is nlip-server's app.
"""

from __future__ import annotations

import json
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

from forge.results.model import load_result
from forge.secrets.masking import clear_secrets

AGENT = str(HERE / "nlip_agent.py")


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    yield
    clear_secrets()


@pytest.fixture(scope="module")
def agent() -> Iterator[AgentProcess]:
    need_sdk("nlip_server.server", "nlip")
    with AgentProcess("nlip_agent.py", path="/nlip/") as running:
        yield running


def write_nlip_bench(root: Path, args: dict[str, Any], tasks: list[dict[str, Any]],
                    **options: Any) -> Path:
    return write_protocol_bench(root, {"nlip": args}, tasks, **options)


# -- answers, and the config on its way --------------------------------------------------------


def test_eval_sends_the_config_as_a_submessage_and_keeps_the_agents_report(
        tmp_path: Path, agent: AgentProcess, capsys: pytest.CaptureFixture[str]) -> None:
    bench = write_nlip_bench(tmp_path / "b", {"url": agent.url},
                             questions(1, 2, 3, effort=3, mode="careful"), k=2)
    seen_before = len(agent.log()["forge"])
    code, out, err = run_forge(capsys, "eval", bench, "--json", "--set", "effort=3",
                               "--set", "mode=careful", "--save", tmp_path / "r.json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["n_attempts"], summary["n_scored"], summary["pass_rate"]) == (6, 6, 1.0)

    result = load_result(tmp_path / "r.json")
    log = agent.log()
    sent = log["forge"][seen_before:]
    by_seed = {m["seed"]: m for m in sent}
    assert len(by_seed) == 6
    for attempt in result.attempts:
        meta = by_seed[attempt.seed]  # JSON: the seed whole, the ints ints
        assert meta["config"] == {"effort": 3, "mode": "careful"}
        assert (meta["task_id"], meta["attempt"], meta["split"]) == (
            attempt.task_id, attempt.attempt, "dev")
        output = attempt.output
        assert output is not None
        n = int(attempt.task_id[1:])
        assert [(c.name, c.args, c.result) for c in output.tool_calls] == [
            ("multiply", {"a": n, "b": 3}, 3 * n)]
        assert (output.usage.input_tokens, output.usage.output_tokens) == (30, 2)
        assert output.signals == ["thought_hard"]
        assert output.metrics["response_bytes"] > 100
        assert output.trace["format"] == "text"
        assert {"format": "structured", "subformat": "JSON", "label": "forge"} in (
            output.trace["submessages"])
    # Each attempt a conversation of its own: nothing of one reaches another.
    conversations = log["conversations"][seen_before:]
    assert len(set(conversations)) == 6 and None not in conversations
    assert log["tokens"][seen_before:] == [None] * 6  # no token_from_env: none sent


def test_a_structured_reply_is_the_answer(tmp_path: Path, agent: AgentProcess) -> None:
    results = run_eval(write_nlip_bench(tmp_path / "b", {"url": agent.url},
                                        [{"id": "j", "input": "json please", "expected": "x"}]))
    output = results["j"].output
    assert output is not None and output.output == {"answer": 42, "unit": "apples"}


# -- a hostile boundary -------------------------------------------------------------------------


def test_error_replies_statuses_and_malformed_answers_are_errors(
        tmp_path: Path, agent: AgentProcess) -> None:
    names = ("oops", "raise", "status-503", "garbage", "not-nlip", "cut-body")
    results = run_eval(write_nlip_bench(tmp_path / "b", {"url": agent.url},
                                        questions(1, 2) + hostile(*names)))
    assert results["q1"].score and results["q2"].score  # the evaluation went on
    assert all(results[n].stop_reason == "error" and results[n].score is None for n in names)
    errors = {n: results[n].error for n in names}
    assert errors["oops"] == ("NlipAttemptError: the agent answered with an error: "
                              "cannot parse the question")
    assert errors["raise"] == ('NlipAttemptError: HTTP 400 from the agent: '
                               '{"detail":"the model server is down"}')
    assert errors["status-503"] == ('NlipAttemptError: HTTP 503 from the agent: '
                                    '{"detail": "overloaded, try later"}')
    assert errors["garbage"] == ("NlipAttemptError: a malformed answer from the agent "
                                 "(not JSON): <html>this is not JSON")
    assert errors["not-nlip"] == ("NlipAttemptError: a malformed answer from the agent "
                                  "(not an NLIP message): format: required field is missing")
    assert (errors["cut-body"] or "").startswith(
        "NlipAttemptError: the connection broke mid-answer: peer closed connection without "
        "sending complete message body")


def test_an_agent_that_does_not_answer_times_out(tmp_path: Path, agent: AgentProcess) -> None:
    results = run_eval(write_nlip_bench(tmp_path / "b", {"url": agent.url},
                                        questions(1) + hostile("hang"), timeout_s=1.5))
    hang = results["hang"]
    assert hang.stop_reason == "timeout" and hang.score is None
    assert hang.error == ("AttemptTimeout: the agent did not answer within 1.5 s; the "
                          "request's connection was dropped (NLIP has no cancel message)")
    assert hang.duration_s < 1.5
    assert results["q1"].score and results["q1"].score.passed


def test_an_oversized_answer_is_refused_as_it_arrives(tmp_path: Path,
                                                      agent: AgentProcess) -> None:
    results = run_eval(write_nlip_bench(tmp_path / "b", {"url": agent.url},
                                        questions(1) + hostile("big"), timeout_s=20))
    big = results["big"]
    assert big.stop_reason == "error" and big.output is None
    assert big.error == ("NlipAttemptError: the agent's answer exceeds 16 MiB (at most 16 MiB "
                         "per response); nothing of it is kept")
    assert results["q1"].score and results["q1"].score.passed


def test_a_search_goes_on_through_every_kind_of_failure(
        tmp_path: Path, agent: AgentProcess, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent answers right only at effort 2; a third of the dev tasks fail in every
    way the boundary can. The search promotes effort 2 all the same."""
    outcome = search_through_failures(tmp_path, {"nlip": {"url": agent.url}},
                                      ["oops", "hang", "garbage", "cut-body", "raise"], capsys)
    assert [(p["target"], p["before"], p["after"]) for p in outcome["promotions"]] == [
        ("effort", 1, 2)]
    reasons = outcome["unscored"]["dev"]["start"]["unscored_by_reason"]
    assert sum(reasons.values()) == 10  # 5 failing tasks, 2 attempts each
    assert any(r.startswith("timeout: AttemptTimeout: the agent did not answer") for r in reasons)


# -- a served agent -----------------------------------------------------------------------------


def test_forge_starts_the_served_agent_and_stops_it(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    need_sdk("nlip_server.server", "nlip")
    pids = tmp_path / "pids"
    bench = write_nlip_bench(tmp_path / "b", {
        "url": "http://127.0.0.1:{port}/nlip/",
        "serve": {"argv": ["{python}", AGENT, "--port", "{port}"], "stop_timeout_s": 1,
                  "env": {"AGENT_PID_FILE": str(pids)}}},
        questions(1, 2, 3) + hostile("hang"), timeout_s=1.5)
    code, out, err = run_forge(capsys, "eval", bench, "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["n_scored"], summary["n_unscored"]) == (3, 1)
    (pid,) = [int(p) for p in pids.read_text().split()]
    # Stopped, and reaped, though it was still working on the request forge dropped.
    assert not alive(pid)


# -- bad benches ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("harness", "fragments"), [
    ({"url": "http://127.0.0.1:{port}/nlip/"}, ["harness.nlip.url", "{port}"]),
    ({"url": "https://192.168.1.9:{port}/", "serve": ["{python}", AGENT]},
     ["harness.nlip.url", "listens on 127.0.0.1"]),
    ({"url": "http://127.0.0.1:1/", "token_from_env": "NOPE_UNSET_TOKEN"},
     ["harness.nlip.token_from_env", "NOPE_UNSET_TOKEN is not set"]),
    ({"url": "http://127.0.0.1:1/", "token_from_env": "not a name"},
     ["harness.nlip.token_from_env"]),
    ({"url": "ftp://127.0.0.1/"}, ["harness.nlip.url", "http:// or https://"]),
])
def test_a_bad_harness_spec_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        harness: dict[str, Any], fragments: list[str]) -> None:
    need_sdk("nlip_sdk.nlip", "nlip")
    bench = write_nlip_bench(tmp_path / "b", harness, questions(1))
    assert_user_error(*run_forge(capsys, "eval", bench), *fragments)


def test_tokens_come_from_the_environment_and_are_redacted(
        tmp_path: Path, agent: AgentProcess, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    token, bearer = "nlip-token-abcdefghijkl", "nlip-bearer-0123456789ab"
    monkeypatch.setenv("FORGE_TEST_NLIP_TOKEN", token)
    monkeypatch.setenv("FORGE_TEST_NLIP_BEARER", f"Bearer {bearer}")
    bench = write_nlip_bench(tmp_path / "b", {
        "url": agent.url, "token_from_env": "FORGE_TEST_NLIP_TOKEN",
        "headers_from_env": {"Authorization": "FORGE_TEST_NLIP_BEARER"}},
        [{"id": "auth", "input": "echo-auth", "expected": "x"}])
    code, _, err = run_forge(capsys, "eval", bench, "--save", tmp_path / "r.json")
    assert code == 0, err
    assert agent.log()["tokens"][-1] == token  # the NLIP authorization token submessage
    saved = (tmp_path / "r.json").read_text(encoding="utf-8")
    assert token not in saved and bearer not in saved
    assert '"output":"*** ***"' in saved  # the agent echoed both; both are masked


# -- the extra and the example bench ------------------------------------------------------------

def test_without_the_extra_the_bench_names_the_pip_install(tmp_path: Path) -> None:
    bench = write_nlip_bench(tmp_path / "b", {"url": "http://127.0.0.1:1/"}, questions(1))
    code, stderr = eval_without(["nlip_sdk", "nlip_sdk.nlip"], bench)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in stderr, stderr
    assert "harness.nlip" in lines[0] and "pip install 'forge[nlip]'" in lines[0]


def test_the_example_bench_search_promotes_settings_that_matter(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """benches/nlip-units, as a user runs it: forge serves the agent, the search
    promotes what the conversions need, every attempt's tool calls and tokens are
    journaled."""
    need_sdk("nlip_server.server", "nlip")
    code, out, err = run_forge(capsys, "search", REPO / "benches" / "nlip-units",
                               "--journals", tmp_path / "j", "--json")
    assert code == 0, err
    outcome = json.loads(out)
    promoted = {p["target"]: (p["before"], p["after"]) for p in outcome["promotions"]}
    assert promoted.get("max_hops", (1, 1))[1] >= 2 and promoted.get("use_table") == (
        False, True)
    assert outcome["test"]["final"] > outcome["test"]["start"] + 0.3
    assert outcome["test"]["ci_low"] > 0
    rows = stored_results(tmp_path / "j" / outcome["run_id"])
    assert rows and all(r["stop_reason"] == "completed" for r in rows)
    assert all(r["output"]["usage"]["input_tokens"] > 0 and r["output"]["cost"] > 0
               for r in rows)
    assert any(c["name"] == "unit_factor" for r in rows for c in r["output"]["tool_calls"])
