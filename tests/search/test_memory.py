"""What the search remembers about a move across incumbents (forge.search.memory).

A move is keyed by its setting and the value it takes, so ``knob -> 3`` tried from
``knob 2`` and again from ``knob 4`` (after a promotion) is the same move to the memory.
"""

from __future__ import annotations

import pytest

from forge.config.moves import Move
from forge.search.memory import MoveMemory, MoveNote, move_key

A, B, C = "a" * 64, "b" * 64, "c" * 64  # incumbents' fingerprints, in the order they came
UP = Move(target="knob", before=2, after=3)


def test_a_move_is_the_setting_and_its_new_value_type_exact() -> None:
    assert move_key(UP) == move_key(Move(target="knob", before=4, after=3))
    assert move_key(Move(target="v", before=0, after=1)) != move_key(
        Move(target="v", before=0, after=True))
    memory = MoveMemory()
    memory.record(UP, MoveNote(1, A, "futile", 0.0, 0.0))
    assert memory.last(Move(target="knob", before=4, after=3)) is not None
    assert memory.last(Move(target="knob", before=2, after=1)) is None


def test_a_futile_move_waits_cooldown_steps_at_a_new_incumbent() -> None:
    memory = MoveMemory(cooldown=2)
    memory.record(UP, MoveNote(3, A, "futile", -0.1, 0.05))
    assert memory.cooling(UP, B, step=4) and memory.cooling(UP, B, step=5)
    assert not memory.cooling(UP, B, step=6)  # cooled down: screened again in turn
    # At the incumbent where it was futile the search does not offer it again anyway.
    assert not memory.cooling(UP, A, step=4)


@pytest.mark.parametrize("outcome", ["weak", "screened", "promoted"])
def test_only_a_futile_move_cools(outcome: str) -> None:
    memory = MoveMemory()
    memory.record(UP, MoveNote(3, A, outcome, 0.1, 0.05))  # type: ignore[arg-type]
    assert not memory.cooling(UP, B, step=4)


def test_a_move_that_looked_good_but_was_not_proven_is_promising_at_the_next_incumbent(
        ) -> None:
    weak = MoveMemory()
    weak.record(UP, MoveNote(2, A, "weak", 0.08, 0.05))
    assert weak.promise(UP, B) == pytest.approx(0.08)
    assert weak.promise(UP, A) is None  # not at the incumbent that found it weak
    dev_refused = MoveMemory()
    dev_refused.record(UP, MoveNote(2, A, "refused", 0.12, 0.04, gate="dev"))
    assert dev_refused.promise(UP, B) == pytest.approx(0.12)


@pytest.mark.parametrize("note", [
    MoveNote(2, A, "weak", -0.02, 0.05),  # it looked worse
    MoveNote(2, A, "weak", None, None),  # nothing was screened
    MoveNote(2, A, "futile", 0.0, 0.0),
    MoveNote(2, A, "refused", 0.2, 0.04, gate="val"),  # a dev-only win: not promising
    MoveNote(2, A, "refused", 0.2, 0.04, gate="aux:cost"),
])
def test_nothing_else_is_promising(note: MoveNote) -> None:
    memory = MoveMemory()
    memory.record(UP, note)
    assert memory.promise(UP, B) is None


def test_a_val_refusal_is_remembered_across_incumbents_until_settled() -> None:
    memory = MoveMemory()
    refused = MoveNote(2, A, "refused", 0.2, 0.04, gate="val")
    memory.record(UP, refused)
    memory.record(UP, MoveNote(4, B, "screened", 0.21, 0.04))  # screening it again
    assert memory.refusal(UP) == refused
    # A dev refusal or a promotion since settles the question anew.
    memory.record(UP, MoveNote(6, C, "refused", 0.1, 0.04, gate="dev"))
    assert memory.refusal(UP) is None
    later = MoveMemory()
    later.record(UP, refused)
    later.record(UP, MoveNote(5, B, "promoted", 0.3, 0.04))
    assert later.refusal(UP) is None


