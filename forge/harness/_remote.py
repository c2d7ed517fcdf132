"""A harness whose agent is behind a url (``a2a``, ``nlip``): what they have in common.

The settings every such harness takes (``url``, ``headers_from_env``, ``serve``), the
checks of them at load, the served agent's start before each batch and its stop at
the end, and the one ``httpx`` client per event loop that the protocol SDK runs on
(:func:`forge.harness._endpoint.bounded_client`: no cookies, answers bounded).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from forge._util.digest import digest_of
from forge.core.spec import BuildContext
from forge.harness._endpoint import bounded_client, check_headers, check_url, read_headers
from forge.harness._serve import ServedAgent, ServeOptions, check_served_url
from forge.harness.base import Harness

if TYPE_CHECKING:
    import httpx

__all__ = ["RemoteAgentHarness", "RemoteSettings"]

#: A slice of the attempt's time kept back from the agent: the harness then has time
#: to cancel the agent's work and say why before the engine's own deadline.
MARGIN_MAX_S = 0.25
#: How long a served agent whose connection dropped gets to be seen exiting.
_EXIT_GRACE_S = 0.5


class RemoteSettings(BaseModel):
    """The arguments every agent-behind-a-url harness takes."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    url: str
    headers_from_env: dict[str, str] = Field(default_factory=dict)
    serve: ServeOptions | None = None

    @field_validator("headers_from_env")
    @classmethod
    def _check_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        return check_headers(headers)


class RemoteAgentHarness(Harness):
    """Holds the url, the headers and the served agent; subclasses speak the protocol."""

    #: The harness's name in a bench (``a2a``), for the fields its errors name.
    kind: ClassVar[str]

    def __init__(self, settings: RemoteSettings, headers: dict[str, str],
                 served: ServedAgent | None, where: BuildContext) -> None:
        self.settings = settings
        self.headers = headers
        self.served = served
        self.where = where
        self._http: httpx.AsyncClient | None = None
        self._http_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def remote_parts(cls, settings: RemoteSettings, ctx: BuildContext
                     ) -> tuple[dict[str, str], ServedAgent | None]:
        """The headers read from the environment and the served agent, each checked
        (a bad one is a bench error naming its field)."""
        try:
            check_url(settings.url, port_placeholder=settings.serve is not None)
            if settings.serve is not None:
                check_served_url(settings.url)
        except ValueError as exc:
            raise ctx.error(str(exc), cls.kind, "url") from None
        headers = read_headers(settings.headers_from_env, ctx, cls.kind)
        served = (ServedAgent(settings.serve, ctx.at(cls.kind, "serve"))
                  if settings.serve is not None else None)
        return headers, served

    def secret_envs(self) -> tuple[str, ...]:
        return tuple(self.settings.headers_from_env.values())

    def remote_identity(self, extra: dict[str, Any]) -> str:
        """The url as written, header names and variables (never a value), the served
        program, and the protocol's own settings (as a digest)."""
        s = self.settings
        headers = ",".join(f"{h}<-${v}" for h, v in sorted(s.headers_from_env.items()))
        serve = f" {self.served.identity}" if self.served is not None else ""
        return f"{self.kind}:{s.url} headers=[{headers}]{serve} {digest_of(extra)[:16]}"

    @property
    def url(self) -> str:
        """The url, with a served agent's port written in."""
        return self.served.fill(self.settings.url) if self.served is not None else (
            self.settings.url)

    def http(self) -> httpx.AsyncClient:
        """The client of the running loop: a client's connections belong to the loop
        that opened them, so a harness run from a new loop starts a new one."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._http_loop is not loop:
            self._http = bounded_client(self.headers)
            self._http_loop = loop
        return self._http

    async def astart(self) -> None:
        if self.served is not None:
            await self.served.ensure()

    async def unreachable_note(self, exc: BaseException | None = None) -> str:
        """Why the agent may not answer: a served agent that has ended, or nothing. After
        a dropped or refused connection (``exc``) the agent gets a moment to be seen
        exiting: the connection drops as it dies, before its exit can be read."""
        if self.served is None:
            return ""
        if exc is not None and _network_failure(exc):
            until = time.monotonic() + _EXIT_GRACE_S
            while self.served.alive and time.monotonic() < until:
                await asyncio.sleep(0.02)
        if self.served.alive:
            return ""
        return f" ({self.served.exit_note() or 'the served agent is not running'})"

    async def aclose(self) -> None:
        http, self._http = self._http, None
        try:
            if http is not None:
                await http.aclose()
        finally:
            if self.served is not None:
                await self.served.stop()


def _network_failure(exc: BaseException) -> bool:
    """Whether a connection failed under ``exc`` (an httpx transport error in its chain)."""
    import httpx

    seen: BaseException | None = exc
    for _ in range(8):  # the SDKs wrap once or twice; a cycle must not hold us
        if seen is None:
            return False
        if isinstance(seen, httpx.TransportError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def margin_s(timeout_s: float) -> float:
    """How long before the attempt's deadline the harness stops waiting for the agent."""
    return min(MARGIN_MAX_S, 0.1 * timeout_s)


def loop_deadline(deadline: float, before: float) -> float:
    """``deadline - before`` (on the monotonic clock) on the running loop's clock."""
    loop = asyncio.get_running_loop()
    return loop.time() + (deadline - before - time.monotonic())
