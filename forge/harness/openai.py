"""The ``openai`` harness: a tool-using agent loop against an OpenAI-compatible endpoint.

Bench syntax::

    harness:
      openai:
        tools: "tools:TOOLS"        # module:attr in the bench folder: a list of functions
        system_prompts: {plain: "You are ...", stepwise: "Think step by step ..."}
        prices: {input_per_mtok: 0.15, output_per_mtok: 0.60}    # optional: cost
        model: null                 # default: FORGE_OPENAI_MODEL, else "default"
        base_url: null              # default: FORGE_OPENAI_BASE_URL (required)
        api_key_env: FORGE_OPENAI_API_KEY
        timeout_s: 60               # per request, never past the attempt's deadline
        retries: 2                  # on connection failures, timeouts, 429 and 5xx
        backoff_s: 0.5              # before retry i: backoff_s * 2**i
        send_seed: true             # send the attempt's seed (paired sampling)

Settings read from the config (a setting the bench's registry does not declare keeps
the default shown): ``temperature`` (server's), ``top_p`` (server's), ``max_tokens``
(server's), ``system_prompt`` (the first variant), ``max_iterations`` (4; model
turns per attempt), ``tool_choice`` (``auto``; ``required`` forces a tool call on
the first turn only, so the model can still answer; ``none`` sends no tools at all,
which every server honours), ``parallel_tool_calls`` (server's).

One attempt: the system prompt and the task's input as the user message (a string
as is; a dict as ``key: value`` lines, or its text when it has one text value),
then turns until the model answers without asking for a tool or ``max_iterations``
turns are spent. Each tool the model asks for runs here (sync functions on daemon
threads, async ones on the loop), in the order asked, its arguments validated
against the function's signature (see :mod:`forge.harness.tools`); a malformed or
invalid call, an unknown tool or a tool that raises becomes a tool message
``error: ...`` for the model and a ``ToolCall`` with ``ok=False``. A tool that
hangs ends its attempt at forge's timeout (its thread is abandoned). A failed
model call (:class:`~forge.llm.LLMError`) ends the attempt as an error with its
reason.

RunOutput: ``output`` is the final text, stripped (None when empty); ``usage`` the
tokens summed over turns; ``cost`` from ``prices``; metrics ``llm_calls``,
``http_retries``, ``request_bytes``, ``response_bytes``, ``tool_errors``; signals
``iteration_cap_hit`` (the last allowed turn still asked for tools, which are not
run), ``tool_error``, ``empty_answer`` (the model ended with no text),
``max_tokens_hit`` (a reply cut by ``max_tokens``); ``trace`` the conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import to_jsonable_python

from forge._util.digest import digest_of
from forge._util.files import validation_problem
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.harness.base import HARNESSES, AttemptContext, Harness, RunOutput, ToolCall, Usage
from forge.harness.tools import Tool, ToolBox, load_tools
from forge.llm.client import API_KEY_ENV, ChatClient, ChatReply, Endpoint

__all__ = ["OpenAIHarness", "OpenAISettings", "Prices", "render_input"]

# A request may run this much past the attempt's deadline, so that forge's own
# timeout ends a slow call and the attempt reads `timeout`, not a client error.
_GRACE_S = 0.5
_SEED_MASK = 2**31 - 1  # llama.cpp and others read the seed as a 32-bit integer


class Prices(BaseModel):
    """Dollars per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    input_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    output_per_mtok: float = Field(ge=0, allow_inf_nan=False)

    def cost(self, usage: Usage) -> float:
        return (usage.input_tokens * self.input_per_mtok
                + usage.output_tokens * self.output_per_mtok) / 1e6


class OpenAISettings(BaseModel):
    """The ``openai:`` arguments of a bench's harness."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tools: str | None = None
    system_prompts: dict[str, str] = Field(
        default_factory=lambda: {"default": "You are a helpful assistant."}, min_length=1)
    prices: Prices | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = API_KEY_ENV
    timeout_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    retries: int = Field(default=2, ge=0, le=10)
    backoff_s: float = Field(default=0.5, ge=0, allow_inf_nan=False)
    send_seed: bool = True


class _RunSettings(BaseModel):
    """The config's settings this harness reads; others are ignored (not its own)."""

    model_config = ConfigDict(extra="ignore")
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    system_prompt: str | None = None
    max_iterations: int = Field(default=4, ge=1)
    tool_choice: Literal["auto", "required", "none"] = "auto"
    parallel_tool_calls: bool | None = None


