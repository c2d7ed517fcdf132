"""Helpers the proposers share: describing a move in a proposal's reason."""

from __future__ import annotations

from forge.config.moves import Move
from forge.config.registry import BoolSetting, EnumSetting, Registry

__all__ = ["describe_move"]


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
