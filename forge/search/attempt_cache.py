"""The attempt cache of a search: attempts from the store or run now, counted once.

:class:`AttemptCache` hands out attempts of (config, seed stream, tasks, attempt
indices), running only those the store does not hold, and counts every attempt
the search asked for once toward the rollout and cost budgets, whether it ran now
or was found in the store (so a resumed search spends what an uninterrupted one did).

It runs nothing itself: :meth:`AttemptCache.fetch` is a generator that yields a
:class:`RolloutRequest` for the attempts the store lacks and takes their results back,
so that the search built on it is an ask/tell object (:class:`forge.search.Search`):
whoever drives it runs each request where it likes.

Nor does a part of the search hold the budget: before a batch it yields a
:class:`Permit` (:func:`allowed`) and is sent whether the batch may run. Whoever drives
the fetch answers it, the search from its :class:`~forge.search.budget.Budget`; so the
race, the screening and the confirmation decide on evidence alone, and the budget is
asked in one place. The cache is also the search's ledger: the rollouts, cost and wall
time spent so far (:meth:`AttemptCache.totals`), which the budget reads and each
candidate record journals.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from forge.bench.loader import Bench
from forge.config.registry import Config
from forge.core.task import Task
from forge.evaluation.rollout import AttemptKey
from forge.evaluation.session import Session
from forge.journal.store import AttemptStore
from forge.results.failures import FailureTally
from forge.results.model import AttemptResult, TaskAttempts

__all__ = ["AttemptCache", "Fetch", "Grants", "Permit", "RolloutRequest", "allowed", "drive"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class RolloutRequest:
    """Attempts a search needs run: ``config`` on ``keys`` (task, attempt index) of
    ``split``, seeded from ``stream``; answered with one result per key."""

    config: Config
    split: str
    stream: str
    keys: tuple[AttemptKey, ...]

    def run(self, session: Session) -> list[AttemptResult]:
        """The request's attempts run on ``session``: its answer."""
        return session.attempts(self.config, list(self.keys), split=self.split,
                                stream=self.stream)


@dataclass(frozen=True)
class Permit:
    """A part of the search asks whether a batch of ``need`` new rollouts may run: with
    the budget's slack (a chunk, which may finish past what is left), or ``whole`` (a
    block run whole or not at all); answered True or False."""

    need: int
    whole: bool = False


class Grants(Protocol):
    """What answers a :class:`Permit` (the search's budget)."""

    def grants(self, permit: Permit) -> bool: ...


#: A part of the search that needs attempts: it yields requests and permits, is sent
#: each request's results and each permit's answer, and returns its value (``yield
#: from`` composes them).
Fetch = Generator[RolloutRequest | Permit, Sequence[AttemptResult] | bool, _T]


def allowed(need: int, *, whole: bool = False) -> Fetch[bool]:
    """Whether a batch of ``need`` new rollouts may run (see :class:`Permit`): nothing
    new always may, without asking."""
    if not need:
        return True
    answer = yield Permit(need, whole)
    return answer is True


class AttemptCache:
    """Attempts for the search, from the store or run now; ``used`` counts requests."""

    def __init__(self, bench: Bench, store: AttemptStore, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.bench = bench
        self.store = store
        self._clock = clock
        self._t0 = clock()
        self.used = 0
        self.cost = 0.0
        self.executed = 0
        #: Every attempt counted in ``used``, the unscored by reason and config: what a
        #: resumed search counts as an uninterrupted one did (forge.results.failures).
        self.failures = FailureTally()
        self._requested: set[tuple[str, str, str, int]] = set()

    def elapsed(self) -> float:
        """Seconds since the search began (the cache was made)."""
        return self._clock() - self._t0

    def totals(self) -> dict[str, float]:
        """What a candidate record journals of the spending so far."""
        return {"rollouts_total": self.used, "cost_total": self.cost,
                "elapsed_s": self.elapsed()}

    def peek(self, config: Config, stream: str, tasks: Sequence[Task], attempts: Sequence[int]
             ) -> TaskAttempts:
        """What the store already holds; runs nothing and counts nothing."""
        fp = config.fingerprint
        out: dict[str, list[AttemptResult]] = {}
        for t in tasks:
            found = [a for i in attempts if (a := self.store.get(fp, stream, t.id, i))]
            if found:
                out[t.id] = found
        return TaskAttempts(out)

    def unrequested(self, config: Config, stream: str, tasks: Sequence[Task],
                    attempts: Sequence[int]) -> int:
        """How much a :meth:`fetch` of these attempts would add to ``used`` (runs
        nothing)."""
        fp = config.fingerprint
        return sum(1 for t in tasks for i in attempts
                   if (fp, stream, t.id, i) not in self._requested)

    def _counted(self, fp: str, stream: str, tasks: Sequence[Task], attempts: Sequence[int]
                 ) -> TaskAttempts:
        """The stored attempts by task id, each counted once toward ``used`` and ``cost``."""
        out: dict[str, list[AttemptResult]] = {}
        for t in tasks:
            got = out.setdefault(t.id, [])
            for i in attempts:
                a = self.store.get(fp, stream, t.id, i)
                if a is None:
                    continue
                got.append(a)
                key = (fp, stream, t.id, i)
                if key not in self._requested:
                    self._requested.add(key)
                    self.used += 1
                    self.cost += a.metrics.get("cost", 0.0)
                    self.failures.add(a, fp)
        return TaskAttempts(out)

    def fetch(self, config: Config, split: str, stream: str, tasks: Sequence[Task],
              attempts: Sequence[int]) -> Fetch[TaskAttempts]:
        """Attempts by task id: those the store lacks are yielded as one
        :class:`RolloutRequest` and the results sent back are stored. Each attempt counts
        once toward ``used`` and ``cost``, whether it ran now or was found in the store
        (so a resumed search counts the same as an uninterrupted one)."""
        fp = config.fingerprint
        missing = tuple(AttemptKey(t, i) for t in tasks for i in attempts
                        if self.store.get(fp, stream, t.id, i) is None)
        if missing:
            results = yield RolloutRequest(config, split, stream, missing)
            assert not isinstance(results, bool), "a request is answered with results"
            self.store.add(fp, stream, list(results))
            self.executed += len(results)
        return self._counted(fp, stream, tasks, attempts)


def drive(session: Session, fetch: Fetch[_T], budget: Grants | None = None) -> _T:
    """Run ``fetch`` to its end, each request as it comes on ``session`` (one engine and
    executor serve every batch, so worker processes and Ray actors start once), each
    permit answered by ``budget`` (every batch may run without one)."""
    try:
        asked = next(fetch)
        while True:
            if isinstance(asked, Permit):
                asked = fetch.send(budget is None or budget.grants(asked))
            else:
                asked = fetch.send(asked.run(session))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
