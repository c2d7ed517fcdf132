"""The triage agent loop: retrieve, sample, extract, validate, execute, verify, retry.

One attempt, driven by its settings:

0. **route** (``keyword_router``): a ticket with a known slang keyword goes straight to
   that keyword's tool, no planner and no judge; if that fails, the loop below runs;
1. **retrieve** the ``search_width`` best tools not tried yet (``retrieval`` mode; on
   a retry with ``query_expansion``, the query gains thesaurus synonyms);
2. **plan**: the planner picks one of them, scoring each by retrieval and by its own
   reading of the ticket, sampled with ``temperature`` (0 = always the best);
3. **extract** its arguments from the ticket (distractors make several candidates;
   the same temperature picks among them);
4. **validate** them against the database first, when ``validate_args`` is on;
5. **verify**: the judge scores the choice, before execution for tools with side
   effects (a refund cannot be taken back) and after it for read-only tools; below
   ``judge_threshold`` the tool is rejected; ``self_check`` asks a second opinion;
6. **retry** up to ``max_iterations``; when they run out (or nothing relevant is
   left), the ticket is escalated to a human, which works but is expensive.

Failure signals go to ``on_signal`` where they happen (the harness hands it to
forge's runtime mutator). The loop reads its settings from ``config`` at the point
of use, so a move the mutator applies in act mode takes effect within the attempt:
``iteration_cap_hit`` is raised when the cap is reached, before escalating, and a
raised cap lets the loop go on; ``no_tool_found`` is raised before giving up, and a
wider search is tried once more. With a hook that changes nothing (off, observe),
every decision and draw is the same as without one.

Every model call is priced by its tokens (a wider search puts more tool descriptions
into the prompt) and timed; randomness comes only from ``seed``, through one RNG per
decision kind and iteration, so two configs run on the same seed share every draw
they have in common (paired comparisons stay sharp).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from triage_catalog import CATALOG
from triage_extract import Candidates, extract
from triage_judge import cue_hits, judge_score
from triage_retrieval import rank, route
from triage_tools import ToolError, call_tool, check_args

__all__ = ["PRICE_IN", "PRICE_OUT", "Trace", "run_agent"]

PRICE_IN = 3e-6  # dollars per input token of a model call
PRICE_OUT = 15e-6  # dollars per output token
VALIDATION_COST = 0.0001  # a database lookup
VALIDATION_MS = 15.0
# How much the planner's tool choice follows retrieval rather than its own reading.
PLANNER_RETRIEVAL = 0.5


@dataclass
class Trace:
    """Everything an attempt did, for the harness to report."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)
    answer: Any = None
    cost: float = 0.0
    latency_ms: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    iterations: int = 0
    escalated: bool = False
    #: called on every occurrence of a signal; a returned text is added to ``steps``
    on_signal: Callable[[str], str | None] | None = field(default=None, repr=False,
                                                           compare=False)

    def signal(self, name: str) -> None:
        if name not in self.signals:  # reported once per attempt
            self.signals.append(name)
        if self.on_signal is not None:  # answered each time it happens
            note = self.on_signal(name)
            if note:
                self.steps.append(note)

    def model_call(self, tokens_in: int, tokens_out: int, ms: float) -> None:
        self.input_tokens += tokens_in
        self.output_tokens += tokens_out
        self.cost += tokens_in * PRICE_IN + tokens_out * PRICE_OUT
        self.latency_ms += ms + 0.4 * tokens_in + 8.0 * tokens_out


def _rng(seed: int, kind: str, i: int) -> random.Random:
    digest = hashlib.blake2b(f"{seed}:{kind}:{i}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _sample(items: list[tuple[Any, float]], temperature: float, rng: random.Random,
            scale: float = 0.4) -> int:
    """Index of the item drawn from softmax(score / (scale·T)); T = 0 takes the first best."""
    u = rng.random()  # drawn even at T = 0, so every config consumes the same stream
    if temperature <= 0 or len(items) == 1:
        return max(range(len(items)), key=lambda i: (items[i][1], -i))
    top = max(s for _, s in items)
    weights = [math.exp((s - top) / (scale * temperature)) for _, s in items]
    u *= sum(weights)
    for i, w in enumerate(weights):
        u -= w
        if u <= 0:
            return i
    return len(items) - 1


