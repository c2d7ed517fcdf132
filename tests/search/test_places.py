"""A move's place among the incumbent's candidate moves, and its tried-key.

The search-level behaviour (a proposer's new values no longer keep a setting's moves
untried) is in test_search_selection.py; these pin the rule itself on each kind of
numeric setting.
"""

from __future__ import annotations

import math

from forge.config.moves import Move
from forge.config.registry import Registry
from forge.search.places import Places

REGISTRY = Registry.model_validate({"name": "t", "settings": {
    "width": {"type": "int", "min": 1, "max": 4096, "default": 64, "scale": "log"},
    "noise": {"type": "float", "min": 0.0, "max": 1.0, "step": 0.1, "default": 0.1},
    "temp": {"type": "float", "min": 0.0, "max": 1.0, "default": 0.5},
    "mode": {"type": "enum", "choices": ["a", "b"], "default": "a"}}})
START = REGISTRY.defaults()


def place(target: str, after: float | int | str) -> float | int | str | bool:
    before = START.values[target]
    places = Places(REGISTRY)
    return places.place(START, Move(target=target, before=before, after=after)).after


def test_a_log_scale_value_takes_the_place_of_a_move_within_a_factor_sqrt2() -> None:
    assert place("width", 100) == 128  # 128 / 100 < sqrt(2)
    assert place("width", 90) == 90  # 128 / 90 > sqrt(2): a place of its own
    assert place("width", 2500) == 2048
    assert place("width", 128) == 128  # a candidate move is its own place


def test_a_float_without_a_step_merges_within_half_its_grid_spacing() -> None:
    # The grid of temp's moves from 0.5 is 0, 0.2, 0.4, 0.6, 0.8, 1: spacing 0.2.
    assert place("temp", 0.65) == 0.6
    assert place("temp", 0.7) == 0.7  # halfway: neither


def test_a_stepped_setting_and_anything_not_numeric_keep_their_own_place() -> None:
    assert place("noise", 0.7) == 0.7
    assert place("noise", 0.35) == 0.35  # off its step: illegal, apply_move says why
    assert place("mode", "b") == "b"


def test_the_tried_key_is_the_places_and_an_illegal_move_was_never_tried() -> None:
    places = Places(REGISTRY)
    near, grid = (Move(target="width", before=64, after=a) for a in (100, 128))
    tried = {places.tried_key(START, grid, 0)}
    assert places.was_tried(START, near, tried, 0)
    # A precision round asks every question again.
    assert not places.was_tried(START, near, tried, 1)
    for bad in (0, -3, 5000, math.nan):
        assert not places.was_tried(START, Move(target="width", before=64, after=bad),
                                    tried, 0)
    refusal = places.near_copy(START, near)
    assert refusal == {"category": "already_tried", "reason": (
        "width 64 -> 100: tried in the place of 128 (within half a step of it) against "
        "this incumbent already")}
