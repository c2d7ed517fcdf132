"""The tolerance gate (``aux:<metric>``): the candidate's regression on a metric against
the *start* config (the one deployed) within its allowance.

Checked on every confirmation task, dev and val alike (a metric of rare events needs
all the paired tasks there are: val alone refused most moves of triage's harmful-action
tolerance in benchmarks/quality.py, and violated no less often), each metric at the
full ``alpha``: a move is promoted only if *every* tolerance is shown, so one that
breaks any tolerance must pass that metric's own test, which happens with probability
at most ``alpha`` whatever the others do (an intersection-union test, Berger 1982).
Anchored at the start, tolerances cannot add up across promotions.

Which test reads a look is a strategy (:mod:`forge.search.gates.tolerance_tests`): the
t-test, the exact test of a rare change, or the netted test of a 0/1 change moved
between attempts. A tolerance the confirmation tasks leave open may be read once more
on an extension block of fresh attempts (:meth:`ToleranceGate.extend`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from scipy import stats as _st

from forge.bench.loader import MetricSpec
from forge.search.gates.base import Details, SequentialGate, Verdict
from forge.search.gates.evidence import Regressions
from forge.search.gates.tolerance_tests import (
    EXTENSION_SHARE,
    SPARSE_TASKS,
    ToleranceLook,
    tolerance_test,
)
from forge.stats.gates import aux_text, regression_allowance
from forge.stats.paired import paired_test
from forge.stats.sequential import rare_event_boundary

__all__ = ["BLOCK_CHANCE", "ToleranceGate", "ToleranceReading"]

#: The least chance, at the rate of regressions a sparse metric's looks saw, that the
#: extension's exact test passes it, for its block to be run: below it the block's
#: rollouts are better spent elsewhere (three of the four blocks the default quickstart
#: ran, none of which passed anything; a move within its tolerance in the tolerance
#: edge benchmark passes in 974 of 1,000 searches, 979 with every block run).
BLOCK_CHANCE = 0.1


@dataclass(frozen=True)
class ToleranceReading:
    """A tolerance's last reading, as the candidate record's ``aux`` block keeps it
    (:class:`~forge.journal.records.AuxDetails`): the means, the bound and the allowance
    always; what the exact or the netted test counted where one read it; and
    ``extension_most`` where a block was judged unable to pass it."""

    before: float
    after: float
    bound: float
    allowed: float
    direction: str
    n_tasks: int
    vs: str = "start"
    attempts: int | None = None
    regressed: int | None = None
    most: int | None = None
    size: float | None = None
    improved: int | None = None
    net_p: float | None = None
    extension_most: int | None = None

    def counted(self, *, attempts: int, regressed: int, most: int, size: float
                ) -> ToleranceReading:
        """With the exact test's count: ``regressed`` of ``attempts`` made worse, each by
        at most ``size``, where ``most`` would pass."""
        return dataclasses.replace(self, attempts=attempts, regressed=regressed, most=most,
                                   size=size)

    def netted(self, *, attempts: int, regressed: int, improved: int, size: float,
               net_p: float) -> ToleranceReading:
        """With the netted test's counts and p."""
        return dataclasses.replace(self, attempts=attempts, regressed=regressed,
                                   improved=improved, size=size, net_p=net_p)

    def skipped(self, most: int) -> ToleranceReading:
        """Marked as not worth an extension block: its look there would allow ``most``."""
        return dataclasses.replace(self, extension_most=most)

    def record(self) -> dict[str, float | int | str | None]:
        """The fields the record sets: the counts only where a test set them."""
        out: dict[str, float | int | str | None] = {
            "before": self.before, "after": self.after, "bound": self.bound,
            "allowed": self.allowed, "direction": self.direction, "vs": self.vs,
            "n_tasks": self.n_tasks}
        for name in ("attempts", "regressed", "most", "size", "improved", "net_p",
                     "extension_most"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


class ToleranceGate(SequentialGate):
    """``aux:<metric>``: the regression against the start within the allowance."""

    def __init__(self, metric: str, spec: MetricSpec, level: float, n_max: int,
                 share: float = 1.0) -> None:
        super().__init__(f"aux:{metric}", level, n_max, share)
        self.metric = metric
        self.spec = spec
        #: Whether the last look read the metric as changed on fewer than SPARSE_TASKS
        #: tasks (the exact test's): the extension keeps to that test.
        self.sparse = False
        #: Paired attempts at each look (the exact test's information).
        self.attempts: list[int] = []
        self.reading: ToleranceReading | None = None

    @property
    def read(self) -> ToleranceReading:
        """The reading of the look under way (a test adds its counts to it)."""
        assert self.reading is not None, f"{self.name} has read nothing"
        return self.reading

    def test(self, evidence: Regressions) -> Verdict | None:
        """One look: the verdict, or None when it leaves the gate open."""
        before, after = evidence.before, evidence.after
        if before is None or after is None:
            return None
        nominal = self.look(len(evidence.worse))
        if nominal is None:
            return None
        look = self._look(evidence, before, after, nominal, None)
        self.attempts.append(evidence.attempts)
        self.sparse = evidence.changed < SPARSE_TASKS
        return tolerance_test(evidence, self.sparse).look(self, look)

    def extend(self, evidence: Regressions, extension: int) -> Verdict | None:
        """The look on every paired attempt, an extension block of ``extension`` fresh
        attempts a task among them: decided either way, as nothing comes after (None
        only where no task has both configs' values: :meth:`exhaust` fails it)."""
        before, after = evidence.before, evidence.after
        if before is None or after is None:
            return None
        look = self._look(evidence, before, after, self.level * EXTENSION_SHARE, extension)
        return tolerance_test(evidence, self.sparse).last(self, look)

    def _look(self, evidence: Regressions, before: float, after: float, level: float,
              extension: int | None) -> ToleranceLook:
        allowed = regression_allowance(self.spec, before)
        t = paired_test(evidence.worse, alpha=level)
        self.reading = ToleranceReading(before=before, after=after, bound=t.ci_high,
                                        allowed=allowed, direction=self.spec.direction,
                                        n_tasks=t.n)
        info: Details = {**self.reading.record(), "nominal": level}
        if extension is not None:
            info["extension"] = extension
        text = aux_text(self.metric, self.spec, before, after, t.ci_high, allowed)
        return ToleranceLook(evidence=evidence, test=t, allowed=allowed, level=level,
                             text=text, info=info, extension=extension)

    def may_extend(self, block: int) -> bool:
        """Whether an extension block of ``block`` paired attempts may plausibly pass the
        gate: the t-test and the netted test may (the netted one reads attempts made
        better too, which no rate of regressions predicts); the exact test not when, were
        the block's attempts to regress at the rate its looks saw, it would stay under
        its last look's boundary with a chance below :data:`BLOCK_CHANCE`. Only which
        confirmations run a block depends on this, not any test's level."""
        r = self.reading
        if (r is None or r.net_p is not None or not self.sparse or not self.attempts
                or r.size is None or r.regressed is None):
            return True
        regressed, seen = r.regressed, self.attempts[-1]
        most = rare_event_boundary([*self.attempts, seen + block], [*self.fractions, 1.0],
                                   r.allowed / r.size, self.level)
        if _st.binom.cdf(most - regressed, block, regressed / seen) >= BLOCK_CHANCE:
            return True
        self.reading = r.skipped(most)  # the mark of a block skipped for it (exhaust)
        return False

    def exhaust(self) -> Verdict:
        """Data ran out with the gate open: not shown."""
        r = self.reading
        # The gate's name heads its reason where it is shown: not repeated here.
        shown = (f"{self.metric}: on no task did both report it" if r is None
                 else aux_text(self.metric, self.spec, r.before, r.after, r.bound, r.allowed))
        why = ("; a block of fresh attempts could not plausibly show it"
               if r is not None and r.extension_most is not None else "")
        return self.decide(False, f"{shown}: not shown within the allowance (vs the start "
                                  f"config{why})", dict(r.record()) if r else {})
