"""What the harnesses that talk to a network endpoint share (``http``, ``a2a``, ``nlip``).

- the endpoint's url, checked (no credentials in it: it is written to journals);
- request headers whose values come from environment variables only, registered as
  secrets (:mod:`forge.secrets.masking`) so they never reach a file or a log;
- an optional extra: a protocol SDK imported when a bench uses its kind, with one
  line naming the ``pip install`` when it is missing;
- an ``httpx`` client that keeps no cookie (attempts share nothing through it) and
  refuses an answer over :data:`~forge._util.bounds.MAX_OUTPUT_BYTES` while it arrives,
  counting the bytes each attempt received;
- what an agent may report about its own run (tool calls, tokens, cost, metrics,
  signals) beside its answer, checked as :class:`~forge.harness.RunOutput` checks them.
"""

from __future__ import annotations

import contextvars
import importlib
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from http.cookiejar import Cookie, CookieJar
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forge._util.bounds import MAX_OUTPUT_BYTES
from forge._util.files import validation_problem
from forge.core.spec import BuildContext
from forge.harness.base import ToolCall, Usage
from forge.secrets.masking import redact, register_secret, secret_from_env

if TYPE_CHECKING:
    import httpx

__all__ = [
    "LOOPBACK",
    "AgentReport",
    "NoCookies",
    "Received",
    "ResponseTooLarge",
    "bounded_client",
    "check_headers",
    "check_url",
    "describe",
    "excerpt",
    "import_extra",
    "read_headers",
    "receiving",
]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP header name (RFC 9110)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The hosts a served agent may listen on: this machine only.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_MIB = MAX_OUTPUT_BYTES // 2**20
_EXCERPT_CHARS = 160


def check_url(url: str, *, port_placeholder: bool = False) -> str:
    """An http(s) url without credentials; ``{port}`` may stand for the port when
    ``port_placeholder`` (a served agent's, filled in when it starts)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// url, got {url!r}")
    if parts.username is not None or parts.password is not None:
        # The url goes into the harness's identity, journals and results.
        raise ValueError("credentials in the url would be written to journals; "
                         "pass them with headers_from_env")
    if "{port}" in url and not port_placeholder:
        raise ValueError("{port} in the url stands for the port of a served agent, "
                         "and there is none (serve); write the port")
    return url


def check_headers(headers: dict[str, str]) -> dict[str, str]:
    """``headers_from_env``: each key an HTTP header name, each value a variable name."""
    seen: set[str] = set()
    for header, variable in headers.items():
        if not _TOKEN.fullmatch(header):
            raise ValueError(f"{header!r} is not an HTTP header name")
        if header.lower() in seen:
            raise ValueError(f"header {header!r} is given twice")
        seen.add(header.lower())
        if not _ENV_NAME.fullmatch(variable):
            raise ValueError(f"{variable!r} (header {header}) is not an environment "
                             "variable name")
    return headers


def read_headers(headers_from_env: Mapping[str, str], ctx: BuildContext, kind: str
                 ) -> dict[str, str]:
    """The header values, read from the environment now and registered as secrets; a
    variable unset or empty, or a value with a line break, is a bench error."""
    headers: dict[str, str] = {}
    for header, variable in headers_from_env.items():
        where = (kind, "headers_from_env", header)
        value = secret_from_env(variable)
        if value is None:
            raise ctx.error(f"environment variable {variable} is not set or empty", *where)
        if "\r" in value or "\n" in value:
            raise ctx.error(f"the value of {variable} holds a line break; not a "
                            "header value", *where)
        scheme, _, credential = value.partition(" ")
        if scheme.isalpha() and credential.strip():
            # "Bearer <token>": a service or a log may echo the token alone.
            register_secret(credential.strip(), name=variable)
        headers[header] = value
    return headers


def import_extra(module: str, extra: str, ctx: BuildContext, kind: str) -> ModuleType:
    """``module``, or the bench error that names the ``pip install`` to run."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ctx.error(f"the {kind} harness needs the {extra} extra, which is not "
                        f"installed ({exc}); run: pip install 'forge[{extra}]'",
                        kind) from None