def test_new_evidence_beats_the_refused_effect_by_two_standard_errors() -> None:
    memory = MoveMemory()
    memory.record(UP, MoveNote(2, A, "refused", 0.20, 0.04, gate="val"))
    assert not memory.new_evidence(UP, 0.25, 0.04)  # within 2 SE of what was refused
    assert not memory.new_evidence(UP, 0.28, 0.04)
    assert memory.new_evidence(UP, 0.29, 0.04)
    floor = MoveMemory()
    floor.record(UP, MoveNote(2, A, "refused", 0.20, 0.04, gate="floor:critical"))
    assert not floor.new_evidence(UP, 0.21, 0.04)


def test_without_a_val_or_floor_refusal_there_is_nothing_to_outdo() -> None:
    memory = MoveMemory()
    assert memory.new_evidence(UP, -1.0, 0.5)
    # A tolerance refusal is settled by the tolerance, which the screening asks itself.
    memory.record(UP, MoveNote(2, A, "refused", 0.20, 0.04, gate="aux:cost"))
    assert memory.refusal(UP) is not None and memory.new_evidence(UP, 0.0, 0.04)


@pytest.mark.parametrize(("note", "close"), [
    (MoveNote(2, A, "weak", 0.04, 0.03), True),
    (MoveNote(2, A, "refused", 0.06, 0.03, gate="dev"), True),
    (MoveNote(2, A, "weak", 0.0, 0.03), False),  # no better than min_effect
    (MoveNote(2, A, "futile", -0.02, 0.03), False),
    (MoveNote(2, A, "refused", 0.06, 0.03, gate="val"), False),  # a dev-only win
    (MoveNote(2, A, "refused", 0.06, 0.03, gate="aux:cost"), False),
    (MoveNote(2, B, "weak", 0.04, 0.03), False),  # learnt at another incumbent
])
def test_a_close_move_looked_better_at_this_incumbent_and_was_not_proven(
        note: MoveNote, close: bool) -> None:
    memory = MoveMemory()
    memory.record(UP, note)
    assert (memory.close(UP, A, min_effect=0.0) == note.screen_effect) is close
    assert (memory.close(UP, A, min_effect=0.0) is None) is not close


def test_a_close_move_is_judged_on_its_last_look() -> None:
    memory = MoveMemory()
    memory.record(UP, MoveNote(2, A, "weak", 0.04, 0.03))
    memory.record(UP, MoveNote(3, A, "futile", -0.01, 0.02))  # the precision round's look
    assert memory.close(UP, A, min_effect=0.0) is None


def test_a_tolerance_refusal_is_offered_again_where_the_incumbent_made_room() -> None:
    memory = MoveMemory()
    memory.record(UP, MoveNote(2, A, "refused", 0.2, 0.04, gate="aux:cost", standing=0.01))
    lower, same = {"cost": -0.05}.__getitem__, {"cost": 0.01}.__getitem__
    assert memory.made_room(UP, B, lower) == pytest.approx(0.2)
    assert memory.made_room(UP, B, same) is None  # no more room than when refused
    assert memory.made_room(UP, A, lower) is None  # not at the incumbent that refused it
    # Its last look decides: screened futile since, it is no longer offered.
    memory.record(UP, MoveNote(3, B, "futile", -0.01, 0.02))
    assert memory.made_room(UP, C, lower) is None


@pytest.mark.parametrize("note", [
    MoveNote(2, A, "refused", -0.05, 0.04, gate="aux:cost", standing=0.0),  # no gain seen
    MoveNote(2, A, "refused", 0.2, 0.04, gate="val"),  # a dev-only win, not a tolerance
    MoveNote(2, A, "weak", 0.08, 0.05),
])
def test_only_a_tolerance_refusal_with_a_gain_is_offered_for_room(note: MoveNote) -> None:
    memory = MoveMemory()
    memory.record(UP, note)
    assert memory.made_room(UP, B, lambda metric: -1.0) is None
