"""Helpers for the proposer tests: small registries, views and fake dev attempts.

Imported as a top-level module (pytest puts this folder on ``sys.path``); the name
is unique so it clashes with no other test helper.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from forge.config.moves import Move, apply_move, candidate_moves
from forge.config.registry import Config, Registry
from forge.harness import RunOutput
from forge.proposers import EvaluatedConfig, Proposal, SearchView
from forge.results.model import AttemptResult, StopReason


def make_registry(settings: Mapping[str, Any], hints: Mapping[str, Any] | None = None,
                  name: str = "t") -> Registry:
    return Registry.model_validate({"name": name, "settings": dict(settings),
                                    "hints": dict(hints or {})})


#: x matters, the rest are distractors of every type.
MIXED = {
    "x": {"type": "int", "min": 0, "max": 10, "step": 1, "default": 5},
    "width": {"type": "int", "min": 1, "max": 32, "default": 4, "scale": "log"},
    "temperature": {"type": "float", "min": 0.0, "max": 1.0, "step": 0.1, "default": 0.5},
    "flag": {"type": "bool", "default": False},
    "mode": {"type": "enum", "choices": ["a", "b", "c"], "default": "a"},
}


def mixed_registry(hints: Mapping[str, Any] | None = None) -> Registry:
    return make_registry(MIXED, hints)


def attempt(*signals: str, stop_reason: StopReason = "completed", task_id: str = "t1",
            with_output: bool = True) -> AttemptResult:
    """A fake dev attempt carrying ``signals``."""
    output = RunOutput(signals=list(signals)) if with_output else None
    return AttemptResult(task_id=task_id, attempt=0, seed=1, stop_reason=stop_reason,
                         duration_s=0.1, output=output, score=None)


def view(registry: Registry, config: Config | None = None, *, seed: int = 0,
         attempts: Sequence[AttemptResult] = (), untried: Iterable[Move] | None = None,
         history: Sequence[EvaluatedConfig] = (), step: int = 1,
         jumps: bool = True) -> SearchView:
    """A view of ``config`` (default: the registry's defaults) with a seeded rng; its
    untried moves are the search's candidate moves (steps and, with ``jumps``, jumps)
    unless given."""
    incumbent = config if config is not None else registry.defaults()
    moves = (list(untried) if untried is not None
             else candidate_moves(registry, incumbent, jumps=jumps))
    return SearchView(registry=registry, incumbent=incumbent, untried=moves,
                      history=list(history), dev_attempts=list(attempts), step=step,
                      rng=random.Random(seed))


def random_config(registry: Registry, rng: random.Random) -> Config:
    """A config drawn uniformly from each setting's legal values (floats on a 0.1 grid)."""
    values: dict[str, Any] = {}
    for name, setting in registry.settings.items():
        if setting.type == "int":
            values[name] = rng.randint(setting.min, setting.max)
        elif setting.type == "float":
            values[name] = round(rng.uniform(setting.min, setting.max), 1)
        elif setting.type == "bool":
            values[name] = rng.random() < 0.5
        else:
            values[name] = rng.choice(setting.choices)
    return registry.validate_config(values)


def assert_legal(registry: Registry, v: SearchView, proposals: Sequence[Proposal]) -> None:
    """Every proposal applies to the incumbent, is not a tried move (a candidate move of
    the search missing from ``untried``), and appears once. A value off the search's
    grid is a legal move too, and one the view cannot call tried."""
    offered = candidate_moves(registry, v.incumbent)
    keys = []
    for p in proposals:
        apply_move(registry, v.incumbent, p.move)
        assert p.move in v.untried or p.move not in offered, p.move
        assert p.reason
        keys.append((p.move.target, repr(p.move.before), repr(p.move.after)))
    assert len(keys) == len(set(keys))


def key(move: Move) -> tuple[str, str, str]:
    return (move.target, repr(move.before), repr(move.after))
