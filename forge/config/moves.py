"""Moves: one setting, ``before -> after``, each with an exact inverse.

One move per candidate, so every score change has one cause. A move carries the
value it expects to replace; applying it to a config holding anything else is a
:class:`~forge.errors.StaleMoveError`, which catches a proposal made for an
incumbent that has since changed.

Two moves are equal when their targets are and each value is of the same type and
equal: ``True`` is not ``1`` and ``1`` is not ``1.0``. pydantic's ``==`` compares
values with Python's, which takes ``True`` for ``1``, so in an enum holding both, two
different moves were one (and sets, ``in`` and dict keys merged them). The moves
forge builds take their values from validated configs and the setting's own
neighbours, whose types are canonical, so equal moves are always spelled alike.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from forge.config.registry import Config, FloatSetting, IntSetting, Registry, Scalar, same_value
from forge.errors import MoveError, StaleMoveError

__all__ = ["Move", "MoveKind", "apply_move", "candidate_moves", "expansion", "move_kind",
           "moved_value", "neighbourhood", "setting_moves"]

MoveKind = Literal["step", "jump"]


class Move(BaseModel):
    """Change ``target`` from ``before`` to ``after``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    target: str
    before: Scalar
    after: Scalar

    def _key(self) -> tuple[Any, ...]:
        return (self.target, type(self.before), self.before, type(self.after), self.after)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Move):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def inverse(self) -> Move:
        return Move(target=self.target, before=self.after, after=self.before)

    def __str__(self) -> str:
        return f"{self.target}: {self.before!r} -> {self.after!r}"


def apply_move(registry: Registry, config: Config, move: Move) -> Config:
    """The config with ``move`` applied; refuses stale, no-op, unknown or out-of-bounds moves."""
    values = dict(config.values)
    values[move.target] = moved_value(registry, config, move)
    return Config(values=values, registry_digest=config.registry_digest)


def moved_value(registry: Registry, config: Config, move: Move) -> Scalar:
    """The value ``move`` gives its setting, checked and refused as :func:`apply_move`
    does, without building the moved config: a config is as large as the registry, and
    a search asks this of every candidate move of every step."""
    setting = registry.settings.get(move.target)
    if setting is None:
        raise MoveError(f"move {move}: unknown setting {move.target!r}")
    current = config.values.get(move.target)
    if not same_value(current, move.before):
        raise StaleMoveError(f"move {move} is stale: {move.target} is {current!r}")
    try:
        after = setting.check(move.after)
    except ValueError as exc:
        raise MoveError(f"move {move}: {exc}") from None
    if same_value(after, current):
        raise MoveError(f"move {move} changes nothing")
    return after


def neighbourhood(registry: Registry, config: Config) -> list[Move]:
    """Every one-setting move from ``config``, in registry order.

    int and float: ``±step`` (log scale ``×2`` / ``÷2``), clamped to bounds; bool:
    flip; enum: each other choice. Moves that clamp back onto the current value are
    left out, so every move changes exactly one setting.
    """
    moves: list[Move] = []
    for name, setting in registry.settings.items():
        current = config.values[name]
        for value in setting.neighbours(current):
            moves.append(Move(target=name, before=current, after=value))
    return moves


def move_kind(registry: Registry, move: Move) -> MoveKind:
    """``step`` when ``after`` is a neighbour of ``before`` (``±step``, ``×2``/``÷2``, a
    bool's flip, an enum's other choice), otherwise ``jump``."""
    setting = registry.settings.get(move.target)
    if setting is None:
        return "jump"
    try:
        neighbours = setting.neighbours(move.before)
    except ValueError:
        return "jump"
    return "step" if any(same_value(v, move.after) for v in neighbours) else "jump"


def candidate_moves(registry: Registry, config: Config, *, jumps: bool = True) -> list[Move]:
    """The one-setting moves a search considers from ``config``: every step of
    :func:`neighbourhood`, then (with ``jumps``) each numeric setting's jumps to the
    other points of its coarse grid (:meth:`~forge.config.registry.IntSetting.jumps`). Any
    other legal value of one setting is a legal move too; these are the ones offered
    without a proposer's say-so."""
    moves = neighbourhood(registry, config)
    if jumps:
        for name, setting in registry.settings.items():
            current = config.values[name]
            moves += [Move(target=name, before=current, after=v) for v in setting.jumps(current)]
    return moves


def setting_moves(registry: Registry, config: Config, name: str, *,
                  jumps: bool = True) -> list[Move]:
    """The moves of :func:`candidate_moves` that change ``name``, in its order (steps,
    then jumps), without listing every other setting's."""
    setting = registry.settings[name]
    current = config.values[name]
    values = [*setting.neighbours(current), *(setting.jumps(current) if jumps else [])]
    return [Move(target=name, before=current, after=v) for v in values]


def expansion(registry: Registry, move: Move) -> Move | None:
    """The same setting moved as far as its candidate moves go the way ``move`` went:
    ``before`` to the farthest of its steps and grid jumps beyond ``after`` (the bound,
    where the grid holds it). None for bools and enums (no way to go farther), or when
    ``after`` is already the farthest."""
    setting = registry.settings.get(move.target)
    if not isinstance(setting, IntSetting | FloatSetting):
        return None
    try:
        values = [*setting.neighbours(move.before), *setting.jumps(move.before)]
    except ValueError:
        return None
    up = float(move.after) > float(move.before)
    beyond = [v for v in values
              if (float(v) > float(move.after) if up else float(v) < float(move.after))]
    if not beyond:
        return None
    far = max(beyond, key=float) if up else min(beyond, key=float)
    return Move(target=move.target, before=move.before, after=far)
