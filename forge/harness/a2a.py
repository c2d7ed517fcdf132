"""The ``a2a`` harness: forge as an A2A client; each attempt is one task of the agent.

Bench syntax (a string is the shorthand for ``url``)::

    harness: {a2a: "http://127.0.0.1:9999/"}
    harness:
      a2a:
        url: "http://127.0.0.1:{port}/"      # the agent's base url (its card under
                                             # /.well-known/agent-card.json)
        serve: ["{python}", agent.py, --port, "{port}"]   # optional: forge runs it
        headers_from_env: {Authorization: A2A_TOKEN}     # values from the environment
        streaming: true          # stream where the agent card says it can; false: poll
        metadata_key: forge      # where the message's metadata carries the config
        poll_interval_s: 0.1     # first wait between tasks/get reads when polling
        cancel_timeout_s: 2      # how long a tasks/cancel may take

Needs the ``a2a`` extra (``pip install 'forge[a2a]'``: ``a2a-sdk``, with the server
parts and ``uvicorn`` that a served agent such as the example bench's runs on).

One attempt is one message in a new context (a fresh ``context_id``: nothing of one
attempt's conversation reaches another). Its parts are the task's input as text
(a mapping as ``key: value`` lines) and, for input that is not a string, the input
itself as a data part. Its metadata holds, under ``metadata_key``, ``{"config",
"seed", "attempt", "split", "task_id", "timeout_s"}``: the config reaches the agent
there and nowhere else. (A2A metadata is a protobuf ``Struct``: numbers arrive as
doubles, exact up to 2**53; the seed is sent modulo 2**53.)

The agent card is read before the first attempt (outside any attempt's time). When
it says the agent streams (``capabilities.streaming``), the message is sent with
``message/stream`` and the task followed through its events; otherwise it is sent
with ``return_immediately`` and the task read back with ``tasks/get`` until it ends.

The answer: the text parts of the final task's artifacts, joined by newlines; without
text, the data of its data parts (one value, or a list); without artifacts, the
task's final status message; an agent that answers with a ``Message`` instead of a
task, that message. The agent may report its own tool calls, token usage, cost,
metrics and signals under ``metadata_key`` in the final task's metadata (status
updates' metadata merge into it) or the answering message's: ``{"tool_calls": [{"name",
"args", "ok", "error", "result"}], "usage": {"input_tokens", "output_tokens"},
"cost", "metrics", "signals"}``; forge keeps them with the attempt, so the
``toolcall`` scorer and cost tolerances work as with any harness.

Failures are data, each an unscored attempt with its reason: a task that ends
``failed``, ``rejected`` or ``canceled`` (the reason is its status message), one
that stops for ``input-required`` or ``auth-required`` (forge sends one message an
attempt; the task is cancelled), a JSON-RPC error, a malformed answer, an event
stream cut short or holding another task's events, an answer over 16 MiB (refused as
it arrives). An attempt that reaches its timeout sends ``tasks/cancel`` for its task
and ends as a ``timeout`` saying what the cancel did; so does one that ends any other
way while its task still runs. Nothing is retried: an agent's task is not idempotent.

Metrics: ``a2a_events`` (events and reads of the task) and ``response_bytes``;
signals from the agent's report, plus ``empty_answer`` when the answer is empty.
Trace: the task and context ids, its states in order, its artifacts' names.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from pydantic import Field

from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness._a2a_task import WAITING, A2AProtocolError, TaskFollower
from forge.harness._endpoint import (
    LOOPBACK,
    AgentReport,
    Received,
    ResponseTooLarge,
    describe,
    import_extra,
    receiving,
)
from forge.harness._remote import RemoteAgentHarness, RemoteSettings, loop_deadline, margin_s
from forge.harness.base import HARNESSES, AttemptContext, AttemptTimeout, RunOutput
from forge.harness.openai import render_input

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types import Message, Part, SendMessageRequest

__all__ = ["A2AAttemptError", "A2AHarness", "A2ASettings"]

log = logging.getLogger(__name__)

_SEED_MASK = 2**53 - 1  # a protobuf Struct holds numbers as doubles
_CARD_TIMEOUT_S = 10.0
_BINDINGS = ["JSONRPC", "HTTP+JSON"]  # the transports forge speaks (not gRPC)


class A2ASettings(RemoteSettings):
    """The ``a2a:`` arguments of a bench's harness."""

    streaming: bool = True
    metadata_key: str = Field(default="forge", min_length=1)
    poll_interval_s: float = Field(default=0.1, gt=0, le=10, allow_inf_nan=False)
    cancel_timeout_s: float = Field(default=2.0, gt=0, le=60, allow_inf_nan=False)


class A2AAttemptError(Exception):
    """The attempt's task did not end with an answer; the message says why, on one line."""


