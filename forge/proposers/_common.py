"""Helpers the proposers share: comparing moves and describing them in a reason."""

from __future__ import annotations

from collections.abc import Iterable

from forge.moves import Move
from forge.registry import BoolSetting, EnumSetting, Registry, same_value

__all__ = ["describe_move", "find_move", "same_move"]


def same_move(a: Move, b: Move) -> bool:
    """The same target, ``before`` and ``after``; ``True`` and ``1`` stay apart.

    ``Move.__eq__`` compares with Python's ``==``, which takes ``True`` for ``1``:
    an enum with both would make two different moves look like one.
    """
    return (a.target == b.target and same_value(a.before, b.before)
            and same_value(a.after, b.after))


def find_move(moves: Iterable[Move], move: Move) -> Move | None:
    """The element of ``moves`` that is :func:`same_move` as ``move``, or None."""
    for candidate in moves:
        if same_move(candidate, move):
            return candidate
    return None


def describe_move(registry: Registry, move: Move) -> str:
    """``"max_iterations up (2 -> 3)"`` for numbers, ``"retrieval -> hybrid"`` otherwise."""
    setting = registry.settings.get(move.target)
    if setting is None or isinstance(setting, (BoolSetting, EnumSetting)):
        return f"{move.target} -> {move.after}"
    try:
        direction = "up" if float(move.after) > float(move.before) else "down"
    except (TypeError, ValueError):  # a malformed move still gets a readable reason
        return f"{move.target} -> {move.after}"
    return f"{move.target} {direction} ({move.before} -> {move.after})"
