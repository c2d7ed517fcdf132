"""What a confirmation ends with: its status, every decided gate, and the readings the
candidate record journals (:mod:`forge.journal.records`: the confirmation block, the
val block, the ``aux`` blocks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from forge.gates.checks import GateResult
from forge.gates.tolerance import ToleranceReading
from forge.journal.records import AuxDetails, ConfirmBlock, ValBlock
from forge.stats.paired import PairedTest

__all__ = ["ConfirmOutcome", "ImprovementReading", "NonInferiorityReading"]

@dataclass(frozen=True)
class ImprovementReading:
    """The improvement gate's last test at ``level``, over ``looks`` looks; ``nominal``
    the level of the look that decided it (None: undecided, or data ran out)."""

    test: PairedTest
    level: float
    looks: int
    nominal: float | None

    def block(self, *, index: int, pooled: bool) -> ConfirmBlock:
        """The record's confirmation block: the ``index``-th confirmation of the search,
        its test pairing the val tasks with dev's where ``pooled``."""
        more = {"splits": ["dev", "val"]} if pooled else {}
        return ConfirmBlock.of(self.test, level=self.level, index=index, stream="dev",
                               looks=self.looks, nominal=self.nominal, **more)


@dataclass(frozen=True)
class NonInferiorityReading:
    """The non-inferiority gate's last test, over ``looks`` looks (``nominal`` as for
    :class:`ImprovementReading`), and both configs' val means on the tasks both ran."""

    test: PairedTest
    looks: int
    nominal: float | None
    before: float | None
    after: float | None

    def block(self) -> ValBlock:
        """The record's val block."""
        return ValBlock.of(self.test, before=self.before, after=self.after,
                           looks=self.looks, nominal=self.nominal)


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

    def confirm_block(self, index: int) -> ConfirmBlock | None:
        """The record's confirmation block (None: no look tested improvement)."""
        return (None if self.improvement is None
                else self.improvement.block(index=index, pooled=self.pooled))

    def val_block(self) -> ValBlock | None:
        """The record's val block (None: val never tested)."""
        return None if self.noninferiority is None else self.noninferiority.block()

    def aux_blocks(self) -> dict[str, AuxDetails]:
        """Each tolerance's ``aux`` block."""
        return {metric: AuxDetails.model_validate(reading.record())
                for metric, reading in self.tolerances.items()}
