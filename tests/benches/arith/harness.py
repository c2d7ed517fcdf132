"""An arithmetic 'agent' whose slips depend on its settings; randomness only from ctx.seed."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _compute(a: int, b: int, op: str, config: dict[str, Any], rng: random.Random) -> int:
    slip = 0.5 * config["temperature"] / (2 if config["mode"] == "careful" else 1)
    if abs(a) + abs(b) > 100:
        slip *= 2 / config["width"]
    value = OPS[op](a, b)
    return value + rng.choice([-1, 1]) if rng.random() < min(slip, 0.9) else value


def run(config: dict[str, Any], task: Any, ctx: Any) -> dict[str, Any]:
    rng = random.Random(ctx.seed)
    a, b, op = task.input["a"], task.input["b"], task.input["op"]
    votes = Counter(_compute(a, b, op, config, rng) for _ in range(config["effort"]))
    answer, _ = votes.most_common(1)[0]
    calls = config["effort"]
    if config["verify"] and answer != OPS[op](a, b):
        answer = _compute(a, b, op, config, rng)
        calls += 1
    cost = 0.001 * calls * (2 if config["mode"] == "careful" else 1) * config["width"] ** 0.5
    signals = ["slip"] if len(votes) > 1 else []
    return {"output": str(answer), "cost": cost, "usage": {"input_tokens": 20 * calls,
                                                          "output_tokens": 5 * calls},
            "metrics": {"harmful_actions": 0.0}, "signals": signals}
