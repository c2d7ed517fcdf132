"""The Chat Completions client against a real local server: replies, retries, failures."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from openai_server import Reply, malformed, reply, status, tool_calls

from forge.errors import UserError
from forge.llm import ChatClient, Endpoint, LLMError


def chat(server: Any, **endpoint: Any) -> Any:
    client = ChatClient(server.endpoint(**endpoint))

    async def go() -> Any:
        try:
            return await client.chat([{"role": "user", "content": "hi"}], temperature=0.2)
        finally:
            await client.aclose()
    return asyncio.run(go())


def test_text_reply_with_usage_and_sizes(openai_server: Any) -> None:
    openai_server.script(reply("hello", prompt_tokens=7, completion_tokens=3))
    got = chat(openai_server)
    assert (got.content, got.input_tokens, got.output_tokens, got.retries) == ("hello", 7, 3, 0)
    assert got.request_bytes == len(openai_server.requests[0].raw)
    assert got.response_bytes > 0
    body = openai_server.requests[0].body
    assert body["model"] == "scripted" and body["temperature"] == 0.2
    assert openai_server.requests[0].path == "/v1/chat/completions"


def test_tool_calls_keep_raw_arguments(openai_server: Any) -> None:
    openai_server.script(tool_calls(("add", {"a": 1}), ("lookup", "{not json")))
    got = chat(openai_server)
    assert [(c.name, c.arguments) for c in got.tool_calls] == [
        ("add", '{"a": 1}'), ("lookup", "{not json")]
    message = got.assistant_message()
    assert message["tool_calls"][1]["function"]["arguments"] == "{not json"


def test_missing_usage_counts_zero(openai_server: Any) -> None:
    openai_server.script(reply("x", usage=False))
    got = chat(openai_server)
    assert (got.input_tokens, got.output_tokens) == (0, 0)


def test_5xx_retried_within_policy_and_counted(openai_server: Any) -> None:
    openai_server.script(status(500), status(503), reply("ok"))
    got = chat(openai_server, retries=2)
    assert got.content == "ok" and got.retries == 2
    assert len(openai_server.requests) == 3


def test_retries_are_bounded(openai_server: Any) -> None:
    openai_server.script(status(500), status(500), status(500), reply("too late"))
    with pytest.raises(LLMError) as err:
        chat(openai_server, retries=1)
    assert err.value.retries == 1 and "HTTP 500" in str(err.value)
    assert len(openai_server.requests) == 2


def test_4xx_is_not_retried(openai_server: Any) -> None:
    openai_server.script(status(400, "bad model"), reply("never"))
    with pytest.raises(LLMError, match=r"HTTP 400.*bad model"):
        chat(openai_server, retries=3)
    assert len(openai_server.requests) == 1


def test_malformed_body_is_an_error_with_excerpt(openai_server: Any) -> None:
    openai_server.script(malformed("<html>oops</html>"))
    with pytest.raises(LLMError, match=r"malformed reply.*oops"):
        chat(openai_server)


def test_slow_reply_times_out_then_retry_succeeds(openai_server: Any) -> None:
    openai_server.script(reply("slow").after(1.0), reply("fast"))
    got = chat(openai_server, timeout_s=0.3, retries=1)
    assert got.content == "fast" and got.retries == 1


def test_deadline_stops_retrying(openai_server: Any) -> None:
    openai_server.script(*[reply("slow").after(0.5)] * 5)
    client = ChatClient(openai_server.endpoint(timeout_s=5, retries=5, backoff_s=0.05))
    start = time.monotonic()
    with pytest.raises(LLMError, match="no reply within"):
        client.chat_sync([{"role": "user", "content": "hi"}], deadline=start + 0.3)
    client.close()
    assert time.monotonic() - start < 1.0


def test_dropped_connection_is_an_error(openai_server: Any) -> None:
    openai_server.script(Reply(drop=True), Reply(drop=True))
    with pytest.raises(LLMError):
        chat(openai_server, retries=1)


def test_connection_refused_is_an_error() -> None:
    client = ChatClient(Endpoint(base_url="http://127.0.0.1:9/v1", model="m", retries=0))
    with pytest.raises(LLMError, match="ConnectError"):
        client.chat_sync([{"role": "user", "content": "hi"}])


def test_api_key_sent_as_bearer_from_env(openai_server: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGE_TEST_KEY", "sk-test-0123456789abcdef")
    openai_server.script(reply("ok"))
    chat(openai_server, api_key_env="FORGE_TEST_KEY")
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-test-0123456789abcdef"
    assert "sk-test" not in openai_server.endpoint(api_key_env="FORGE_TEST_KEY").model_dump_json()


def test_endpoint_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORGE_OPENAI_BASE_URL", raising=False)
    with pytest.raises(UserError, match="FORGE_OPENAI_BASE_URL"):
        Endpoint.from_env(what="the llm proposer")
    monkeypatch.setenv("FORGE_OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("FORGE_OPENAI_MODEL", "qwen")
    got = Endpoint.from_env(what="x", timeout_s=3.0, model=None)
    assert (got.base_url, got.model, got.timeout_s) == ("http://127.0.0.1:1/v1", "qwen", 3.0)
    assert got.identity == "openai:http://127.0.0.1:1/v1:qwen"


@pytest.mark.parametrize("url", ["http://user:pw@127.0.0.1:8000/v1", "ftp://x/v1", "nonsense"])
def test_base_url_with_credentials_or_wrong_scheme_refused(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGE_OPENAI_BASE_URL", url)
    with pytest.raises(UserError, match="base_url") as err:
        Endpoint.from_env(what="the judge")
    assert "pw" not in str(err.value).replace(url, "") and "\n" not in str(err.value)
