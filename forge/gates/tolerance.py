"""The tolerance gate (``aux:<metric>``): the candidate's regression on a metric against
the *start* config (the one deployed) within its allowance.

Checked on every confirmation task, dev and val alike (a metric of rare events needs
all the paired tasks there are: val alone refused most moves of triage's harmful-action
tolerance in benchmarks/quality.py, and violated no less often), each metric at the
full ``alpha``: a move is promoted only if *every* tolerance is shown, so one that
breaks any tolerance must pass that metric's own test, which happens with probability
at most ``alpha`` whatever the others do (an intersection-union test, Berger 1982).
Anchored at the start, tolerances cannot add up across promotions.

Which test reads a look is a strategy (below): the
t-test, the exact test of a rare change, or the netted test of a 0/1 change moved
between attempts. A tolerance the confirmation tasks leave open may be read once more
on an extension block of fresh attempts (:meth:`ToleranceGate.extend`).

How a look is read (one strategy per kind of metric):

- :class:`TTest`: the upper bound of the paired t-test of the per-task regressions
  within the allowance.
- :class:`ExactTest`: a metric the candidate changed on fewer than :data:`SPARSE_TASKS`
  tasks is not read by the t-test, whose bound on a handful of rare events is far too
  narrow (benchmarks/tolerance_edge.py), but by an exact group-sequential test of the
  rate of attempts it made worse (:func:`~forge.stats.sequential.rare_event_boundary`;
  each taken to regress by the most one could, the largest value the metric took): it
  passes when so few are worse that a rate of ``allowance / size`` would show so few
  with a chance within the level spent. A metric no attempt changed may also pass, as
  before, on identical deltas over half the tasks (or
  :data:`~forge.stats.IDENTICAL_PAIRS` paired attempts).
- :class:`NettedTest`: where every attempt moved by 0 or the full ``size`` (a 0/1
  metric: a harmful action or none), some made worse and some *better*, the count of
  those made worse charges a move that only traded harm between tasks with every one of
  them: such a change is read instead by Tango's score test of ``p_worse - p_better >=
  allowance / size`` (:func:`~forge.stats.net_regression_p`) at the look's nominal
  level, as the t-test is, with no futility rule (a handful of attempts swing it).

Each strategy has a ``look`` (a look of the confirmation's plan, which may leave the
gate open) and a ``last`` (the extension block's look, decided either way): the t-test
once at :data:`EXTENSION_SHARE` of the level, its looks before having spent the rest, so
a tolerance the move breaks passes one or the other with probability at most ``alpha``
(a union bound); the exact test at one more look, which may spend what its looks before
left of the level; the netted test, like the t-test, once at :data:`EXTENSION_SHARE`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

from scipy import stats as _st

from forge.bench.loader import MetricSpec
from forge.gates.base import Details, SequentialGate, Verdict
from forge.gates.checks import aux_text
from forge.gates.evidence import Regressions
from forge.stats.paired import PairedTest, net_regression_p, paired_test
from forge.stats.pairs import regression_allowance
from forge.stats.sequential import hopeless, rare_event_boundary

__all__ = ["BLOCK_CHANCE", "EXTENSION_SHARE", "SPARSE_TASKS", "ExactTest", "NettedTest", "TTest",
           "ToleranceGate", "ToleranceLook", "ToleranceReading", "ToleranceTest",
           "tolerance_test"]

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


#: A tolerance's metric changed on fewer tasks than this is read by the exact test for
#: rare events, not by the t-test: ten tasks of events give a t-test its spread; fewer
#: give it a handful of values.
SPARSE_TASKS = 10

#: The share of a tolerance's level its t-test on the extension block spends (its looks
#: before spend the rest). On the contest (quality.py, 10 seeds), a fifth and 0.35 did
#: alike, with the t-test then let read the exact test's metrics on the block (which
#: broke their level: benchmarks/tolerance_edge.py); capping the exact test's looks at
#: 0.8 alpha, for a share at its extension look, cost triage 0.012 at 5k, and scaling
#: them by 0.8 cost closedform 0.019 at 2k (its first looks pass "no change").
EXTENSION_SHARE = 0.2

#: Rounding slack of a bound exactly at the allowance.
_EPS = 1e-12


@dataclass(frozen=True)
class ToleranceLook:
    """What one look of a tolerance read: the evidence, its t-test at ``level``, the
    allowance, the reason's head and the verdict's details so far; ``extension``, the
    fresh attempts a task of the extension block (None: a look of the plan)."""

    evidence: Regressions
    test: PairedTest
    allowed: float
    level: float
    text: str
    info: Details
    extension: int | None = None

    @property
    def where(self) -> str:
        """The reason's tail: what the test compared."""
        if self.extension is None:
            return f"(vs the start config, {self.test.n} tasks)"
        return (f"on the extension too ({self.extension} fresh attempts a task, "
                f"{self.evidence.attempts} paired attempts; vs the start config)")

    @property
    def within(self) -> bool:
        """The t-test's bound within the allowance."""
        return self.test.ci_high <= self.allowed + _EPS


class ToleranceTest(Protocol):
    """A test of a tolerance: ``look`` may leave the gate open, ``last`` decides it."""

    def look(self, gate: ToleranceGate, look: ToleranceLook) -> Verdict | None: ...

    def last(self, gate: ToleranceGate, look: ToleranceLook) -> Verdict: ...


