"""Moves: one setting, ``before -> after``, an exact inverse, and the neighbourhood."""

from __future__ import annotations

import itertools
import math
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge.config.moves import (
    Move,
    apply_move,
    candidate_moves,
    expansion,
    move_kind,
    neighbourhood,
)
from forge.config.registry import (
    INT_BOUND,
    BoolSetting,
    Config,
    EnumSetting,
    FloatSetting,
    IntSetting,
    Registry,
    Scalar,
    same_value,
)
from forge.errors import MoveError, StaleMoveError, UserError


def make_registry(**settings_: Any) -> Registry:
    return Registry(name="test", settings=settings_)


def int_setting(lo: int, hi: int, default: int, step: int = 1, scale: str = "linear"
                ) -> IntSetting:
    return IntSetting(type="int", min=lo, max=hi, default=default, step=step, scale=scale)


def float_setting(lo: float, hi: float, default: float, step: float | None = None,
                  scale: str = "linear") -> FloatSetting:
    return FloatSetting(type="float", min=lo, max=hi, default=default, step=step, scale=scale)


@pytest.fixture
def registry() -> Registry:
    """The DESIGN.md example registry."""
    return make_registry(
        max_iterations=int_setting(1, 8, 2),
        temperature=float_setting(0.0, 1.5, 0.7, step=0.1),
        search_width=int_setting(1, 32, 4, scale="log"),
        retrieval=EnumSetting(type="enum", choices=["bm25", "tfidf", "hybrid"], default="bm25"),
        query_expansion=BoolSetting(type="bool", default=False),
    )


@pytest.fixture
def config(registry: Registry) -> Config:
    return registry.defaults()


def afters(registry: Registry, config: Config, target: str) -> list[Scalar]:
    return [m.after for m in neighbourhood(registry, config) if m.target == target]


def at(registry: Registry, **values: Scalar) -> Config:
    return registry.validate_config({**registry.defaults().values, **values})


# --------------------------------------------------------------------------- Move and apply


def test_inverse_swaps_before_and_after() -> None:
    move = Move(target="temperature", before=0.7, after=0.8)
    assert move.inverse() == Move(target="temperature", before=0.8, after=0.7)
    assert move.inverse().inverse() == move


def test_apply_changes_only_the_target_and_leaves_the_input_alone(
        registry: Registry, config: Config) -> None:
    moved = apply_move(registry, config, Move(target="max_iterations", before=2, after=3))
    assert moved.values == {**config.values, "max_iterations": 3}
    assert config.values["max_iterations"] == 2
    assert moved.registry_digest == registry.digest
    assert moved.fingerprint != config.fingerprint


def test_apply_then_inverse_gives_back_the_config(registry: Registry, config: Config) -> None:
    move = Move(target="retrieval", before="bm25", after="hybrid")
    back = apply_move(registry, apply_move(registry, config, move), move.inverse())
    assert back == config
    assert back.fingerprint == config.fingerprint


def test_stale_move_is_refused(registry: Registry, config: Config) -> None:
    with pytest.raises(StaleMoveError) as info:
        apply_move(registry, config, Move(target="max_iterations", before=3, after=4))
    assert isinstance(info.value, MoveError)
    assert isinstance(info.value, UserError)
    assert "stale" in str(info.value)
    assert "max_iterations is 2" in str(info.value)


def test_applying_the_same_move_twice_is_stale(registry: Registry, config: Config) -> None:
    move = Move(target="query_expansion", before=False, after=True)
    moved = apply_move(registry, config, move)
    with pytest.raises(StaleMoveError):
        apply_move(registry, moved, move)


def test_stale_check_keeps_bools_and_ints_apart(registry: Registry, config: Config) -> None:
    # False == 0 in Python, but a move made for 0 is not a move for False.
    with pytest.raises(StaleMoveError):
        apply_move(registry, config, Move(target="query_expansion", before=0, after=True))


@pytest.mark.parametrize("move", [
    Move(target="max_iterations", before=2, after=2),
    Move(target="temperature", before=0.7, after=0.7),
    Move(target="retrieval", before="bm25", after="bm25"),
    Move(target="query_expansion", before=False, after=False),
], ids=["int", "float", "enum", "bool"])
def test_no_op_move_is_refused(registry: Registry, config: Config, move: Move) -> None:
    with pytest.raises(MoveError, match="changes nothing") as info:
        apply_move(registry, config, move)
    assert not isinstance(info.value, StaleMoveError)


