"""An enum holding both ``1`` and ``True``: proposers and the search keep its two moves apart.

Python's ``==`` takes ``True`` for ``1``, so before moves compared type-exactly a
search deduplicated ``mode: plain -> 1`` and ``mode: plain -> True`` into one
candidate, and a proposer could take a tried move for an untried one.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import read_calls, run_forge_json, search_tasks, write_search_bench

from forge.config.moves import Move, neighbourhood
from forge.config.registry import Registry
from forge.harness import RunOutput
from forge.proposers import AutoProposer, ReflectProposer, SearchView
from forge.results.model import AttemptResult

REGISTRY = """\
name: twins
settings:
  mode: {type: enum, choices: [plain, 1, true], default: plain}
hints:
  wants_true: {mode: "True"}
"""

#: Only ``mode: true`` helps; ``mode: 1`` is as good as ``plain``.
HARNESS = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["mode"] is True else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong"}
"""

TO_ONE = Move(target="mode", before="plain", after=1)
TO_TRUE = Move(target="mode", before="plain", after=True)


def typed(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)


@pytest.fixture
def registry() -> Registry:
    return Registry.model_validate(yaml.safe_load(REGISTRY))


def view(registry: Registry, untried: list[Move], *signals: str) -> SearchView:
    attempts = [AttemptResult(task_id=f"t{i}", attempt=0, seed=i, stop_reason="completed",
                              duration_s=0.1, output=RunOutput(signals=list(signals)),
                              score=None) for i in range(3)]
    return SearchView(registry=registry, incumbent=registry.defaults(), untried=untried,
                      history=[], dev_attempts=attempts, step=1, rng=random.Random(0))


def test_the_neighbourhood_holds_both_moves(registry: Registry) -> None:
    moves = neighbourhood(registry, registry.defaults())
    assert [typed(m.after) for m in moves] == [("int", 1), ("bool", True)]
    assert TO_ONE != TO_TRUE and len(set(moves)) == 2


def test_reflection_does_not_take_the_tried_twin_for_its_move(registry: Registry) -> None:
    reflect = ReflectProposer()
    # The hint asks for True; only the move to 1 is untried, so there is nothing to propose.
    assert reflect.propose(view(registry, [TO_ONE], "wants_true"), 4) == []
    (proposal,) = reflect.propose(view(registry, [TO_ONE, TO_TRUE], "wants_true"), 4)
    assert typed(proposal.move.after) == ("bool", True)


def test_auto_proposes_both_twins_once_each(registry: Registry) -> None:
    proposals = AutoProposer(registry, seed=0).propose(
        view(registry, [TO_ONE, TO_TRUE], "wants_true"), 4)
    assert [(p.proposer, typed(p.move.after)) for p in proposals] == [
        ("reflect", ("bool", True)), ("optuna", ("int", 1))]


def test_the_search_screens_both_twins_and_promotes_the_one_that_helps(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = write_search_bench(tmp_path / "bench", HARNESS, registry=REGISTRY,
                               tasks=search_tasks(24, 20, 10), k=4,
                               search={"max_steps": 3, "patience": 2})
    journals = tmp_path / "journals"
    outcome = run_forge_json(capsys, "search", bench, "--journals", journals, "--run-id", "r",
                             "--proposer", "sweep", "--candidates", "2", "--json")
    assert typed(outcome["final_config"]["mode"]) == ("bool", True)
    steps = run_forge_json(capsys, "journal", "show", "r", "--journals", journals, "--json")
    decided = [(r["step"], typed(r["move"]["before"]), typed(r["move"]["after"]), r["verdict"])
               for r in steps]
    # A step screens every other choice of an enum: the twins side by side, each a
    # candidate with a verdict of its own; mode true is promoted, and mode 1 is no
    # no-op after it.
    assert decided == [(1, ("str", "plain"), ("int", 1), "rejected"),
                       (1, ("str", "plain"), ("bool", True), "promoted"),
                       (2, ("bool", True), ("str", "plain"), "rejected"),
                       (2, ("bool", True), ("int", 1), "rejected")]
    harness_saw = {typed(c["config"]["mode"]) for c in read_calls(bench)}
    assert harness_saw == {("str", "plain"), ("int", 1), ("bool", True)}
    # The journal keeps the types apart too: true and 1 in the JSON.
    lines = (journals / "r" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    afters = [json.loads(line)["move"]["after"] for line in lines
              if json.loads(line).get("kind") == "candidate"]
    assert [typed(a) for a in afters] == [("int", 1), ("bool", True), ("str", "plain"),
                                          ("int", 1)]