def _owned(con: sqlite3.Connection, name: str, value: Any, customer_id: int) -> bool:
    """Whether an extracted value refers to something this customer may act on."""
    if name == "order_id":
        row = con.execute("SELECT customer_id FROM orders WHERE id = ?", (value,)).fetchone()
        return row is not None and row[0] == customer_id
    if name == "sku":
        return con.execute("SELECT 1 FROM products WHERE sku = ?", (value,)).fetchone() is not None
    return True


def _choose_args(tool: str, found: dict[str, Candidates], config: Mapping[str, Any],
                 con: sqlite3.Connection, customer_id: int, rng: random.Random,
                 trace: Trace) -> tuple[dict[str, Any], bool] | None:
    """One value per argument: sampled, or (``validate_args``) the best one that checks out.

    Also says whether some value is not the extractor's most plausible candidate,
    which is what ``self_check`` looks for when it re-reads the ticket.
    """
    args: dict[str, Any] = {}
    off_best = False
    for name, cands in found.items():
        # Argument plausibilities are coarser than retrieval scores: a wider softmax.
        first = _sample([(v, s) for v, s in cands], config["temperature"], rng, scale=0.5)
        order = [first] + [i for i in range(len(cands)) if i != first]
        if not config["validate_args"]:
            args[name] = cands[first][0]
            off_best |= cands[first][1] < cands[0][1]
            continue
        trace.cost += VALIDATION_COST
        trace.latency_ms += VALIDATION_MS
        valid = [i for i in order if _owned(con, name, cands[i][0], customer_id)]
        if not valid:
            trace.signal("invalid_args")
            return None
        args[name] = cands[valid[0]][0]
        off_best |= cands[valid[0]][1] < cands[0][1]
    if config["validate_args"]:
        try:
            check_args(CATALOG[tool], args)
        except ToolError:
            trace.signal("invalid_args")
            return None
    return args, off_best


def _verify(text: str, tool: str, config: Mapping[str, Any], seed: int, it: int, trace: Trace,
            *, result_ok: bool, off_best: bool) -> bool:
    """The judge against the threshold.

    ``self_check`` asks a second opinion that also re-reads the ticket's arguments: the
    two scores are averaged, and an argument that is not the most plausible reading of
    the ticket (a distractor's order number, say) is refused outright.
    """
    opinions = 2 if config["self_check"] else 1
    scores = []
    for k in range(opinions):
        trace.model_call(400, 20, 250.0)
        scores.append(judge_score(text, tool, _rng(seed, f"judge{k}", it), result_ok=result_ok))
    if config["self_check"] and off_best:
        trace.signal("self_check_reject")
        trace.steps.append(f"{tool}: self-check refused the arguments")
        return False
    score = sum(scores) / len(scores)
    if score < config["judge_threshold"]:
        trace.signal("verifier_reject")
        trace.steps.append(f"{tool}: judge {score:.2f} < {config['judge_threshold']}")
        return False
    return True


def _execute(con: sqlite3.Connection, tool: str, args: dict[str, Any], trace: Trace) -> bool:
    spec = CATALOG[tool]
    outcome = call_tool(con, tool, args)
    trace.cost += spec.cost
    trace.latency_ms += spec.latency_ms
    trace.calls.append({"name": tool, "args": args, "ok": outcome.ok, "error": outcome.error,
                        "result": outcome.result})
    if not outcome.ok:
        trace.signal("tool_error")
        return False
    assert outcome.result is not None
    trace.answer = outcome.result.get(spec.answer)
    return True


def _pool(ticket: str, config: Mapping[str, Any], it: int,
          rejected: set[str]) -> list[tuple[str, float]]:
    """The planner's options: the ``search_width`` best tools not yet tried, each scored
    by retrieval (normalised to the best) and by how well the planner reads its cues.

    A retry searches again (with thesaurus synonyms when ``query_expansion`` is on), so
    the pool refills with the next tools down the ranking.
    """
    expanded = config["query_expansion"] and it > 0
    ranking = [(n, s) for n, s in rank(ticket, config["retrieval"], expanded)
               if n not in rejected][: config["search_width"]]
    top = ranking[0][1] if ranking and ranking[0][1] > 0 else 1.0
    hits = cue_hits(ticket)
    return [(n, PLANNER_RETRIEVAL * s / top + (1 - PLANNER_RETRIEVAL) * min(hits[n], 3) / 3)
            for n, s in ranking]


