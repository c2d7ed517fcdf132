"""What every sequential gate of a confirmation shares: its looks and its verdict.

A gate is tested once a look, at that look's nominal level
(:func:`~forge.stats.sequential.nominal_level`, the power spending of its ``level``
over the share of its ``n_max`` tasks the look has paired). A look that decides gives a
:class:`Verdict`, and the gate is decided for good; one that does not leaves it open.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from forge.gates.checks import GateResult
from forge.stats.paired import IDENTICAL_PAIRS, PairedTest
from forge.stats.sequential import nominal_level

__all__ = ["Details", "SequentialGate", "Verdict", "signed"]

#: A verdict's details, as :class:`~forge.gates.checks.GateResult` keeps them.
Details = dict[str, float | int | str | None]


@dataclass(frozen=True)
class Verdict:
    """A gate's decision: passed or failed, why, and the numbers it read."""

    passed: bool
    reason: str
    details: Details


def signed(x: float) -> str:
    """``+0.125``, or ``+inf``/``-inf`` for a bound no data narrowed."""
    return f"{x:+.3f}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


class SequentialGate:
    """One group-sequential test: its looks so far and, once decided, its verdict.

    ``share`` is the part of ``level`` its looks may spend (a tolerance leaves the rest
    to the extension's test)."""

    def __init__(self, name: str, level: float, n_max: int, share: float = 1.0) -> None:
        self.name = name
        self.level = level
        self.n_max = n_max
        self.share = share
        #: The information fraction of each look that tested.
        self.fractions: list[float] = []
        self.verdict: Verdict | None = None
        #: The nominal level of the look that decided (None: decided otherwise, or open).
        self.nominal: float | None = None

    @property
    def open(self) -> bool:
        return self.verdict is None

    @property
    def passed(self) -> bool | None:
        """True or False once decided; None while open."""
        return None if self.verdict is None else self.verdict.passed

    def look(self, n: int) -> float | None:
        """Register a look with ``n`` paired tasks; its nominal level, or None when the
        look adds no task (no new information: no test)."""
        fraction = min(1.0, n / self.n_max)
        if n < 2 or (self.fractions and fraction <= self.fractions[-1]):
            return None
        self.fractions.append(fraction)
        return nominal_level(self.fractions, self.level * self.share)

    def undecidable(self, t: PairedTest, pairs: int) -> bool:
        """Identical deltas on fewer than half the tasks decide nothing, unless they rest
        on :data:`~forge.stats.IDENTICAL_PAIRS` paired attempts (``pairs``): a rare event
        (a harmful action on one attempt in fifty) is absent from a chunk by chance, and a
        t-test would read its absence as certainty."""
        return (t.sd == 0 and bool(self.fractions) and self.fractions[-1] < 0.5
                and pairs < IDENTICAL_PAIRS)

    def decide(self, passed: bool, reason: str, details: Mapping[str, float | int | str | None],
               nominal: float | None = None) -> Verdict:
        """Decide the gate for good; the verdict's details gain its looks and level."""
        self.verdict = Verdict(passed, reason,
                               {**details, "looks": len(self.fractions), "level": self.level})
        self.nominal = nominal
        return self.verdict

    def result(self) -> GateResult:
        """The decided gate as the journal's gate list keeps it."""
        assert self.verdict is not None, f"{self.name} is still open"
        return GateResult(name=self.name, passed=self.verdict.passed,
                          reason=self.verdict.reason, details=self.verdict.details)