def test_move_of_an_unknown_setting_is_refused(registry: Registry, config: Config) -> None:
    with pytest.raises(MoveError, match="unknown setting 'temprature'"):
        apply_move(registry, config, Move(target="temprature", before=0.7, after=0.8))


@pytest.mark.parametrize(("move", "fragment"), [
    (Move(target="max_iterations", before=2, after=9), "[1, 8]"),
    (Move(target="max_iterations", before=2, after=0), "[1, 8]"),
    (Move(target="max_iterations", before=2, after=2.5), "integer"),
    (Move(target="temperature", before=0.7, after=1.6), "[0.0, 1.5]"),
    (Move(target="search_width", before=4, after=64), "[1, 32]"),
    (Move(target="retrieval", before="bm25", after="dense"), "bm25"),
    (Move(target="query_expansion", before=False, after=1), "true or false"),
], ids=["above-max", "below-min", "int-given-float", "float-above-max", "log-above-max",
        "enum-not-a-choice", "bool-given-int"])
def test_move_that_leaves_the_bounds_is_refused(
        registry: Registry, config: Config, move: Move, fragment: str) -> None:
    with pytest.raises(MoveError) as info:
        apply_move(registry, config, move)
    assert not isinstance(info.value, StaleMoveError)
    assert fragment in str(info.value)
    assert move.target in str(info.value)


def test_float_move_given_an_int_stores_a_float(registry: Registry, config: Config) -> None:
    moved = apply_move(registry, config, Move(target="temperature", before=0.7, after=1))
    assert moved.values["temperature"] == 1.0
    assert type(moved.values["temperature"]) is float


# --------------------------------------------------------------------------- move equality

#: Values that Python's ``==`` confuses across types (True == 1 == 1.0), mixed with any
#: bool, int, float or str, so that draws often collide.
TWINS = st.sampled_from([True, False, 1, 0, 1.0, 0.0, -0.0, 2, 2.0, "1", "True", ""])
VALUES = st.one_of(TWINS, st.booleans(), st.integers(-3, 3),
                   st.floats(-3, 3, allow_nan=False), st.text(max_size=2))


def same_typed(a: Scalar, b: Scalar) -> bool:
    return type(a) is type(b) and a == b


@pytest.mark.parametrize(("a", "b"), [(True, 1), (False, 0), (1, 1.0), (0, 0.0), (True, 1.0),
                                      (1, "1")])
def test_moves_whose_values_differ_in_type_are_different_moves(a: Scalar, b: Scalar) -> None:
    for x, y in [(Move(target="x", before=a, after=2), Move(target="x", before=b, after=2)),
                 (Move(target="x", before=2, after=a), Move(target="x", before=2, after=b))]:
        assert x != y
        assert x not in [y]
        assert len({x, y}) == 2
        assert {x: "first", y: "second"}[x] == "first"


@settings(max_examples=300)
@given(st.sampled_from(["x", "y"]), VALUES, VALUES, st.sampled_from(["x", "y"]), VALUES,
       VALUES)
def test_move_equality_is_type_exact_and_hash_agrees(
        t1: str, b1: Scalar, a1: Scalar, t2: str, b2: Scalar, a2: Scalar) -> None:
    m1 = Move(target=t1, before=b1, after=a1)
    m2 = Move(target=t2, before=b2, after=a2)
    assert (type(m1.before), type(m1.after)) == (type(b1), type(a1))  # stored as given
    expected = t1 == t2 and same_typed(b1, b2) and same_typed(a1, a2)
    assert (m1 == m2) is expected
    assert (m1 != m2) is not expected
    assert (m1 in {m2}) is expected
    if expected:
        assert hash(m1) == hash(m2)
    assert m1 == Move(target=t1, before=b1, after=a1)  # reflexive on a rebuilt copy
    assert m1.inverse().inverse() == m1


@given(VALUES, VALUES)
def test_a_move_survives_its_journal_form(before: Scalar, after: Scalar) -> None:
    # Resume reads moves back from JSON: each must come back equal, and only to itself.
    move = Move(target="x", before=before, after=after)
    back = Move.model_validate_json(move.model_dump_json())
    assert back == move and hash(back) == hash(move)


def test_a_move_is_not_equal_to_its_fields() -> None:
    move = Move(target="x", before=1, after=2)
    assert move != ("x", 1, 2)
    assert move != {"target": "x", "before": 1, "after": 2}


# --------------------------------------------------------------------------- neighbourhood


