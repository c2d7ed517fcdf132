"""The agno-support agent's language model, scripted so the bench runs offline.

``ScriptedSupportModel`` is a real ``agno.models.base.Model`` subclass: Agno calls it
as it calls any provider, runs the tools it asks for, feeds their results back, and
counts its tokens and cost. Its replies depend on what a real model's would: the
conversation Agno sends (the system message with the agent's instructions, the tool
results so far) and its sampling settings (``temperature``, ``seed``). What it does:

- it plans the tool calls a question needs (a status: ``lookup_order``; whether an
  order can be returned: that and ``return_policy``; the refund: those and
  ``compute_refund``) and makes them one turn at a time, then answers from the
  results;
- told to answer in one word ("concise" instructions), it sometimes answers a status
  question from "memory" without looking the order up; told to always use its tools
  ("verify"), it never does; told to be warm and thorough ("friendly"), it wraps
  every answer in a sentence, which an exact-answer scorer refuses;
- at a high temperature it now and then mistypes an order id; the tool raises, and
  it retries with the right one, spending a tool call;
- when Agno refuses a call (the agent's ``tool_call_limit`` is spent) it gives up.

So the instructions, the tool-call limit and the temperature all move the pass
rate, and ``markdown`` (which only adds a formatting line to the prompt) does not.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from agno.metrics import MessageMetrics
from agno.models.base import Model
from agno.models.message import Message
from agno.models.response import ModelResponse

#: Dollars per million tokens, as a small hosted model charges.
PRICE_IN, PRICE_OUT = 0.15, 0.60
_ORDER = re.compile(r"\bA\d{4}\b")
_LIMIT = "limit reached"


@dataclass
class ScriptedSupportModel(Model):
    id: str = "scripted-support-1"
    name: str = "ScriptedSupport"
    provider: str = "forge-example"
    temperature: float = 0.7
    seed: int | None = None

    # -- the provider interface Agno calls ------------------------------------------

    def invoke(self, messages: list[Message], assistant_message: Message,
               **kwargs: Any) -> ModelResponse:
        return self._reply(messages)

    async def ainvoke(self, messages: list[Message], assistant_message: Message,
                      **kwargs: Any) -> ModelResponse:
        return self._reply(messages)

    def invoke_stream(self, messages: list[Message], assistant_message: Message,
                      **kwargs: Any) -> Iterator[ModelResponse]:
        yield self._reply(messages)

    async def ainvoke_stream(self, messages: list[Message], assistant_message: Message,
                             **kwargs: Any) -> AsyncIterator[ModelResponse]:
        yield self._reply(messages)

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]

    # -- the script -------------------------------------------------------------------

    def _reply(self, messages: list[Message]) -> ModelResponse:
        system = next((str(m.content) for m in messages if m.role == "system"), "")
        question = next((str(m.content) for m in messages if m.role == "user"), "")
        results = [m for m in messages if m.role == "tool"]
        rng = random.Random(f"{self.seed}|{question}|{len(results)}")
        response = ModelResponse(role="assistant")
        move = self._next_move(system, question, results, rng)
        if isinstance(move, str):
            response.content = f"Happy to help! Here is what I found: {move}." if (
                "warm and thorough" in system) else move
        else:
            name, args = move
            response.tool_calls = [{"id": f"call_{len(results)}", "type": "function",
                                    "function": {"name": name, "arguments": json.dumps(args)}}]
        response.response_usage = self._usage(messages, response)
        return response

    def _next_move(self, system: str, question: str, results: list[Message],
                   rng: random.Random) -> str | tuple[str, dict[str, Any]]:
        """The answer (a string) or the next tool call (name, arguments)."""
        if any(_LIMIT in str(m.content).lower() for m in results):
            return "I could not finish looking this up."
        found = _ORDER.search(question)
        if found is None:
            return "Which order do you mean?"
        order_id = found.group(0)
        kind = ("refund" if "how much" in question.lower() else
                "return" if "return" in question.lower() else "status")
        if (kind == "status" and not results and "one word" in system
                and "always" not in system.lower() and rng.random() < 0.5):
            return "shipped"  # an answer from "memory", without a look at the order
        done = {str(m.tool_name): json.loads(str(m.content)) if m.tool_name != "compute_refund"
                else str(m.content) for m in results if not m.tool_call_error}
        if "lookup_order" not in done:
            slip = rng.random() < 0.3 * self.temperature
            return "lookup_order", {"order_id": order_id[:-1] + "O" if slip else order_id}
        order = done["lookup_order"]
        if kind == "status":
            return str(order["status"])
        if "return_policy" not in done:
            return "return_policy", {"category": order["category"]}
        policy = done["return_policy"]
        days = order["days_since_delivery"]
        if kind == "return":
            return "yes" if days is not None and days <= policy["return_days"] else "no"
        if "compute_refund" not in done:
            return "compute_refund", {"price": order["price"],
                                      "restocking_fee_percent":
                                          policy["restocking_fee_percent"]}
        return str(done["compute_refund"])

    @staticmethod
    def _usage(messages: list[Message], response: ModelResponse) -> MessageMetrics:
        sent = sum(len(str(m.content or "")) for m in messages)
        said = len(str(response.content or "")) + len(json.dumps(response.tool_calls))
        usage = MessageMetrics(input_tokens=40 + sent // 4, output_tokens=1 + said // 4)
        usage.total_tokens = usage.input_tokens + usage.output_tokens
        usage.cost = (usage.input_tokens * PRICE_IN + usage.output_tokens * PRICE_OUT) / 1e6
        return usage