def render_input(value: Any) -> str:
    """The task's input as the user message."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if len(value) == 1 and isinstance(next(iter(value.values())), str):
            return str(next(iter(value.values())))
        return "\n".join(f"{k}: {v if isinstance(v, str) else _dumps(v)}"
                         for k, v in value.items())
    return _dumps(value)


def _dumps(value: Any) -> str:
    return json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False)


class _Tally:
    """What the turns of one attempt add up to."""

    def __init__(self) -> None:
        self.input_tokens = self.output_tokens = 0
        self.calls = self.retries = self.sent = self.received = 0
        self.cut = False

    def add(self, reply: ChatReply) -> None:
        self.input_tokens += reply.input_tokens
        self.output_tokens += reply.output_tokens
        self.calls += 1
        self.retries += reply.retries
        self.sent += reply.request_bytes
        self.received += reply.response_bytes
        self.cut = self.cut or reply.finish_reason == "length"


@HARNESSES.register("openai")
class OpenAIHarness(Harness):
    """Runs the agent loop; one :class:`ChatClient` and one tool thread pool per harness."""

    options_model = OpenAISettings

    def __init__(self, endpoint: Endpoint, settings: OpenAISettings, tools: list[Tool],
                 tools_identity: str) -> None:
        self.endpoint = endpoint
        self.settings = settings
        self.tools = ToolBox(tools)
        self._client = ChatClient(endpoint)
        self._identity = "|".join([
            endpoint.identity, f"tools={tools_identity}",
            # Prompts, prices and the call policy decide outcomes too; the endpoint
            # part already names url and model (never the key).
            digest_of(settings.model_dump(mode="json", exclude={"base_url", "model"})),
            digest_of(self.tools.schemas)])

    @property
    def identity(self) -> str:
        return self._identity

    def secret_envs(self) -> tuple[str, ...]:
        return (self.settings.api_key_env,)

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> RunOutput:
        s, variant = self._run_settings(config)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.settings.system_prompts[variant]},
            {"role": "user", "content": render_input(task.input)}]
        tally = _Tally()
        calls: list[ToolCall] = []
        signals: list[str] = []
        content: str | None = None
        for turn in range(s.max_iterations):
            reply = await self._chat(messages, s, turn, ctx)
            tally.add(reply)
            content = reply.content
            messages.append(reply.assistant_message())
            if not reply.tool_calls:
                break
            if turn + 1 >= s.max_iterations:
                # No turn is left to read the results: running the tools would only
                # add side effects the answer never sees.
                signals.append("iteration_cap_hit")
                break
            for request in reply.tool_calls:
                call, text = await self.tools.execute(request.name, request.arguments)
                calls.append(call)
                messages.append({"role": "tool", "tool_call_id": request.id, "content": text})
        output = content.strip() if content else None
        output = output or None
        errors = sum(not c.ok for c in calls)
        signals += _closing_signals(signals, output=output, errors=errors, cut=tally.cut)
        usage = Usage(input_tokens=tally.input_tokens, output_tokens=tally.output_tokens)
        return RunOutput(
            output=output, tool_calls=calls, usage=usage,
            cost=self.settings.prices.cost(usage) if self.settings.prices else None,
            metrics={"llm_calls": float(tally.calls), "http_retries": float(tally.retries),
                     "request_bytes": float(tally.sent),
                     "response_bytes": float(tally.received), "tool_errors": float(errors)},
            signals=signals, trace={"system_prompt": variant, "messages": messages[1:]})

    def _run_settings(self, config: dict[str, Any]) -> tuple[_RunSettings, str]:
        """The attempt's settings and the name of its system prompt variant."""
        try:
            s = _RunSettings.model_validate(config)
        except ValidationError as exc:
            problem = validation_problem(exc)
            raise ValueError(f"setting {problem.field}: {problem.message}") from None
        variant = s.system_prompt or next(iter(self.settings.system_prompts))
        if variant not in self.settings.system_prompts:
            raise ValueError(f"system_prompt {variant!r} is not one of the bench's "
                             f"system_prompts: {', '.join(self.settings.system_prompts)}")
        return s, variant

    async def _chat(self, messages: list[dict[str, Any]], s: _RunSettings, turn: int,
                    ctx: AttemptContext) -> ChatReply:
        params: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p,
                                  "max_tokens": s.max_tokens}
        if self.settings.send_seed:
            params["seed"] = ctx.seed & _SEED_MASK
        tools = self.tools.schemas if s.tool_choice != "none" else None
        if tools:
            # `required` on every turn would forbid the answer: only the first must call.
            params["tool_choice"] = "auto" if s.tool_choice == "required" and turn else (
                s.tool_choice)
            params["parallel_tool_calls"] = s.parallel_tool_calls
        # A copy: the client serialises it now, and the caller keeps appending.
        return await self._client.chat(list(messages), tools=tools,
                                       deadline=ctx.deadline + _GRACE_S, **params)

    async def aclose(self) -> None:
        await self._client.aclose()
        self.tools.close()

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> OpenAIHarness:
        settings = OpenAISettings.model_validate(args)
        tools, tools_identity = (load_tools(settings.tools, ctx.at("openai", "tools"))
                                 if settings.tools else ([], "none"))
        what = "bench " + (ctx.file.parent.name if ctx.file and ctx.file.name == "bench.yaml"
                           else str(ctx.file or ctx.base_dir))
        endpoint = Endpoint.from_env(what=what, base_url=settings.base_url,
                                     model=settings.model, api_key_env=settings.api_key_env,
                                     timeout_s=settings.timeout_s, retries=settings.retries,
                                     backoff_s=settings.backoff_s)
        return cls(endpoint, settings, tools, tools_identity)


def _closing_signals(signals: list[str], *, output: str | None, errors: int,
                     cut: bool) -> list[str]:
    """The signals an attempt's end adds to those its turns raised: a tool failed, no
    answer (unless the turns ran out, already signalled), the reply cut at max_tokens."""
    added = []
    if errors:
        added.append("tool_error")
    if output is None and "iteration_cap_hit" not in signals:
        added.append("empty_answer")
    if cut:
        added.append("max_tokens_hit")
    return added