def test_neighbourhood_of_the_design_defaults(registry: Registry, config: Config) -> None:
    moves = neighbourhood(registry, config)
    assert [(m.target, m.before, m.after) for m in moves] == [
        ("max_iterations", 2, 1), ("max_iterations", 2, 3),
        ("temperature", 0.7, 0.6), ("temperature", 0.7, 0.8),
        ("search_width", 4, 2), ("search_width", 4, 8),
        ("retrieval", "bm25", "tfidf"), ("retrieval", "bm25", "hybrid"),
        ("query_expansion", False, True),
    ]


@pytest.mark.parametrize(("value", "expected"), [(1, [2]), (2, [1, 3]), (8, [7])])
def test_int_neighbours_are_one_step_clamped_at_the_bounds(
        registry: Registry, value: int, expected: list[int]) -> None:
    assert afters(registry, at(registry, max_iterations=value), "max_iterations") == expected


@pytest.mark.parametrize(("value", "expected"), [(0, [3]), (4, [1, 7]), (9, [6, 10]),
                                                 (10, [7])])
def test_int_step_larger_than_one_clamps_onto_the_bound(value: int, expected: list[int]) -> None:
    # 4 and 10 are off the grid (a default there is refused; a config may hold them).
    reg = make_registry(k=int_setting(0, 10, 3, step=3))
    assert afters(reg, at(reg, k=value), "k") == expected


@pytest.mark.parametrize(("value", "expected"), [(1, [2]), (4, [2, 8]), (16, [8, 32]),
                                                 (32, [16]), (20, [10, 32])])
def test_int_log_scale_halves_and_doubles_clamped(
        registry: Registry, value: int, expected: list[int]) -> None:
    assert afters(registry, at(registry, search_width=value), "search_width") == expected


@pytest.mark.parametrize(("value", "expected"), [
    (0.01, [0.005, 0.02]), (0.001, [0.002]), (0.6, [0.3, 1.0]), (1.0, [0.5]),
])
def test_float_log_scale_halves_and_doubles_clamped(
        value: float, expected: list[float]) -> None:
    reg = make_registry(lr=float_setting(0.001, 1.0, 0.01, scale="log"))
    assert afters(reg, at(reg, lr=value), "lr") == expected


@pytest.mark.parametrize(("value", "expected"), [
    (0.7, [0.6, 0.8]), (0.0, [0.1]), (1.5, [1.4]), (1.45, [1.35, 1.5]), (0.3, [0.2, 0.4]),
])
def test_float_step_neighbours_land_on_clean_values(
        registry: Registry, value: float, expected: list[float]) -> None:
    assert afters(registry, at(registry, temperature=value), "temperature") == expected


def test_walking_a_float_by_step_visits_clean_decimals(registry: Registry) -> None:
    config = at(registry, temperature=0.0)
    visited = [config.values["temperature"]]
    while True:
        ups = [m for m in neighbourhood(registry, config)
               if m.target == "temperature" and m.after > m.before]  # type: ignore[operator]
        if not ups:
            break
        config = apply_move(registry, config, ups[0])
        visited.append(config.values["temperature"])
    assert visited == [i / 10 for i in range(16)]
    assert "0.7999999999999999" not in repr(visited)
    # and back down again, still on clean values
    downs = []
    while True:
        down = [m for m in neighbourhood(registry, config)
                if m.target == "temperature" and m.after < m.before]  # type: ignore[operator]
        if not down:
            break
        config = apply_move(registry, config, down[0])
        downs.append(config.values["temperature"])
    assert downs == [i / 10 for i in range(14, -1, -1)]


def test_float_step_defaults_to_a_tenth_of_the_range() -> None:
    reg = make_registry(x=float_setting(0.0, 2.0, 1.0))
    assert afters(reg, reg.defaults(), "x") == [0.8, 1.2]


def test_float_step_on_a_large_value_is_cleaned_relative_to_the_value() -> None:
    reg = make_registry(x=float_setting(0.0, 2000.0, 1000.0, step=1000.0))
    assert afters(reg, at(reg, x=1000.1), "x") == [0.1, 2000.0]


def test_tiny_float_settings_still_move() -> None:
    log = make_registry(eps=float_setting(1e-12, 1e-6, 1e-12, scale="log"))
    assert afters(log, log.defaults(), "eps") == [2e-12]
    assert afters(log, at(log, eps=3e-11), "eps") == [1.5e-11, 6e-11]
    linear = make_registry(eps=float_setting(0.0, 1e-9, 5e-10, step=1e-11))
    assert afters(linear, linear.defaults(), "eps") == [4.9e-10, 5.1e-10]


