"""The harness: forge calls ``run(config, task, ctx)`` once per attempt of one task.

This one is a toy so that your first ``forge search`` finds something real, offline,
in seconds: a pretend model adds up a list of numbers, and how often it gets the sum
right depends on the three settings declared in registry.yaml:

- ``temperature``: the hotter the model, the more often it slips (a sum a little off);
- ``prompt``: a ``terse`` prompt makes it lose track of a number in long lists; a
  ``stepwise`` prompt (a running total) does not, but its longer answers cost more;
- ``votes``: ask the model several times and keep the majority answer; each vote is
  paid for, so the cost gate in bench.yaml has a say.

To tune your own agent, keep ``run``'s signature and replace ``toy_model`` and
``agent`` with a call into your code: read your settings from ``config`` (the keys of
registry.yaml), the question from ``task.input``, take all randomness from
``ctx.seed``, and return the answer with what it cost. Anything your harness raises,
or a hang past ``rollouts.timeout_s``, is recorded as a failed attempt; the search
goes on.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from forge import AttemptContext, RunOutput, Task, Usage

# Prices of the pretend model, in dollars per token.
INPUT_PRICE = 1e-6
OUTPUT_PRICE = 2e-6


@dataclass
class Reply:
    """One call of the model: its answer and the tokens it used."""

    answer: int
    input_tokens: int
    output_tokens: int


def toy_model(question: str, *, temperature: float, prompt: str,
              rng: random.Random) -> Reply:
    """Stands in for a call to your LLM. Replace it (and ``agent``) with your own."""
    numbers = [int(n) for n in re.findall(r"\d+", question)]
    # Every draw is made whatever the settings, so that one seed meets the same luck
    # under every config: forge compares configs seed by seed.
    lose_track, slip, which, sign = rng.random(), rng.random(), rng.random(), rng.random()
    if prompt == "terse" and len(numbers) >= 5 and lose_track < 0.4:
        numbers.pop(int(which * len(numbers)))  # skipped one number of a long list
    answer = sum(numbers)
    if slip < 0.02 + 0.45 * temperature:
        answer += 10 if sign < 0.5 else -1  # a slip: a carry or a digit off
    stepwise = prompt == "stepwise"
    return Reply(answer=answer,
                 input_tokens=60 + 4 * len(numbers) + (5 if stepwise else 0),
                 output_tokens=4 + (len(numbers) if stepwise else 0))


def agent(question: str, config: dict[str, Any], rng: random.Random
          ) -> tuple[int, list[Reply]]:
    """The agent loop: ask the model ``votes`` times, keep the most common answer."""
    replies = [toy_model(question, temperature=config["temperature"],
                         prompt=config["prompt"], rng=rng)
               for _ in range(config["votes"])]
    answer, _ = Counter(r.answer for r in replies).most_common(1)[0]
    return answer, replies


def run(config: dict[str, Any], task: Task, ctx: AttemptContext) -> RunOutput:
    """One attempt: ``config`` is a private copy of the settings, ``ctx.seed`` is the
    attempt's seed (the same for every config, so comparisons are paired)."""
    rng = random.Random(ctx.seed)
    answer, replies = agent(task.input, config, rng)
    input_tokens = sum(r.input_tokens for r in replies)
    output_tokens = sum(r.output_tokens for r in replies)
    # `signals` name what went wrong in words forge's reflection proposer reads;
    # `metrics` may carry more auxiliary metrics for bench.yaml's gates.
    signals = ["votes_disagree"] if len({r.answer for r in replies}) > 1 else []
    return RunOutput(output=str(answer),
                     usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
                     cost=input_tokens * INPUT_PRICE + output_tokens * OUTPUT_PRICE,
                     signals=signals,
                     trace=[r.answer for r in replies])
