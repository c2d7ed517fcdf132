"""The reflection proposer: failure signals of dev attempts, mapped through registry hints."""

from __future__ import annotations

from typing import Any

import pytest
from proposer_helpers import assert_legal, attempt, key, make_registry, view

from forge.config.moves import Move, candidate_moves, neighbourhood
from forge.config.registry import Registry
from forge.proposers import Proposer, ReflectProposer
from forge.proposers.reflect import count_signals, hinted_move

SETTINGS: dict[str, Any] = {
    "max_iterations": {"type": "int", "min": 1, "max": 8, "step": 1, "default": 2},
    "search_width": {"type": "int", "min": 1, "max": 32, "default": 4, "scale": "log"},
    "temperature": {"type": "float", "min": 0.0, "max": 1.5, "step": 0.1, "default": 0.7},
    "strict": {"type": "bool", "default": False},
    "retrieval": {"type": "enum", "choices": ["bm25", "tfidf", "hybrid"], "default": "bm25"},
}
HINTS: dict[str, Any] = {
    "iteration_cap_hit": {"max_iterations": "up"},
    "context_overflow": {"search_width": "down", "temperature": "down"},
    "format_error": {"strict": "toggle"},
    "retrieval_miss": {"retrieval": "hybrid"},
    "timeout": {"max_iterations": "down"},
    "loop_detected": {"max_iterations": "up"},
}


@pytest.fixture
def registry() -> Registry:
    return make_registry(SETTINGS, HINTS)


def moves_of(proposals: list[Any]) -> list[tuple[str, Any, Any]]:
    return [(p.move.target, p.move.before, p.move.after) for p in proposals]


def test_signals_map_through_hints_most_frequent_first(registry: Registry) -> None:
    attempts = ([attempt("iteration_cap_hit")] * 3 + [attempt("format_error")]
                + [attempt("no_hint_for_this")] * 6)
    v = view(registry, attempts=attempts, jumps=False)
    proposals = ReflectProposer().propose(v, 10)
    assert moves_of(proposals) == [("max_iterations", 2, 3), ("strict", False, True)]
    assert proposals[0].proposer == "reflect"
    assert proposals[0].reason.startswith(
        "signal iteration_cap_hit in 3 of 10 dev attempts -> max_iterations up (2 -> 3)")
    assert "format_error in 1 of 10" in proposals[1].reason
    assert_legal(registry, v, proposals)


def test_directions_per_setting_type(registry: Registry) -> None:
    attempts = [attempt("context_overflow", "retrieval_miss")] * 2
    v = view(registry, attempts=attempts, jumps=False)
    proposals = ReflectProposer().propose(v, 10)
    # One signal per attempt twice: a tie, broken by signal name.
    assert moves_of(proposals) == [("search_width", 4, 2),      # log scale: halve
                                   ("temperature", 0.7, 0.6),   # linear: minus step
                                   ("retrieval", "bm25", "hybrid")]
    assert_legal(registry, v, proposals)


def test_toggle_flips_either_way(registry: Registry) -> None:
    config = registry.with_values(registry.defaults(), {"strict": True})
    v = view(registry, config, attempts=[attempt("format_error")])
    assert moves_of(ReflectProposer().propose(v, 5)) == [("strict", True, False)]


def test_moves_at_a_bound_or_already_there_are_skipped(registry: Registry) -> None:
    config = registry.with_values(registry.defaults(),
                                  {"max_iterations": 8, "search_width": 1,
                                   "temperature": 0.0, "retrieval": "hybrid"})
    attempts = [attempt("iteration_cap_hit", "context_overflow", "retrieval_miss",
                        "format_error")]
    v = view(registry, config, attempts=attempts)
    proposals = ReflectProposer().propose(v, 10)
    assert moves_of(proposals) == [("strict", False, True)]
    assert_legal(registry, v, proposals)


def test_tried_moves_are_skipped(registry: Registry) -> None:
    config = registry.defaults()
    untried = [m for m in neighbourhood(registry, config)
               if not (m.target == "max_iterations" and m.after == 3)]
    attempts = [attempt("iteration_cap_hit")] * 5 + [attempt("format_error")]
    v = view(registry, config, attempts=attempts, untried=untried)
    assert moves_of(ReflectProposer().propose(v, 10)) == [("strict", False, True)]