def test_bool_flips_and_enum_switches_to_each_other_choice(
        registry: Registry, config: Config) -> None:
    assert afters(registry, config, "query_expansion") == [True]
    assert afters(registry, at(registry, query_expansion=True), "query_expansion") == [False]
    assert afters(registry, at(registry, retrieval="tfidf"), "retrieval") == ["bm25", "hybrid"]


def test_a_setting_that_cannot_move_has_no_neighbours() -> None:
    reg = make_registry(
        fixed_int=int_setting(3, 3, 3),
        fixed_float=float_setting(0.5, 0.5, 0.5, step=0.1),
        flag=BoolSetting(type="bool", default=True),
    )
    assert [(m.target, m.after) for m in neighbourhood(reg, reg.defaults())] == [
        ("flag", False)]


def test_every_neighbour_of_the_defaults_applies_and_inverts(
        registry: Registry, config: Config) -> None:
    for move in neighbourhood(registry, config):
        moved = apply_move(registry, config, move)
        assert apply_move(registry, moved, move.inverse()) == config


# --------------------------------------------------------------------------- properties

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)

# Decimal-looking numbers people write (0.7, 1e-5, 1500) and any finite float.
CLEAN_FLOATS = st.builds(lambda m, e: float(f"{m}e{e}"),
                         st.integers(-(10**6), 10**6), st.integers(-15, 6))
ANY_FLOATS = st.floats(allow_nan=False, allow_infinity=False)
FLOATS = st.one_of(CLEAN_FLOATS, CLEAN_FLOATS, ANY_FLOATS)
POSITIVE_FLOATS = st.one_of(CLEAN_FLOATS.filter(lambda x: x > 0),
                            st.floats(min_value=5e-324, allow_infinity=False))


