"""The auto proposer: reflection first, then Optuna's ranking, each move once."""

from __future__ import annotations

import random

from proposer_helpers import assert_legal, attempt, key, mixed_registry, random_config, view

from forge.config.registry import Registry
from forge.proposers import AutoProposer, Proposer

HINTS = {
    "iteration_cap_hit": {"x": "up"},
    "format_error": {"flag": "toggle"},
    "too_wide": {"width": "down"},
}


def fed_auto(registry: Registry, seed: int, n: int) -> AutoProposer:
    auto = AutoProposer(registry, seed=seed)
    rng = random.Random(seed)
    for _ in range(n):
        config = random_config(registry, rng)
        auto.observe(config, float(config.values["x"]) / 10 + rng.gauss(0, 0.05))
    return auto


def test_reflection_comes_first_then_optuna_without_repeats() -> None:
    registry = mixed_registry(HINTS)
    auto = fed_auto(registry, 0, 12)
    attempts = [attempt("format_error")] * 3 + [attempt("iteration_cap_hit")]
    v = view(registry, attempts=attempts, seed=0)
    proposals = auto.propose(v, 100)
    assert [p.proposer for p in proposals[:2]] == ["reflect", "reflect"]
    # x's hint leads with its jump halfway to the bound (5 -> 7), not the step.
    assert [key(p.move) for p in proposals[:2]] == [("flag", "False", "True"), ("x", "5", "7")]
    assert all(p.proposer == "optuna" for p in proposals[2:])
    # Optuna ranks every untried move; the two reflection already named appear once.
    assert sorted(key(p.move) for p in proposals) == sorted(key(m) for m in v.untried)
    assert_legal(registry, v, proposals)


def test_n_caps_the_total_and_reflection_fills_it_first() -> None:
    registry = mixed_registry(HINTS)
    auto = fed_auto(registry, 1, 6)
    attempts = [attempt("format_error", "iteration_cap_hit", "too_wide")]
    v = view(registry, attempts=attempts, seed=1)
    assert [p.proposer for p in auto.propose(v, 2)] == ["reflect", "reflect"]
    four = auto.propose(view(registry, attempts=attempts, seed=1), 4)
    assert [p.proposer for p in four] == ["reflect", "reflect", "reflect", "optuna"]
    assert auto.propose(view(registry, attempts=attempts, seed=1), 0) == []


def test_without_signals_auto_is_the_optuna_ranking() -> None:
    registry = mixed_registry(HINTS)
    auto = fed_auto(registry, 2, 10)
    proposals = auto.propose(view(registry, seed=3), 4)
    ranking = auto.optuna.propose(view(registry, seed=3), 4)
    assert [key(p.move) for p in proposals] == [key(p.move) for p in ranking]
    assert all(p.proposer == "optuna" for p in proposals)


def test_observe_feeds_the_optuna_part() -> None:
    registry = mixed_registry(HINTS)
    auto = fed_auto(registry, 3, 5)
    assert auto.optuna.n_trials == 5


def test_auto_is_deterministic_and_satisfies_the_protocol() -> None:
    registry = mixed_registry(HINTS)
    attempts = [attempt("too_wide")]

    def run() -> list[tuple[tuple[str, str, str], str, str]]:
        proposals = fed_auto(registry, 4, 9).propose(view(registry, attempts=attempts), 5)
        return [(key(p.move), p.proposer, p.reason) for p in proposals]

    assert run() == run()
    assert isinstance(AutoProposer(registry), Proposer)
