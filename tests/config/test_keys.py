"""Telling configs one move apart without fingerprinting them: the keys must agree with
the fingerprints exactly, on random registries, configs and moves (values of every
type, ints given to floats, 0.0 against -0.0, enums holding both 1 and True)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from forge.config.keys import one_change, same_spelling, spelled_move, spelling
from forge.config.moves import Move, apply_move, moved_value
from forge.config.registry import Config, EnumSetting, FloatSetting, IntSetting, Registry, Scalar
from forge.errors import MoveError
from forge.search.places import Places

SCALARS = st.one_of(
    st.sampled_from([0, 0.0, -0.0, 1, 1.0, -1, True, False, "1", "", "true", 2 ** 60,
                     float(2 ** 60), 1e16, 0.1]),
    st.booleans(), st.integers(-10 ** 20, 10 ** 20),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=4))


def _choice_key(value: Any) -> tuple[str, Any]:  # as the registry tells choices apart
    if isinstance(value, bool):
        return ("bool", value)
    return ("number", value) if isinstance(value, int | float) else ("str", value)


@st.composite
def registries(draw: st.DrawFn) -> Registry:
    settings_: dict[str, dict[str, Any]] = {}
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["int", "float", "bool", "enum"]))
        if kind == "int":
            lo = draw(st.integers(-20, 20))
            hi = draw(st.integers(lo, lo + 40))
            spec: dict[str, Any] = {"min": lo, "max": hi, "default": draw(st.integers(lo, hi))}
        elif kind == "float":
            lo = draw(st.sampled_from([-1.0, 0.0, -0.5])) if draw(st.booleans()) else \
                draw(st.floats(-10, 10))
            hi = lo + draw(st.floats(0, 10))
            step = draw(st.none() | st.sampled_from([0.1, 0.25, 1.0]))
            # With a step, the default on its grid from min, as a registry requires.
            default = draw(st.floats(lo, hi)) if step is None else min(
                lo + step * draw(st.integers(0, math.floor((hi - lo) / step))), hi)
            spec = {"min": lo, "max": hi, "default": default, "step": step}
        elif kind == "bool":
            spec = {"default": draw(st.booleans())}
        else:
            choices = draw(st.lists(st.one_of(st.booleans(), st.integers(-2, 2),
                                              st.sampled_from([0.5, -0.0, 2.0]),
                                              st.text(max_size=2)),
                                    min_size=2, max_size=5, unique_by=_choice_key))
            spec = {"choices": choices, "default": draw(st.sampled_from(choices))}
        settings_[f"s{i}"] = {"type": kind, **spec}
    return Registry.model_validate({"name": "r", "settings": settings_})


def values(registry: Registry, name: str) -> st.SearchStrategy[Scalar]:
    """Values for ``name``: legal ones of each spelling its check takes, and some not."""
    setting = registry.settings[name]
    if isinstance(setting, IntSetting):
        return st.integers(setting.min - 1, setting.max + 1) | st.just(1.0)
    if isinstance(setting, FloatSetting):
        ints = st.integers(math.ceil(setting.min), math.floor(setting.max)) \
            if math.ceil(setting.min) <= math.floor(setting.max) else st.nothing()
        zero = st.just(-0.0) | st.just(0.0) if setting.min <= 0 <= setting.max else st.nothing()
        return st.floats(setting.min, setting.max) | ints | zero | st.just(setting.max + 1)
    if isinstance(setting, EnumSetting):
        twins = [float(c) for c in setting.choices
                 if isinstance(c, int) and not isinstance(c, bool)]  # 1.0 for the choice 1
        return st.sampled_from([*setting.choices, *twins, "none of them"])
    return st.booleans() | st.just(1)


@st.composite
def configs(draw: st.DrawFn, registry: Registry) -> Config:
    picked = {}
    for name, setting in registry.settings.items():
        value = draw(values(registry, name))
        try:
            picked[name] = setting.check(value)
        except ValueError:
            picked[name] = setting.default
    return registry.validate_config(picked)


@st.composite
def moves(draw: st.DrawFn, registry: Registry, config: Config) -> Move:
    name = draw(st.sampled_from(list(registry.settings)))
    setting, current = registry.settings[name], config.values[name]
    near = [*setting.neighbours(current), *setting.jumps(current)]
    after = draw(st.sampled_from(near) | values(registry, name) if near
                 else values(registry, name))
    return Move(target=name, before=current, after=after)


def twin(move: Move) -> Move:
    """``move`` with its value spelled the other way where a number has one: 0.0 and
    -0.0, 1 and 1.0 (a float setting takes either; an int or enum setting, only one)."""
    after = move.after
    if isinstance(after, float) and after == 0:
        other: Scalar = -after
    elif isinstance(after, float) and after.is_integer():
        other = int(after)
    elif isinstance(after, int) and not isinstance(after, bool):
        other = float(after)
    else:
        other = after
    return Move(target=move.target, before=move.before, after=other)


def drawn(data: st.DataObject) -> tuple[Registry, Config]:
    """A random registry and a config of it."""
    registry = data.draw(registries())
    return registry, data.draw(configs(registry))


def fingerprint_or_refusal(registry: Registry, config: Config, move: Move) -> str | None:
    try:
        return apply_move(registry, config, move).fingerprint
    except MoveError:
        return None


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_two_moves_share_a_tried_key_exactly_when_their_configs_share_a_fingerprint(
        data: st.DataObject) -> None:
    registry, incumbent = drawn(data)
    first = data.draw(moves(registry, incumbent))
    second = twin(first) if data.draw(st.booleans()) else data.draw(moves(registry, incumbent))
    places = Places(registry)
    round_ = data.draw(st.sampled_from([0, 2]))
    keys = []
    for move in (first, second):
        fingerprint = fingerprint_or_refusal(registry, incumbent, move)
        try:
            keys.append(places.key(incumbent, move, round_))
        except MoveError:  # refused exactly where apply_move refuses
            assert fingerprint is None
            return
        assert fingerprint is not None
        assert moved_value(registry, incumbent, move) == \
            apply_move(registry, incumbent, move).values[move.target]
    same_config = (apply_move(registry, incumbent, first).fingerprint
                   == apply_move(registry, incumbent, second).fingerprint)
    assert (keys[0] == keys[1]) == same_config


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_scored_config_one_move_away_is_found_by_its_move_as_by_its_fingerprint(
        data: st.DataObject) -> None:
    # The optuna proposer's check that a suggestion's config was scored already.
    registry, incumbent = drawn(data)
    history = []
    probes = [data.draw(moves(registry, incumbent)) for _ in range(3)]
    for _ in range(data.draw(st.integers(0, 4))):
        config = incumbent
        for _ in range(data.draw(st.integers(0, 2))):
            move = data.draw(moves(registry, config))
            if fingerprint_or_refusal(registry, config, move) is not None:
                config = apply_move(registry, config, move)
                if config.values[move.target] is not incumbent.values[move.target]:
                    probes += [move, twin(move)]  # found, and its twin not, or both
        history.append(config)
    seen_keys = {key for c in history
                 if (key := one_change(incumbent.values, c.values)) is not None}
    seen = {c.fingerprint for c in history}
    for probe in probes:
        move = Move(target=probe.target, before=incumbent.values[probe.target],
                    after=probe.after)
        fingerprint = fingerprint_or_refusal(registry, incumbent, move)
        if fingerprint is None:
            continue
        key = spelled_move(move.target, moved_value(registry, incumbent, move))
        assert (key in seen_keys) == (fingerprint in seen)


@given(SCALARS, SCALARS)
def test_same_spelling_is_equality_of_the_canonical_json(a: Scalar, b: Scalar) -> None:
    assert same_spelling(a, b) == (spelling(a) == spelling(b))
    assert same_spelling(a, a)


def test_the_spellings_a_fingerprint_tells_apart() -> None:
    assert not same_spelling(0.0, -0.0)  # equal numbers, two fingerprints
    assert not same_spelling(1, 1.0) and not same_spelling(1, True)
    assert not same_spelling("1", 1)
    assert same_spelling(0.1 + 0.2, 0.30000000000000004)


def test_the_tried_keys_of_twin_values_follow_their_fingerprints() -> None:
    registry = Registry.model_validate({"name": "r", "settings": {
        "x": {"type": "float", "min": -1.0, "max": 1.0, "default": 0.5}}})
    start = registry.defaults()
    places = Places(registry)

    def key(after: Scalar) -> tuple[str, str, str]:
        return places.key(start, Move(target="x", before=0.5, after=after), 0)

    assert key(0.0) != key(-0.0)  # equal moves (0.0 == -0.0), two configs
    assert key(1) == key(1.0)  # one config: the float setting holds 1.0 either way
