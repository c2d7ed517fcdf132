"""A scripted "small tool-using model" for the openai-math bench.

``math_model(body)`` is a ``default`` responder for :class:`openai_server.ScriptedOpenAI`:
it reads the question in the first user message, plans the tool calls it needs
(one per turn, in order), asks for the next one, and once every result is back
answers with the last result. Like a real model it can only use the tools it is
sent: without them it answers "I don't know". Token counts grow with the request,
so prompts and turns show up in cost.
"""

from __future__ import annotations

import json
import re
from typing import Any

from openai_server import Reply, reply, tool_call

__all__ = ["math_model", "plan"]

Step = tuple[str, dict[str, Any]]  # tool, arguments; "$i" refers to result i

_OPS = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide",
        "plus": "add", "minus": "subtract", "times": "multiply"}
_N = r"(-?\d+(?:\.\d+)?)"
_FACT = r"(?:the atomic number of (\w+)|the number of moons of (\w+))"


def _fact(element: str | None, planet: str | None) -> Step:
    if element:
        return "lookup", {"table": "elements", "key": element}
    return "lookup", {"table": "moons", "key": str(planet).lower()}


def plan(question: str) -> list[Step] | None:
    """The tool calls that answer ``question``; None for a question it cannot read."""
    q = question.strip()
    if m := re.fullmatch(rf"What is {_N} ([-+*/]) {_N}\?", q):
        return [(_OPS[m[2]], {"a": float(m[1]), "b": float(m[3])})]
    if m := re.fullmatch(rf"What is \({_N} ([-+*/]) {_N}\) ([-+*/]) {_N}\?", q):
        return [(_OPS[m[2]], {"a": float(m[1]), "b": float(m[3])}),
                (_OPS[m[4]], {"a": "$0", "b": float(m[5])})]
    if m := re.fullmatch(r"What is the atomic number of (\w+) plus the atomic number of (\w+)\?",
                         q):
        return [_fact(m[1], None), _fact(m[2], None), ("add", {"a": "$0", "b": "$1"})]
    if m := re.fullmatch(rf"What is {_FACT} (plus|minus|times) {_N}\?", q):
        return [_fact(m[1], m[2]), (_OPS[m[3]], {"a": "$0", "b": float(m[4])})]
    if m := re.fullmatch(rf"What is {_FACT}\?", q):
        return [_fact(m[1], m[2])]
    if m := re.fullmatch(r"What is the capital of (.+)\?", q):
        return [("lookup", {"table": "capitals", "key": m[1]})]
    if m := re.fullmatch(r"How many moons does (\w+) have\?", q):
        return [("lookup", {"table": "moons", "key": m[1]})]
    return None


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def math_model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    question = next(m["content"] for m in messages if m["role"] == "user")
    results = [_value(m["content"]) for m in messages if m["role"] == "tool"]
    prompt_tokens = len(json.dumps(messages)) // 4
    steps = plan(question)
    if not body.get("tools") or steps is None:
        return reply("I don't know.", prompt_tokens=prompt_tokens)
    if any(isinstance(r, str) and r.startswith("error:") for r in results):
        return reply("The tool failed.", prompt_tokens=prompt_tokens)
    if len(results) < len(steps):
        name, args = steps[len(results)]
        args = {k: results[int(v[1:])] if isinstance(v, str) and v.startswith("$") else v
                for k, v in args.items()}
        return tool_call(name, args, prompt_tokens=prompt_tokens)
    return reply(str(results[-1]), prompt_tokens=prompt_tokens)