def tolerance_test(evidence: Regressions, sparse: bool) -> ToleranceTest:
    """The test for a look: the t-test unless the metric changed on few tasks
    (``sparse``) and took a value to scale a rare change by; then the netted test where
    every attempt moved by 0 or that value, some either way, else the exact test."""
    rare = evidence.rare() if sparse else None
    if rare is None:
        return TTest()
    regressed, size = rare
    net = evidence.net(size)
    if net is not None:
        return NettedTest(*net, size=size)
    return ExactTest(regressed, size)


def _futile(gate: ToleranceGate, look: ToleranceLook) -> Verdict | None:
    """Failed where even an optimistic trend could not show the allowance with every
    task in; not before half the tasks: a metric of rare events (a harmful action in
    fifty attempts) swings too much on a chunk to give up on it."""
    fraction = gate.fractions[-1]
    room = paired_test([look.allowed - w for w in look.evidence.worse], alpha=look.level)
    if fraction >= 0.5 and hopeless(room, fraction, 0.0, gate.level):
        return gate.decide(False, f"{look.text}: cannot plausibly be shown within the "
                                  f"allowance {look.where}", look.info)
    return None


@dataclass(frozen=True)
class TTest:
    """The t-test's upper bound of the regression within the allowance."""

    def look(self, gate: ToleranceGate, look: ToleranceLook) -> Verdict | None:
        if not gate.undecidable(look.test, gate.attempts[-1]) and look.within:
            return gate.decide(True, f"{look.text} <= allowed {look.where}", look.info)
        return _futile(gate, look)

    def last(self, gate: ToleranceGate, look: ToleranceLook) -> Verdict:
        # A sparse metric read by the t-test on the block only where nothing changed.
        if (not gate.sparse or not look.evidence.changed) and look.within:
            return gate.decide(True, f"{look.text} <= allowed at level {look.level:.3g} "
                                     f"{look.where}", look.info)
        return gate.decide(False, f"{look.text}: not shown within the allowance "
                                  f"{look.where}", look.info)


@dataclass(frozen=True)
class ExactTest:
    """The exact group-sequential test of the rate of attempts made worse, each by at
    most ``size``: ``regressed`` of them."""

    regressed: int
    size: float

    def look(self, gate: ToleranceGate, look: ToleranceLook) -> Verdict | None:
        seen = gate.attempts[-1]
        most = rare_event_boundary(gate.attempts, gate.fractions, look.allowed / self.size,
                                   gate.level)
        gate.reading = gate.read.counted(attempts=seen, regressed=self.regressed, most=most,
                                         size=self.size)
        if self.regressed <= most:
            return gate.decide(
                True, f"{look.text}: worse on {self.regressed} of {seen} paired attempts, "
                      f"each by at most {self.size:g}: few enough for the exact test of a "
                      f"rare change (at most {most}; vs the start config, {look.test.n} "
                      f"tasks)",
                {**look.info, "regressed": self.regressed, "most": most, "size": self.size})
        if not look.evidence.changed:
            return TTest().look(gate, look)
        return _futile(gate, look)

    def last(self, gate: ToleranceGate, look: ToleranceLook) -> Verdict:
        # The test the looks read it by, whatever the block changed: twice the attempts
        # spread a rare event over more tasks, and the t-test on it at the edge passed
        # 5.8% of 1,000 searches where it was let in (benchmarks/tolerance_edge.py).
        attempts = look.evidence.attempts
        most = rare_event_boundary([*gate.attempts, attempts], [*gate.fractions, 1.0],
                                   look.allowed / self.size, gate.level)
        gate.reading = gate.read.counted(attempts=attempts, regressed=self.regressed,
                                         most=most, size=self.size)
        look = dataclasses.replace(look, info={**look.info, "regressed": self.regressed,
                                               "most": most, "size": self.size})
        if self.regressed <= most:
            return gate.decide(
                True, f"{look.text}: worse on {self.regressed} paired attempts, each by at "
                      f"most {self.size:g}: few enough for the exact test's last look (at "
                      f"most {most}) {look.where}", look.info)
        return TTest().last(gate, look)


@dataclass(frozen=True)
class NettedTest:
    """Tango's score test of the net rate of attempts made worse (``worse`` made worse,
    ``better`` better, of ``n``, each by ``size``) below ``allowance / size``."""

    worse: int
    better: int
    n: int
    size: float

    def _test(self, gate: ToleranceGate, look: ToleranceLook, where: str, *, final: bool
              ) -> Verdict | None:
        p = net_regression_p(self.worse, self.better, self.n, look.allowed / self.size)
        gate.reading = gate.read.netted(attempts=self.n, regressed=self.worse,
                                        improved=self.better, size=self.size, net_p=p)
        info: Details = {**look.info, "regressed": self.worse, "improved": self.better,
                         "size": self.size, "net_p": p}
        head = (f"{look.text}: worse on {self.worse}, better on {self.better} of {self.n} "
                f"paired attempts, each by {self.size:g}: net p={p:.3g}")
        if p <= look.level:
            return gate.decide(True, f"{head} <= {look.level:.3g}, the netted test of a "
                                     f"rare change ({where})", info)
        if final:
            return gate.decide(False, f"{head} > {look.level:.3g}: not shown within the "
                                      f"allowance ({where})", info)
        return None

    def look(self, gate: ToleranceGate, look: ToleranceLook) -> Verdict | None:
        # No futility: a few attempts moved either way swing the count.
        return self._test(gate, look, f"vs the start config, {look.test.n} tasks",
                          final=False)

    def last(self, gate: ToleranceGate, look: ToleranceLook) -> Verdict:
        verdict = self._test(gate, look, f"at its share of the level, on the extension "
                                         f"too: {look.extension} fresh attempts a task; vs "
                                         f"the start config", final=True)
        assert verdict is not None
        return verdict


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