def _routed(config: Mapping[str, Any], ticket: str, customer_id: int, seed: int,
            con: sqlite3.Connection, trace: Trace) -> str | None:
    """The keyword router's shortcut: straight to a tool, no planner and no judge.

    Returns the tool it tried (so the loop does not try it again), or None when no
    keyword matched. Success ends the attempt with ``trace.answer`` set.
    """
    tool = route(ticket)
    if tool is None:
        return None
    trace.signal("routed")
    found = extract(CATALOG[tool], ticket, customer_id)
    if found is None:
        trace.steps.append(f"router -> {tool}: no arguments in the ticket")
        return tool
    chosen = _choose_args(tool, found, config, con, customer_id, _rng(seed, "route", 0), trace)
    if chosen is not None and _execute(con, tool, chosen[0], trace):
        trace.steps.append(f"router -> {tool}: done")
    return tool


def _relevant(pool: list[tuple[str, float]]) -> bool:
    return bool(pool) and max(s for _, s in pool) > 0


def run_agent(config: Mapping[str, Any], ticket: str, customer_id: int, seed: int,
              con: sqlite3.Connection,
              on_signal: Callable[[str], str | None] | None = None) -> Trace:
    """One attempt at ``ticket`` on the private database ``con``.

    ``config`` is read where each setting is used, never copied: in act mode the
    runtime mutator changes it (through ``on_signal``) during the attempt.
    """
    trace = Trace(on_signal=on_signal)
    rejected: set[str] = set()
    if config["keyword_router"]:
        tool = _routed(config, ticket, customer_id, seed, con, trace)
        if tool is not None and trace.calls and trace.calls[-1]["ok"]:
            return trace
        if tool is not None:
            rejected.add(tool)
    for it in itertools.count():
        if it >= config["max_iterations"]:
            trace.signal("iteration_cap_hit")  # a runtime move may raise the cap
            if it >= config["max_iterations"]:
                break
        trace.iterations = it + 1
        left = _pool(ticket, config, it, rejected)
        if not _relevant(left):
            width = config["search_width"]
            trace.signal("no_tool_found")  # nothing in the catalogue looks relevant
            if config["search_width"] == width:
                break
            left = _pool(ticket, config, it, rejected)  # a runtime move widened the search
            if not _relevant(left):
                break
        prompt = 180 + int(1.3 * len(ticket.split())) + 60 * config["search_width"]
        trace.model_call(prompt, 40, 400.0)  # the planner picks a tool and its arguments
        pick = _sample(left, config["temperature"], _rng(seed, "tool", it))
        tool = left[pick][0]
        if pick > 0:
            trace.signal("off_top_pick")
        rejected.add(tool)  # whatever happens next, this tool is not tried twice
        found = extract(CATALOG[tool], ticket, customer_id)
        if found is None:
            trace.signal("missing_args")
            trace.steps.append(f"{tool}: no arguments in the ticket")
            continue
        chosen = _choose_args(tool, found, config, con, customer_id, _rng(seed, "args", it),
                              trace)
        if chosen is None:
            trace.steps.append(f"{tool}: arguments failed validation")
            continue
        args, off_best = chosen
        if CATALOG[tool].side_effect:
            if not _verify(ticket, tool, config, seed, it, trace, result_ok=False,
                           off_best=off_best):
                continue
            if _execute(con, tool, args, trace):
                trace.steps.append(f"{tool}: done")
                return trace
        elif _execute(con, tool, args, trace):
            if _verify(ticket, tool, config, seed, it, trace, result_ok=True,
                       off_best=off_best):
                trace.steps.append(f"{tool}: accepted")
                return trace
            trace.answer = None
    _execute(con, "escalate_to_human", {"customer_id": customer_id, "reason": "unresolved"},
             trace)
    trace.escalated = True
    trace.signal("escalated")
    return trace