class NoCookies(CookieJar):
    """A jar that keeps nothing: a cookie set by one attempt's answer would otherwise be
    sent with the next attempt, state that attempts must not share."""

    def set_cookie(self, cookie: Cookie) -> None:
        return None

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


class ResponseTooLarge(Exception):
    """An answer over the bound; raised while it arrives, so none of it is held."""

    def __init__(self) -> None:
        super().__init__(f"the agent's answer exceeds {_MIB} MiB (at most {_MIB} MiB "
                         "per response); nothing of it is kept")


@dataclass
class Received:
    """The bytes of the responses one attempt read."""

    bytes: int = 0


#: The attempt whose responses are being read (set by the harness around each attempt;
#: httpx reads a response in the task that asked for it).
_RECEIVING: contextvars.ContextVar[Received | None] = contextvars.ContextVar(
    "forge_receiving", default=None)


def receiving() -> Received:
    """Count the bytes read from here on (in this task) into a new tally."""
    tally = Received()
    _RECEIVING.set(tally)
    return tally


def bounded_client(headers: Mapping[str, str], *, limit: int = MAX_OUTPUT_BYTES
                   ) -> httpx.AsyncClient:
    """An ``httpx`` client without cookies, redirects or a request timeout (the harness
    keeps the attempt's deadline), whose responses stop at ``limit`` bytes."""
    import httpx

    class _Bounded(httpx.AsyncByteStream):
        def __init__(self, inner: httpx.AsyncByteStream) -> None:
            self._inner = inner
            self._tally = _RECEIVING.get()

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self._inner:
                seen += len(chunk)
                if self._tally is not None:
                    self._tally.bytes += len(chunk)
                if seen > limit:
                    raise ResponseTooLarge()
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class _Transport(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            # No connection cap: the engine's concurrency is the one limit, and a pool
            # wait would show up as attempts timing out.
            self._inner = httpx.AsyncHTTPTransport(
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await self._inner.handle_async_request(request)
            assert isinstance(response.stream, httpx.AsyncByteStream)
            return httpx.Response(response.status_code, headers=response.headers,
                                  stream=_Bounded(response.stream),
                                  extensions=response.extensions, request=request)

        async def aclose(self) -> None:
            await self._inner.aclose()

    return httpx.AsyncClient(transport=_Transport(), headers=dict(headers),
                             cookies=NoCookies(), follow_redirects=False,
                             timeout=httpx.Timeout(None))


class AgentReport(BaseModel):
    """What an agent may say about its own run beside its answer: a mapping (A2A: under
    the harness's metadata key in the task's or message's metadata). Other keys of it
    are the agent's own and ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    signals: list[str] = Field(default_factory=list)

    @classmethod
    def read(cls, value: Any) -> AgentReport:
        """The report in ``value`` (None: none); ``ValueError`` says what is wrong."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise ValueError(f"the agent's forge report is a {type(value).__name__}, "
                             "not a mapping")
        try:
            return cls.model_validate(dict(value))
        except ValidationError as exc:
            problem = validation_problem(exc)
            raise ValueError(f"the agent's forge report is invalid: {problem.field}: "
                             f"{redact(problem.message)}") from None


def describe(exc: BaseException) -> str:
    """An exception as one redacted line: its type when it says nothing more."""
    text = str(exc).strip() or type(exc).__name__
    return " ".join(redact(text).split())


def excerpt(content: bytes) -> str:
    """A response body as one short redacted line."""
    if not content:
        return "(empty body)"
    # The whole body is redacted before the clip: a clip through a secret would leave
    # a prefix of it that no longer matches.
    text = " ".join(redact(content.decode("utf-8", "replace")).split())
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "…"
