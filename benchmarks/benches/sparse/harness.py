"""The sparse closed-form bench: a few strong settings, many null ones, one interaction,
and a cost tolerance that binds. Every effect is a formula, so truth is exact.

An attempt succeeds with probability :func:`success_probability`: the task's base rate
plus one term per strong setting, clamped to [0.02, 0.98] (the terms never reach the
clamps: base rates are 0.15..0.45 and the terms add at most 0.30).

Strong settings (gain in success probability, cost factor):

- ``planner`` none / basic / full: +0 / +0.05 / +0.03 on lookup tasks and +0.14 on
  reasoning tasks (+0.085 at the splits' half-and-half mix); cost x1.00 / x1.04 / x1.08.
- ``verify``: +0.06; cost x1.06.
- ``examples`` 0..8: +0.08 (1 - 0.6^n), diminishing (+0.032 for the first); cost
  x(1 + 0.012 n).
- ``tools`` (the interaction): +0.07 with ``planner: full``, nothing otherwise; cost x1.015.

Null settings (``tone``, ``format``, ``cache``, ``stream``, ``header``, ``chunk``) change
which attempts succeed, never their chance: the attempt's uniform draw is keyed by the
attempt seed and the null settings' values (:func:`draw_key`). So two configs that agree
on every null setting share their draws (common random numbers: a move of a strong
setting flips only the attempts between the two rates), and a move of a null setting
redraws every attempt at the same rate (a zero effect with the full noise of two
independent Bernoulli draws).

The cost tolerance (+10% vs the start, bench.yaml) binds: the best config overall
(planner full, verify, tools, examples 8: cost x1.30) breaks it, and the best within it
is planner full with tools (x1.096); verify taken first (x1.06) shuts planner full out
(x1.145). ``benchmarks/quality_truth.py`` reads :func:`expected` and
:func:`success_probability` for the truth of a config, and ``benchmarks/proof_cost.py``
:func:`draw_key` for which configs share draws.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

NULLS = ("tone", "format", "cache", "stream", "header", "chunk")
_PLANNER_GAIN = {"none": {"lookup": 0.0, "reasoning": 0.0},
                 "basic": {"lookup": 0.05, "reasoning": 0.05},
                 "full": {"lookup": 0.03, "reasoning": 0.14}}
_PLANNER_COST = {"none": 1.0, "basic": 1.04, "full": 1.08}


def _uniform(*parts: object) -> float:
    """A uniform draw in [0, 1) fixed by ``parts`` (sha256 of their canonical text)."""
    text = "\x1f".join(json.dumps(p, sort_keys=True, separators=(",", ":")) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2.0 ** 64


def draw_key(config: dict[str, Any]) -> dict[str, Any]:
    """What an attempt's success draw depends on besides its seed: the null settings."""
    return {k: config[k] for k in NULLS}


def success_probability(config: dict[str, Any], task_input: dict[str, Any]) -> float:
    p = float(task_input["base"])
    planner = str(config["planner"])
    p += _PLANNER_GAIN[planner][str(task_input["family"])]
    if config["verify"]:
        p += 0.06
    p += 0.08 * (1.0 - 0.6 ** int(config["examples"]))
    if config["tools"] and planner == "full":
        p += 0.07
    return min(0.98, max(0.02, p))


def expected_metrics(config: dict[str, Any]) -> dict[str, float]:
    """Means of the auxiliary metrics of one attempt (the same on every task)."""
    factor = _PLANNER_COST[str(config["planner"])]
    factor *= 1.06 if config["verify"] else 1.0
    factor *= 1.0 + 0.012 * int(config["examples"])
    factor *= 1.015 if config["tools"] else 1.0
    return {"cost": 0.002 * factor,
            "latency_ms": 600.0 * (1.0 + 0.05 * int(config["examples"]))
            * (1.3 if config["verify"] else 1.0)}


def expected(config: dict[str, Any], tasks: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The exact mean score over ``tasks`` (their inputs) and the metric means."""
    ps = [success_probability(config, t) for t in tasks]
    return {"score": sum(ps) / len(ps), "metrics": expected_metrics(config)}


def run(config: dict[str, Any], task: Any, ctx: Any) -> dict[str, Any]:
    ok = _uniform(ctx.seed, draw_key(config)) < success_probability(config, task.input)
    means = expected_metrics(config)
    # Metric noise is seeded by the attempt alone (common random numbers, as closedform's).
    cost = means["cost"] * (0.9 + 0.2 * _uniform("cost", ctx.seed))
    latency = means["latency_ms"] * (0.8 + 0.4 * _uniform("latency", ctx.seed))
    return {"output": "pass" if ok else "fail", "cost": cost,
            "metrics": {"latency_ms": latency},
            "usage": {"input_tokens": 100, "output_tokens": 20}}
