"""Confirming one selected candidate: every gate a group-sequential test, stopped early.

The candidate was *selected* on the screening tasks (the first ``screen_tasks`` of the
dev order, attempt block 0). Its confirmation never reads those attempts: it runs the
other dev tasks on block 0, then the screening tasks again on a fresh block (attempt
indices ``k..2k``), so every dev task counts and none of the data that chose the
candidate decides it. Chunks of tasks come in one *look* at a time, and after each
look every open gate is tested at that look's nominal level (:mod:`forge.stats.sequential`):

- ``dev``: improvement over the incumbent beyond ``min_effect``, at the level
  ``alpha_j`` the search spends on its j-th confirmation since the last promotion;
  with ``pooled``, on the dev and the val confirmation tasks together (val's chunks
  interleaved with dev's while it is open): the val attempts are as fresh as dev's,
  and on triage a +0.05 move reads p = 0.007 on 110 dev tasks whatever the attempts
  a task (the spread is between tasks), so only more tasks add power;
- ``val``: non-inferiority against the incumbent (lower bound above ``-val_margin``),
  opened once ``dev`` has passed (pooled: as soon as val data come in), at ``alpha``;
- ``aux:<metric>``: the regression against the *start* config (the one deployed) within
  its tolerance, on every confirmation task (dev and val), each metric at ``alpha``
  (an intersection-union test: below) and anchored at the start, so tolerances cannot
  add up across promotions. A metric the candidate changed on fewer than
  :data:`SPARSE_TASKS` tasks is not read by the t-test, whose bound on a handful of
  rare events is far too narrow, but by an exact group-sequential test of the rate of
  attempts it made worse (:func:`~forge.stats.sequential.rare_event_boundary`; each taken to
  regress by the most one could, the largest value the metric took): it passes when so
  few are worse that a rate of ``allowance / size`` would show so few with a chance
  within the level spent; a metric no attempt changed may also pass, as before, on
  identical deltas over half the tasks (or :data:`~forge.stats.IDENTICAL_PAIRS`
  paired attempts). Where every attempt moved by 0 or the full ``size`` (a 0/1
  metric: a harmful action or none), some made worse and some *better* (``netted``),
  the count of those made worse charges a move that only traded harm between tasks with
  every one of them: such a change is read instead by the netted test
  (:func:`~forge.stats.net_regression_p`, Tango's score test of ``p_worse - p_better
  >= allowance / size``) at the look's nominal level, as the t-test is, with no
  futility rule (a handful of attempts swing it);
- ``floor:<tag>``: critical tasks' pass rates, on every tagged dev and val task (those
  the looks did not reach are run for both configs), checked once ``dev`` and ``val``
  have passed (``floors_ahead``; before, once every other gate had): a few tasks a
  promotion needs whatever the tolerances show, run before a tolerance's further chunks
  take the budget. Run ahead, their attempts are kept from every test's data, which
  reads the tasks its own plan reaches (tagged tasks are no random sample of them); the
  final check finds them run.

A tolerance can need more attempts than the confirmation tasks give: a rare event's
rate is read on attempts, and a move within +0.01 harmful actions by a few thousandths
is left "not shown" on 1,100 paired attempts. With an ``extension`` (fresh attempt
indices no selection has read), a confirmation whose dev and val gates passed and whose
last chunk left a tolerance open runs that block, the candidate and the start, on every
confirmation task (only if the budget holds all of it), and tests each open tolerance
once more on every paired attempt: the t-test once, at :data:`EXTENSION_SHARE` of the
level, its looks before having spent the rest (their spending scaled by ``1 - share``),
so a tolerance the move breaks passes one or the other with probability at most
``alpha`` (a union bound); or, where the metric changed on few tasks, the exact test at
one more look, which may spend what its looks before left of the level (their own
spending unchanged: its first looks pass "no change", which the contest needs); the
netted test, like the t-test, once at :data:`EXTENSION_SHARE` of the level. A block
where only exact tests are open is run only if, at the rate of regressions their looks
saw, one of them would pass with a chance of at least :data:`BLOCK_CHANCE` (the test
counts the attempts made worse, and a metric both configs act on, a few harmful actions
each, has too many for it); skipping a look only lowers its chance to pass.

A gate that crosses its boundary is decided for good; one whose evidence points
clearly the other way (an 80% bound on the wrong side) is decided as failed, which
only removes rejections and so costs no error. Data are fetched only while a gate is
open: dev chunks until ``dev`` decides (with one val chunk after the first, where a
dev-only win shows early), then val chunks while ``val`` or an auxiliary gate is
open, then the dev chunks left while an auxiliary gate is. Data exhausted with a gate
open: that gate fails ("not shown").

A candidate of a precision round was selected on attempts ``0..m·K`` of the dev tasks
(m = 2^round); its confirmation runs every dev and val task on the next ``m·K`` attempts
(``fresh``), which no selection of that round or before has read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scipy import stats as _st

from forge.bench import Bench
from forge.registry import Config
from forge.results import TaskAttempts, paired_attempts
from forge.search.attempt_cache import Rollouts
from forge.search.racing import hopeless
from forge.stats.gates import (
    GateResult,
    aux_text,
    floor_gate,
    paired_regressions,
    regression_allowance,
    regressions,
    score_deltas,
)
from forge.stats.paired import IDENTICAL_PAIRS, PairedTest, net_regression_p, paired_test
from forge.stats.sequential import nominal_level, rare_event_boundary
from forge.task import Task

__all__ = ["EXTENSION_SHARE", "SPARSE_TASKS", "ConfirmOutcome", "Confirmation"]

#: A tolerance's metric changed on fewer tasks than this is read by the exact test for
#: rare events (:func:`~forge.stats.sequential.rare_event_boundary`), not by the t-test: ten
#: tasks of events give a t-test its spread; fewer give it a handful of values.
SPARSE_TASKS = 10

#: The share of a tolerance's level its t-test on the extension block spends (its looks
#: before spend the rest). On the contest (quality.py, 10 seeds), a fifth and 0.35 did
#: alike, with the t-test then let read the exact test's metrics on the block (which
#: broke their level: benchmarks/tolerance_edge.py); capping the exact test's looks at
#: 0.8 alpha, for a share at its extension look, cost triage 0.012 at 5k, and scaling
#: them by 0.8 cost closedform 0.019 at 2k (its first looks pass "no change").
EXTENSION_SHARE = 0.2
#: The least chance, at the rate of regressions a sparse metric's looks saw, that the
#: extension's exact test passes it, for its block to be run: below it the block's
#: rollouts are better spent elsewhere (three of the four blocks the default quickstart
#: ran, none of which passed anything; a move within its tolerance in the tolerance
#: edge benchmark passes in 974 of 1,000 searches, 979 with every block run).
BLOCK_CHANCE = 0.1


@dataclass
class _Gate:
    """One sequential test: its looks so far and, once decided, its verdict."""

    name: str
    level: float
    n_max: int
    #: The share of ``level`` the t-test's looks may spend (the rest left to the
    #: extension's t-test).
    share: float = 1.0
    #: Whether the last look read the metric as changed on fewer than SPARSE_TASKS tasks
    #: (the exact test's): the extension keeps to that test.
    sparse: bool = False
    fractions: list[float] = field(default_factory=list)
    #: Paired attempts at each look (the tolerances' exact test for rare events).
    attempts: list[int] = field(default_factory=list)
    passed: bool | None = None
    reason: str = ""
    details: dict[str, float | int | str | None] = field(default_factory=dict)

    @property
    def open(self) -> bool:
        return self.passed is None

    def look(self, n: int) -> float | None:
        """Register a look with ``n`` paired tasks; its nominal level, or None when the
        look adds no task (no new information: no test)."""
        fraction = min(1.0, n / self.n_max)
        if n < 2 or (self.fractions and fraction <= self.fractions[-1]):
            return None
        self.fractions.append(fraction)
        return nominal_level(self.fractions, self.level * self.share)

    def undecidable(self, t: PairedTest, pairs: Callable[[], int]) -> bool:
        """Identical deltas on fewer than half the tasks decide nothing, unless they rest
        on :data:`~forge.stats.IDENTICAL_PAIRS` paired attempts (``pairs()``): a rare
        event (a harmful action on one attempt in fifty) is absent from a chunk by chance,
        and a t-test would read its absence as certainty. (A tolerance whose metric
        changed on few tasks may pass sooner on the exact test for a rare change.)"""
        return (t.sd == 0 and bool(self.fractions) and self.fractions[-1] < 0.5
                and pairs() < IDENTICAL_PAIRS)

    def decide(self, passed: bool, reason: str, **details: float | int | str | None) -> None:
        self.passed = passed
        self.reason = reason
        self.details.update(details, looks=len(self.fractions), level=self.level)

    def result(self) -> GateResult:
        return GateResult(name=self.name, passed=bool(self.passed), reason=self.reason,
                          details=self.details)


@dataclass
class ConfirmOutcome:
    status: Literal["promoted", "rejected", "budget"]
    gates: list[GateResult]
    dev: dict[str, Any]
    val: dict[str, Any] | None
    aux: dict[str, dict[str, Any]]
    rollouts: int
    looks: int
    not_run: list[str]
    #: The incumbent's and the candidate's mean over the dev confirmation attempts.
    dev_means: tuple[float | None, float | None] = (None, None)
    #: Whether the improvement test paired the val tasks with dev's.
    pooled: bool = False


def _fmt(x: float) -> str:
    return f"{x:+.3f}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


class Confirmation:
    """The confirmation of ``candidate`` against ``incumbent`` (and ``start`` for the
    auxiliary gates). ``run`` fetches what it needs through ``rollouts`` and stops at
    the first look that decides, or when a look would not fit ``budget_left``."""

    def __init__(self, rollouts: Rollouts, bench: Bench, *, incumbent: Config, start: Config,
                 candidate: Config, level: float, dev_order: Sequence[Task], screen_tasks: int,
                 look_tasks: int, val_order: Sequence[Task], val_look_tasks: int, k: int,
                 budget_left: Callable[[], int | None], slack: int,
                 fresh: range | None = None, pooled: bool = False,
                 extension: range | None = None, netted: bool = False,
                 floors_ahead: bool = False) -> None:
        self.rollouts = rollouts
        self.bench = bench
        self.inc, self.start, self.cand = incumbent, start, candidate
        self.k = k
        self.budget_left = budget_left
        self.slack = slack
        gates = bench.spec.gates
        self.gates = gates
        # The dev plan: the tasks screening did not reach on block 0, then the screened
        # ones again on block 1 (fresh seeds), a look per chunk.
        rest, screened = list(dev_order[screen_tasks:]), list(dev_order[:screen_tasks])
        if fresh is not None:
            # A precision round: every dev task on attempts its selection never read.
            rest, screened = list(dev_order), []
        base = fresh or range(k)
        self.dev_plan = [(rest[i:i + look_tasks], base)
                         for i in range(0, len(rest), look_tasks)]
        self.dev_plan += [(screened[i:i + look_tasks], range(k, 2 * k))
                          for i in range(0, len(screened), look_tasks)]
        self.val_plan = [(list(val_order[i:i + val_look_tasks]), base)
                         for i in range(0, len(val_order), val_look_tasks)]
        # Pooled, the improvement test pairs val's tasks too: val never selects either.
        self.pooled = pooled and bool(val_order)
        self.dev = _Gate("dev", level,
                         len(dev_order) + (len(val_order) if self.pooled else 0))
        self.val = _Gate("val", gates.alpha, len(val_order)) if val_order else None
        # The tolerances are checked on every confirmation task, dev and val alike: a
        # metric of rare events needs all the paired tasks there are (measured in
        # benchmarks/quality.py: val alone refused most moves of triage's harmful-action
        # tolerance, and violated no less often).
        n_aux = len(val_order) + len(dev_order)
        # Each metric at the full alpha, not a Bonferroni share: a move is promoted only
        # if *every* tolerance is shown, so one that breaks any tolerance must pass that
        # metric's own test, which happens with probability at most alpha whatever the
        # others do (an intersection-union test, Berger 1982). The promise "every
        # tolerance of a promotion holds, with probability 1 - alpha" needs no share.
        self.extension = extension if extension else None
        self.netted = netted
        self.floors_ahead = floors_ahead
        share = 1.0 - EXTENSION_SHARE if self.extension is not None else 1.0
        self.aux = {m: _Gate(f"aux:{m}", gates.alpha, n_aux, share)
                    for m in bench.spec.metrics}
        self.extended = False
        self.data: dict[tuple[str, str], TaskAttempts] = {}  # (config fp, split) -> attempts
        # The floors' tagged tasks, run ahead of the looks that reach them: kept apart, so
        # no test reads tasks picked by tag before its own plan picks them.
        self.floor_data: dict[tuple[str, str], TaskAttempts] = {}
        self.spent = 0
        self.looks = 0
        self.last_dev: PairedTest | None = None
        self.last_val: PairedTest | None = None
        self.aux_info: dict[str, dict[str, Any]] = {}

    # -- data ------------------------------------------------------------------------

    def _configs(self, split: str) -> list[Config]:
        """Who must run a chunk of ``split`` now: the candidate, the incumbent while its
        gate is open, and the start while an auxiliary gate is open."""
        wanted = [self.cand]
        floors = bool(self.gates.task_floors) and not self.floors_ahead
        if (split == "dev" and self.dev.open) or (split == "val" and self.val is not None and (
                self.val.open or floors or (self.pooled and self.dev.open))):
            # Floors run last compared the candidate with the incumbent on every val
            # task (run ahead, on their tagged tasks alone).
            wanted.append(self.inc)
        if (any(g.open for g in self.aux.values())
                and self.start.fingerprint not in {c.fingerprint for c in wanted}):
            wanted.append(self.start)
        return wanted

    def _fetch(self, split: str, tasks: list[Task], attempts: range,
               configs: list[Config] | None = None, *, look: bool = True,
               into: dict[tuple[str, str], TaskAttempts] | None = None) -> bool:
        configs = configs or self._configs(split)
        data = self.data if into is None else into
        need = sum(self.rollouts.unrequested(c, split, tasks, attempts) for c in configs)
        left = self.budget_left()
        if left is not None and need and (left <= 0 or need > left + self.slack):
            return False
        before = self.rollouts.used
        for c in configs:
            got = self.rollouts.get(c, split, split, tasks, attempts)
            key = (c.fingerprint, split)
            data[key] = data.get(key, TaskAttempts()).merged(got)
        self.spent += self.rollouts.used - before
        self.looks += look
        return True

    def _get(self, config: Config, split: str) -> TaskAttempts:
        return self.data.get((config.fingerprint, split), TaskAttempts())

    # -- gates -----------------------------------------------------------------------

    def _test_dev(self) -> None:
        inc, cand = self._get(self.inc, "dev"), self._get(self.cand, "dev")
        if self.pooled:
            # Task ids are unique across splits (the bench refuses anything else).
            inc, cand = inc.merged(self._get(self.inc, "val")), cand.merged(
                self._get(self.cand, "val"))
        deltas = list(score_deltas(inc, cand).values())
        nominal = self.dev.look(len(deltas))
        if nominal is None:
            return
        t = paired_test(deltas, alpha=nominal, threshold=self.gates.min_effect)
        self.last_dev = t
        where = (f"{self._dev_label} {_fmt(t.effect)} (bounds {_fmt(t.ci_low)}.."
                 f"{_fmt(t.ci_high)}, {t.n} tasks, look {len(self.dev.fractions)})")
        info: dict[str, float | int | str | None] = {**t.as_dict(), "nominal": nominal}
        if self.dev.undecidable(t, lambda: _pairs(paired_attempts(inc, cand))):
            return
        if t.p_value < nominal:
            self.dev.decide(True, f"{where}: p={t.p_value:.3g} < {nominal:.3g}, the look's "
                                  f"share of level {self.dev.level:.3g}", **info)
        elif hopeless(t, self.dev.fractions[-1], self.gates.min_effect, self.dev.level):
            self.dev.decide(False, f"{where}: cannot plausibly improve (futility), "
                                   f"p={t.p_value:.3g}", **info)

    @property
    def _dev_label(self) -> str:
        return "dev+val" if self.pooled else "dev"

    def _test_val(self) -> None:
        assert self.val is not None
        deltas = list(score_deltas(self._get(self.inc, "val"), self._get(self.cand, "val"))
                      .values())
        nominal = self.val.look(len(deltas))
        if nominal is None:
            return
        margin = self.gates.val_margin
        t = paired_test(deltas, alpha=nominal, threshold=-margin)
        self.last_val = t
        info: dict[str, float | int | str | None] = {**t.as_dict(), "margin": margin,
                                                     "nominal": nominal}
        if self.val.undecidable(t, lambda: _pairs(paired_attempts(
                self._get(self.inc, "val"), self._get(self.cand, "val")))):
            return
        if t.p_value < nominal:
            self.val.decide(True, f"val {_fmt(t.effect)}, lower bound {_fmt(t.ci_low)} > "
                                  f"-{margin:g} (margin; {t.n} tasks)", **info)
        elif hopeless(t, self.val.fractions[-1], -margin, self.val.level, optimism=2.0):
            # Two standard errors of benefit of the doubt, not one: a good candidate's
            # first val chunk, taken early, must not drop it on a bad draw.
            self.val.decide(False, f"val {_fmt(t.effect)}: cannot plausibly be shown above "
                                   f"-{margin:g} (margin) on the val tasks ({t.n} tasks)",
                          **info)

    def _aux_pairs(self) -> tuple[TaskAttempts, TaskAttempts]:
        # Task ids are unique across splits (the bench refuses anything else).
        return (self._get(self.start, "dev").merged(self._get(self.start, "val")),
                self._get(self.cand, "dev").merged(self._get(self.cand, "val")))

    def _test_aux(self, metric: str, gate: _Gate) -> None:
        spec = self.bench.spec.metrics[metric]
        start, cand = self._aux_pairs()
        worse, before, after = regressions(spec, start, cand, metric)
        if before is None or after is None:
            return
        nominal = gate.look(len(worse))
        if nominal is None:
            return
        allowed = regression_allowance(spec, before)
        t = paired_test(worse, alpha=nominal)
        # The same data as "room left under the allowance": hopeless as for dev and val.
        room = paired_test([allowed - w for w in worse], alpha=nominal)
        text, info = self._read(metric, before, after, t, allowed, nominal)
        pairs = paired_regressions(spec, start, cand, metric)
        gate.attempts.append(sum(map(len, pairs)))
        changed = _changed(pairs)
        gate.sparse = changed < SPARSE_TASKS
        rare = (_rare_regressions(metric, start, cand, pairs) if changed < SPARSE_TASKS
                else None)
        net = _net_counts(pairs, rare[1]) if rare is not None and self.netted else None
        if rare is not None:
            # Changed on too few tasks for the t-test, whose bound on a handful of rare
            # events is far too narrow (benchmarks/tolerance_edge.py): only the exact
            # test, or the netted one, passes it; the evidence against it may still fail
            # it below (not the netted one's).
            regressed, size = rare
            if net is not None:
                self._test_netted(metric, gate, text, info, net, size, allowed, nominal,
                                  f"vs the start config, {t.n} tasks")
                return  # no futility: a few attempts moved either way swing the count
            most = rare_event_boundary(gate.attempts, gate.fractions, allowed / size,
                                       gate.level)
            self.aux_info[metric].update(attempts=gate.attempts[-1], regressed=regressed,
                                         most=most, size=size)
            if regressed <= most:
                gate.decide(True, f"{text}: worse on {regressed} of {gate.attempts[-1]} "
                                  f"paired attempts, each by at most {size:g}: few enough "
                                  f"for the exact test of a rare change (at most {most}; vs "
                                  f"the start config, {t.n} tasks)",
                            **info, regressed=regressed, most=most, size=size)
                return
        if (rare is None or not changed) and not gate.undecidable(t, lambda: gate.attempts[-1]) \
                and t.ci_high <= allowed + 1e-12:
            gate.decide(True, f"{text} <= allowed (vs the start config, {t.n} tasks)", **info)
            return
        if gate.fractions[-1] >= 0.5 and hopeless(room, gate.fractions[-1], 0.0, gate.level):
            # Not on fewer than half the tasks: a metric of rare events (a harmful action
            # in fifty attempts) swings too much on a chunk to give up on it.
            gate.decide(False, f"{text}: cannot plausibly be shown within the allowance "
                               f"(vs the start config, {t.n} tasks)", **info)

    def _test_netted(self, metric: str, gate: _Gate, text: str,
                     info: dict[str, float | int | str | None], net: tuple[int, int, int],
                     size: float, allowed: float, level: float, where: str,
                     final: bool = False) -> None:
        """The netted test of a sparse 0/1 change at ``level``: passed when the net rate of
        attempts made worse is shown below ``allowed / size``; failed only at the
        ``final`` look (the extension's), left open before."""
        worse, better, n = net
        p = net_regression_p(worse, better, n, allowed / size)
        read = dict(regressed=worse, improved=better, size=size, net_p=p)
        self.aux_info[metric].update(attempts=n, **read)
        info.update(read)
        head = (f"{text}: worse on {worse}, better on {better} of {n} paired attempts, each "
                f"by {size:g}: net p={p:.3g}")
        if p <= level:
            gate.decide(True, f"{head} <= {level:.3g}, the netted test of a rare change "
                              f"({where})", **info)
        elif final:
            gate.decide(False, f"{head} > {level:.3g}: not shown within the allowance "
                               f"({where})", **info)

    def _read(self, metric: str, before: float, after: float, t: PairedTest, allowed: float,
              nominal: float) -> tuple[str, dict[str, float | int | str | None]]:
        """A tolerance test's reason head and details; its reading kept for the record."""
        spec = self.bench.spec.metrics[metric]
        info: dict[str, float | int | str | None] = {
            "before": before, "after": after, "bound": t.ci_high, "allowed": allowed,
            "direction": spec.direction, "vs": "start", "n_tasks": t.n, "nominal": nominal}
        self.aux_info[metric] = {k: v for k, v in info.items() if k != "nominal"}
        return aux_text(metric, spec, before, after, t.ci_high, allowed), info

    def _test_open(self) -> None:
        if self.dev.open:
            self._test_dev()
        if self.val is not None and self.val.open and self._get(self.cand, "val"):
            self._test_val()
        for metric, gate in self.aux.items():
            if gate.open:
                self._test_aux(metric, gate)

    def _failed(self) -> bool:
        gates = [self.dev, *(g for g in [self.val] if g is not None), *self.aux.values()]
        return any(g.passed is False for g in gates)

    def _all_passed(self) -> bool:
        gates = [self.dev, *(g for g in [self.val] if g is not None), *self.aux.values()]
        return all(g.passed for g in gates)

    # -- the procedure -------------------------------------------------------------

    def run(self) -> ConfirmOutcome:
        dev_i = val_i = 0
        while not self._failed() and not self._all_passed():
            if self.pooled and self.dev.open and val_i < len(self.val_plan) and (
                    dev_i >= len(self.dev_plan)
                    or val_i * len(self.dev_plan) < dev_i * len(self.val_plan)):
                # Pooled: val's chunks keep pace with dev's, so each look of the
                # improvement test adds tasks of both splits in their proportion.
                split, (tasks, attempts) = "val", self.val_plan[val_i]
                val_i += 1
            elif (not self.pooled and self.dev.open and dev_i >= 1 and val_i == 0
                    and self.val is not None and self.val_plan):
                # One val chunk early: a dev-only win shows there, before the rest of the
                # dev chunks are spent on it (a candidate that passes needs it anyway).
                split, (tasks, attempts) = "val", self.val_plan[0]
                val_i = 1
            elif self.dev.open and dev_i < len(self.dev_plan):
                split, (tasks, attempts) = "dev", self.dev_plan[dev_i]
                dev_i += 1
            elif (self.dev.passed and self.val is not None and val_i < len(self.val_plan)
                  and (self.val.open or any(g.open for g in self.aux.values()))):
                split, (tasks, attempts) = "val", self.val_plan[val_i]
                val_i += 1
            elif (self.dev.passed and dev_i < len(self.dev_plan)
                  and any(g.open for g in self.aux.values())):
                split, (tasks, attempts) = "dev", self.dev_plan[dev_i]
                dev_i += 1
            elif self._extend():
                continue
            else:
                self._exhaust()
                break
            if not self._fetch(split, tasks, attempts):
                return self._outcome("budget")
            self._test_open()
            if (self.floors_ahead and self._improvement_shown() and not self.floor_data
                    and not self._all_passed() and not self._failed()):
                # Floors before the tolerances' further chunks: a promotion needs both,
                # and the floors, a few tagged tasks, must not be what the budget lacks
                # once a tolerance has taken the rest.
                floors = self._check_floors(ahead=True)
                if floors is None:
                    return self._outcome("budget")
                if not all(g.passed for g in floors):
                    return self._outcome("rejected", floors)
        if self._all_passed():
            floors = self._check_floors()
            if floors is None:
                return self._outcome("budget")
            if not all(g.passed for g in floors):
                return self._outcome("rejected", floors)
            return self._outcome("promoted", floors)
        return self._outcome("rejected")

    def _improvement_shown(self) -> bool:
        return bool(self.dev.passed) and (self.val is None or bool(self.val.passed))

    def _check_floors(self, *, ahead: bool = False) -> list[GateResult] | None:
        """The floors on every tagged task (run now if not yet), or None when the budget
        does not hold the tasks left to run. ``ahead`` (gates still open): the tagged
        tasks are kept apart from the tests' data, which must not read tasks picked by
        tag before their own plan reaches them; the final check finds them run."""
        if not self.gates.task_floors:
            return []
        data = self.floor_data if ahead else self.data
        if not self._cover_floors(data):
            return None
        return self._floors(data)

    def _extend(self) -> bool:
        """The extension block, once, where only tolerances are open (module docstring):
        False when there is none, it was run, or the budget does not hold all of it."""
        if (self.extension is None or self.extended or not self.dev.passed
                or (self.val is not None and not self.val.passed)
                or not any(g.open for g in self.aux.values())):
            return False
        self.extended = True
        plan = [("dev", tasks) for tasks, _ in self.dev_plan]
        plan += [("val", tasks) for tasks, _ in self.val_plan]
        configs = [self.cand, self.start]
        need = sum(self.rollouts.unrequested(c, split, tasks, self.extension)
                   for split, tasks in plan for c in configs)
        left = self.budget_left()
        if left is not None and need > left:
            return False
        block = sum(len(tasks) for _, tasks in plan) * len(self.extension)
        if not any(self._may_pass(metric, gate, block)
                   for metric, gate in self.aux.items() if gate.open):
            return False
        for split, tasks in plan:
            self._fetch(split, tasks, self.extension, configs, look=False)
        self.looks += 1
        for metric, gate in self.aux.items():
            if gate.open:
                self._test_extended(metric, gate)
        return True

    def _may_pass(self, metric: str, gate: _Gate, block: int) -> bool:
        """Whether the extension's test of ``metric`` may plausibly pass it: the t-test
        and the netted test may (the netted one reads attempts made better too, which
        no rate of regressions predicts); the exact test not when, were the block's
        attempts to regress at the rate its looks saw, it would stay under its last
        look's boundary with a chance below :data:`BLOCK_CHANCE`. Only which
        confirmations run a block depends on this, not any test's level."""
        # The last look's reading (no data has come in since): its count of attempts
        # made worse and the most one could regress, set where the exact test read it
        # (a ``net_p`` beside them: the netted test read it).
        info = self.aux_info.get(metric, {})
        if "net_p" in info or not gate.sparse or not gate.attempts or "size" not in info:
            return True
        regressed, seen = int(info["regressed"]), gate.attempts[-1]
        most = rare_event_boundary([*gate.attempts, seen + block], [*gate.fractions, 1.0],
                                   float(info["allowed"]) / float(info["size"]), gate.level)
        if _st.binom.cdf(most - regressed, block, regressed / seen) >= BLOCK_CHANCE:
            return True
        info["extension_most"] = most  # the mark of a block skipped for it (_exhaust)
        return False

    def _test_extended(self, metric: str, gate: _Gate) -> None:
        """``metric``'s tolerance on every paired attempt, the extension's too (the t-test
        at :data:`EXTENSION_SHARE` of its level, the exact test at its last look); decided
        either way: nothing comes after."""
        spec = self.bench.spec.metrics[metric]
        start, cand = self._aux_pairs()
        worse, before, after = regressions(spec, start, cand, metric)
        if before is None or after is None:
            return  # on no task did both report it: not shown (_exhaust)
        level = gate.level * EXTENSION_SHARE
        allowed = regression_allowance(spec, before)
        t = paired_test(worse, alpha=level)
        pairs = paired_regressions(spec, start, cand, metric)
        attempts = sum(map(len, pairs))
        changed = _changed(pairs)
        text, info = self._read(metric, before, after, t, allowed, level)
        info["extension"] = len(self.extension or ())
        where = (f"on the extension too ({len(self.extension or ())} fresh attempts a "
                 f"task, {attempts} paired attempts; vs the start config)")
        # The test the looks read it by, whatever the block changed: twice the attempts
        # spread a rare event over more tasks, and the t-test on it at the edge passed
        # 5.8% of 1,000 searches where it was let in (benchmarks/tolerance_edge.py).
        rare = _rare_regressions(metric, start, cand, pairs) if gate.sparse else None
        net = _net_counts(pairs, rare[1]) if rare is not None and self.netted else None
        if rare is not None and net is not None:
            # The netted test once more, at the t-test's share of the level.
            self._test_netted(metric, gate, text, info, net, rare[1], allowed, level,
                              f"at its share of the level, on the extension too: "
                              f"{len(self.extension or ())} fresh attempts a task; vs the "
                              f"start config", final=True)
            return
        if rare is not None:
            # The exact test's next look, at what its looks before left of the level.
            regressed, size = rare
            most = rare_event_boundary([*gate.attempts, attempts], [*gate.fractions, 1.0],
                                       allowed / size, gate.level)
            self.aux_info[metric].update(attempts=attempts, regressed=regressed, most=most,
                                         size=size)
            info.update(regressed=regressed, most=most, size=size)
            if regressed <= most:
                gate.decide(True, f"{text}: worse on {regressed} paired attempts, each by at "
                                  f"most {size:g}: few enough for the exact test's last "
                                  f"look (at most {most}) {where}", **info)
                return
        if (not gate.sparse or not changed) and t.ci_high <= allowed + 1e-12:
            gate.decide(True, f"{text} <= allowed at level {level:.3g} {where}", **info)
            return
        gate.decide(False, f"{text}: not shown within the allowance {where}", **info)

    def _cover_floors(self, into: dict[tuple[str, str], TaskAttempts] | None = None) -> bool:
        """Both configs on every tagged dev and val task a floor names, each on its
        chunk's attempts (those the looks ran cost nothing again); False when the budget
        does not allow the rest. A floor holds for *every* tagged task: checked on the
        tasks an early decision happened to run, it compared a few of them, or none."""
        tags = set(self.gates.task_floors)
        for split, plan in (("dev", self.dev_plan), ("val", self.val_plan)):
            for tasks, attempts in plan:
                tagged = [t for t in tasks if tags & set(t.tags)]
                if tagged and not self._fetch(split, tagged, attempts, [self.cand, self.inc],
                                              look=False, into=into):
                    return False
        return True

    def _exhaust(self) -> None:
        """Data ran out: open gates fail as not shown; val not opened stays not run."""
        if self.dev.open:
            t = self.last_dev
            label = self._dev_label
            shown = f" ({label} {_fmt(t.effect)}, p={t.p_value:.3g}, {t.n} tasks)" if t else ""
            self.dev.decide(False, f"{label}: no significant improvement on the confirmation "
                                   f"tasks{shown}", **(t.as_dict() if t else {}))
            return
        if self.val is not None and self.val.open:
            t = self.last_val
            self.val.decide(False, f"val {_fmt(t.effect) if t else '?'}: not shown above "
                                   f"-{self.gates.val_margin:g} (margin)",
                            **(t.as_dict() if t else {}))
            return
        for metric, gate in self.aux.items():
            if gate.open:
                info = self.aux_info.get(metric)
                # The gate's name heads its reason where it is shown: not repeated here.
                shown = (f"{metric}: on no task did both report it" if info is None
                         else aux_text(metric, self.bench.spec.metrics[metric],
                                       float(info["before"]), float(info["after"]),
                                       float(info["bound"]), float(info["allowed"])))
                why = ("; a block of fresh attempts could not plausibly show it"
                       if info is not None and "extension_most" in info else "")
                gate.decide(False, f"{shown}: not shown within the allowance (vs the start "
                                   f"config{why})", **(info or {}))

    def _floors(self, data: dict[tuple[str, str], TaskAttempts]) -> list[GateResult]:
        def seen(config: Config, split: str) -> TaskAttempts:
            return data.get((config.fingerprint, split), TaskAttempts())

        checks = [("dev", seen(self.inc, "dev"), seen(self.cand, "dev"))]
        if self.val is not None:
            checks.append(("val", seen(self.inc, "val"), seen(self.cand, "val")))
        tags = {t.id: list(t.tags) for s in self.bench.splits.values() for t in s}
        return [floor_gate(tag, floor, checks, tags)
                for tag, floor in self.gates.task_floors.items()]

    def _outcome(self, status: Literal["promoted", "rejected", "budget"],
                 floors: Sequence[GateResult] = ()) -> ConfirmOutcome:
        decided = [g for g in [self.dev, self.val, *self.aux.values()]
                   if g is not None and not g.open]
        results = [g.result() for g in decided] + list(floors)
        not_run = [] if self.val is None or self.val.fractions else ["val"]
        t = self.last_dev
        dev: dict[str, Any] = {}
        if t is not None:
            dev = {**t.as_dict(), "level": self.dev.level, "looks": len(self.dev.fractions),
                   "nominal": self.dev.details.get("nominal")}
        val = None
        if self.last_val is not None and self.val is not None:
            val = {**self.last_val.as_dict(), "looks": len(self.val.fractions),
                   "nominal": self.val.details.get("nominal"),
                   **dict(zip(("before", "after"), _shared_means(self._get(self.inc, "val"),
                                                                 self._get(self.cand, "val")),
                              strict=True))}
        means = _shared_means(self._get(self.inc, "dev"), self._get(self.cand, "dev"))
        return ConfirmOutcome(status, results, dev, val, self.aux_info, self.spent, self.looks,
                              not_run, means, self.pooled)



def _pairs(paired: dict[str, list[Any]]) -> int:
    return sum(map(len, paired.values()))


def _shared_means(a: TaskAttempts, b: TaskAttempts) -> tuple[float | None, float | None]:
    """Both configs' mean scores over the tasks both ran (what their delta compares)."""
    shared = [t for t in a if t in b]
    return (TaskAttempts({t: a[t] for t in shared}).mean_score,
            TaskAttempts({t: b[t] for t in shared}).mean_score)


def _changed(pairs: list[list[float]]) -> int:
    """The tasks of ``pairs`` (regressions, per task and attempt) with any change."""
    return sum(1 for attempts in pairs if any(d != 0 for d in attempts))


def _net_counts(pairs: list[list[float]], size: float) -> tuple[int, int, int] | None:
    """For a sparse change where every paired attempt moved by 0 or ``size`` either way
    (a 0/1 metric: a harmful action or none), some made worse and some *better*: the
    attempts made worse, made better, and in all, which the netted test reads
    (:func:`~forge.stats.net_regression_p`). None otherwise: a change that made no
    attempt better has nothing to net, and one that made none worse passes the exact
    test's count of none soonest (its flat spending passes "no change" on some 300
    paired attempts at +0.01, where the netted test's early looks have almost none of
    the level: on triage at 2k it lost `temperature` 0.8 -> 0.0 in 3 of 40 searches)."""
    flat = [d for attempts in pairs for d in attempts]
    if any(d != 0 and not math.isclose(abs(d), size) for d in flat):
        return None
    worse, better = sum(d > 0 for d in flat), sum(d < 0 for d in flat)
    return (worse, better, len(flat)) if better and worse else None


def _rare_regressions(metric: str, start: TaskAttempts, cand: TaskAttempts,
                      pairs: list[list[float]]) -> tuple[int, float] | None:
    """For a metric changed on fewer than :data:`SPARSE_TASKS` tasks of ``pairs`` (the
    regressions, per task and attempt): the attempts it regressed on, and the most one
    attempt could regress (the largest value the metric took on either config, or the
    largest regression seen if larger). None when it took no value but 0 (nothing to
    scale a rare change by: it waits for half the tasks)."""
    worse = [d for attempts in pairs for d in attempts if d > 0]
    largest = max((abs(a.metrics[metric]) for config in (start, cand)
                   for attempts in config.values() for a in attempts
                   if a.stop_reason == "completed" and metric in a.metrics), default=0.0)
    size = max([largest, *worse])
    return (len(worse), size) if size > 0 and pairs else None
