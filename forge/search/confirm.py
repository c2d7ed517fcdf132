"""Confirming one selected candidate: a look scheduler over group-sequential gates,
stopped early.

The candidate was *selected* on the screening tasks (the first ``screen_tasks`` of the
dev order, attempt block 0). Its confirmation never reads those attempts: it runs the
other dev tasks on block 0, then the screening tasks again on a fresh block (attempt
indices ``k..2k``), so every dev task counts and none of the data that chose the
candidate decides it. Chunks of tasks come in one *look* at a time, and after each
look every open gate is tested at that look's nominal level (:mod:`forge.gates`):
``dev`` (:class:`~forge.gates.ImprovementGate`, on the dev and val tasks
together where the bench has val tasks, val's chunks interleaved with dev's while it is
open), ``val`` (:class:`~forge.gates.NonInferiorityGate`), an ``aux:<metric>``
per tolerance (:class:`~forge.gates.ToleranceGate`, on every confirmation task),
and the ``floor:<tag>`` gates (:class:`~forge.gates.FloorGate`), checked once
``dev`` and ``val`` have passed on every tagged task (run now if the looks did not
reach them): run ahead, before a tolerance's further chunks take the budget, their
attempts are kept from every test's data, which reads the tasks its own plan reaches
(tagged tasks are no random sample of them); the final check finds them run.

A gate that crosses its boundary is decided for good; one whose evidence points
clearly the other way is decided as failed, which only removes rejections and so costs
no error. Data are fetched only while a gate is open: dev (and val) chunks until ``dev``
decides, then val chunks while ``val`` or a tolerance is open, then the dev chunks left
while a tolerance is. Data exhausted with a gate open: that gate fails ("not shown").

A tolerance can need more attempts than the confirmation tasks give: a rare event's
rate is read on attempts, and a move within +0.01 harmful actions by a few thousandths
is left "not shown" on 1,100 paired attempts. With an ``extension`` (fresh attempt
indices no selection has read), a confirmation whose dev and val gates passed and whose
last chunk left a tolerance open runs that block, the candidate and the start, on every
confirmation task (only if the budget holds all of it), and tests each open tolerance
once more on every paired attempt (:meth:`~forge.gates.ToleranceGate.extend`). A
block where only exact tests are open is run only if one of them may plausibly pass
(:meth:`~forge.gates.ToleranceGate.may_extend`); skipping a look only lowers its
chance to pass.

A candidate of a precision round was selected on attempts ``0..m·K`` of the dev tasks
(m = 2^round); its confirmation runs every dev and val task on the next ``m·K`` attempts
(``fresh``), which no selection of that round or before has read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from forge.bench.loader import Bench
from forge.config.registry import Config
from forge.core.task import Task
from forge.gates import (
    BLOCK_CHANCE,
    EXTENSION_SHARE,
    SPARSE_TASKS,
    FloorGate,
    ImprovementGate,
    NonInferiorityGate,
    PairedScores,
    Regressions,
    SequentialGate,
    SplitPair,
    ToleranceGate,
    ToleranceReading,
    UnscoredGate,
)
from forge.gates.checks import GateResult
from forge.results.model import TaskAttempts
from forge.search.attempt_cache import AttemptCache, Fetch, allowed
from forge.search.confirm_outcome import (
    ConfirmOutcome,
    ImprovementReading,
    NonInferiorityReading,
)
from forge.stats.unscored import failure_pairs

__all__ = [
    "BLOCK_CHANCE",
    "EXTENSION_SHARE",
    "SPARSE_TASKS",
    "Chunk",
    "ConfirmOutcome",
    "Confirmation",
]

#: Attempts by (config fingerprint, split).
_Data = dict[tuple[str, str], TaskAttempts]


@dataclass(frozen=True)
class Chunk:
    """A chunk of one split's tasks on a range of attempt indices."""

    split: Literal["dev", "val"]
    tasks: list[Task]
    attempts: range


