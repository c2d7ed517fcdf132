"""The improvement gate (``dev``): the candidate beats the incumbent by ``min_effect``.

Tested at the level ``alpha_j`` the search spends on its j-th confirmation since the
last promotion, on the dev confirmation tasks, and pooled with val's where the bench
has val tasks (``dev+val``): the val attempts are as fresh as dev's, and on triage a
+0.05 move reads p = 0.007 on 110 dev tasks whatever the attempts a task (the spread is
between tasks), so only more tasks add power. A trend that could not plausibly reach
the level with every task in fails it (futility).
"""

from __future__ import annotations

from forge.gates.base import SequentialGate, Verdict, signed
from forge.gates.evidence import PairedScores
from forge.stats.paired import PairedTest, paired_test
from forge.stats.sequential import hopeless

__all__ = ["ImprovementGate"]


class ImprovementGate(SequentialGate):
    """``dev``: H0 candidate minus incumbent ``<= min_effect``, over ``n_max`` tasks."""

    def __init__(self, level: float, n_max: int, *, min_effect: float, pooled: bool) -> None:
        super().__init__("dev", level, n_max)
        self.min_effect = min_effect
        #: Whether the val tasks are paired with dev's.
        self.pooled = pooled
        #: The last look's test (the journal's confirmation block).
        self.last: PairedTest | None = None

    @property
    def label(self) -> str:
        return "dev+val" if self.pooled else "dev"

    def test(self, evidence: PairedScores) -> Verdict | None:
        """One look: the verdict, or None when it leaves the gate open."""
        nominal = self.look(len(evidence.deltas))
        if nominal is None:
            return None
        t = paired_test(evidence.deltas, alpha=nominal, threshold=self.min_effect)
        self.last = t
        where = (f"{self.label} {signed(t.effect)} (bounds {signed(t.ci_low)}.."
                 f"{signed(t.ci_high)}, {t.n} tasks, look {len(self.fractions)})")
        info = {**t.as_dict(), "nominal": nominal}
        if self.undecidable(t, evidence.pairs):
            return None
        if t.p_value < nominal:
            return self.decide(True, f"{where}: p={t.p_value:.3g} < {nominal:.3g}, the "
                                     f"look's share of level {self.level:.3g}", info, nominal)
        if hopeless(t, self.fractions[-1], self.min_effect, self.level):
            return self.decide(False, f"{where}: cannot plausibly improve (futility), "
                                      f"p={t.p_value:.3g}", info, nominal)
        return None

    def exhaust(self) -> Verdict:
        """Data ran out with the gate open: not shown."""
        t = self.last
        shown = (f" ({self.label} {signed(t.effect)}, p={t.p_value:.3g}, {t.n} tasks)"
                 if t else "")
        return self.decide(False, f"{self.label}: no significant improvement on the "
                                  f"confirmation tasks{shown}", dict(t.as_dict()) if t else {})
