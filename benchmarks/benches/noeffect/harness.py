"""A harness whose settings change its outcomes but not their chance of success.

Each attempt succeeds with the task's own probability ``task.input["p"]``. The draw
is a hash of the attempt seed *and* the canonical config, so
two configs see different (independent) outcomes on the same seed, yet every
config has exactly the same success probability on every task: no setting has an
effect. ``cost`` depends on the seed only, so no setting changes it either.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _uniform(*parts: object) -> float:
    """A uniform draw in [0, 1) fixed by ``parts`` (sha256 of their canonical text)."""
    text = "\x1f".join(json.dumps(p, sort_keys=True, separators=(",", ":")) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2.0 ** 64


def success_probability(config: dict[str, Any], task: Any) -> float:
    return float(task.input["p"])


def run(config: dict[str, Any], task: Any, ctx: Any) -> dict[str, Any]:
    ok = _uniform(ctx.seed, config) < success_probability(config, task)
    cost = 0.001 * (1.0 + _uniform("cost", ctx.seed))
    return {"output": "pass" if ok else "fail", "cost": cost,
            "usage": {"input_tokens": 100, "output_tokens": 20}}