@st.composite
def int_settings(draw: st.DrawFn) -> IntSetting:
    scale = draw(st.sampled_from(["linear", "log"]))
    lo = draw(st.integers(1 if scale == "log" else -(10**6), 10**6))
    # Up to the largest bound a registry accepts, as the floats reach float max.
    hi = lo + draw(st.one_of(st.integers(0, 20), st.integers(0, 10**9),
                             st.just(INT_BOUND - lo)))
    step = draw(st.one_of(st.integers(1, 5), st.integers(1, 10**9)))
    if scale == "log":  # halves and doubles: no step grid
        default = draw(st.integers(lo, hi))
    else:  # a default off the grid min + n * step is refused
        default = lo + step * draw(st.integers(0, (hi - lo) // step))
    return int_setting(lo, hi, default, step=step, scale=scale)


@st.composite
def float_settings(draw: st.DrawFn) -> FloatSetting:
    scale = draw(st.sampled_from(["linear", "log"]))
    a, b = draw(POSITIVE_FLOATS if scale == "log" else FLOATS), draw(FLOATS)
    if scale == "log" and b <= 0:
        b = a
    lo, hi = min(a, b), max(a, b)
    if not math.isfinite(hi - lo):  # a registry refuses such a range: the widest it takes
        lo = hi - sys.float_info.max
    step = draw(st.one_of(st.none(), POSITIVE_FLOATS))
    if step is None or scale == "log":
        default = draw(st.one_of(st.just(lo), st.just(hi), st.floats(lo, hi)))
    else:  # on the grid min + n * step (a default off it is refused)
        default = grid_point(draw, lo, hi, step)
    return float_setting(lo, hi, default, step=step, scale=scale)


def grid_point(draw: st.DrawFn, lo: float, hi: float, step: float) -> float:
    """A point ``lo + n * step`` of [lo, hi] (``lo`` itself on a grid too fine to count)."""
    steps = (hi - lo) / step
    if not math.isfinite(steps) or steps > 2 ** 52:
        return lo
    return min(lo + draw(st.integers(0, math.floor(steps))) * step, hi)


def _choice_key(value: Scalar) -> tuple[str, Any]:
    # Matches ``same_value``: 1 and 1.0 are one choice, True and 1 are two.
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    return ("str", value)


@st.composite
def enum_settings(draw: st.DrawFn) -> EnumSetting:
    choice = st.one_of(st.booleans(), st.integers(-5, 5),
                       st.floats(-2, 2, allow_nan=False), st.text(max_size=4))
    choices = draw(st.lists(choice, min_size=2, max_size=5, unique_by=_choice_key))
    return EnumSetting(type="enum", choices=choices, default=draw(st.sampled_from(choices)))


@st.composite
def bool_settings(draw: st.DrawFn) -> BoolSetting:
    return BoolSetting(type="bool", default=draw(st.booleans()))


SETTINGS = st.one_of(int_settings(), float_settings(), enum_settings(), bool_settings())


@st.composite
def registries(draw: st.DrawFn) -> Registry:
    names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    return Registry(name="random", settings={n: draw(SETTINGS) for n in names})


def values_in(setting: Any) -> st.SearchStrategy[Scalar]:
    if isinstance(setting, IntSetting):
        return st.one_of(st.sampled_from([setting.min, setting.max, setting.default]),
                         st.integers(setting.min, setting.max))
    if isinstance(setting, FloatSetting):
        return st.one_of(st.sampled_from([setting.min, setting.max, setting.default]),
                         st.floats(setting.min, setting.max))
    if isinstance(setting, BoolSetting):
        return st.booleans()
    assert isinstance(setting, EnumSetting)
    return st.sampled_from(setting.choices)


@st.composite
def registry_and_config(draw: st.DrawFn) -> tuple[Registry, Config]:
    registry = draw(registries())
    values = {name: draw(values_in(s)) for name, s in registry.settings.items()}
    return registry, registry.validate_config(values)


PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)


@PROPERTY_SETTINGS
@given(registry_and_config())
def test_every_neighbour_stays_in_bounds_and_changes_exactly_its_target(
        case: tuple[Registry, Config]) -> None:
    registry, config = case
    for move in neighbourhood(registry, config):
        assert same_value(move.before, config.values[move.target])
        moved = apply_move(registry, config, move)
        revalidated = registry.validate_config(moved.values)
        assert revalidated.fingerprint == moved.fingerprint
        changed = [k for k in config.values
                   if not same_value(config.values[k], moved.values[k])]
        assert changed == [move.target]
        assert same_value(moved.values[move.target], move.after)


@PROPERTY_SETTINGS
@given(registry_and_config())
def test_every_neighbour_is_undone_exactly_by_its_inverse(case: tuple[Registry, Config]) -> None:
    registry, config = case
    for move in neighbourhood(registry, config):
        back = apply_move(registry, apply_move(registry, config, move), move.inverse())
        assert back == config
        assert back.fingerprint == config.fingerprint
        assert all(same_value(back.values[k], v) for k, v in config.values.items())


@PROPERTY_SETTINGS
@given(registry_and_config())
def test_applying_a_neighbour_twice_is_stale(case: tuple[Registry, Config]) -> None:
    registry, config = case
    for move in neighbourhood(registry, config):
        moved = apply_move(registry, config, move)
        with pytest.raises(StaleMoveError):
            apply_move(registry, moved, move)


@PROPERTY_SETTINGS
@given(registry_and_config())
def test_neighbourhood_follows_the_contract_for_each_type(case: tuple[Registry, Config]) -> None:
    registry, config = case
    moves = neighbourhood(registry, config)
    assert [m.target for m in moves] == sorted(
        (m.target for m in moves), key=list(registry.settings).index)
    for name, setting in registry.settings.items():
        current = config.values[name]
        got = [m.after for m in moves if m.target == name]
        if isinstance(setting, BoolSetting):
            assert got == [not current]
        elif isinstance(setting, EnumSetting):
            assert got == [c for c in setting.choices if not same_value(c, current)]
        elif isinstance(setting, IntSetting):
            assert isinstance(current, int)
            raw = ([current // 2, current * 2] if setting.scale == "log"
                   else [current - setting.step, current + setting.step])
            clamped = [min(max(x, setting.min), setting.max) for x in raw]
            assert got == list(dict.fromkeys(x for x in clamped if x != current))
        else:
            assert isinstance(setting, FloatSetting) and isinstance(current, float)
            assert len(got) <= 2
            assert len(set(got)) == len(got)
            below = [x for x in got if x < current]  # type: ignore[operator]
            above = [x for x in got if x > current]  # type: ignore[operator]
            assert len(below) <= 1 and len(above) <= 1
            # A move exists towards each bound not yet reached, unless the step is
            # below what a float can resolve at this value (then nothing moves).
            resolvable = (setting.scale == "log"
                          or setting.effective_step > 1e-10 * abs(current))
            if resolvable:
                assert (len(below) == 1) == (current > setting.min)
                assert (len(above) == 1) == (current < setting.max)


@PROPERTY_SETTINGS
@given(registry_and_config())
def test_every_candidate_move_jumps_included_changes_one_setting_and_inverts_exactly(
        case: tuple[Registry, Config]) -> None:
    # Issue 14: a move may jump to any legal value of one setting; it stays one cause
    # with an exact inverse, and says which kind it is.
    registry, config = case
    steps = {(m.target, repr(m.after)) for m in neighbourhood(registry, config)}
    for move in candidate_moves(registry, config):
        moved = apply_move(registry, config, move)
        changed = [k for k in config.values if not same_value(config.values[k], moved.values[k])]
        assert changed == [move.target]
        assert registry.validate_config(moved.values).fingerprint == moved.fingerprint
        back = apply_move(registry, moved, move.inverse())
        assert back == config and back.fingerprint == config.fingerprint
        kind = move_kind(registry, move)
        assert kind == ("step" if (move.target, repr(move.after)) in steps else "jump")


@pytest.mark.parametrize(("lo", "hi"), [(1.0, sys.float_info.max),
                                         (5e-324, sys.float_info.max), (1e-6, 1.0)])
def test_a_log_float_jumps_across_every_decade_of_its_range(lo: float, hi: float) -> None:
    # A range up to the largest float overflowed max / min's powers (found by the property
    # above); rounded at max's magnitude, its inner points were all zero, clamped to min.
    reg = make_registry(x=float_setting(lo, hi, lo, scale="log"))
    jumps = [m.after for m in candidate_moves(reg, reg.defaults())
             if m.target == "x" and move_kind(reg, m) == "jump"]
    assert len(jumps) == 5 and jumps[-1] == hi and all(lo < x <= hi for x in jumps)
    # Evenly spread in logs: each point about the same factor above the last.
    logs = [math.log(x) for x in jumps]
    gaps = [b - a for a, b in itertools.pairwise(logs)]
    assert max(gaps) - min(gaps) < 1e-6 * max(gaps)


@pytest.mark.parametrize(("lo", "hi"), [(-3, 2 ** 53), (-(2 ** 53), 2 ** 53), (0, 2 ** 53 - 1)])
def test_an_int_range_near_2_53_jumps_within_its_bounds(lo: int, hi: int) -> None:
    # The grid's points were float quotients: near 2**53 one rounded to 2**53 + 1, a move
    # past the bound (found by the moves property above, in CI).
    reg = make_registry(x=int_setting(lo, hi, 0))
    jumps = [m.after for m in candidate_moves(reg, reg.defaults())
             if m.target == "x" and move_kind(reg, m) == "jump"]
    assert jumps and jumps[-1] == hi and all(lo <= x <= hi for x in jumps)
    for m in candidate_moves(reg, reg.defaults()):
        apply_move(reg, reg.defaults(), m)


def test_a_log_float_keeps_a_proposed_value_at_its_own_magnitude() -> None:
    # Snapped at the bound's magnitude, 3.7e10 in [1, max float] became min.
    setting = float_setting(1.0, sys.float_info.max, 1.0, scale="log")
    assert setting.snap(3.7e10) == 3.7e10
    assert setting.snap(math.inf) == sys.float_info.max and setting.snap(0.5) == 1.0
    assert float_setting(1e-6, 1.0, 1e-3, scale="log").snap(1 / 3 * 1e-4) == 3.33333333333e-05


# --------------------------------------------------------------------------- expansion


@pytest.mark.parametrize(("target", "before", "after", "farthest"), [
    ("max_iterations", 2, 3, 8),         # a step up: to the bound
    ("max_iterations", 2, 1, None),      # a step down onto the bound: nothing farther
    ("search_width", 4, 8, 32),          # log scale: the bound
    ("temperature", 0.7, 0.3, 0.0),      # a float jump down: its bound
    ("temperature", 0.7, 1.5, None),     # already at the bound
    ("retrieval", "bm25", "tfidf", None),  # an enum has no way farther
    ("query_expansion", False, True, None),
])
def test_a_moves_expansion_goes_as_far_as_its_setting_goes_the_same_way(
        registry: Registry, target: str, before: Scalar, after: Scalar,
        farthest: Scalar | None) -> None:
    config = at(registry, **{target: before})
    further = expansion(registry, Move(target=target, before=before, after=after))
    if farthest is None:
        assert further is None
        return
    assert further == Move(target=target, before=before, after=farthest)
    # A move like any other: legal from the same config, with an exact inverse.
    moved = apply_move(registry, config, further)
    assert apply_move(registry, moved, further.inverse()) == config
    assert move_kind(registry, further) == "jump"