@HARNESSES.register("a2a", shorthand="url")
class A2AHarness(RemoteAgentHarness):
    """Sends each attempt as a message to the agent and follows its task."""

    options_model = A2ASettings
    kind = "a2a"
    settings: A2ASettings

    def __init__(self, settings: A2ASettings, headers: dict[str, str], *args: Any) -> None:
        super().__init__(settings, headers, *args)
        self._client: Client | None = None
        self._client_key: tuple[object, int | None] | None = None
        self._streaming = False
        #: Cancels sent for attempts that ended meanwhile; awaited (bounded) at close.
        self._cancels: set[asyncio.Task[str]] = set()

    @property
    def identity(self) -> str:
        s = self.settings
        return self.remote_identity({"streaming": s.streaming, "metadata_key": s.metadata_key,
                                     "poll_interval_s": s.poll_interval_s,
                                     "cancel_timeout_s": s.cancel_timeout_s})

    async def astart(self) -> None:
        """Start the served agent if any, then read the agent card (again when the agent
        or the event loop is new) and make the client for it."""
        await super().astart()
        if self._client is None or self._client_key != self._key():
            await self._connect()

    def _key(self) -> tuple[object, int | None]:
        """What the client was made for: the loop's http client, the served agent's port."""
        return self.http(), self.served.port if self.served is not None else None

    async def _connect(self) -> None:
        from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

        http = self.http()
        try:
            async with asyncio.timeout(_CARD_TIMEOUT_S):
                card = await A2ACardResolver(http, self.url).get_agent_card()
        except Exception as exc:  # the SDK's errors, a timeout, a malformed card
            raise self.where.error(f"cannot read the agent card at {self.url}: "
                                   f"{describe(exc)}{await self.unreachable_note(exc)}",
                                   "a2a", "url") from None
        streaming = self.settings.streaming and card.capabilities.streaming
        config = ClientConfig(streaming=streaming, polling=not streaming, httpx_client=http,
                              supported_protocol_bindings=list(_BINDINGS))
        try:
            client = ClientFactory(config).create(card)
        except ValueError as exc:
            raise self.where.error(f"the agent card at {self.url} offers no transport forge "
                                   f"speaks ({', '.join(_BINDINGS)}): {exc}", "a2a", "url"
                                   ) from None
        self._check_interfaces(card)
        self._client, self._streaming, self._client_key = client, streaming, self._key()

    def _check_interfaces(self, card: Any) -> None:
        """A served agent is this machine's: a card that sends forge elsewhere is refused."""
        from urllib.parse import urlsplit

        if self.served is None:
            return
        for interface in card.supported_interfaces:
            host = urlsplit(interface.url).hostname
            if interface.protocol_binding in _BINDINGS and host not in LOOPBACK:
                raise self.where.error(
                    f"the served agent's card names {interface.url!r}, not a loopback "
                    "address; a served agent must listen on 127.0.0.1", "a2a", "serve")

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> RunOutput:
        # The engine started the harness before the batch; this is for a direct call.
        # A served agent that died meanwhile is not started again here: that would
        # spend this attempt's time; the next batch starts it.
        if self._client is None:
            await self.astart()
        elif self._client_key != self._key():
            await self._connect()
        assert self._client is not None
        client = self._client
        received = receiving()
        follower = TaskFollower(client, streaming=self._streaming,
                                poll_interval_s=self.settings.poll_interval_s)
        margin = margin_s(ctx.timeout_s)
        try:
            async with asyncio.timeout_at(loop_deadline(ctx.deadline, margin)) as limit:
                await follower.run(self._request(config, task, ctx))
        except asyncio.CancelledError:
            self._cancel_later(client, follower)  # the engine gave up on the attempt
            raise
        except Exception as exc:
            if limit.expired():
                raise await self._timed_out(client, follower, ctx, margin) from None
            ended = await self._end(client, follower, ctx, margin)
            note = await self.unreachable_note(exc)
            raise A2AAttemptError(f"{_reason(exc)}{note}{ended}") from None
        return await self._answer(client, follower, received, ctx, margin)

    def _request(self, config: dict[str, Any], task: Task, ctx: AttemptContext
                 ) -> SendMessageRequest:
        from a2a.types import Message, Role, SendMessageRequest

        meta = {"config": config, "seed": ctx.seed & _SEED_MASK, "attempt": ctx.attempt,
                "split": ctx.split, "task_id": task.id, "timeout_s": ctx.timeout_s}
        message = Message(message_id=uuid.uuid4().hex, context_id=uuid.uuid4().hex,
                          role=Role.ROLE_USER, parts=_parts(task.input),
                          metadata={self.settings.metadata_key: meta})
        return SendMessageRequest(message=message)

    async def _answer(self, client: Client, follower: TaskFollower, received: Received,
                      ctx: AttemptContext, margin: float) -> RunOutput:
        """The RunOutput of a task that ended; an error for one that did not complete."""
        state = follower.state
        if follower.message is None and state != "completed":
            why = _status_text(follower) or "(no reason given)"
            if state in WAITING:
                ended = await self._end(client, follower, ctx, margin)
                raise A2AAttemptError(f"the agent's task stopped for {state}: {why}; forge "
                                      f"sends one message an attempt{ended}")
            raise A2AAttemptError(f"the agent's task ended {state}: {why}")
        holder = follower.message if follower.message is not None else follower.task
        assert holder is not None
        try:
            report = AgentReport.read(_metadata(holder).get(self.settings.metadata_key))
        except ValueError as exc:
            raise A2AAttemptError(str(exc)) from None
        output = _answer_of(follower)
        signals = [*report.signals, *(["empty_answer"] if output in (None, "") else [])]
        return RunOutput(
            output=output, tool_calls=report.tool_calls, usage=report.usage,
            cost=report.cost, signals=signals, trace=follower.trace(),
            metrics={**report.metrics, "a2a_events": float(follower.events),
                     "response_bytes": float(received.bytes)})

    async def _timed_out(self, client: Client, follower: TaskFollower, ctx: AttemptContext,
                         margin: float) -> AttemptTimeout:
        ended = await self._end(client, follower, ctx, margin)
        state = follower.state or "no task yet"
        return AttemptTimeout(f"the agent's task did not end within {ctx.timeout_s:g} s "
                              f"(its state: {state}){await self.unreachable_note()}{ended}")

    async def _end(self, client: Client, follower: TaskFollower, ctx: AttemptContext,
                   margin: float) -> str:
        """Cancel the attempt's task if it still runs, waiting for the answer until just
        before the deadline; what happened, as a clause for the attempt's error."""
        if follower.open_task is None:
            return ""
        cancel = self._cancel_later(client, follower)
        left = ctx.deadline - margin / 4 - time.monotonic()
        try:
            outcome = await asyncio.wait_for(asyncio.shield(cancel), max(left, 0.0))
        except TimeoutError:
            outcome = "no answer to it yet"
        return f"; sent tasks/cancel: {outcome}"

    def _cancel_later(self, client: Client, follower: TaskFollower) -> asyncio.Task[str]:
        """``tasks/cancel`` for the follower's task, as a task of its own: it outlives the
        attempt when the engine gives up on that, and :meth:`aclose` waits for it."""
        task_id = follower.open_task
        cancel = asyncio.ensure_future(self._cancel(client, task_id))
        self._cancels.add(cancel)
        cancel.add_done_callback(self._cancels.discard)
        return cancel

    async def _cancel(self, client: Client, task_id: str | None) -> str:
        from a2a.types import CancelTaskRequest

        from forge.harness._a2a_task import state_name

        if task_id is None:
            return "no task to cancel"
        try:
            async with asyncio.timeout(self.settings.cancel_timeout_s):
                task = await client.cancel_task(CancelTaskRequest(id=task_id))
        except TimeoutError:
            return f"no answer within {self.settings.cancel_timeout_s:g} s"
        except Exception as exc:  # the SDK's errors, a dropped connection, ...
            log.info("tasks/cancel of %s failed: %s", task_id, describe(exc))
            return f"it failed: {describe(exc)}"
        return f"the task is now {state_name(task.status.state)}"

    async def aclose(self) -> None:
        pending = list(self._cancels)
        if pending:
            await asyncio.wait(pending, timeout=self.settings.cancel_timeout_s)
        self._client = None
        await super().aclose()

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> A2AHarness:
        import_extra("a2a.client", "a2a", ctx, "a2a")
        settings = A2ASettings.model_validate(args)
        headers, served = cls.remote_parts(settings, ctx)
        return cls(settings, headers, served, ctx)


