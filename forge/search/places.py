"""Where a proposed move stands among those a search has tried: its place and its key.

A move is tried once against an incumbent in each precision round. A value off the
setting's candidate moves (a proposer's 30,810 flips) is tried in the *place* of the
candidate move nearest it (32,768), on the setting's scale, when it lies within half a
step of it: near copies of one value are one question, and a proposer that keeps
suggesting new ones must not keep the candidate moves they stand for untried for ever.
Half a step is a factor of sqrt(2) on a log scale (whose steps are x2), half the grid's
spacing for a float without a step, and half the step otherwise, where every legal
value is a step-grid point: those settings' values are never merged, so a narrow peak
between grid points (noise 0.7 on a grid of 0.6 and 0.8) stays reachable.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from forge.config.keys import spelled_move
from forge.config.moves import Move, moved_value, setting_moves
from forge.config.registry import Config, FloatSetting, IntSetting, Registry, same_value
from forge.errors import MoveError

__all__ = ["Places", "TriedKey"]

#: (the incumbent's fingerprint, with its precision round if any; the setting moved;
#: its new value's canonical JSON). Against one incumbent, two moves share a key
#: exactly when their candidates share a fingerprint (:mod:`forge.config.keys`), and
#: the key costs no fingerprint of a candidate: the search keys every candidate move
#: of every step.
TriedKey = tuple[str, str, str]


class Places:
    """The places and tried-keys of moves against an incumbent."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def key(self, incumbent: Config, move: Move, round_: int) -> TriedKey:
        """The tried-key of a move that is its own place (a candidate move)."""
        inc = incumbent.fingerprint
        after = moved_value(self.registry, incumbent, move)  # refuses as apply_move does
        return (inc if not round_ else f"{inc}@round{round_}", *spelled_move(move.target, after))

    def tried_key(self, incumbent: Config, move: Move, round_: int) -> TriedKey:
        """The tried-key of ``move``'s place."""
        return self.key(incumbent, self.place(incumbent, move), round_)

    def was_tried(self, incumbent: Config, move: Move, tried: set[TriedKey],
                  round_: int) -> bool:
        """Whether ``move``'s place was tried against the incumbent in this round (False
        for an illegal move: the step journals it as such)."""
        try:
            return self.tried_key(incumbent, move, round_) in tried
        except MoveError:  # an illegal proposal: refused, with its reason, by the step
            return False

    def place(self, incumbent: Config, move: Move) -> Move:
        """The candidate move of the incumbent whose place ``move`` takes: itself when it
        is one (a step or a grid jump) or lies more than half a step from every one, else
        the nearest within half a step."""
        setting = self.registry.settings.get(move.target)
        if not isinstance(
                setting, IntSetting | FloatSetting) or isinstance(
                move.after, bool) or not isinstance(move.after, int | float) or not (
                setting.min <= move.after <= setting.max):
            return move  # not numeric, or illegal (NaN, out of bounds): apply_move says why
        options = setting_moves(self.registry, incumbent, move.target)
        if not options or any(same_value(m.after, move.after) for m in options):
            return move
        if setting.scale == "log":
            def scale(x: float) -> float:
                return math.log(x)
            half = math.log(2) / 2
        else:
            def scale(x: float) -> float:
                return x
            grid = sorted(float(m.after) for m in options)
            spacing = min((b - a for a, b in itertools.pairwise(grid)), default=math.inf)
            half = (setting.step if setting.step is not None else spacing) / 2
        target = scale(float(move.after))
        nearest = min(options, key=lambda m: abs(scale(float(m.after)) - target))
        gap = abs(scale(float(nearest.after)) - target)
        return nearest if gap < half - 1e-12 else move

    def near_copy(self, incumbent: Config, move: Move) -> dict[str, Any]:
        """The refusal of a proposer's move whose place was tried against the incumbent
        (a ``proposal_invalid`` record's fields): it spends nothing, but what the
        proposer offered is on record."""
        place = self.place(incumbent, move)
        where = ("" if place == move else
                 f" in the place of {place.after!r} (within half a step of it)")
        return {"category": "already_tried", "reason": (
            f"{move.target} {move.before!r} -> {move.after!r}: tried{where} against this "
            "incumbent already")}
