"""A scripted model for the ag2-orders agent: offline, reproducible for a seed, and
sensitive to what a real model is sensitive to.

It is an AG2 model client like any provider's: AG2 hands it the conversation (after
the agent's middleware, so ``HistoryLimiter`` has already cut it), the system message
and the tool schemas, and it answers with text or with tool calls. It reads the
question, and the tool results it can still see, and:

- under a system message that does not forbid it, answers from "memory" more often
  than not instead of using its tools: a status guessed (rarely right), an amount
  converted at the exchange rate it remembers (stale, so wrong);
- needs both orders' results in view to add two orders' items: with too short a
  history the first result is cut, it looks it up again, and after a few calls gives
  up and answers with what it sees (a wrong sum);
- at higher temperature sometimes wraps a right answer in words, which an exact
  check refuses.

Token usage grows with what it reads and writes, so more history and more tool calls
cost more, as with a hosted model.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ag2.config import ModelConfig, ModelProvider
from ag2.events import (
    BaseEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextInput,
    ToolCallEvent,
    ToolCallsEvent,
    ToolResultEvent,
    Usage,
)

MODEL = "scripted-orders-1"
STATUSES = ("pending", "shipped", "delivered", "cancelled", "returned")
#: Model calls after which it stops looking things up and answers.
PATIENCE = 4
#: How often, when nothing forbids it, it answers from memory instead of a tool.
RECALL = 0.75
#: The exchange rates it remembers (units per US dollar): close, but stale.
REMEMBERED_RATES = {"USD": 1.0, "EUR": 0.9, "GBP": 0.8, "JPY": 150.0, "CHF": 0.9}

STATUS = re.compile(r"status of order (A-\d+)")
PRICE = re.compile(r"order (A-\d+) cost in ([A-Z]{3})")
ITEMS = re.compile(r"items are in orders (A-\d+) and (A-\d+)")


class ScriptedModel(ModelConfig):
    """The model config an ``ag2.Agent`` takes; each run gets a fresh client."""

    def __init__(self, *, temperature: float, seed: int = 0) -> None:
        self.temperature = temperature
        self.seed = seed

    @property
    def provider(self) -> ModelProvider:
        return ModelProvider.OPENAI  # what it imitates; nothing is sent anywhere

    @property
    def model(self) -> str:
        return MODEL

    def copy(self) -> ScriptedModel:
        return self

    def create(self) -> Brain:
        return Brain(self.temperature, self.seed)


class Brain:
    """One run's model client: it counts its calls, as a model's context grows."""

    def __init__(self, temperature: float, seed: int) -> None:
        self.temperature = temperature
        self.seed = seed
        self.calls = 0

    async def __call__(self, messages: Sequence[BaseEvent], context: Any, *,
                       tools: Iterable[Any] = (), **_: Any) -> ModelResponse:
        self.calls += 1
        question = _question(messages)
        orders, converted = _seen(messages)
        system = " ".join(context.prompt).lower()
        rng = random.Random(f"{self.seed}|{question}|{self.calls}")
        read = (len(system) + sum(_size(e) for e in messages)) // 4
        action = self._decide(question, orders, converted, "never answer from memory" in system,
                              rng)
        if isinstance(action, ToolCallEvent):
            usage = Usage(prompt_tokens=read, completion_tokens=12 + len(action.arguments) // 4)
            return ModelResponse(tool_calls=ToolCallsEvent([action]), usage=usage, model=MODEL,
                                 finish_reason="tool_calls")
        usage = Usage(prompt_tokens=read, completion_tokens=4 + len(action) // 4)
        return ModelResponse(ModelMessage(action), usage=usage, model=MODEL,
                             finish_reason="stop")

    def _decide(self, question: str, orders: dict[str, dict[str, Any]],
                converted: float | None, grounded: bool,
                rng: random.Random) -> str | ToolCallEvent:
        if m := STATUS.search(question):
            order = m.group(1)
            if order in orders:
                return self._say(str(orders[order]["status"]), rng)
            if not grounded and rng.random() < RECALL:
                return rng.choice(STATUSES)  # from "memory"
            return _call("find_order", order_id=order)
        if m := PRICE.search(question):
            order, currency = m.groups()
            if converted is not None:
                return self._say(f"{converted:.2f}", rng)
            if order in orders:
                total = float(orders[order]["total_usd"])
                if not grounded and rng.random() < RECALL:  # converted in its head
                    return self._say(f"{total * REMEMBERED_RATES.get(currency, 1.0):.2f}", rng)
                return _call("convert", amount_usd=total, currency=currency)
            return _call("find_order", order_id=order)
        if m := ITEMS.search(question):
            wanted = m.groups()
            missing = [o for o in wanted if o not in orders]
            if missing and self.calls < PATIENCE:
                return _call("find_order", order_id=missing[0])
            return self._say(str(sum(int(orders[o]["items"]) for o in wanted
                                     if o in orders)), rng)
        return "I can only help with orders."

    def _say(self, answer: str, rng: random.Random) -> str:
        if rng.random() < 0.2 * self.temperature:
            return f"The answer is {answer}."
        return answer


def _call(name: str, **arguments: Any) -> ToolCallEvent:
    return ToolCallEvent(name, arguments=json.dumps(arguments))


def _question(messages: Sequence[BaseEvent]) -> str:
    for event in messages:
        if isinstance(event, ModelRequest):
            return " ".join(p.content for p in event.parts if isinstance(p, TextInput))
    return ""


def _seen(messages: Sequence[BaseEvent]) -> tuple[dict[str, dict[str, Any]], float | None]:
    """The orders and the conversion whose results are still in view."""
    orders: dict[str, dict[str, Any]] = {}
    converted: float | None = None
    for event in messages:
        if not isinstance(event, ToolResultEvent) or not event.result.parts:
            continue
        data = getattr(event.result.parts[0], "data", None)
        if event.name == "find_order" and isinstance(data, dict):
            orders[str(data["order_id"])] = data
        elif event.name == "convert" and isinstance(data, int | float):
            converted = float(data)
    return orders, converted


def _size(event: BaseEvent) -> int:
    """Characters of an event as a model would read them."""
    if isinstance(event, ModelRequest):
        return sum(len(p.content) for p in event.parts if isinstance(p, TextInput))
    if isinstance(event, ToolResultEvent):
        return sum(len(json.dumps(getattr(p, "data", ""), default=str))
                   for p in event.result.parts)
    if isinstance(event, ModelResponse):
        calls = event.tool_calls.calls if event.tool_calls else []
        return len(event.content or "") + sum(len(c.arguments) + len(c.name) for c in calls)
    return 0
