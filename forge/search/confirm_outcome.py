"""What a confirmation ends with: its status, every decided gate, and the readings the
candidate record journals (:mod:`forge.journal.records`: the confirmation block, the
val block, the ``aux`` blocks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from forge.search.gates.tolerance import ToleranceReading
from forge.stats.gates import GateResult
from forge.stats.paired import PairedTest

__all__ = ["ConfirmOutcome", "ImprovementReading", "NonInferiorityReading"]

#: A journal block's fields as the record model validates them.
Fields = dict[str, float | int | str | None]


@dataclass(frozen=True)
class ImprovementReading:
    """The improvement gate's last test at ``level``, over ``looks`` looks; ``nominal``
    the level of the look that decided it (None: undecided, or data ran out)."""

    test: PairedTest
    level: float
    looks: int
    nominal: float | None

    def record(self) -> Fields:
        """The fields of the record's confirmation block
        (:class:`~forge.journal.records.ConfirmBlock`) this reading sets."""
        return {**self.test.as_dict(), "level": self.level, "looks": self.looks,
                "nominal": self.nominal}


@dataclass(frozen=True)
class NonInferiorityReading:
    """The non-inferiority gate's last test, over ``looks`` looks (``nominal`` as for
    :class:`ImprovementReading`), and both configs' val means on the tasks both ran."""

    test: PairedTest
    looks: int
    nominal: float | None
    before: float | None
    after: float | None

    def record(self) -> Fields:
        """The record's val block (:class:`~forge.journal.records.ValBlock`)."""
        return {**self.test.as_dict(), "looks": self.looks, "nominal": self.nominal,
                "before": self.before, "after": self.after}


@dataclass(frozen=True)
class ConfirmOutcome:
    """A confirmation's end: ``promoted``, ``rejected``, or cut short by the ``budget``."""

    status: Literal["promoted", "rejected", "budget"]
    #: Every decided gate, the floors last.
    gates: tuple[GateResult, ...]
    improvement: ImprovementReading | None
    noninferiority: NonInferiorityReading | None
    #: Each tolerance's last reading, in the order they were first read.
    tolerances: dict[str, ToleranceReading]
    #: The rollouts the confirmation asked for (from the store or run).
    rollouts: int
    looks: int
    #: The gates never opened (val, when no val chunk came in).
    not_run: tuple[str, ...]
    #: The incumbent's and the candidate's mean over the dev confirmation attempts.
    dev_means: tuple[float | None, float | None] = (None, None)
    #: Whether the improvement test paired the val tasks with dev's.
    pooled: bool = False

    @property
    def dev(self) -> Fields:
        """The confirmation block's fields (empty: no look tested improvement)."""
        return {} if self.improvement is None else self.improvement.record()

    @property
    def val(self) -> Fields | None:
        """The val block's fields (None: val never tested)."""
        return None if self.noninferiority is None else self.noninferiority.record()

    @property
    def aux(self) -> dict[str, Fields]:
        """Each tolerance's ``aux`` block's fields."""
        return {metric: reading.record() for metric, reading in self.tolerances.items()}
