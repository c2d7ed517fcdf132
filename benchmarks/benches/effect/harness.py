"""A harness whose neutral settings change its outcomes but not their chance of
success, and one setting, ``boost``, that raises that chance by 10 points.

Each attempt succeeds with the task's own probability ``task.input["p"]``, plus
0.10 (clamped to 1) when ``boost`` is true. The draw is a hash of the attempt
seed *and* the canonical config, so two configs see different (independent)
outcomes on the same seed, yet every neutral setting leaves every task's success
probability unchanged. ``cost`` depends on the seed only, so no
setting changes it.
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
    p = float(task.input["p"]) + (0.10 if config.get("boost") else 0.0)
    return min(1.0, p)


def run(config: dict[str, Any], task: Any, ctx: Any) -> dict[str, Any]:
    ok = _uniform(ctx.seed, config) < success_probability(config, task)
    cost = 0.001 * (1.0 + _uniform("cost", ctx.seed))
    return {"output": "pass" if ok else "fail", "cost": cost,
            "usage": {"input_tokens": 100, "output_tokens": 20}}
