"""The kinds of setting a registry declares (int, float, bool, enum), each with its
bounds, its check of a value, and the neighbours and jumps a proposer moves to.

:mod:`forge.config.registry` re-exports every public name here.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    model_validator,
)

from forge._util.bounds import MAX_CHOICES
from forge._util.show import short

__all__ = [
    "INT_BOUND",
    "JUMP_POINTS",
    "BoolSetting",
    "EnumSetting",
    "FloatSetting",
    "IntSetting",
    "Scalar",
    "Setting",
    "same_value",
]

Scalar = bool | int | float | str
#: Points of the coarse grid a numeric setting's jumps are drawn from (ends included).
JUMP_POINTS = 6
#: The largest bound an int setting may have: every integer up to it is a float too.
INT_BOUND = 2 ** 53
_FLOAT_DIGITS = 12  # significant digits kept: 0.7 + 0.1 lands on 0.8, not 0.7999999999999999


def _round_float(x: float, magnitude: float) -> float:
    """``x`` without the noise of float arithmetic on operands as large as ``magnitude``.

    Relative to the operands, not a fixed number of decimals: a fixed count rounded
    ``2e-12`` to ``0.0`` and made small settings immovable.
    """
    if magnitude == 0 or not math.isfinite(magnitude):
        return x
    return round(x, _FLOAT_DIGITS - 1 - math.floor(math.log10(magnitude)))


def same_value(a: Any, b: Any) -> bool:
    """Equality that keeps ``True`` and ``1`` apart (Python's ``==`` does not)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


class _SettingBase(BaseModel):
    # allow_inf_nan=False: a bound, step or default of .inf or .nan is never meant.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    description: str = ""

    def check(self, value: Any) -> Scalar:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def neighbours(self, value: Any) -> list[Scalar]:  # pragma: no cover
        raise NotImplementedError

    def snap(self, value: Any) -> Scalar:
        """The legal value nearest ``value`` (on the step grid where there is one)."""
        return self.check(value)

    def jumps(self, value: Any, points: int = JUMP_POINTS) -> list[Scalar]:
        """Values of a coarse grid over the whole range that are neither ``value`` nor one
        of its neighbours (those are steps), in increasing order. Bools and enums have
        none: every other value of theirs is a step already."""
        return []

    def bounds_text(self) -> str:  # pragma: no cover
        raise NotImplementedError


class IntSetting(_SettingBase):
    type: Literal["int"]
    # Within ±2**53, where floats count every integer: past it a proposer's model
    # (optuna's, in floats) raised OverflowError on every step, and a snapped value
    # could miss the grid. As bounds of the field, editors see them in the schema too.
    min: int = Field(ge=-INT_BOUND, le=INT_BOUND)
    max: int = Field(ge=-INT_BOUND, le=INT_BOUND)
    step: int = Field(default=1, gt=0)
    default: StrictInt  # a YAML `true` must not pass as 1
    scale: Literal["linear", "log"] = "linear"

    @model_validator(mode="after")
    def _bounds(self) -> IntSetting:
        _check_bounds(self.min, self.max, self.default, self.scale)
        if self.scale == "linear" and (self.default - self.min) % self.step:
            below = self.min + (self.default - self.min) // self.step * self.step
            _off_grid(self.default, self.min, self.step, below, below + self.step, self.max)
        return self

    def check(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer in [{self.min}, {self.max}], got "
                             f"{_shown(value)}")
        if not self.min <= value <= self.max:
            raise ValueError(f"{_shown(value)} is outside [{self.min}, {self.max}]")
        return value

    def neighbours(self, value: Any) -> list[Scalar]:
        v = self.check(value)
        raw = [v // 2, v * 2] if self.scale == "log" else [v - self.step, v + self.step]
        return _distinct_clamped(raw, v, self.min, self.max)

    def snap(self, value: Any) -> int:
        x = min(max(float(value), self.min), self.max)
        if self.scale == "log":
            return int(min(max(round(x), self.min), self.max))
        return int(min(self.min + round((x - self.min) / self.step) * self.step, self.max))

    def jumps(self, value: Any, points: int = JUMP_POINTS) -> list[Scalar]:
        v = self.check(value)
        if self.scale == "log":  # powers of two from min, and max itself
            grid = [self.min * 2 ** i for i in range(64) if self.min * 2 ** i <= self.max]
            grid.append(self.max)
        else:
            count = (self.max - self.min) // self.step + 1
            # In exact fractions: near 2**53 a float quotient rounds past the range's end.
            picks = range(count) if count <= 2 * points else (
                round(Fraction(i * (count - 1), points - 1)) for i in range(points))
            grid = [self.min + i * self.step for i in picks]
        return _jumps_from(grid, v, self.neighbours(v))

    def bounds_text(self) -> str:
        extra = ", log" if self.scale == "log" else f", step {self.step}"
        return f"[{self.min}, {self.max}]{extra}"


class FloatSetting(_SettingBase):
    type: Literal["float"]
    min: float
    max: float
    step: float | None = Field(default=None, gt=0)
    default: float
    scale: Literal["linear", "log"] = "linear"

    @model_validator(mode="after")
    def _bounds(self) -> FloatSetting:
        for name in ("min", "max", "default"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be a finite number")
        _check_bounds(self.min, self.max, self.default, self.scale)
        if not math.isfinite(self.max - self.min):
            # Its steps and its grid are fractions of the range, and a proposer's model
            # (optuna's) samples within it: each refused it on every step.
            raise ValueError(f"max - min must be a finite number, got {self.max:g} - "
                             f"{self.min:g}")
        if self.scale == "linear" and self.step is not None:
            self._check_grid(self.step)
        return self

    def _check_grid(self, step: float) -> None:
        """Refuse a default off the grid ``min + n * step`` that moves and snapped
        values stand on, to within float rounding: 12 significant digits at the
        bounds' magnitude, as :meth:`snap` rounds (a grid finer than that has every
        float on it)."""
        q = (self.default - self.min) / step
        if not math.isfinite(q) or abs(q) > 2 ** 52:
            return
        magnitude = max(abs(self.min), abs(self.max))
        below, above = (_round_float(self.min + n * step, magnitude)
                        for n in (math.floor(q), math.floor(q) + 1))
        tolerance = 1e-9 * step + 10.0 ** (1 - _FLOAT_DIGITS) * magnitude
        if min(self.default - below, above - self.default) > tolerance:
            _off_grid(self.default, self.min, step, below, above, self.max)

    @property
    def effective_step(self) -> float:
        """The declared step, or a tenth of the range when none is declared."""
        return self.step if self.step is not None else (self.max - self.min) / 10 or 1.0

    def check(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number in [{self.min}, {self.max}], got "
                             f"{_shown(value)}")
        try:
            v = float(value)
        except OverflowError:  # an int too large for a float is outside any float bound
            v = math.inf
        if not math.isfinite(v) or not self.min <= v <= self.max:
            raise ValueError(f"{_shown(value)} is outside [{self.min}, {self.max}]")
        return v

    def neighbours(self, value: Any) -> list[Scalar]:
        v = self.check(value)
        s = self.effective_step
        if self.scale == "log":  # halving and doubling are exact in binary floating point
            raw = [v / 2, v * 2]
        else:
            raw = [_round_float(x, max(abs(v), s)) for x in (v - s, v + s)]
        return _distinct_clamped(raw, v, self.min, self.max)

    def snap(self, value: Any) -> float:
        x = min(max(float(value), self.min), self.max)
        if self.scale == "log":  # at its own magnitude, as the log grid's points; a bound
            return x if x in (self.min, self.max) else min(max(_round_float(x, x), self.min),
                                                           self.max)
        if self.step is None:
            return _round_float(x, max(abs(self.min), abs(self.max)))
        snapped = self.min + round((x - self.min) / self.step) * self.step
        return min(_round_float(snapped, max(abs(self.min), abs(self.max))), self.max)

    def jumps(self, value: Any, points: int = JUMP_POINTS) -> list[Scalar]:
        v = self.check(value)
        if self.scale == "log":
            # In logs, and max itself last: max / min or a power of the ratio overflows
            # a range up to the largest float, though every point of the grid is inside.
            # Each point rounded at its own magnitude: at max's, those of a range of
            # many decades rounded to zero.
            lo, d = math.log(self.min), (math.log(self.max) - math.log(self.min)) / (points - 1)
            grid = [_round_float(x, x) for x in (math.exp(lo + i * d) for i in range(points - 1))]
            grid.append(self.max)
        else:
            span = self.max - self.min
            # A step tiny against the range (even a denormal one) is a dense grid: six
            # points, as with no step, never an overflow.
            steps = span / self.step if self.step is not None else math.inf
            count = round(steps) + 1 if steps <= 10 ** 12 else (
                points if self.step is None else 10 ** 12)
            picks = range(count) if count <= 2 * points else (
                round(i * (count - 1) / (points - 1)) for i in range(points))
            width = span / (count - 1) if count > 1 else 0.0
            grid = [_round_float(self.min + i * width, max(abs(self.min), abs(self.max)))
                    for i in picks]
        # Rounding to clean decimals can step past a bound (a range narrower than the
        # rounding's resolution): every point is kept inside, the ends exactly.
        grid = [min(max(x, self.min), self.max) for x in grid]
        grid[-1] = self.max
        grid[0] = self.min
        return _jumps_from(grid, v, self.neighbours(v))

    def bounds_text(self) -> str:
        extra = ", log" if self.scale == "log" else f", step {self.effective_step:g}"
        return f"[{self.min:g}, {self.max:g}]{extra}"


class BoolSetting(_SettingBase):
    type: Literal["bool"]
    default: StrictBool

    def check(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {_shown(value)}")
        return value

    def neighbours(self, value: Any) -> list[Scalar]:
        return [not self.check(value)]

    def bounds_text(self) -> str:
        return "true | false"


class EnumSetting(_SettingBase):
    type: Literal["enum"]
    # Two or more, as the schema tells editors; one is refused below with the reason.
    choices: list[bool | int | float | str] = Field(
        min_length=1, max_length=MAX_CHOICES, json_schema_extra={"minItems": 2})
    default: bool | int | float | str

    @model_validator(mode="after")
    def _choices(self) -> EnumSetting:
        # A dict by value key, not a scan of the choices seen so far: the scan made
        # validating 200,000 choices take hours (it was quadratic).
        seen: dict[tuple[str, Any], Any] = {}
        for c in self.choices:
            key = _value_key(c)
            if key in seen:
                raise ValueError(f"choice {_shown(c)} is listed twice")
            seen[key] = c
        if _value_key(self.default) not in seen:
            raise ValueError(f"default {_shown(self.default)} is not one of the choices "
                             f"{_choices_text(self.choices)}")
        if len(self.choices) == 1:
            # Silently, a search would have nothing to try here and say nothing of it.
            raise ValueError(f"one choice, {_shown(self.choices[0])}: expected two or more "
                             "(a setting with one value gives the search nothing to try)")
        return self

    @cached_property
    def _index(self) -> dict[tuple[str, Any], Scalar]:
        return {_value_key(c): c for c in self.choices}

    def check(self, value: Any) -> Scalar:
        try:
            found = self._index.get(_value_key(value))
        except TypeError:  # unhashable: a list or a mapping is no choice
            found = None
        if found is None:
            raise ValueError(f"expected one of {_choices_text(self.choices)}, got "
                             f"{_shown(value)}")
        return found

    def neighbours(self, value: Any) -> list[Scalar]:
        v = self.check(value)
        return [c for c in self.choices if not same_value(c, v)]

    def bounds_text(self) -> str:
        return " | ".join(str(c) for c in self.choices)


def _value_key(value: Any) -> tuple[str, Any]:
    """A key under which two values are the same exactly when :func:`same_value` says
    so: ``True`` apart from ``1``, ``1`` with ``1.0``."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    return (type(value).__name__, value)


def _shown(value: Any, limit: int = 60) -> str:
    """A value in a message as Python writes it, bounded (see :mod:`forge._util.show`)."""
    return short(value, limit, style="python")


def _choices_text(choices: list[Any], shown: int = 10) -> str:
    head = ", ".join(_shown(c, 40) for c in choices[:shown])
    return f"[{head}]" if len(choices) <= shown else f"[{head}, ... ({len(choices)} in all)]"


Setting = Annotated[IntSetting | FloatSetting | BoolSetting | EnumSetting,
                    Field(discriminator="type")]


def _check_bounds(lo: float, hi: float, default: float, scale: str) -> None:
    if lo > hi:
        raise ValueError(f"min ({lo}) is greater than max ({hi})")
    if not lo <= default <= hi:
        raise ValueError(f"default {default} is outside [{lo}, {hi}]")
    if scale == "log" and lo <= 0:
        raise ValueError(f"log scale needs min > 0, got min {lo}")


def _off_grid(default: float, lo: float, step: float, below: float, above: float,
              hi: float) -> None:
    """Refuse a default between two points of its step grid (``below``, ``above``)."""
    nearest = " or ".join(f"{x:g}" for x in (below, above) if x <= hi)
    raise ValueError(f"default {default:g} is off the step grid (min {lo:g} plus a whole "
                     f"number of steps of {step:g}): expected {nearest} (or a step that "
                     f"reaches {default:g})")


def _distinct_clamped(raw: list[Any], current: Any, lo: Any, hi: Any) -> list[Scalar]:
    out: list[Scalar] = []
    for x in raw:
        x = min(max(x, lo), hi)
        if x != current and x not in out:
            out.append(x)
    return out


def _jumps_from(grid: list[Any], current: Any, steps: list[Scalar]) -> list[Scalar]:
    out: list[Scalar] = []
    for x in sorted(grid):
        if x != current and x not in steps and x not in out:
            out.append(x)
    return out
