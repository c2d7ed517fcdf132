"""The agno-support agent as an Agno user writes it: the agent factory, the scorer and
the environment (tasks with their splits), in plain Agno.

forge reads three names from here (see bench.yaml): ``make_agent`` builds the agent
for one attempt from the config forge is trying, ``ENV`` gives the tasks of every
split (each task's ``metadata["split"]``) and its ``scorer`` judges the answers.
Agno's own runner takes the same ``ENV``: ``run_rollouts(ENV, k=3)``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml
from agno.agent import Agent
from agno.environments import Environment, Task
from agno.scorer import CodeScorer
from scripted_model import ScriptedSupportModel
from shop import ORDERS, TOOLS, returnable

#: The instructions the ``instructions`` setting chooses between.
INSTRUCTIONS = {
    "concise": "You are the shop's support agent. Answer in one word or number, nothing else.",
    "verify": ("You are the shop's support agent. Always look the order up with your tools "
               "before you answer, and the policy too when it matters. Answer in one word "
               "or number, nothing else."),
    "friendly": ("You are the shop's support agent. Be warm and thorough: answer in a "
                 "full, friendly sentence."),
}


def make_agent(config: dict[str, Any], ctx: Any = None) -> Agent:
    """The support agent for one attempt. ``ctx`` is forge's attempt context (its seed
    makes the scripted model's sampling repeatable); None outside forge."""
    model = ScriptedSupportModel(temperature=config["temperature"],
                                 seed=None if ctx is None else ctx.seed)
    return Agent(name="support", model=model, tools=list(TOOLS),
                 instructions=INSTRUCTIONS[config["instructions"]],
                 tool_call_limit=config["tool_call_limit"], markdown=config["markdown"])


def exact_answer(run: Any, expected: Any) -> bool:
    """The answer, trimmed and case-folded, is the expected one."""
    return str(run.content or "").strip().lower() == str(expected).strip().lower()


def _defaults() -> dict[str, Any]:
    """The registry's default config: the agent Agno's own runner builds."""
    registry = Path(__file__).resolve().parents[2] / "registry" / "agno-support.yaml"
    settings = yaml.safe_load(registry.read_text(encoding="utf-8"))["settings"]
    return {name: spec["default"] for name, spec in settings.items()}


def _tasks() -> list[Task]:
    """A question about each of the shop's orders: its status when it is on its way,
    else whether it can be returned or how much a return refunds (drawn with a fixed
    seed); a quarter of them val, a quarter test, the rest dev."""
    rng = random.Random(7)
    tasks = []
    for n, order in enumerate(ORDERS.values()):
        split = ("val", "test", "dev", "dev")[n % 4]
        oid = order.order_id
        if order.status != "delivered":
            question, expected, kind = f"What is the status of order {oid}?", order.status, "status"
        elif rng.random() < 0.5:
            question, kind = f"Can order {oid} still be returned?", "return"
            expected = "yes" if returnable(order) else "no"
        else:
            question, kind = f"How much would I get back if I return order {oid}?", "refund"
            fee = {"electronics": 15, "clothing": 0, "books": 5}[order.category]
            expected = f"{order.price * (100 - fee) / 100:.2f}"
        tasks.append(Task(input=question, expected=expected, id=f"{kind}-{oid}",
                          metadata={"split": split, "tags": [kind]}))
    return tasks


SCORER = CodeScorer(exact_answer)
ENV = Environment(name="agno-support", tasks=tuple(_tasks()), scorer=SCORER,
                  agent=lambda: make_agent(_defaults()), timeout_seconds=30)
