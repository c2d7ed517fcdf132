"""openai: the tool-using agent loop against a real scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import logging
import secrets
import shutil
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_user_error, readable_bytes, run_forge, stored_text, write_jsonl
from openai_math_model import math_model
from openai_server import (
    Reply,
    ScriptedOpenAI,
    current_request,
    malformed,
    reply,
    status,
    tool_call,
    tool_calls,
)

from forge.bench.loader import Bench, load_bench
from forge.core.spec import BuildContext, Spec
from forge.core.task import Task
from forge.evaluation.evaluate import evaluate
from forge.harness import HARNESSES, AttemptContext, OpenAIHarness, ToolCall
from forge.harness.tools import tool_from_function
from forge.results.model import AttemptResult, EvalResult
from forge.secrets.masking import MASK, clear_secrets

ROOT = Path(__file__).resolve().parents[2]
MATH = ROOT / "benches" / "openai-math"

TOOLS = '''
from __future__ import annotations

import time
from typing import Literal


def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first addend
        b: the second addend
    """
    total = a + b
    return int(total) if total == int(total) else total


def boom(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


def unit(kind: Literal["metre", "second"], scale: int = 1) -> str:
    """Name a unit."""
    return f"{scale} {kind}"


def hang() -> str:
    """Never answers in time."""
    time.sleep(2)
    return "late"


async def shout(text: str) -> dict[str, str]:
    """Upper-case text (an async tool)."""
    return {"loud": text.upper()}


TOOLS = [add, boom, unit, hang, shout]
'''

REGISTRY = """\
name: oa
settings:
  temperature:    {type: float, min: 0.0, max: 1.0, step: 0.1, default: 0.5}
  top_p:          {type: float, min: 0.5, max: 1.0, step: 0.1, default: 1.0}
  max_tokens:     {type: int, min: 16, max: 512, default: 64, scale: log}
  system_prompt:  {type: enum, choices: [plain, terse], default: plain}
  max_iterations: {type: int, min: 1, max: 6, default: 4}
  tool_choice:    {type: enum, choices: [auto, required, none], default: auto}
"""

PROMPTS = {"plain": "You are a calculator.", "terse": "Answer in one word."}
PRICES = {"input_per_mtok": 2.0, "output_per_mtok": 10.0}


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    yield
    clear_secrets()


def write_bench(root: Path, server_url: str | None, *, questions: dict[str, Any] | None = None,
                timeout_s: float = 5.0, k: int = 1, **harness: Any) -> Path:
    """A bench of the openai harness with the TOOLS above, one dev task per question."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    (root / "registry.yaml").write_text(REGISTRY, encoding="utf-8")
    rows = [{"id": f"t-{q}", "input": q, "expected": answer}
            for q, answer in (questions or {"2 + 3": 5}).items()]
    write_jsonl(root / "tasks" / "dev.jsonl", rows)
    write_jsonl(root / "tasks" / "val.jsonl", [{"id": "v", "input": "1 + 1", "expected": 2}])
    args = {"tools": "tools:TOOLS", "system_prompts": PROMPTS, "prices": PRICES,
            "base_url": server_url, "model": "scripted", "retries": 2, "backoff_s": 0.01,
            **harness}
    bench = root / "bench.yaml"
    bench.write_text(
        "name: oa\n"
        f"harness: {json.dumps({'openai': args})}\n"
        "registry: registry.yaml\n"
        "splits: {dev: tasks/dev.jsonl, val: tasks/val.jsonl}\n"
        f"rollouts: {json.dumps({'k': k, 'concurrency': 4, 'timeout_s': timeout_s})}\n"
        "scorer: exact\n", encoding="utf-8")
    return bench


def run_eval(bench_file: Path, **values: Any) -> tuple[Bench, EvalResult]:
    bench = load_bench(bench_file)
    config = bench.registry.validate_config({**bench.defaults.values, **values})
    return bench, evaluate(bench, config)


def only_attempt(result: EvalResult) -> AttemptResult:
    (attempt,) = result.attempts
    return attempt


def by_question(result: EvalResult) -> dict[str, AttemptResult]:
    return {a.task_id.removeprefix("t-"): a for a in result.attempts}


# -- the loop --------------------------------------------------------------------------------


def test_tool_loop_records_the_call_sums_usage_and_prices_it(tmp_path: Path,
                                                            openai_server: Any) -> None:
    openai_server.script(tool_call("add", {"a": 2, "b": 3}, prompt_tokens=10, completion_tokens=5),
                         reply(" 5\n", prompt_tokens=20, completion_tokens=2))
    _, result = run_eval(write_bench(tmp_path / "b", openai_server.url))
    attempt = only_attempt(result)
    assert attempt.stop_reason == "completed" and attempt.score is not None
    assert attempt.score.passed
    out = attempt.output
    assert out is not None and out.output == "5"
    assert out.tool_calls == [ToolCall(name="add", args={"a": 2, "b": 3}, ok=True, result=5)]
    assert (out.usage.input_tokens, out.usage.output_tokens) == (30, 7)
    assert out.cost == pytest.approx((30 * 2.0 + 7 * 10.0) / 1e6)
    requests = openai_server.requests
    assert out.metrics == {"llm_calls": 2, "http_retries": 0, "tool_errors": 0,
                           "request_bytes": sum(len(r.raw) for r in requests),
                           "response_bytes": out.metrics["response_bytes"]}
    assert out.metrics["response_bytes"] > 0 and out.signals == []

    first, second = (r.body for r in requests)
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"] == "2 + 3"
    add = next(t["function"] for t in first["tools"] if t["function"]["name"] == "add")
    assert add["description"] == "Add two numbers."
    assert add["parameters"]["properties"]["a"] == {"type": "number",
                                                    "description": "the first addend"}
    assert add["parameters"]["required"] == ["a", "b"]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_0", "content": "5"}
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "add"


def test_malformed_arguments_are_fed_back_and_the_loop_goes_on(tmp_path: Path,
                                                              openai_server: Any) -> None:
    openai_server.script(tool_call("add", '{"a": 2, "b":'), tool_call("add", {"a": 2, "b": 3}),
                         reply("5"))
    _, result = run_eval(write_bench(tmp_path / "b", openai_server.url))
    out = only_attempt(result).output
    assert out is not None and out.output == "5"
    bad, good = out.tool_calls
    assert (bad.name, bad.ok, bad.args) == ("add", False, {})
    assert bad.error is not None and bad.error.startswith("arguments are not valid JSON")
    assert good.ok and good.result == 5
    assert out.signals == ["tool_error"] and out.metrics["tool_errors"] == 1
    second = openai_server.requests[1].body
    assert second["messages"][-2]["tool_calls"][0]["function"]["arguments"] == '{"a": 2, "b":'
    fed_back = second["messages"][-1]
    assert fed_back["role"] == "tool" and fed_back["tool_call_id"] == "call_0"
    assert fed_back["content"] == f"error: {bad.error}"


def test_unknown_invalid_and_raising_calls_are_recorded_not_ok(tmp_path: Path,
                                                              openai_server: Any) -> None:
    openai_server.script(
        tool_calls(("nope", {}), ("boom", {"reason": "why"}), ("add", {"a": "x", "b": 1}),
                   ("unit", {"kind": "inch"}), ("unit", {"kind": "metre", "extra": 1}),
                   ("add", "[1, 2]"), ("unit", {"kind": "second", "scale": 3}),
                   ("shout", {"text": "hi"})),
        reply("done"))
    _, result = run_eval(write_bench(tmp_path / "b", openai_server.url))
    attempt = only_attempt(result)
    assert attempt.stop_reason == "completed"
    out = attempt.output
    assert out is not None
    errors = [c.error for c in out.tool_calls]
    assert [c.ok for c in out.tool_calls] == [False] * 6 + [True, True]
    assert errors[0] is not None and "unknown tool 'nope'" in errors[0]
    assert errors[1] == "RuntimeError: boom: why"
    assert errors[2] is not None and errors[2].startswith("invalid arguments: a:")
    assert errors[3] is not None and "kind: expected 'metre' or 'second'" in errors[3]
    assert "Input should be" not in errors[3]  # forge's wording, not pydantic's
    assert errors[4] is not None and "extra: unknown field" in errors[4]
    assert errors[5] == "arguments must be a JSON object, got list"
    assert out.tool_calls[6].result == "3 second"
    assert out.tool_calls[7].result == {"loud": "HI"}
    assert out.metrics["tool_errors"] == 6 and "tool_error" in out.signals
    tool_messages = [m for m in openai_server.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [f"call_{i}" for i in range(8)]
    assert tool_messages[1]["content"] == "error: RuntimeError: boom: why"
    assert tool_messages[7]["content"] == '{"loud": "HI"}'


def test_iteration_cap_is_a_signal_and_the_last_calls_are_not_run(tmp_path: Path,
                                                                  openai_server: Any) -> None:
    openai_server.script(tool_call("add", {"a": 1, "b": 1}), tool_call("add", {"a": 2, "b": 2}))
    _, result = run_eval(write_bench(tmp_path / "b", openai_server.url), max_iterations=2)
    attempt = only_attempt(result)
    out = attempt.output
    assert attempt.stop_reason == "completed" and out is not None
    assert out.output is None and out.signals == ["iteration_cap_hit"]
    assert out.metrics["llm_calls"] == 2 and [c.args for c in out.tool_calls] == [{"a": 1, "b": 1}]
    assert attempt.score is not None and not attempt.score.passed


def test_an_empty_answer_is_a_signal(tmp_path: Path, openai_server: Any) -> None:
    openai_server.script(reply("   "))
    _, result = run_eval(write_bench(tmp_path / "b", openai_server.url))
    out = only_attempt(result).output
    assert out is not None and out.output is None and out.signals == ["empty_answer"]


# -- failures are data -------------------------------------------------------------------------


def test_each_failure_is_recorded_with_its_reason_and_the_evaluation_goes_on(
        tmp_path: Path, openai_server: Any) -> None:
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def model(body: dict[str, Any]) -> Reply:
        question = body["messages"][1]["content"]
        with lock:
            seen[question] = n = seen.get(question, 0) + 1
        answers: dict[str, Callable[[], Reply]] = {
            "ok": lambda: reply("fine"),
            "flaky": lambda: status(500 if n == 1 else 503) if n <= 2 else reply("fine"),
            "down": lambda: status(500, "overloaded"),
            "garbage": lambda: malformed("<html>bad gateway</html>"),
            "nullcall": lambda: Reply(body=json.dumps({"choices": [{"message": {
                "role": "assistant", "content": None, "tool_calls": [None]}}]}).encode()),
            "slow": lambda: reply("fine").after(2.0),
            "hang": lambda: tool_call("hang", {}) if n == 1 else reply("fine"),
        }
        return answers[question]()

    openai_server.answer_with(model)
    questions = dict.fromkeys(["ok", "flaky", "down", "garbage", "nullcall", "slow", "hang"],
                              "fine")
    _, result = run_eval(write_bench(tmp_path / "b", openai_server.url, questions=questions,
                                     timeout_s=1.0))
    got = by_question(result)
    assert got["ok"].stop_reason == "completed" and got["ok"].metrics["http_retries"] == 0
    assert got["flaky"].stop_reason == "completed" and got["flaky"].metrics["http_retries"] == 2
    assert got["flaky"].score is not None and got["flaky"].score.passed
    down = got["down"]
    assert down.stop_reason == "error" and down.error is not None
    assert down.error.startswith("LLMError: HTTP 500") and "overloaded" in down.error
    assert "(after 2 retries)" in down.error and seen["down"] == 3
    garbage = got["garbage"]
    assert garbage.stop_reason == "error" and "malformed reply" in (garbage.error or "")
    assert "bad gateway" in (garbage.error or "") and seen["garbage"] == 1
    assert got["nullcall"].stop_reason == "error"
    assert "LLMError: malformed reply" in (got["nullcall"].error or "")
    assert got["slow"].stop_reason == "timeout"
    assert got["hang"].stop_reason == "timeout"
    assert result.summary()["n_scored"] == 2


# -- settings ---------------------------------------------------------------------------------


def test_settings_reach_the_request(tmp_path: Path, openai_server: Any) -> None:
    openai_server.script(tool_call("add", {"a": 2, "b": 3}), reply("5"))
    _, result = run_eval(write_bench(tmp_path / "b", openai_server.url), temperature=0.3,
                         top_p=0.9, max_tokens=77, system_prompt="terse",
                         tool_choice="required")
    attempt = only_attempt(result)
    first, second = (r.body for r in openai_server.requests)
    assert (first["temperature"], first["top_p"], first["max_tokens"]) == (0.3, 0.9, 77)
    assert first["messages"][0] == {"role": "system", "content": PROMPTS["terse"]}
    assert first["model"] == "scripted" and first["seed"] == attempt.seed & (2**31 - 1)
    # `required` holds for the first turn only: the model must be free to answer.
    assert (first["tool_choice"], second["tool_choice"]) == ("required", "auto")
    assert attempt.output is not None and attempt.output.trace["system_prompt"] == "terse"


def test_tool_choice_none_sends_no_tools(tmp_path: Path, openai_server: Any) -> None:
    openai_server.script(reply("5"))
    run_eval(write_bench(tmp_path / "b", openai_server.url, send_seed=False), tool_choice="none")
    body = openai_server.requests[0].body
    assert "tools" not in body and "tool_choice" not in body and "seed" not in body


def test_settings_the_registry_lacks_take_the_harness_defaults(openai_server: Any,
                                                               tmp_path: Path) -> None:
    import asyncio

    bench = write_bench(tmp_path / "b", openai_server.url)
    spec = Spec(name="openai", args={"tools": "tools:TOOLS", "system_prompts": PROMPTS,
                                     "base_url": openai_server.url})
    harness = HARNESSES.build(spec, BuildContext(base_dir=bench.parent, file=bench))
    assert isinstance(harness, OpenAIHarness)
    openai_server.script(*[tool_call("add", {"a": 1, "b": 1})] * 4)
    task = Task(id="t", input={"question": "1 + 1", "units": ["m"]})
    ctx = AttemptContext(seed=1, attempt=0, split="dev", timeout_s=5, deadline=1e12)

    async def go() -> Any:
        try:
            return await harness.run({"unrelated": 1}, task, ctx)
        finally:
            await harness.aclose()

    out = asyncio.run(go())
    first = openai_server.requests[0].body
    assert not {"temperature", "top_p", "max_tokens"} & set(first)
    assert first["messages"][0]["content"] == PROMPTS["plain"]  # the first variant
    assert first["messages"][1]["content"] == 'question: 1 + 1\nunits: ["m"]'
    assert out.metrics["llm_calls"] == 4 and out.signals == ["iteration_cap_hit"]
    assert out.cost is None  # no price table


def test_unknown_prompt_variant_is_an_attempt_error(tmp_path: Path, openai_server: Any) -> None:
    bench = write_bench(tmp_path / "b", openai_server.url, system_prompts={"plain": "x"})
    _, result = run_eval(bench, system_prompt="terse")
    attempt = only_attempt(result)
    assert attempt.stop_reason == "error" and "'terse'" in (attempt.error or "")
    assert openai_server.requests == []


# -- bench errors, identity, schemas -------------------------------------------------------------


def test_missing_base_url_is_one_line_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("FORGE_OPENAI_BASE_URL", raising=False)
    assert_user_error(*run_forge(capsys, "eval", MATH), "bench openai-math",
                      "FORGE_OPENAI_BASE_URL")
    journals = tmp_path / "journals"
    assert_user_error(*run_forge(capsys, "search", MATH, "--journals", journals),
                      "FORGE_OPENAI_BASE_URL")
    assert not journals.exists() or not any(journals.iterdir())


@pytest.mark.parametrize(("change", "fragment"), [
    ({"tools": "tools:add"}, "harness.openai.tools: 'tools:add' is a function"),
    ({"tools": "tools:MISSING"}, "has no attribute 'MISSING'"),
    ({"tools": "nosuchmodule:TOOLS"}, "cannot import 'nosuchmodule'"),
    ({"prices": {"input_per_mtok": -1, "output_per_mtok": 0}}, "harness.openai.prices"),
    ({"colour": "blue"}, "harness.openai.colour"),
])
def test_bad_harness_arguments_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          change: dict[str, Any], fragment: str) -> None:
    bench = write_bench(tmp_path / "b", "http://127.0.0.1:9/v1", **change)
    assert_user_error(*run_forge(capsys, "eval", bench), str(bench), fragment)


def test_identity_names_endpoint_and_code_never_the_key(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    key = secrets.token_urlsafe(24)
    monkeypatch.setenv("FORGE_OPENAI_API_KEY", key)
    bench = write_bench(tmp_path / "b", "http://127.0.0.1:9/v1")
    first = load_bench(bench).harness_identity
    assert first.startswith("openai:http://127.0.0.1:9/v1:scripted|tools=tools:TOOLS:")
    assert key not in first
    tools = tmp_path / "b" / "tools.py"
    tools.write_text(tools.read_text() + "\n# changed\n", encoding="utf-8")
    second = load_bench(bench).harness_identity
    write_bench(tmp_path / "b", "http://127.0.0.1:9/v1",
                system_prompts={**PROMPTS, "plain": "other"})
    third = load_bench(bench).harness_identity
    assert len({first, second, third}) == 3


def test_schema_from_signature_and_docstring() -> None:
    def lookup(table: str, key: str = "x", *, limit: int | None = None) -> str:
        """Look up a key.

        More words.

        Args:
            table (str): which table
            key: the key
        """
        return table

    schema = tool_from_function(lookup).schema["function"]
    assert schema["description"] == "Look up a key. More words."
    props = schema["parameters"]["properties"]
    assert props["table"] == {"type": "string", "description": "which table"}
    assert props["key"] == {"type": "string", "default": "x", "description": "the key"}
    assert props["limit"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert schema["parameters"]["required"] == ["table"]
    with pytest.raises(ValueError, match="cannot be passed by name"):
        tool_from_function(lambda *a: a, "star")


# -- secrets ----------------------------------------------------------------------------------


def test_search_never_writes_the_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str],
                                         caplog: pytest.LogCaptureFixture) -> None:
    token = secrets.token_urlsafe(24)
    assert len(token) == 32
    monkeypatch.setenv("FORGE_OPENAI_API_KEY", token)

    def leaky(body: dict[str, Any]) -> Reply:
        """The math model, except that it echoes the Authorization header it was sent
        into capital answers, tool arguments and 500 bodies."""
        auth = current_request().headers.get("authorization", "")
        question = body["messages"][1]["content"]
        if "capital" in question:
            return reply(f"I was called with {auth}")
        if "moons" in question:
            return status(500, f"rejected credentials {auth}")
        if "atomic" in question and not any(m["role"] == "tool" for m in body["messages"]):
            return tool_call("lookup", {"table": "elements", "key": auth})
        return math_model(body)

    bench = tmp_path / "bench"
    shutil.copytree(MATH, bench, ignore=shutil.ignore_patterns("__pycache__"))
    text = (bench / "bench.yaml").read_text(encoding="utf-8")
    text = text.replace("../../registry/", str(ROOT / "registry") + "/")
    text = text.replace("    retries: 2\n", "    retries: 2\n    backoff_s: 0.01\n")
    assert "backoff_s" in text
    (bench / "bench.yaml").write_text(text, encoding="utf-8")
    journals = tmp_path / "journals"
    caplog.set_level(logging.DEBUG)
    with ScriptedOpenAI(leaky) as server:
        monkeypatch.setenv("FORGE_OPENAI_BASE_URL", server.url)
        code, out, err = run_forge(capsys, "search", bench, "--journals", journals,
                                   "--run-id", "r1", "--max-steps", "1", "-k", "1",
                                   "--budget-rollouts", "400")
        assert code == 0, err
        assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {token}"}
    files = [p for p in journals.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"run.json", "journal.jsonl", "attempts.jsonl.gz"}
    needle = token.encode()
    for path in files:
        assert needle not in readable_bytes(path), path
    attempts = stored_text(journals / "r1")
    assert f"I was called with Bearer {MASK}" in attempts  # an answer, redacted
    assert f"rejected credentials Bearer {MASK}" in attempts  # a 500's body, redacted
    assert f"no 'Bearer {MASK}' in table" in attempts  # a tool error, redacted
    for text in (out, err, "\n".join(r.getMessage() for r in caplog.records)):
        assert token not in text
