"""Telling configs one move apart without fingerprinting them whole.

A config's fingerprint is the sha256 of its values' canonical JSON (with its registry's
digest): as long as the registry, and as costly. A search asks, for every candidate
move of every step, whether the moved config was tried against this incumbent, and a
proposer whether it was scored already; fingerprinting each moved config made a
step's cost grow with the square of the settings (39.5 s to a first candidate at
1,000 settings, none in 600 s at 10,000).

Two configs of one registry have one fingerprint exactly when every setting's value
is spelled alike in canonical JSON (sha256 collisions aside, as everywhere in
forge). So a config one move from a known one is told by the setting it moves and
its new value's spelling (:func:`spelled_move`), and whether a known config is one move
from another by comparing spellings setting by setting (:func:`one_change`), never
hashing either. Fingerprints themselves, which journals hold, are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from forge._util.digest import canonical_json
from forge.config.registry import Scalar

__all__ = ["SpelledMove", "one_change", "same_spelling", "spelled_move", "spelling"]

#: (the setting moved, its new value's canonical JSON).
SpelledMove = tuple[str, str]

_PLAIN = (bool, int, str)


def spelling(value: Scalar) -> str:
    """``value`` as a fingerprint spells it: ``true``, ``1``, ``1.0`` and ``"1"`` differ."""
    return canonical_json(value)


def same_spelling(a: Scalar, b: Scalar) -> bool:
    """Whether ``a`` and ``b`` are spelled alike (:func:`spelling`), mostly without
    spelling them: values of one built-in type are spelled alike exactly when they are
    equal, but for 0.0 and -0.0 (equal, spelled apart)."""
    if type(a) is float and type(b) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if type(a) is type(b) and type(a) in _PLAIN:
        return a == b
    return spelling(a) == spelling(b)


def spelled_move(target: str, value: Scalar) -> SpelledMove:
    """The key of the config that moves ``target`` to ``value`` (a checked value, as
    :func:`forge.config.moves.moved_value` gives it), among the configs one move from the same
    one: two such configs share a fingerprint exactly when they share this key."""
    return (target, spelling(value))


def one_change(base: Mapping[str, Scalar], other: Mapping[str, Scalar]) -> SpelledMove | None:
    """The :func:`spelled_move` of ``other`` as a config one move from ``base`` (both
    complete configs of one registry), or None when they differ in no setting or in
    more than one. Stops at the second difference."""
    found: SpelledMove | None = None
    for name, value in base.items():
        theirs = other[name]
        if value is theirs or same_spelling(value, theirs):
            continue
        if found is not None:
            return None
        found = spelled_move(name, theirs)
    return found
