"""A small client for OpenAI-compatible Chat Completions endpoints, over httpx.

It speaks only what vLLM, llama.cpp's server, Ollama's ``/v1`` endpoint and OpenAI
share: ``POST {base_url}/chat/completions`` with ``model``, ``messages``, optional
``tools`` / ``tool_choice`` and sampling parameters; the reply's first choice and its
``usage``. Three pieces of forge call it: the ``openai`` harness, the ``judge``
scorer and the ``llm`` proposer.

Failures are :class:`LLMError` with a one-line reason: the callers turn them into
data (an attempt in error, an unscored verdict, a skipped proposal). The policy for
retries is declared (:class:`Endpoint`), bounded, never runs past the caller's
deadline, and every reply says how many retries it took.

The API key is read from the environment variable the endpoint names, registered as a
secret (:mod:`forge.secrets.masking`) so that no file or log forge writes can show it, and is
never part of :class:`Endpoint`, which journals and fingerprints store.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from forge._util.files import validation_problem
from forge.errors import LLMError, OptionError
from forge.secrets.masking import clip, redact, secret_from_env

__all__ = ["ChatClient", "ChatReply", "Endpoint", "LLMError", "ToolCallRequest"]

BASE_URL_ENV = "FORGE_OPENAI_BASE_URL"
API_KEY_ENV = "FORGE_OPENAI_API_KEY"
MODEL_ENV = "FORGE_OPENAI_MODEL"
#: A status worth another try: the server is overloaded or failed, not the request.
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_EXCERPT = 200


class Endpoint(BaseModel):
    """Where and how to call a model. Safe to journal: it holds the *name* of the
    environment variable with the API key, never the key."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    base_url: str
    model: str
    api_key_env: str | None = API_KEY_ENV
    timeout_s: float = Field(default=60.0, gt=0)
    retries: int = Field(default=2, ge=0, le=10)
    backoff_s: float = Field(default=0.5, ge=0)

    @field_validator("base_url")
    @classmethod
    def _plain_url(cls, value: str) -> str:
        url = httpx.URL(value)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"expected an http(s) URL such as http://127.0.0.1:8000/v1, "
                             f"got {value!r}")
        if url.userinfo:
            # A password in the URL would be journaled with the endpoint; the key
            # belongs in the environment variable that api_key_env names.
            raise ValueError("the base URL must not hold credentials; put the key in the "
                             "environment variable api_key_env names")
        return value

    @property
    def identity(self) -> str:
        """What decides the replies: the server and the model (not the key)."""
        return f"openai:{self.base_url.rstrip('/')}:{self.model}"

    @classmethod
    def from_env(cls, *, what: str, **overrides: Any) -> Endpoint:
        """The endpoint that ``FORGE_OPENAI_BASE_URL`` / ``FORGE_OPENAI_MODEL`` name,
        with ``overrides`` (None values ignored) taking precedence.

        A missing base URL, or a value the endpoint refuses, is an
        :class:`~forge.errors.OptionError` naming ``what`` needs it (and the field).
        """
        given = {k: v for k, v in overrides.items() if v is not None}
        base_url = given.pop("base_url", None) or os.environ.get(BASE_URL_ENV, "").strip()
        if not base_url:
            raise OptionError(f"{what} needs an OpenAI-compatible endpoint: set {BASE_URL_ENV} "
                              f"(e.g. http://127.0.0.1:8000/v1) and, if the server needs "
                              f"them, {API_KEY_ENV} and {MODEL_ENV}")
        model = given.pop("model", None) or os.environ.get(MODEL_ENV, "").strip() or "default"
        try:
            return cls(base_url=base_url, model=model, **given)
        except ValidationError as exc:
            problem = validation_problem(exc)
            # No file to name: the values come from the environment or the caller.
            raise OptionError(f"{what}: endpoint {problem.field}: {problem.message}") from None


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call the model asked for. ``arguments`` is the raw JSON text the model
    wrote (it may be malformed: the caller decides what that means)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatReply:
    """The first choice of a reply, its usage and what the call cost to get."""

    content: str | None
    tool_calls: list[ToolCallRequest]
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    retries: int
    request_bytes: int
    response_bytes: int
    message: dict[str, Any] = field(repr=False)

    def assistant_message(self) -> dict[str, Any]:
        """The reply as the ``assistant`` message to send back in the next turn."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in self.tool_calls]
        return out


@dataclass(frozen=True)
class _Post:
    body: bytes
    timeout: float


class ChatClient:
    """Calls one :class:`Endpoint`; ``chat`` (async) and ``chat_sync`` share one policy.

    ``transport`` replaces httpx's network transport (a test may pass
    ``httpx.MockTransport``; forge's own tests use a real local server instead).
    """

    def __init__(self, endpoint: Endpoint, *,
                 transport: httpx.AsyncBaseTransport | httpx.BaseTransport | None = None
                 ) -> None:
        self.endpoint = endpoint
        self._transport = transport
        self._async: httpx.AsyncClient | None = None
        self._sync: httpx.Client | None = None
        key = secret_from_env(endpoint.api_key_env) if endpoint.api_key_env else None
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._url = endpoint.base_url.rstrip("/") + "/chat/completions"

    # -- calls ----------------------------------------------------------------------

    async def chat(self, messages: list[dict[str, Any]], *,
                   tools: list[dict[str, Any]] | None = None, deadline: float | None = None,
                   **params: Any) -> ChatReply:
        """One completion; ``deadline`` is on :func:`time.monotonic`'s clock."""
        import asyncio

        if self._async is None:
            transport = self._transport if isinstance(self._transport,
                                                      httpx.AsyncBaseTransport) else None
            # No cookie jar: each call stands alone, as the endpoint contract says.
            self._async = httpx.AsyncClient(transport=transport, headers=self._headers,
                                            cookies=None, follow_redirects=False)
        plan = self._tries(self._body(messages, tools, params), deadline)
        step = next(plan)
        while True:
            outcome: httpx.Response | httpx.HTTPError | None = None
            if isinstance(step, _Post):
                try:
                    outcome = await self._async.post(self._url, content=step.body,
                                                     timeout=step.timeout)
                    self._async.cookies.clear()
                except httpx.HTTPError as exc:
                    outcome = exc
            else:
                await asyncio.sleep(step)
            try:
                step = plan.send(outcome)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]

    def chat_sync(self, messages: list[dict[str, Any]], *,
                  tools: list[dict[str, Any]] | None = None, deadline: float | None = None,
                  **params: Any) -> ChatReply:
        """:meth:`chat` for callers without an event loop (the ``llm`` proposer)."""
        if self._sync is None:
            transport = self._transport if isinstance(self._transport,
                                                      httpx.BaseTransport) else None
            self._sync = httpx.Client(transport=transport, headers=self._headers,
                                      follow_redirects=False)
        plan = self._tries(self._body(messages, tools, params), deadline)
        step = next(plan)
        while True:
            outcome: httpx.Response | httpx.HTTPError | None = None
            if isinstance(step, _Post):
                try:
                    outcome = self._sync.post(self._url, content=step.body, timeout=step.timeout)
                    self._sync.cookies.clear()
                except httpx.HTTPError as exc:
                    outcome = exc
            else:
                time.sleep(step)
            try:
                step = plan.send(outcome)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()
            self._async = None
        self.close()

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    # -- shared policy ----------------------------------------------------------------

    def _tries(self, body: bytes, deadline: float | None
               ) -> Generator[_Post | float, httpx.Response | httpx.HTTPError | None, ChatReply]:
        """The retry policy, written once for the async and the sync caller: it yields a
        :class:`_Post` to make (and is sent its response or error) or a pause in seconds
        to sleep; it returns the reply or raises :class:`LLMError`."""
        failures: list[str] = []
        for attempt in range(self.endpoint.retries + 1):
            timeout = self._timeout(deadline)
            outcome = yield _Post(body, timeout)
            if isinstance(outcome, httpx.TimeoutException):
                failures.append(f"no reply within {timeout:.3g} s")
            elif isinstance(outcome, httpx.HTTPError):
                failures.append(f"{type(outcome).__name__}: {outcome}")
            elif outcome is not None:
                reply = self._reply(outcome, len(body), attempt, failures)
                if reply is not None:
                    return reply
            pause = self._pause(attempt, deadline, failures)
            if pause is None:
                break
            yield pause
        raise self._give_up(failures)

    def _body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
              params: dict[str, Any]) -> bytes:
        payload: dict[str, Any] = {"model": self.endpoint.model, "messages": messages}
        if tools:
            payload["tools"] = tools
        payload.update({k: v for k, v in params.items() if v is not None})
        return json.dumps(payload).encode()

    def _timeout(self, deadline: float | None) -> float:
        if deadline is None:
            return self.endpoint.timeout_s
        return max(0.001, min(self.endpoint.timeout_s, deadline - time.monotonic()))

    def _pause(self, attempt: int, deadline: float | None, failures: list[str]) -> float | None:
        """Seconds to wait before the next try, or None when the policy says stop."""
        if failures and failures[-1].startswith("final:"):
            return None
        if attempt >= self.endpoint.retries:
            return None
        pause = float(self.endpoint.backoff_s * (2 ** attempt))
        if deadline is not None and time.monotonic() + pause >= deadline:
            return None
        return pause

    def _give_up(self, failures: list[str]) -> LLMError:
        reasons = [f.removeprefix("final:") for f in failures]
        retries = max(0, len(failures) - 1)
        last = reasons[-1] if reasons else "no call was made"
        if len(reasons) > 1:
            last += "; earlier: " + "; ".join(reasons[:-1])
        return LLMError(last, retries=retries)

    def _reply(self, response: httpx.Response, sent: int, attempt: int,
               failures: list[str]) -> ChatReply | None:
        """The parsed reply, or None after noting why this try failed."""
        text = response.text
        if response.status_code != 200:
            reason = f"HTTP {response.status_code}: {_excerpt(text)}"
            # A request the server refuses will be refused again: do not retry it.
            failures.append(reason if response.status_code in _RETRY_STATUS
                            else "final:" + reason)
            return None
        try:
            data = response.json()
            message = data["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
            usage = data.get("usage") or {}
            calls = _tool_calls(message.get("tool_calls") or [])
            input_tokens = _count(usage.get("prompt_tokens"))
            output_tokens = _count(usage.get("completion_tokens"))
        # AttributeError: a part that should be an object is not (a null tool call).
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            failures.append(f"final:malformed reply ({type(exc).__name__}): {_excerpt(text)}")
            return None
        content = message.get("content")
        return ChatReply(
            content=content if isinstance(content, str) else None, tool_calls=calls,
            finish_reason=data["choices"][0].get("finish_reason"),
            input_tokens=input_tokens, output_tokens=output_tokens,
            retries=attempt, request_bytes=sent, response_bytes=len(response.content),
            message=message)


def _tool_calls(raw_calls: list[Any]) -> list[ToolCallRequest]:
    calls = []
    for i, raw in enumerate(raw_calls):
        fn = raw.get("function") or {}
        args = fn.get("arguments")
        calls.append(ToolCallRequest(
            id=str(raw.get("id") or f"call_{i}"), name=str(fn.get("name") or ""),
            arguments=args if isinstance(args, str) else json.dumps(args)))
    return calls


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _excerpt(text: str) -> str:
    # Redacted before the clip: a server that echoes the key (an error page quoting the
    # request) must not leave the key's first characters in an attempt's error.
    return clip(" ".join(redact(text).split()), _EXCERPT)
