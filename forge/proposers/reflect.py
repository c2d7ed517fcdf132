"""The reflection proposer: failure signals of the incumbent's dev attempts -> hinted moves.

A registry's ``hints`` say which way to move a setting when a failure signal shows
up (``iteration_cap_hit: {max_iterations: up}``). Reflection counts the signals in
the incumbent's *dev* attempts (the view carries nothing else, so it cannot peek at
val or test) and turns the most frequent ones into moves of the hinted setting the
hinted way: for a number, the jump halfway to its bound first and the step once the
jump is tried (a signal says which way, not how far); for a bool or an enum, the
named move. It stays inside the registry: only the incumbent's untried candidate
moves are proposed; the gates still decide.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

from forge.config.moves import Move
from forge.config.registry import (
    BoolSetting,
    Config,
    EnumSetting,
    FloatSetting,
    IntSetting,
    Registry,
    Scalar,
    Setting,
    same_value,
)
from forge.proposers._common import describe_move
from forge.proposers.base import PROPOSERS, Proposal, Proposer, SearchView
from forge.results.model import AttemptResult

__all__ = ["STOP_REASON_SIGNALS", "ReflectProposer", "count_signals", "hinted_move"]

#: Stop reasons that count as failure signals of the same name.
STOP_REASON_SIGNALS = ("timeout", "error")


def count_signals(attempts: Sequence[AttemptResult]) -> Counter[str]:
    """In how many attempts each signal shows up (once per attempt, however often it fired).

    Signals come from ``output.signals``; a ``timeout`` or ``error`` stop reason
    counts as a signal of that name, since such attempts often have no output.
    """
    counts: Counter[str] = Counter()
    for attempt in attempts:
        names = set(attempt.output.signals) if attempt.output is not None else set()
        if attempt.stop_reason in STOP_REASON_SIGNALS:
            names.add(attempt.stop_reason)
        counts.update(names)
    return counts


def hinted_move(registry: Registry, config: Config, target: str, direction: str) -> Move | None:
    """One step of ``target`` from its value in ``config`` towards ``direction``, or None.

    ``up`` / ``down`` take the neighbour above / below the current value (so ``±step``
    or ``×2`` / ``÷2``, clamped); ``toggle`` flips a bool; for an enum, the direction
    names a choice. None when there is no such neighbour: at a bound, already on the
    named choice, or a direction that does not fit the setting's type.
    """
    setting = registry.settings.get(target)
    if setting is None or target not in config.values:
        return None
    current = config.values[target]
    after = _hinted_value(setting, current, direction)
    if after is None or same_value(after, current):
        return None
    return Move(target=target, before=current, after=after)


def _hinted_value(setting: Setting, current: Scalar, direction: str) -> Scalar | None:
    """The neighbour of ``current`` that ``direction`` names, or None."""
    neighbours = setting.neighbours(current)
    if isinstance(setting, (IntSetting, FloatSetting)):
        if direction == "up":
            return min((v for v in neighbours if float(v) > float(current)), default=None,
                       key=float)
        if direction == "down":
            return max((v for v in neighbours if float(v) < float(current)), default=None,
                       key=float)
        return None
    if isinstance(setting, BoolSetting):
        return neighbours[0] if direction == "toggle" else None
    if isinstance(setting, EnumSetting):
        # Hints are read from YAML as strings, so the choice is matched by its text.
        return next((c for c in neighbours if str(c) == direction), None)
    return None


def hinted_jump(registry: Registry, config: Config, target: str, direction: str
                ) -> Move | None:
    """A jump of numeric ``target`` towards ``direction``: the point of its coarse grid
    nearest halfway from the current value to the bound (on the log scale for log
    settings). A step may show too little to be screened through (a noise level far
    from its best value gains nothing per step); halfway is the guess that neither
    overshoots nor stays too close. None for bools, enums, or a setting at its bound."""
    setting = registry.settings.get(target)
    if (not isinstance(setting, (IntSetting, FloatSetting)) or target not in config.values
            or direction not in {"up", "down"}):
        return None
    value = config.values[target]
    current = float(value)
    side = [v for v in setting.jumps(value)
            if (float(v) > current if direction == "up" else float(v) < current)]
    if not side:
        return None
    bound = float(setting.max if direction == "up" else setting.min)
    log = setting.scale == "log"

    def t(x: float) -> float:
        return math.log(x) if log else x

    middle = (t(current) + t(bound)) / 2
    after = min(side, key=lambda v: (abs(t(float(v)) - middle), float(v)))
    return Move(target=target, before=value, after=after)


@PROPOSERS.register("reflect")
class ReflectProposer(Proposer):
    """Maps the incumbent's failure signals through ``registry.hints`` to moves.

    Signals are taken most frequent first (ties by name, so the order does not
    depend on attempt order); within a signal, its hints in registry order. A numeric
    hint gives :func:`hinted_jump` and, once that is tried, :func:`hinted_move`.
    A move is skipped when the setting is at its bound, when it is not in
    ``view.untried`` (tried already), or when an earlier signal proposed it. Signals
    without a hint are ignored. Stateless: :meth:`observe` does nothing.
    """

    name: str = "reflect"

    def propose(self, view: SearchView, n: int) -> list[Proposal]:
        """Up to ``n`` hinted moves, strongest signal first; none if nothing is hinted."""
        if n <= 0 or not view.registry.hints:
            return []
        counts = count_signals(view.dev_attempts)
        total = len(view.dev_attempts)
        proposals: list[Proposal] = []
        chosen: set[Move] = set()
        for signal, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
            for target, direction in view.registry.hints.get(signal, {}).items():
                # The jump first, the step once it is tried.
                move = hinted_jump(view.registry, view.incumbent, target, direction)
                if move is None or move not in view.untried:
                    move = hinted_move(view.registry, view.incumbent, target, direction)
                if move is None or move not in view.untried or move in chosen:
                    continue
                chosen.add(move)
                reason = (f"signal {signal} in {count} of {total} dev attempts -> "
                          f"{describe_move(view.registry, move)} (hint: {direction})")
                proposals.append(Proposal(move=move, proposer=self.name, reason=reason))
                if len(proposals) >= n:
                    return proposals
        return proposals

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        """Nothing to learn: reflection reads the current view only."""
