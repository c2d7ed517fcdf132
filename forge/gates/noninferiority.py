"""The non-inferiority gate (``val``): the candidate no worse than the incumbent on val
by more than ``val_margin`` (its lower bound above ``-val_margin``), at ``alpha``.

Opened as soon as val data come in. A first val chunk taken early must not drop a good
candidate on a bad draw, so its futility rule gives two standard errors of benefit of
the doubt, not one.
"""

from __future__ import annotations

from forge.gates.base import SequentialGate, Verdict, signed
from forge.gates.evidence import PairedScores
from forge.stats.paired import PairedTest, paired_test
from forge.stats.sequential import hopeless

__all__ = ["NonInferiorityGate"]


class NonInferiorityGate(SequentialGate):
    """``val``: H0 candidate minus incumbent ``<= -margin``, over ``n_max`` tasks."""

    def __init__(self, level: float, n_max: int, *, margin: float) -> None:
        super().__init__("val", level, n_max)
        self.margin = margin
        #: The last look's test (the journal's val block).
        self.last: PairedTest | None = None

    def test(self, evidence: PairedScores) -> Verdict | None:
        """One look: the verdict, or None when it leaves the gate open."""
        nominal = self.look(len(evidence.deltas))
        if nominal is None:
            return None
        margin = self.margin
        t = paired_test(evidence.deltas, alpha=nominal, threshold=-margin)
        self.last = t
        info = {**t.as_dict(), "margin": margin, "nominal": nominal}
        if self.undecidable(t, evidence.pairs):
            return None
        if t.p_value < nominal:
            return self.decide(True, f"val {signed(t.effect)}, lower bound {signed(t.ci_low)}"
                                     f" > -{margin:g} (margin; {t.n} tasks)", info, nominal)
        if hopeless(t, self.fractions[-1], -margin, self.level, optimism=2.0):
            return self.decide(False, f"val {signed(t.effect)}: cannot plausibly be shown "
                                      f"above -{margin:g} (margin) on the val tasks "
                                      f"({t.n} tasks)", info, nominal)
        return None

    def exhaust(self) -> Verdict:
        """Data ran out with the gate open: not shown."""
        t = self.last
        return self.decide(False, f"val {signed(t.effect) if t else '?'}: not shown above "
                                  f"-{self.margin:g} (margin)", dict(t.as_dict()) if t else {})
