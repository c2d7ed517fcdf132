"""The ag2-orders agent: a real ``ag2.Agent`` with real Python tools, built per attempt.

forge calls ``make_agent(config, ctx)`` for every attempt (``harness: {ag2:
"orders_agent:make_agent"}``) with the attempt's config, the registry's settings:

- ``instructions``: which system message the agent gets;
- ``history_events``: how many events of the conversation the model sees, through
  AG2's own ``HistoryLimiter`` middleware;
- ``temperature``: the model's sampling temperature.

The model is scripted (``orders_model.py``) so the bench runs offline; put a real model
config in its place (``OpenAIConfig(model, temperature=..., seed=ctx.seed)``) and the
same bench tunes a hosted agent.
"""

from __future__ import annotations

from typing import Any

from ag2 import Agent
from ag2.middleware.builtin import HistoryLimiter
from orders_model import ScriptedModel
from orders_tools import TOOLS

PROMPTS = {
    "concise": ("You are the order desk of a small shop. Answer in as few words as "
                "possible: just the status, the amount or the number."),
    "grounded": ("You are the order desk of a small shop. Look every fact up with your "
                 "tools before you answer; never answer from memory. Reply with just the "
                 "status, the amount (two decimals) or the number."),
}


def make_agent(config: dict[str, Any], ctx: Any = None) -> Agent:
    """A fresh agent for one attempt; ``ctx`` (forge's attempt context) seeds the model,
    and is left out when AG2's own runner builds the agent."""
    seed = ctx.seed if ctx is not None else 0
    model = ScriptedModel(temperature=float(config["temperature"]), seed=seed)
    return Agent("order-desk", PROMPTS[config["instructions"]], config=model, tools=TOOLS,
                 middleware=[HistoryLimiter(int(config["history_events"]))])