def test_timeout_and_error_stop_reasons_count_as_signals(registry: Registry) -> None:
    attempts = [attempt(stop_reason="timeout", with_output=False)] * 2 + [
        attempt(stop_reason="error", with_output=False)]
    counts = count_signals(attempts)
    assert counts == {"timeout": 2, "error": 1}
    v = view(registry, attempts=attempts)
    proposals = ReflectProposer().propose(v, 10)
    assert moves_of(proposals) == [("max_iterations", 2, 1)]  # hint: timeout -> down
    assert "signal timeout in 2 of 3 dev attempts" in proposals[0].reason


def test_a_signal_counts_once_per_attempt() -> None:
    counts = count_signals([attempt("a", "a", "b"), attempt("a"),
                            attempt("a", stop_reason="timeout")])
    assert counts == {"a": 3, "b": 1, "timeout": 1}


def test_the_same_move_from_two_signals_is_proposed_once(registry: Registry) -> None:
    attempts = [attempt("iteration_cap_hit", "loop_detected")] * 2 + [attempt("loop_detected")]
    proposals = ReflectProposer().propose(view(registry, attempts=attempts, jumps=False),
                                          10)
    assert moves_of(proposals) == [("max_iterations", 2, 3)]
    assert "loop_detected in 3 of 3" in proposals[0].reason  # the stronger signal names it


def test_n_limits_and_no_signals_or_no_hints_give_nothing(registry: Registry) -> None:
    attempts = [attempt("iteration_cap_hit")] * 3 + [attempt("format_error")] * 2
    reflect = ReflectProposer()
    assert moves_of(reflect.propose(view(registry, attempts=attempts), 1)) == [
        ("max_iterations", 2, 5)]
    assert reflect.propose(view(registry, attempts=attempts), 0) == []
    assert reflect.propose(view(registry, attempts=[attempt(), attempt()]), 5) == []
    no_hints = make_registry(SETTINGS)
    assert reflect.propose(view(no_hints, attempts=attempts), 5) == []


def test_a_hint_leads_with_the_jump_halfway_to_the_bound_then_the_step(
        registry: Registry) -> None:
    # A signal says which way to move, not how far: the jump halfway to the bound comes
    # first (a step is often too small to screen through), the step once it is tried.
    attempts = [attempt("iteration_cap_hit")] * 3 + [attempt("context_overflow")] * 2
    v = view(registry, attempts=attempts)
    proposals = ReflectProposer().propose(v, 10)
    assert moves_of(proposals) == [("max_iterations", 2, 5),   # 2 .. 8: halfway is 5
                                   ("search_width", 4, 1),     # log 4 .. 1: 2 is the step
                                   ("temperature", 0.7, 0.3)]  # 0.7 .. 0: the grid's 0.3
    assert "(hint: up)" in proposals[0].reason
    assert_legal(registry, v, proposals)
    # The jump tried against this incumbent: the step the same way.
    tried = {p.move for p in proposals}
    v = view(registry, attempts=attempts,
             untried=[m for m in candidate_moves(registry, registry.defaults())
                      if m not in tried])
    assert moves_of(ReflectProposer().propose(v, 10)) == [
        ("max_iterations", 2, 3), ("search_width", 4, 2), ("temperature", 0.7, 0.6)]
    # An enum or a bool has no jump: its hint names the move either way.
    enum = [attempt("retrieval_miss", "format_error")]
    assert moves_of(ReflectProposer().propose(view(registry, attempts=enum), 10)) == [
        ("strict", False, True), ("retrieval", "bm25", "hybrid")]


def test_hinted_move_follows_the_setting_neighbours(registry: Registry) -> None:
    config = registry.defaults()
    assert hinted_move(registry, config, "search_width", "up") == Move(
        target="search_width", before=4, after=8)
    assert hinted_move(registry, config, "temperature", "up") == Move(
        target="temperature", before=0.7, after=0.8)
    assert hinted_move(registry, config, "retrieval", "bm25") is None   # already there
    assert hinted_move(registry, config, "retrieval", "tfidf") == Move(
        target="retrieval", before="bm25", after="tfidf")
    assert hinted_move(registry, config, "strict", "up") is None        # not a bool direction
    assert hinted_move(registry, config, "nope", "up") is None
    low = registry.with_values(config, {"max_iterations": 1})
    assert hinted_move(registry, low, "max_iterations", "down") is None


def test_reflect_is_stateless_and_satisfies_the_protocol(registry: Registry) -> None:
    reflect = ReflectProposer()
    assert isinstance(reflect, Proposer)
    attempts = [attempt("iteration_cap_hit")]
    before = [key(p.move) for p in reflect.propose(view(registry, attempts=attempts), 5)]
    reflect.observe(registry.defaults(), 0.5)
    assert [key(p.move) for p in reflect.propose(view(registry, attempts=attempts), 5)] == before
