"""The closed-form contest bench: every effect is a formula, so truth is exact.

An attempt succeeds with probability :func:`success_probability` (a task's base rate
plus one term per setting, clamped to [0.02, 0.98]); the draw is a hash of the
attempt seed and the canonical config, so two configs see independent outcomes on
the same seed while neutral settings (``cache``) leave every probability unchanged.
The auxiliary metrics are noisy around :func:`expected_metrics`; their means are
exact too. ``benchmarks/quality_truth.py`` reads both for the truth of a config.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from typing import Any

_MODE_GAIN = {"careful": 0.0, "balanced": 0.05, "bold": 0.12}
_MODE_HARM = {"careful": 0.010, "balanced": 0.013, "bold": 0.045}


def _uniform(*parts: object) -> float:
    """A uniform draw in [0, 1) fixed by ``parts`` (sha256 of their canonical text)."""
    text = "\x1f".join(json.dumps(p, sort_keys=True, separators=(",", ":")) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2.0 ** 64


def _retry_gain(retries: int) -> float:
    return 0.25 * (1.0 - 0.55 ** retries)


def success_probability(config: dict[str, Any], task_input: dict[str, Any]) -> float:
    p = float(task_input["base"])
    # A narrow peak at 0.7: nothing to gain a step or two from the default 0.05.
    p += 0.22 * math.exp(-(((float(config["noise"]) - 0.7) / 0.13) ** 2))
    p += _retry_gain(int(config["retries"]))
    p -= 0.15 * (float(config["temperature"]) - 0.3) ** 2
    p += 0.015 * math.log2(max(1, int(config["width"])))
    p += _MODE_GAIN[str(config["mode"])]
    if config["shortcut"]:
        p += 0.30 if task_input["family"] == "slang" else -0.08
    return min(0.98, max(0.02, p))


def expected_metrics(config: dict[str, Any]) -> dict[str, float]:
    """Means of the auxiliary metrics of one attempt (the same on every task)."""
    retries = int(config["retries"])
    width = max(1, int(config["width"]))
    return {
        "cost": 0.002 * 1.045 ** retries * (1.0 + 0.02 * math.log2(width)),
        "latency_ms": 800.0 * (1.0 + 0.08 * retries) * (1.0 + 0.10 * math.log2(width)),
        "harmful_actions": _MODE_HARM[str(config["mode"])],
    }


def expected(config: dict[str, Any], tasks: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The exact mean score over ``tasks`` (their inputs) and the metric means."""
    ps = [success_probability(config, t) for t in tasks]
    return {"score": math.fsum(ps) / len(ps), "metrics": expected_metrics(config)}


def run(config: dict[str, Any], task: Any, ctx: Any) -> dict[str, Any]:
    ok = _uniform(ctx.seed, config) < success_probability(config, task.input)
    means = expected_metrics(config)
    # Metric noise is seeded by the attempt alone (common random numbers, as the gate
    # benches' cost): configs with the same rate of harmful actions act harmfully on the
    # same attempts, and a higher rate adds harmful attempts to those.
    cost = means["cost"] * (0.9 + 0.2 * _uniform("cost", ctx.seed))
    latency = means["latency_ms"] * (0.8 + 0.4 * _uniform("latency", ctx.seed))
    harmful = 1.0 if _uniform("harm", ctx.seed) < means["harmful_actions"] else 0.0
    return {"output": "pass" if ok else "fail", "cost": cost,
            "metrics": {"latency_ms": latency, "harmful_actions": harmful},
            "usage": {"input_tokens": 100, "output_tokens": 20}}
