"""A harness whose settings each earn one verdict: promoted, rejected on val, rejected
on an auxiliary metric, rejected on dev. Randomness comes only from ctx.seed."""

from __future__ import annotations

import random
from typing import Any


def run(config: dict[str, Any], task: Any, ctx: Any) -> dict[str, Any]:
    p = 0.45
    if config["boost"]:
        p += 0.35
    if config["overfit"]:
        p += 0.2 if ctx.split == "dev" else -0.3
    if config["pricey"]:
        p += 0.2
    ok = random.Random(ctx.seed).random() < p
    cost = 1.0 * (1.05 if config["boost"] else 1.0) * (2.0 if config["pricey"] else 1.0)
    return {"output": task.expected if ok else "wrong", "cost": cost}