def _parts(value: Any) -> list[Part]:
    """The task's input as the message's parts: its text, and for input that is not a
    string, the input itself as data."""
    from a2a.helpers import new_data_part, new_text_part

    parts = [new_text_part(render_input(value))]
    if not isinstance(value, str):
        try:
            parts.append(new_data_part(value))
        except Exception as exc:  # a value protobuf's Value cannot hold (a huge int)
            log.debug("the task's input goes as text only: %s", exc)
    return parts


def _answer_of(follower: TaskFollower) -> Any:
    """The answer's text (artifacts, else the final status message, else the answering
    message), or its data when it has no text; None when it has neither."""
    from a2a.helpers import get_data_parts, get_text_parts

    if follower.message is not None:
        groups = [list(follower.message.parts)]
    else:
        assert follower.task is not None
        groups = [list(a.parts) for a in follower.task.artifacts] or [
            list(follower.task.status.message.parts)]
    texts = [t for parts in groups for t in get_text_parts(parts)]
    if texts:
        return "\n".join(texts)
    data = [d for parts in groups for d in get_data_parts(parts)]
    return None if not data else data[0] if len(data) == 1 else data


def _status_text(follower: TaskFollower) -> str:
    from a2a.helpers import get_message_text

    if follower.task is None:
        return ""
    return " ".join(get_message_text(follower.task.status.message).split())


def _metadata(holder: Message | Any) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(holder.metadata) if holder.HasField("metadata") else {}


def _reason(exc: BaseException) -> str:
    """Why the exchange failed, in a user's words."""
    from a2a.utils.errors import A2AError
    from google.protobuf.json_format import ParseError

    if isinstance(exc, ResponseTooLarge | A2AProtocolError):
        return str(exc)
    if isinstance(exc, ParseError):
        return f"a malformed answer from the agent: {describe(exc)}"
    if isinstance(exc, A2AError):
        return f"A2A error from the agent: {describe(exc)}"
    return f"{type(exc).__name__}: {describe(exc)}"
