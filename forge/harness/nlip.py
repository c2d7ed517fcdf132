"""The ``nlip`` harness: forge as an NLIP client; each attempt is one NLIP exchange.

NLIP (ECMA-430, the Natural Language Interaction Protocol) carries one message in, one
message out, over HTTP: a JSON object with ``format``, ``subformat``, ``content`` and
``submessages``. Bench syntax (a string is the shorthand for ``url``)::

    harness: {nlip: "http://127.0.0.1:8010/nlip/"}
    harness:
      nlip:
        url: "http://127.0.0.1:{port}/nlip/"     # where the agent takes NLIP messages
        serve: ["{python}", agent.py, --port, "{port}"]   # optional: forge runs it
        headers_from_env: {Authorization: NLIP_TOKEN}    # HTTP headers from the environment
        token_from_env: NLIP_AUTH      # optional: an NLIP ``authorization`` token submessage
        language: english              # the subformat of the text forge sends
        config_label: forge            # the label of the submessage carrying the config

Needs the ``nlip`` extra (``pip install 'forge[nlip]'``: ``nlip-sdk``, with
``nlip-server`` and ``uvicorn`` that a served agent such as the example bench's runs
on).

The message forge sends: the task's input as text (``format: text``, ``subformat:
language``; a mapping as ``key: value`` lines), and a structured JSON submessage
labelled ``config_label`` holding ``{"config", "seed", "attempt", "split", "task_id",
"timeout_s"}``: the config reaches the agent there and nowhere else. An input that is
not a string also goes as a structured JSON submessage labelled ``input``.

The answer: the text of the reply (its content when its format is text, and every
text submessage), joined by newlines; a reply without text whose content is
structured JSON answers with that JSON. A structured JSON submessage of the reply
labelled ``config_label`` may report the agent's own run (``tool_calls``, ``usage``,
``cost``, ``metrics``, ``signals``), kept with the attempt as from any harness.

Failures are data, each an unscored attempt with its reason: a reply of format
``error`` (its text), an HTTP status other than 200 (the server's detail), a body
that is not JSON or not an NLIP message, a connection that breaks mid-answer, an
answer over 16 MiB (refused as it arrives). An attempt that reaches its timeout ends
as a ``timeout``: NLIP has no cancel message, so forge drops the request's connection.
Nothing is retried.

Metrics: ``response_bytes``; signals from the agent's report, plus ``empty_answer``.
Trace: the reply's format and subformat, and its submessages' formats and labels.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from forge._util.files import validation_problem
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness._endpoint import (
    AgentReport,
    ResponseTooLarge,
    describe,
    excerpt,
    import_extra,
    receiving,
)
from forge.harness._remote import RemoteAgentHarness, RemoteSettings, loop_deadline, margin_s
from forge.harness.base import HARNESSES, AttemptContext, AttemptTimeout, RunOutput
from forge.harness.openai import render_input
from forge.secrets.masking import secret_from_env

if TYPE_CHECKING:
    import httpx
    from nlip_sdk.nlip import NLIP_Message

__all__ = ["NlipAttemptError", "NlipHarness", "NlipSettings"]


class NlipSettings(RemoteSettings):
    """The ``nlip:`` arguments of a bench's harness."""

    token_from_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    language: str = Field(default="english", min_length=1)
    config_label: str = Field(default="forge", min_length=1)


class NlipAttemptError(Exception):
    """The exchange gave no answer; the message says why, on one line."""