def _chunks(split: Literal["dev", "val"], tasks: Sequence[Task], size: int,
            attempts: range) -> list[Chunk]:
    return [Chunk(split, list(tasks[i:i + size]), attempts)
            for i in range(0, len(tasks), size)]


class Confirmation:
    """The confirmation of ``candidate`` against ``incumbent`` (and ``start`` for the
    tolerances) at ``level``. :meth:`run` asks for the attempts it needs through
    ``rollouts`` and stops at the first look that decides, or when a look does not fit
    the budget; ``extension`` is the block of fresh attempt indices a tolerance left
    open may be read on (None: none).

    Before each chunk it asks the budget for a :class:`~forge.search.attempt_cache.Permit`,
    and before the extension block for one run whole or not at all; a chunk the budget
    refuses (which marks it spent) ends the confirmation (the outcome's status is then
    ``budget``, as journaled). :meth:`run` is a
    :data:`~forge.search.attempt_cache.Fetch`: a driver answers its rollout requests and
    permits (:func:`~forge.search.attempt_cache.drive`, or the search's ask/tell loop)."""

    def __init__(self, rollouts: AttemptCache, bench: Bench, *, incumbent: Config, start: Config,
                 candidate: Config, level: float, dev_order: Sequence[Task], screen_tasks: int,
                 look_tasks: int, val_order: Sequence[Task], val_look_tasks: int, k: int,
                 fresh: range | None = None,
                 extension: range | None = None) -> None:
        self.rollouts = rollouts
        self.bench = bench
        self.inc, self.start, self.cand = incumbent, start, candidate
        self.extension = extension if extension else None
        gates = bench.spec.gates
        # The dev plan: the tasks screening did not reach on block 0, then the screened
        # ones again on block 1 (fresh seeds), a look per chunk.
        rest, screened = list(dev_order[screen_tasks:]), list(dev_order[:screen_tasks])
        if fresh is not None:
            # A precision round: every dev task on attempts its selection never read.
            rest, screened = list(dev_order), []
        base = fresh or range(k)
        self.dev_plan = (_chunks("dev", rest, look_tasks, base)
                         + _chunks("dev", screened, look_tasks, range(k, 2 * k)))
        self.val_plan = _chunks("val", val_order, val_look_tasks, base)
        self._dev_i = self._val_i = 0
        # The improvement test pairs val's tasks too: val never selects either.
        self.pooled = bool(val_order)
        self.dev = ImprovementGate(level, len(dev_order) + len(val_order),
                                   min_effect=gates.min_effect, pooled=self.pooled)
        self.val = (NonInferiorityGate(gates.alpha, len(val_order), margin=gates.val_margin)
                    if val_order else None)
        share = 1.0 - EXTENSION_SHARE if self.extension is not None else 1.0
        self.aux = {m: ToleranceGate(m, spec, gates.alpha, len(val_order) + len(dev_order),
                                     share)
                    for m, spec in bench.spec.metrics.items()}
        self.floors = [FloorGate(tag, floor) for tag, floor in gates.task_floors.items()]
        self.unscored = UnscoredGate(gates.alpha, len(val_order) + len(dev_order),
                                     allowed=gates.unscored.max_increase)
        #: The chunks read so far: the start runs them all once the candidate fails.
        self.read: list[Chunk] = []
        self.extended = False
        self.data: _Data = {}
        # The floors' tagged tasks, run ahead of the looks that reach them: kept apart, so
        # no test reads tasks picked by tag before its own plan picks them.
        self.floor_data: _Data = {}
        self.spent = 0
        self.looks = 0
        #: Each tolerance's last reading, in the order first read (the record keeps it).
        self.readings: dict[str, ToleranceReading] = {}

    # -- the procedure -------------------------------------------------------------

    def run(self) -> Fetch[ConfirmOutcome]:
        """Look after look until every gate is decided, or one failed, or the budget
        cuts it short; the floors last (or as soon as dev and val passed)."""
        while not self._failed() and not self._all_passed():
            chunk = self._next_chunk()
            if chunk is None:
                if (yield from self._extend()):
                    continue
                self._exhaust()
                break
            if not (yield from self._fetch(chunk.split, chunk.tasks, chunk.attempts)):
                return self._cut()
            self.read.append(chunk)
            if not (yield from self._cover_start()):
                return self._cut()
            self._test_open()
            if self._floors_due():
                # Floors before the tolerances' further chunks: a promotion needs both,
                # and the floors, a few tagged tasks, must not be what the budget lacks
                # once a tolerance has taken the rest.
                floors = yield from self._check_floors(self.floor_data)
                if floors is None:
                    return self._cut()
                if not all(g.passed for g in floors):
                    return self._outcome("rejected", floors)
        if not self._all_passed():
            return self._outcome("rejected")
        floors = yield from self._check_floors(self.data)
        if floors is None:
            return self._cut()
        return self._outcome("promoted" if all(g.passed for g in floors) else "rejected",
                             floors)

    def _next_chunk(self) -> Chunk | None:
        """The next chunk an open gate needs, in the plan's order; None when none is."""
        dev_left, val_left = self._dev_i < len(self.dev_plan), self._val_i < len(self.val_plan)
        if self.dev.open:
            if val_left and (not dev_left or self._val_i * len(self.dev_plan)
                             < self._dev_i * len(self.val_plan)):
                # Val's chunks keep pace with dev's, so each look of the improvement
                # test adds tasks of both splits in their proportion.
                return self._take_val()
            return self._take_dev() if dev_left else None
        if not self.dev.passed:
            return None
        tolerances = any(g.open for g in self.aux.values())
        if self.val is not None and val_left and (self.val.open or tolerances):
            return self._take_val()
        return self._take_dev() if dev_left and tolerances else None

    def _take_dev(self) -> Chunk:
        self._dev_i += 1
        return self.dev_plan[self._dev_i - 1]

    def _take_val(self) -> Chunk:
        self._val_i += 1
        return self.val_plan[self._val_i - 1]

    def _cut(self) -> ConfirmOutcome:
        """A look did not fit the budget (which is spent now): the search stops after
        this confirmation."""
        return self._outcome("budget")

    # -- data ------------------------------------------------------------------------

    def _configs(self, split: str) -> list[Config]:
        """Who must run a chunk of ``split`` now: the candidate, the incumbent while its
        gate is open, and the start while a tolerance is open."""
        wanted = [self.cand]
        if (split == "dev" and self.dev.open) or (split == "val" and self.val is not None and (
                self.val.open or self.dev.open)):
            wanted.append(self.inc)
        if ((any(g.open for g in self.aux.values()) or self._start_for_failures())
                and self.start.fingerprint not in {c.fingerprint for c in wanted}):
            wanted.append(self.start)
        return wanted

    def _start_for_failures(self) -> bool:
        """Whether the failure-share gate needs the start's attempts: it is open and the
        candidate has failed (a candidate that never failed cannot fail more)."""
        return self.unscored.open and any(
            a.failed for items in self._both(self.cand).values() for a in items)

    def _cover_start(self) -> Fetch[bool]:
        """The start on every chunk read so far, once the failure-share gate needs it
        (those it ran cost nothing again); False when the budget does not allow them."""
        if not self._start_for_failures():
            return True
        for chunk in self.read:
            if not (yield from self._fetch(chunk.split, chunk.tasks, chunk.attempts,
                                           [self.start], look=False)):
                return False
        return True

    def _fetch(self, split: str, tasks: list[Task], attempts: range,
               configs: list[Config] | None = None, *, look: bool = True,
               into: _Data | None = None) -> Fetch[bool]:
        """Each config's attempts on ``tasks`` into ``into`` (the tests' data unless
        told); False, fetching nothing, when the budget does not allow them."""
        configs = configs or self._configs(split)
        data = self.data if into is None else into
        need = sum(self.rollouts.unrequested(c, split, tasks, attempts) for c in configs)
        if not (yield from allowed(need)):
            return False
        before = self.rollouts.used
        for c in configs:
            got = yield from self.rollouts.fetch(c, split, split, tasks, attempts)
            key = (c.fingerprint, split)
            data[key] = data.get(key, TaskAttempts()).merged(got)
        self.spent += self.rollouts.used - before
        self.looks += look
        return True

    def _get(self, config: Config, split: str) -> TaskAttempts:
        return self.data.get((config.fingerprint, split), TaskAttempts())

    def _both(self, config: Config) -> TaskAttempts:
        # Task ids are unique across splits (the bench refuses anything else).
        return self._get(config, "dev").merged(self._get(config, "val"))

    def _regressions(self, metric: str) -> Regressions:
        return Regressions(metric, self.bench.spec.metrics[metric], self._both(self.start),
                           self._both(self.cand))

    # -- gates -----------------------------------------------------------------------

    def _test_open(self) -> None:
        if self.dev.open:
            # Pooled: val's tasks with dev's (none where the bench has no val tasks).
            self.dev.test(PairedScores(self._both(self.inc), self._both(self.cand)))
        if self.val is not None and self.val.open and self._get(self.cand, "val"):
            self.val.test(PairedScores(self._get(self.inc, "val"), self._get(self.cand, "val")))
        for metric, gate in self.aux.items():
            if gate.open:
                gate.test(self._regressions(metric))
                self._note(gate)
        self._test_unscored()

    def _test_unscored(self) -> None:
        """The failure-share gate, after the others: decided once they all passed."""
        if not self.unscored.open:
            return
        cand = [a for items in self._both(self.cand).values() for a in items
                if a.stop_reason != "cancelled"]
        others = [g for g in self._sequential() if g is not self.unscored]
        vs_inc = (None if self.inc.fingerprint == self.start.fingerprint
                  else failure_pairs(self._both(self.inc), self._both(self.cand)))
        self.unscored.test(failure_pairs(self._both(self.start), self._both(self.cand)),
                           attempts=len(cand), failed=sum(a.failed for a in cand),
                           last=all(g.passed for g in others), incumbent=vs_inc)

    def _note(self, gate: ToleranceGate) -> None:
        if gate.reading is not None:
            self.readings[gate.metric] = gate.reading

    def _sequential(self) -> list[SequentialGate]:
        return [self.dev, *(g for g in [self.val] if g is not None), *self.aux.values(),
                self.unscored]

    def _failed(self) -> bool:
        return any(g.passed is False for g in self._sequential())

    def _all_passed(self) -> bool:
        return all(g.passed for g in self._sequential())

    def _improvement_shown(self) -> bool:
        return bool(self.dev.passed) and (self.val is None or bool(self.val.passed))

    def _floors_due(self) -> bool:
        """The floors run ahead once dev and val passed, with a tolerance still open."""
        return (self._improvement_shown() and not self.floor_data
                and not self._all_passed() and not self._failed())

    def _check_floors(self, data: _Data) -> Fetch[list[GateResult] | None]:
        """The floors on every tagged task, run into ``data`` if not yet (the floors'
        own data ahead of the final check, the tests' data at it), or None when the
        budget does not hold the tasks left to run."""
        if not self.floors:
            return []
        if not (yield from self._cover_floors(data)):
            return None
        pairs = [SplitPair("dev", *self._seen(data, "dev"))]
        if self.val is not None:
            pairs.append(SplitPair("val", *self._seen(data, "val")))
        tags = {t.id: list(t.tags) for s in self.bench.splits.values() for t in s}
        return [floor.check(pairs, tags) for floor in self.floors]

    def _seen(self, data: _Data, split: str) -> tuple[TaskAttempts, TaskAttempts]:
        return (data.get((self.inc.fingerprint, split), TaskAttempts()),
                data.get((self.cand.fingerprint, split), TaskAttempts()))

    def _cover_floors(self, into: _Data) -> Fetch[bool]:
        """Both configs on every tagged dev and val task a floor names, each on its
        chunk's attempts (those the looks ran cost nothing again); False when the budget
        does not allow the rest."""
        tags = {floor.tag for floor in self.floors}
        for chunk in [*self.dev_plan, *self.val_plan]:
            tagged = [t for t in chunk.tasks if tags & set(t.tags)]
            if tagged and not (yield from self._fetch(chunk.split, tagged, chunk.attempts,
                                                      [self.cand, self.inc], look=False,
                                                      into=into)):
                return False
        return True

    def _extend(self) -> Fetch[bool]:
        """The extension block, once, where only tolerances are open: False when there
        is none, it was run, the budget does not hold all of it, or no open tolerance
        could plausibly pass on it."""
        extension = self.extension
        if (extension is None or self.extended or not self._improvement_shown()
                or not any(g.open for g in self.aux.values())):
            return False
        self.extended = True
        plan = [*self.dev_plan, *self.val_plan]
        configs = [self.cand, self.start]
        if not (yield from self._block_worth(plan, configs, extension)):
            return False
        for chunk in plan:
            yield from self._fetch(chunk.split, chunk.tasks, extension, configs, look=False)
        self.looks += 1
        for metric, gate in self.aux.items():
            if gate.open:
                gate.extend(self._regressions(metric), len(extension))
                self._note(gate)
        self._test_unscored()
        return True

    def _block_worth(self, plan: list[Chunk], configs: list[Config], extension: range
                     ) -> Fetch[bool]:
        """Whether the budget holds the whole block and an open tolerance may plausibly
        pass on it (each asked in turn until one may: those asked are marked)."""
        need = sum(self.rollouts.unrequested(c, chunk.split, chunk.tasks, extension)
                   for chunk in plan for c in configs)
        if not (yield from allowed(need, whole=True)):
            return False
        block = sum(len(chunk.tasks) for chunk in plan) * len(extension)
        return any(self._may_extend(gate, block) for gate in self.aux.values() if gate.open)

    def _may_extend(self, gate: ToleranceGate, block: int) -> bool:
        may = gate.may_extend(block)
        self._note(gate)
        return may

    def _exhaust(self) -> None:
        """Data ran out: open gates fail as not shown; val not opened stays not run."""
        if self.dev.open:
            self.dev.exhaust()
        elif self.val is not None and self.val.open:
            self.val.exhaust()
        elif any(g.open for g in self.aux.values()):
            for gate in self.aux.values():
                if gate.open:
                    gate.exhaust()
        elif self.unscored.open:
            self.unscored.exhaust()

    def _outcome(self, status: Literal["promoted", "rejected", "budget"],
                 floors: Sequence[GateResult] = ()) -> ConfirmOutcome:
        decided = [g.result() for g in self._sequential() if not g.open]
        not_run = () if self.val is None or self.val.fractions else ("val",)
        dev = None
        if self.dev.last is not None:
            dev = ImprovementReading(self.dev.last, self.dev.level, len(self.dev.fractions),
                                     self.dev.nominal)
        val = None
        if self.val is not None and self.val.last is not None:
            val = NonInferiorityReading(self.val.last, len(self.val.fractions),
                                        self.val.nominal,
                                        *_shared_means(self._get(self.inc, "val"),
                                                       self._get(self.cand, "val")))
        means = _shared_means(self._get(self.inc, "dev"), self._get(self.cand, "dev"))
        return ConfirmOutcome(status, (*decided, *floors), dev, val, dict(self.readings),
                              self.spent, self.looks, not_run, means, self.pooled)


def _shared_means(a: TaskAttempts, b: TaskAttempts) -> tuple[float | None, float | None]:
    """Both configs' mean scores over the tasks both ran (what their delta compares)."""
    shared = [t for t in a if t in b]
    return (TaskAttempts({t: a[t] for t in shared}).mean_score,
            TaskAttempts({t: b[t] for t in shared}).mean_score)
