"""The scripted brain of the nlip-units agent: a unit converter that answers in text.

No model: what a model-driven agent would do is played by a deterministic script, so
the bench runs offline and a search finds the same thing every time. The answer
depends on the config forge sends (in the NLIP message's structured ``forge``
submessage) and on the attempt's seed, as a real agent's depends on its settings and
its sampling:

- ``max_hops``: conversion steps the agent may chain. Between a unit and its
  dimension's base unit (metre, kilogram, litre) is one step; between two other units,
  two (through the base). Out of steps, the agent answers the value in the base unit.
- ``use_table``: look each unit's factor up in the desk's table (a tool call) instead
  of recalling it; recalled factors are wrong for a few units (a nautical mile taken
  for a mile, an imperial gallon for a US one, a stone for six kilograms, ...).
- ``precision``: decimals of the answer.
- ``temperature``: the chance of a slip in the arithmetic is ``0.2 * temperature``.

Each tool call, the tokens it took and their cost go back to forge in a structured
``forge`` submessage of the reply.
"""

from __future__ import annotations

import random
import re
from typing import Any

#: Each unit: its dimension's base unit, and how many base units one of it is.
TABLE: dict[str, tuple[str, float]] = {
    "metre": ("metre", 1.0), "kilometre": ("metre", 1000.0), "mile": ("metre", 1609.344),
    "nautical mile": ("metre", 1852.0), "foot": ("metre", 0.3048),
    "yard": ("metre", 0.9144), "inch": ("metre", 0.0254),
    "kilogram": ("kilogram", 1.0), "pound": ("kilogram", 0.45359237),
    "stone": ("kilogram", 6.35029318), "ounce": ("kilogram", 0.028349523125),
    "gram": ("kilogram", 0.001),
    "litre": ("litre", 1.0), "US gallon": ("litre", 3.785411784),
    "imperial gallon": ("litre", 4.54609), "US cup": ("litre", 0.2365882365),
    "millilitre": ("litre", 0.001),
}

#: What the agent recalls without its table: right for most units, not for these.
RECALLED = {**{unit: factor for unit, (_, factor) in TABLE.items()},
            "nautical mile": 1609.344, "imperial gallon": 3.785411784, "stone": 6.0,
            "ounce": 0.03, "US cup": 0.25}

PRICES = {"input_per_mtok": 0.15, "output_per_mtok": 0.60}

_QUESTION = re.compile(r"Convert ([0-9.]+) (.+) to (.+)\.$")


def plural(unit: str) -> str:
    return {"inch": "inches", "foot": "feet"}.get(unit, unit + "s")


_SINGULAR = {plural(unit): unit for unit in TABLE}


def parse(question: str) -> tuple[float, str, str]:
    """(quantity, from unit, to unit) of "Convert 12 miles to kilometres."."""
    m = _QUESTION.search(question.strip())
    if m is None or m[2] not in _SINGULAR or m[3] not in _SINGULAR:
        raise ValueError(f"not a conversion this agent knows: {question!r}")
    source, target = _SINGULAR[m[2]], _SINGULAR[m[3]]
    if TABLE[source][0] != TABLE[target][0]:
        raise ValueError(f"{source} and {target} measure different things")
    return float(m[1]), source, target


def hops(source: str, target: str) -> int:
    base = TABLE[source][0]
    return 1 if base in (source, target) else 2


def right_answer(question: str) -> float:
    quantity, source, target = parse(question)
    return quantity * TABLE[source][1] / TABLE[target][1]


def respond(question: str, config: dict[str, Any], seed: int) -> dict[str, Any]:
    """The answer's text and what the agent reports: ``{"answer", "report"}``."""
    rng = random.Random(seed)
    quantity, source, target = parse(question)
    calls: list[dict[str, Any]] = []

    def factor(unit: str) -> float:
        if config.get("use_table"):
            value = TABLE[unit][1]
            calls.append({"name": "unit_factor", "args": {"unit": unit},
                          "result": {"base": TABLE[unit][0], "factor": value}})
            return value
        return RECALLED[unit]

    base_value = quantity * factor(source)
    if hops(source, target) > int(config.get("max_hops", 1)):
        value = base_value  # out of steps: the value in the base unit
    else:
        value = base_value / factor(target)
    if rng.random() < 0.2 * float(config.get("temperature", 0.7)):
        value *= rng.choice([0.9, 1.1, 10.0])  # a slip in the arithmetic
    precision = int(config.get("precision", 1))
    answer = f"{value:.{precision}f} {plural(target)}"
    input_tokens = 120 + 60 * len(calls)
    output_tokens = 8 + precision
    cost = (input_tokens * PRICES["input_per_mtok"]
            + output_tokens * PRICES["output_per_mtok"]) / 1e6
    report = {"tool_calls": calls,
              "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
              "cost": cost,
              "signals": ["hop_cap_hit"] if hops(source, target) > int(
                  config.get("max_hops", 1)) else []}
    return {"answer": answer, "report": report}
