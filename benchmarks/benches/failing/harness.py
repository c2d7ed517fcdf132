"""The effect bench's harness with one more setting, ``shortcut``: +0.10 chance of
success on every task, as ``boost`` gives, but on a hard task (``p < 0.5``) every
attempt it would get wrong raises instead of answering. Failures correlate with
difficulty, as a lower ``max_tokens`` truncating the hard answers would: left out of the
means, they make ``shortcut`` look near perfect on the hard tasks.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Below this chance of success a task is hard, and the shortcut fails where it is wrong.
HARD = 0.5


def _uniform(*parts: object) -> float:
    """A uniform draw in [0, 1) fixed by ``parts`` (sha256 of their canonical text)."""
    text = "\x1f".join(json.dumps(p, sort_keys=True, separators=(",", ":")) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2.0 ** 64


def success_probability(config: dict[str, Any], task: Any) -> float:
    bonus = 0.10 * bool(config.get("boost")) + 0.10 * bool(config.get("shortcut"))
    return min(1.0, float(task.input["p"]) + bonus)


def run(config: dict[str, Any], task: Any, ctx: Any) -> dict[str, Any]:
    ok = _uniform(ctx.seed, config) < success_probability(config, task)
    if not ok and config.get("shortcut") and float(task.input["p"]) < HARD:
        raise RuntimeError("shortcut: no answer within the limits")
    cost = 0.001 * (1.0 + _uniform("cost", ctx.seed))
    return {"output": "pass" if ok else "fail", "cost": cost,
            "usage": {"input_tokens": 100, "output_tokens": 20}}