@HARNESSES.register("nlip", shorthand="url")
class NlipHarness(RemoteAgentHarness):
    """POSTs each attempt as an NLIP message and reads the reply."""

    options_model = NlipSettings
    kind = "nlip"
    settings: NlipSettings

    def __init__(self, settings: NlipSettings, headers: dict[str, str], *args: Any,
                 token: str | None = None) -> None:
        super().__init__(settings, {**headers, "Content-Type": "application/json"}, *args)
        self._token = token

    def secret_envs(self) -> tuple[str, ...]:
        token = self.settings.token_from_env
        return (*super().secret_envs(), *((token,) if token is not None else ()))

    @property
    def identity(self) -> str:
        s = self.settings
        return self.remote_identity({"token_from_env": s.token_from_env,
                                     "language": s.language, "config_label": s.config_label})

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> RunOutput:
        if self.served is not None and self.served.port is None:
            await self.astart()  # a direct call; the engine has started the harness
        body = self._message(config, task, ctx).model_dump_json(exclude_none=True).encode()
        received = receiving()
        try:
            async with asyncio.timeout_at(loop_deadline(ctx.deadline,
                                                        margin_s(ctx.timeout_s))) as limit:
                response = await self._post(self.http(), body)
        except Exception as exc:
            if limit.expired():
                raise AttemptTimeout(
                    f"the agent did not answer within {ctx.timeout_s:g} s; the request's "
                    "connection was dropped (NLIP has no cancel message)"
                    f"{await self.unreachable_note()}") from None
            note = await self.unreachable_note(exc)
            raise NlipAttemptError(f"{_reason(exc)}{note}") from None
        reply = _reply(response)
        return self._output(reply, received.bytes)

    async def _post(self, http: httpx.AsyncClient, body: bytes) -> httpx.Response:
        response = await http.post(self.url, content=body)
        await response.aread()  # through the bound, inside the attempt's time
        return response

    def _message(self, config: dict[str, Any], task: Task, ctx: AttemptContext
                 ) -> NLIP_Message:
        from nlip_sdk.nlip import NLIP_Factory

        message = NLIP_Factory.create_text(render_input(task.input),
                                           language=self.settings.language)
        message.add_json({"config": config, "seed": ctx.seed, "attempt": ctx.attempt,
                          "split": ctx.split, "task_id": task.id, "timeout_s": ctx.timeout_s},
                         label=self.settings.config_label)
        if not isinstance(task.input, str):
            message.add_json({"value": task.input}, label="input")
        if self._token is not None:
            message.add_authentication_token(self._token)
        # A fresh conversation for each attempt: nothing of one reaches another.
        message.add_conversation_token(uuid.uuid4().hex)
        return message

    def _output(self, reply: NLIP_Message, received: int) -> RunOutput:
        errors = [str(c) for c in reply.extract_field_list("error")]
        if errors:
            raise NlipAttemptError("the agent answered with an error: "
                                   + " ".join("; ".join(errors).split()))
        texts = [t for t in reply.extract_field_list("text") if isinstance(t, str)]
        output: Any = "\n".join(texts) if texts else None
        if output is None and _is_json(reply.format, reply.subformat):
            output = reply.content
        try:
            report = AgentReport.read(self._report(reply))
        except ValueError as exc:
            raise NlipAttemptError(str(exc)) from None
        signals = [*report.signals, *(["empty_answer"] if output in (None, "") else [])]
        return RunOutput(
            output=output, tool_calls=report.tool_calls, usage=report.usage,
            cost=report.cost, signals=signals,
            metrics={**report.metrics, "response_bytes": float(received)},
            trace={"format": reply.format, "subformat": reply.subformat,
                   "submessages": [{"format": str(m.format.value), "subformat": m.subformat,
                                    "label": m.label} for m in reply.submessages or []][:64]})

    def _report(self, reply: NLIP_Message) -> Any:
        """The agent's report: the structured JSON submessage labelled config_label."""
        for sub in reply.submessages or []:
            if (sub.label or "").lower() == self.settings.config_label.lower() and _is_json(
                    sub.format.value, sub.subformat):
                return sub.content
        return None

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> NlipHarness:
        import_extra("nlip_sdk.nlip", "nlip", ctx, "nlip")
        settings = NlipSettings.model_validate(args)
        headers, served = cls.remote_parts(settings, ctx)
        token = None
        if settings.token_from_env is not None:
            token = secret_from_env(settings.token_from_env)
            if token is None:
                raise ctx.error(f"environment variable {settings.token_from_env} is not set "
                                "or empty", "nlip", "token_from_env")
        return cls(settings, headers, served, ctx, token=token)


def _is_json(form: str, subformat: str) -> bool:
    return form.lower() == "structured" and subformat.lower() == "json"


def _reply(response: httpx.Response) -> NLIP_Message:
    """The reply as an NLIP message; anything else is an :class:`NlipAttemptError`."""
    from nlip_sdk.nlip import NLIP_Message

    status, content = response.status_code, response.content
    if status != 200:
        raise NlipAttemptError(f"HTTP {status} from the agent: {excerpt(content)}")
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise NlipAttemptError(f"a malformed answer from the agent (not JSON): "
                               f"{excerpt(content)}") from None
    try:
        return NLIP_Message.model_validate(data)
    except ValidationError as exc:
        problem = validation_problem(exc)
        raise NlipAttemptError(f"a malformed answer from the agent (not an NLIP message): "
                               f"{problem.field or 'body'}: {problem.message}") from None


def _reason(exc: BaseException) -> str:
    import httpx

    if isinstance(exc, ResponseTooLarge):
        return str(exc)
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect to the agent: {describe(exc)}"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return f"the connection broke mid-answer: {describe(exc)}"
    return f"{type(exc).__name__}: {describe(exc)}"
