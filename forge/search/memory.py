"""What the search learnt about each move, kept across incumbents.

A move is one setting taking one value; the same move (``retrieval -> hybrid``) is
tried again after each promotion, against a new incumbent. The memory keeps, per
move, what became of it each time, and uses that to steer *selection* only:

- a move found futile on the screening tasks is not screened again at once: after a
  promotion it goes to the back of the queue for ``cooldown`` steps;
- a move refused by the val gate (a dev-only win, say) is confirmed again only on new
  evidence: its screening effect at the new incumbent must beat the one it had when
  refused by more than twice its standard error;
- a move refused by an auxiliary tolerance is confirmed again only at an incumbent that
  has brought that metric down against the start config since (more room under the
  tolerance): testing it again with less room or the same would only try its luck on
  the same val seeds (see :meth:`MoveMemory.more_room`); at such an incumbent it is
  proposed early, since what stopped it is weaker there and its gain likely is not
  (:meth:`MoveMemory.made_room`);
- a move that looked better at this incumbent but was not proven (weak at screening,
  or refused by the dev gate) is *close*: once no untried move is left, the search
  screens the close ones again with twice the attempts a task (:meth:`MoveMemory.close`).

None of this touches a confirmation's data or level: it decides which candidate is
confirmed, never how, so the guarantee of every confirmation holds as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from forge.config.moves import Move
from forge.config.registry import Scalar

__all__ = ["MoveFate", "MoveKey", "MoveMemory", "MoveNote", "move_key"]

MoveFate = Literal["futile", "weak", "screened", "refused", "promoted"]

#: A move without its ``before``: the setting and the value it takes, type-exact.
MoveKey = tuple[str, str, Scalar]


def move_key(move: Move) -> MoveKey:
    return (move.target, type(move.after).__name__, move.after)


@dataclass(frozen=True)
class MoveNote:
    """What became of a move at one incumbent."""

    step: int
    incumbent: str
    outcome: MoveFate
    screen_effect: float | None = None
    screen_se: float | None = None
    gate: str | None = None  # the refusing gate: "dev", "val", "aux:cost", "floor:x"
    #: For a tolerance refusal: the incumbent's own regression of that metric against
    #: the start when the move was refused (the room it left is the allowance minus it).
    standing: float | None = None


@dataclass
class MoveMemory:
    """Notes per move, oldest first. ``cooldown``: steps a futile move waits after a
    promotion before it is screened again ahead of untried ones."""

    cooldown: int = 2
    notes: dict[MoveKey, list[MoveNote]] = field(default_factory=dict)

    def record(self, move: Move, note: MoveNote) -> None:
        self.notes.setdefault(move_key(move), []).append(note)

    def last(self, move: Move) -> MoveNote | None:
        found = self.notes.get(move_key(move))
        return found[-1] if found else None

    def cooling(self, move: Move, incumbent: str, step: int) -> bool:
        """Found futile at another incumbent less than ``cooldown`` steps ago."""
        note = self.last(move)
        return (note is not None and note.outcome == "futile" and note.incumbent != incumbent
                and step - note.step <= self.cooldown)

    def promise(self, move: Move, incumbent: str) -> float | None:
        """The screening effect the move showed at an earlier incumbent when it looked
        better but was not proven (weak, or refused by the dev gate): worth trying early
        at the new incumbent, which shares all but one setting with the old. None when
        it showed nothing of the kind."""
        note = self.last(move)
        if (note is None or note.incumbent == incumbent or note.screen_effect is None
                or note.screen_effect <= 0):
            return None
        if note.outcome in {"weak", "screened"} or (note.outcome == "refused"
                                                    and note.gate == "dev"):
            return note.screen_effect
        return None

    def made_room(self, move: Move, incumbent: str, standing: Callable[[str], float]
                  ) -> float | None:
        """The screening effect of a move a tolerance refused at an earlier incumbent, if
        it had a gain and this incumbent has made room under that tolerance since
        (``standing(metric)``: its regression of the metric against the start, now lower
        than when the move was refused). None for any other move."""
        note = self.last(move)
        if (note is None or note.incumbent == incumbent or note.outcome != "refused"
                or note.gate is None or not note.gate.startswith("aux:")
                or note.screen_effect is None or note.screen_effect <= 0):
            return None
        return note.screen_effect if self.more_room(move, standing(note.gate[4:])) else None

    def close(self, move: Move, incumbent: str, min_effect: float) -> float | None:
        """The screening effect of a move whose last look, at ``incumbent`` itself, was
        better than ``min_effect`` but not proven: weak at screening, or refused by the
        dev gate. A decision that more attempts a task may turn (FocusedILS raises the
        runs of its close configs the same way); None for any other move."""
        note = self.last(move)
        if (note is None or note.incumbent != incumbent or note.screen_effect is None
                or not note.screen_effect > min_effect):
            return None
        if note.outcome == "weak" or (note.outcome == "refused" and note.gate == "dev"):
            return note.screen_effect
        return None

    def refusal(self, move: Move) -> MoveNote | None:
        """The last refusal by a val, floor or auxiliary gate, if the move has not been
        promoted or refused by the dev gate since (those settle the question anew)."""
        for note in reversed(self.notes.get(move_key(move), [])):
            if note.outcome == "promoted" or (note.outcome == "refused" and note.gate == "dev"):
                return None
            if note.outcome == "refused" and note.gate is not None and note.gate != "dev":
                return note
        return None

    def more_room(self, move: Move, standing: float) -> bool:
        """For a move last refused by a tolerance: is the incumbent's regression of that
        metric (``standing``) now lower than when the move was refused?"""
        note = self.refusal(move)
        if note is None or note.gate is None or not note.gate.startswith("aux:"):
            return True
        then = note.standing if note.standing is not None else 0.0
        return standing < then - 1e-12

    def new_evidence(self, move: Move, effect: float, se: float) -> bool:
        """For a move last refused by val or a floor: does its screening effect now beat
        the one it was refused with by more than two standard errors?"""
        note = self.refusal(move)
        if note is None or note.gate is None or note.gate.startswith("aux:"):
            return True
        then = note.screen_effect if note.screen_effect is not None else float("-inf")
        return effect > then + 2 * se
