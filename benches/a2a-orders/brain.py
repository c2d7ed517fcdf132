"""The scripted brain of the a2a-orders agent: an order desk that answers with tools.

No model: what a model-driven agent would do is played by a deterministic script, so
the bench runs offline and a search finds the same thing every time. The answer
depends on the config forge sends (in the A2A message's metadata) and on the
attempt's seed, as a real agent's depends on its settings and its sampling:

- ``max_steps``: tool rounds the agent may take. A status question takes one round
  (look the order up), a total takes two (look up, add shipping), a comparison of two
  orders three (two look-ups, compare). Out of rounds, the agent answers with what it
  has, which is wrong.
- ``temperature``: the chance of a slip in the final answer is ``0.3 * temperature``.
- ``verify``: the agent looks the order up again before it answers (one more tool
  call, more tokens) and catches a slip nine times in ten.
- ``tone``: ``friendly`` answers cost 30 more output tokens and change nothing else.

Each tool call, the tokens it took and their cost go back to forge in the task's
metadata, so the journal shows them and a cost tolerance can hold the search back.
"""

from __future__ import annotations

import random
import re
from typing import Any

#: The shop's orders: status, items (name, quantity, unit price), shipping.
ORDERS: dict[int, dict[str, Any]] = {
    1040 + i: {"status": status, "items": items, "shipping": shipping}
    for i, (status, items, shipping) in enumerate([
        ("shipped", [("kettle", 1, 24.0), ("filter", 2, 3.5)], 4.0),
        ("processing", [("lamp", 2, 18.0)], 5.0),
        ("delivered", [("mug", 4, 6.0), ("tray", 1, 9.0)], 3.0),
        ("cancelled", [("chair", 1, 79.0)], 12.0),
        ("shipped", [("pen", 10, 1.2)], 2.0),
        ("delivered", [("desk", 1, 149.0), ("mat", 1, 15.0)], 0.0),
        ("processing", [("plant", 3, 11.0)], 6.0),
        ("returned", [("shoes", 1, 64.0)], 4.5),
        ("shipped", [("book", 3, 12.5), ("bag", 1, 20.0)], 3.5),
        ("delivered", [("clock", 1, 32.0)], 4.0),
        ("processing", [("scarf", 2, 14.0), ("hat", 1, 16.0)], 3.0),
        ("shipped", [("phone case", 2, 9.5)], 2.5),
    ])}

PRICES = {"input_per_mtok": 0.15, "output_per_mtok": 0.60}

_STATUS = re.compile(r"status of order (\d+)")
_TOTAL = re.compile(r"total of order (\d+)")
_MORE = re.compile(r"orders (\d+) and (\d+)")


def subtotal(order: int) -> float:
    return sum(qty * price for _, qty, price in ORDERS[order]["items"])


def total(order: int) -> float:
    return subtotal(order) + ORDERS[order]["shipping"]


def money(value: float) -> str:
    return f"{value:.2f}"


def plan(question: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls the question needs, in order."""
    if m := _STATUS.search(question):
        return [("lookup_order", {"order_id": int(m[1])})]
    if m := _TOTAL.search(question):
        order = int(m[1])
        return [("lookup_order", {"order_id": order}),
                ("add", {"a": subtotal(order), "b": ORDERS[order]["shipping"]})]
    if m := _MORE.search(question):
        a, b = int(m[1]), int(m[2])
        return [("lookup_order", {"order_id": a}), ("lookup_order", {"order_id": b}),
                ("compare", {"a": total(a), "b": total(b)})]
    raise ValueError(f"not a question this desk answers: {question!r}")


def right_answer(question: str) -> str:
    if m := _STATUS.search(question):
        return str(ORDERS[int(m[1])]["status"])
    if m := _TOTAL.search(question):
        return money(total(int(m[1])))
    if m := _MORE.search(question):
        a, b = int(m[1]), int(m[2])
        return str(a if total(a) >= total(b) else b)
    raise ValueError(f"not a question this desk answers: {question!r}")


def _run_tool(name: str, args: dict[str, Any]) -> Any:
    if name == "lookup_order":
        order = ORDERS.get(args["order_id"])
        if order is None:
            raise KeyError(f"no order {args['order_id']}")
        return {"status": order["status"], "subtotal": money(subtotal(args["order_id"])),
                "shipping": money(order["shipping"])}
    if name == "add":
        return money(args["a"] + args["b"])
    return "a" if args["a"] >= args["b"] else "b"


def _wrong(question: str, right: str, rng: random.Random) -> str:
    """A plausible wrong answer: another status, an amount off by a little, the other
    order."""
    if _STATUS.search(question):
        return rng.choice(sorted({o["status"] for o in ORDERS.values()} - {right}))
    if _TOTAL.search(question):
        return money(float(right) + rng.choice([-1.0, 1.0, 2.5]))
    a, b = _MORE.search(question).groups()  # type: ignore[union-attr]
    return b if right == a else a


def respond(question: str, config: dict[str, Any], seed: int) -> dict[str, Any]:
    """The answer and what the agent reports: ``{"answer", "report"}``."""
    rng = random.Random(seed)
    steps = plan(question)
    allowed = int(config.get("max_steps", 1))
    calls = [{"name": name, "args": args, "result": _run_tool(name, args)}
             for name, args in steps[:allowed]]
    right = right_answer(question)
    if len(steps) > allowed:
        answer = _wrong(question, right, rng)  # out of rounds: a guess from half the facts
    else:
        answer = right
        slipped = rng.random() < 0.3 * float(config.get("temperature", 0.7))
        caught = rng.random() < 0.9
        if config.get("verify"):
            first = steps[0][1]
            calls.append({"name": "lookup_order", "args": first,
                          "result": _run_tool("lookup_order", first)})
        if slipped and not (config.get("verify") and caught):
            answer = _wrong(question, right, rng)
    input_tokens = 150 + 90 * len(calls)
    output_tokens = 12 + 30 * (config.get("tone") == "friendly")
    cost = (input_tokens * PRICES["input_per_mtok"]
            + output_tokens * PRICES["output_per_mtok"]) / 1e6
    report = {"tool_calls": calls,
              "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
              "cost": cost,
              "signals": ["step_cap_hit"] if len(steps) > allowed else []}
    return {"answer": answer, "report": report}
