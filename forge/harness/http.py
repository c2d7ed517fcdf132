"""The ``http`` harness: each attempt is one self-contained POST to a stateless service.

Bench syntax::

    harness: {http: "http://127.0.0.1:8123/run"}          # shorthand: the url
    harness:
      http:
        url: "http://127.0.0.1:8123/run"
        headers_from_env: {Authorization: FORGE_HARNESS_TOKEN}
        timeout_s: 30                      # per request; default: the attempt's time left
        retries: {max: 2, backoff_s: 0.2, on: [connect, 5xx]}

The body is ``{"config", "task", "ctx": {seed, attempt, split, timeout_s,
deadline_s}}`` (``deadline_s``: seconds left when the request is sent); the answer is
a RunOutput as JSON. The service keeps nothing between attempts and forge sends it
nothing to keep: no cookie is stored, so none is sent back.

Failures are data. A refused or dropped connection, a timeout, a 4xx or 5xx, a body
that is not JSON or not a RunOutput: the attempt raises :class:`HttpAttemptError`,
whose one-line message gives the number of tries and each one's reason (status and
a short, redacted excerpt of the body), and the rollout engine records it as an
``error``.

Retries (``retries``; none by default) are bounded: at most ``max`` after the first
try, waiting ``backoff_s * 2**i`` before retry ``i``, only for the failure kinds in
``on`` (``connect``: the connection could not be made; ``disconnect``: it was
dropped before an answer; ``timeout``: no answer within ``timeout_s``; ``5xx``;
``429``, which waits at least the ``Retry-After`` it is given). A 4xx other than
429, a redirect and a bad body are never retried: sent again, the same request gets
the same answer. No retry starts if its wait would end past the attempt's
deadline. No jitter: forge's runs are reproducible, and concurrency is bounded.

On success forge adds three metrics: ``http_retries`` (tries minus one),
``request_bytes`` (the body of one request) and ``response_bytes`` (the body of the
answer that succeeded). A metric of the same name that the service returned is
kept as the service reported it: the service knows its own domain, and forge's
figure is dropped (logged at debug level).

Secrets: header values come from environment variables, read with
:func:`forge.secrets.masking.secret_from_env`, so they are redacted from everything forge
writes. The harness's identity names the url, the header names and the variables,
never a value; credentials in the url itself are refused.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from forge._util.files import validation_problem
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness._endpoint import (
    NoCookies,
    check_headers,
    check_url,
    describe,
    excerpt,
    read_headers,
)
from forge.harness.base import HARNESSES, AttemptContext, Harness, RunOutput
from forge.secrets.masking import redact

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpAttemptError", "HttpHarness", "HttpSettings", "RetryPolicy"]

log = logging.getLogger(__name__)

RetryOn = Literal["connect", "disconnect", "timeout", "5xx", "429"]

# Without a timeout_s of its own, a request may run a little past the attempt's
# deadline, so that the engine's timeout ends it and the attempt is a `timeout`.
_GRACE_S = 0.5


class RetryPolicy(BaseModel):
    """How many times, after what wait, and on which failures a request is sent again."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    max: int = Field(default=0, ge=0, le=10)
    backoff_s: float = Field(default=0.2, ge=0.0, le=60.0)
    on: tuple[RetryOn, ...] = ("connect", "5xx")


class HttpSettings(BaseModel):
    """The ``http:`` arguments of a bench's harness."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    url: str
    headers_from_env: dict[str, str] = Field(default_factory=dict)
    timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    retries: RetryPolicy = Field(default_factory=RetryPolicy)

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        return check_url(url)

    @field_validator("headers_from_env")
    @classmethod
    def _check_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        return check_headers(headers)


class HttpAttemptError(Exception):
    """An attempt's request failed; the message says how often and why, on one line."""


@dataclass(frozen=True)
class _Failure:
    """One failed try: its kind (a retry policy's ``on`` value, or ``final``)."""

    kind: str
    reason: str
    retry_after: float | None = None


@HARNESSES.register("http", shorthand="url")
class HttpHarness(Harness):
    """POSTs each attempt to ``settings.url``; one :class:`httpx.AsyncClient` per harness."""

    options_model = HttpSettings

    def __init__(self, settings: HttpSettings, headers: dict[str, str]) -> None:
        self.settings = settings
        self._headers = {**headers, "Content-Type": "application/json"}
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def secret_envs(self) -> tuple[str, ...]:
        return tuple(self.settings.headers_from_env.values())

    @property
    def identity(self) -> str:
        s = self.settings
        headers = ",".join(f"{h}<-${v}" for h, v in sorted(s.headers_from_env.items()))
        retries = f"{s.retries.max}x{s.retries.backoff_s:g}s[{','.join(sorted(s.retries.on))}]"
        # Termination settings change which attempts end as errors, so they are part of
        # what the results were measured with, as the attempt timeout is.
        return (f"http:{s.url} headers=[{headers}] timeout_s={s.timeout_s} "
                f"retries={retries}")

    def _client_now(self) -> httpx.AsyncClient:
        # Made on first use, inside the loop that runs the attempts: a harness built
        # only for its identity (as a bench load does) opens nothing.
        import httpx  # here, not at the top: process workers import this package

        loop = asyncio.get_running_loop()
        # A client's connections belong to the loop that opened them; a harness run
        # from a new loop (its old one closed) starts a new client.
        if self._client is None or self._client_loop is not loop:
            # No connection cap: the engine's concurrency is the one limit, and a pool
            # wait would show up as attempts timing out.
            self._client = httpx.AsyncClient(
                headers=self._headers, cookies=NoCookies(), follow_redirects=False,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))
            self._client_loop = loop
        return self._client

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> RunOutput:
        client = self._client_now()
        failures: list[str] = []
        task_json = task.model_dump(mode="json")
        while True:
            remaining = ctx.deadline - time.monotonic()
            body = json.dumps({"config": config, "task": task_json, "ctx": {
                "seed": ctx.seed, "attempt": ctx.attempt, "split": ctx.split,
                "timeout_s": ctx.timeout_s, "deadline_s": max(0.0, remaining)}},
                ensure_ascii=False, allow_nan=False).encode("utf-8")
            outcome = await self._try(client, body, remaining)
            if not isinstance(outcome, _Failure):
                output, response_bytes = outcome
                return self._with_metrics(output, len(failures), len(body), response_bytes)
            failures.append(outcome.reason)
            wait, stop = self._next_wait(outcome, len(failures), ctx.deadline)
            if stop is not None:
                raise HttpAttemptError(self._summary(failures, stop))
            log.info("POST %s: try %d failed (%s); retrying in %.2f s", self.settings.url,
                     len(failures), outcome.reason, wait)
            await asyncio.sleep(wait)

    async def _try(self, client: httpx.AsyncClient, body: bytes, remaining: float
                   ) -> tuple[RunOutput, int] | _Failure:
        import httpx

        own = self.settings.timeout_s
        limit = own if own is not None and own < remaining else max(remaining, 0.0) + _GRACE_S
        try:
            async with asyncio.timeout(limit):
                response = await client.post(self.settings.url, content=body,
                                             timeout=httpx.Timeout(limit))
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            return _Failure("connect", f"cannot connect: {describe(exc)}")
        except (httpx.TimeoutException, TimeoutError):
            return _Failure("timeout", f"no answer within {limit:.3g} s")
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            return _Failure("disconnect", f"connection dropped: {describe(exc)}")
        except httpx.HTTPError as exc:
            return _Failure("final", f"request failed: {describe(exc)}")
        return self._read(response)

    def _read(self, response: httpx.Response) -> tuple[RunOutput, int] | _Failure:
        status = response.status_code
        content = response.content
        if status >= 500:
            return _Failure("5xx", f"HTTP {status}: {excerpt(content)}")
        if status == 429:
            return _Failure("429", f"HTTP 429: {excerpt(content)}",
                            _retry_after(response.headers.get("Retry-After")))
        if 300 <= status < 400:
            return _Failure("final", f"HTTP {status} (redirects are not followed)")
        if status >= 400 or status < 200:
            return _Failure("final", f"HTTP {status}: {excerpt(content)}")
        try:
            data = json.loads(content)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _Failure("final", f"HTTP {status} with a body that is not JSON: "
                                     f"{excerpt(content)}")
        if not isinstance(data, dict):
            return _Failure("final", f"HTTP {status} with a JSON {type(data).__name__}, "
                                     "not a RunOutput object")
        try:
            output = RunOutput.model_validate(data)
        except ValidationError as exc:
            problem = validation_problem(exc)
            return _Failure("final", f"HTTP {status} with a body that is not a RunOutput: "
                                     f"{problem.field or 'body'}: {redact(problem.message)}")
        return output, len(content)

    def _next_wait(self, failure: _Failure, tries: int, deadline: float
                   ) -> tuple[float, str | None]:
        """The wait before the next try, or why there is none."""
        policy = self.settings.retries
        if failure.kind not in policy.on:
            return 0.0, ("not retried" if failure.kind == "final"
                         else f"{failure.kind} failures are not retried")
        if tries > policy.max:
            return 0.0, f"retries exhausted (max {policy.max})"
        wait = policy.backoff_s * 2 ** (tries - 1)
        if failure.retry_after is not None:
            wait = max(wait, failure.retry_after)
        if time.monotonic() + wait >= deadline:
            return 0.0, f"no time left for a retry after {wait:.3g} s"
        return wait, None

    def _summary(self, failures: list[str], stop: str) -> str:
        n = len(failures)
        reasons = "; ".join(f"[{i}] {r}" for i, r in enumerate(failures, start=1))
        return (f"POST {self.settings.url} failed after {n} {'try' if n == 1 else 'tries'}: "
                f"{reasons}; {stop}")

    def _with_metrics(self, output: RunOutput, retries: int, request_bytes: int,
                      response_bytes: int) -> RunOutput:
        ours = {"http_retries": float(retries), "request_bytes": float(request_bytes),
                "response_bytes": float(response_bytes)}
        clash = sorted(set(ours) & set(output.metrics))
        if clash:
            log.debug("POST %s: the service's own %s kept", self.settings.url, clash)
        return output.model_copy(update={"metrics": {**ours, **output.metrics}})

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> HttpHarness:
        settings = HttpSettings.model_validate(args)
        headers = read_headers(settings.headers_from_env, ctx, "http")
        return cls(settings, headers)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header: a number of seconds or an HTTP date."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None
