"""Rollouts for a search: reuse from the store, budget accounting, and racing.

:class:`Rollouts` hands out attempts of (config, seed stream, tasks, attempt
indices), running only those the store does not hold, and counts every attempt
the search asked for once. :func:`screen` races one candidate against the
incumbent: tasks in a fixed random order, chunk by chunk, stopping as soon as the
candidate clearly cannot pass (futility), and adding a block of attempts only when
the decision is close.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from forge.bench import Bench
from forge.gates import TaskAttempts, score_deltas
from forge.registry import Config
from forge.results import AttemptResult
from forge.rollout import AttemptKey
from forge.session import Session
from forge.stats import PairedTest, paired_test
from forge.store import AttemptStore
from forge.task import Task

__all__ = ["Rollouts", "ScreenOutcome", "screen"]


class Rollouts:
    """Attempts for the search, from the store or run now; ``used`` counts requests."""

    def __init__(self, bench: Bench, session: Session, store: AttemptStore) -> None:
        self.bench = bench
        # One engine and executor serve every batch, so worker processes and Ray actors
        # start once per search, not per decision.
        self.session = session
        self.store = store
        self.used = 0
        self.cost = 0.0
        self.executed = 0
        self._requested: set[tuple[str, str, str, int]] = set()

    def peek(self, config: Config, stream: str, tasks: Sequence[Task], attempts: Sequence[int]
             ) -> dict[str, list[AttemptResult]]:
        """What the store already holds; runs nothing and counts nothing."""
        fp = config.fingerprint
        out: dict[str, list[AttemptResult]] = {}
        for t in tasks:
            found = [a for i in attempts if (a := self.store.get(fp, stream, t.id, i))]
            if found:
                out[t.id] = found
        return out

    def unrequested(self, config: Config, stream: str, tasks: Sequence[Task],
                    attempts: Sequence[int]) -> int:
        """How much ``get`` of these attempts would add to ``used`` (runs nothing)."""
        fp = config.fingerprint
        return sum(1 for t in tasks for i in attempts
                   if (fp, stream, t.id, i) not in self._requested)

    def get(self, config: Config, split: str, stream: str, tasks: Sequence[Task],
            attempts: Sequence[int]) -> dict[str, list[AttemptResult]]:
        """Attempts by task id. Each attempt counts once toward ``used`` and ``cost``,
        whether it ran now or was found in the store (so a resumed search counts the
        same as an uninterrupted one)."""
        fp = config.fingerprint
        missing = [AttemptKey(t, i) for t in tasks for i in attempts
                   if self.store.get(fp, stream, t.id, i) is None]
        if missing:
            results = self.session.attempts(config, missing, split=split, stream=stream)
            self.store.add(fp, stream, results)
            self.executed += len(results)
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
        return out


@dataclass
class ScreenOutcome:
    """How a candidate fared on the screening seeds, and what it cost."""

    status: str  # "pass", "fail", "futile" or "budget"
    test: PairedTest
    rollouts: int  # attempts newly asked for (candidate and incumbent)
    reused: int  # attempts served that an earlier decision had already asked for
    saved_by_racing: int  # candidate attempts a full evaluation would have run on top
    blocks: int
    tasks_seen: int


class _Counter:
    def __init__(self, rollouts: Rollouts) -> None:
        self.rollouts = rollouts
        self.new = 0
        self.served = 0

    def get(self, config: Config, tasks: Sequence[Task], attempts: Sequence[int]
            ) -> dict[str, list[AttemptResult]]:
        before = self.rollouts.used
        got = self.rollouts.get(config, "dev", "dev", tasks, attempts)
        self.new += self.rollouts.used - before
        self.served += sum(len(v) for v in got.values())
        return got


def screen(rollouts: Rollouts, incumbent: Config, candidate: Config, order: Sequence[Task], *,
           k: int, alpha: float, min_effect: float, chunks: int = 4, max_blocks: int = 2,
           futility_level: float = 0.5, close_factor: float = 2.0,
           budget_left: int | None = None) -> ScreenOutcome:
    """Race ``candidate`` against ``incumbent`` on the dev screening seeds.

    Screening only picks what to confirm; the confirmation on fresh seeds carries the
    error guarantee, so racing here may stop early and add attempts freely.
    """
    counter = _Counter(rollouts)
    size = max(1, math.ceil(len(order) / chunks))
    inc: dict[str, list[AttemptResult]] = {}
    cand: dict[str, list[AttemptResult]] = {}
    test = paired_test([], alpha=alpha, threshold=min_effect)
    seen = 0
    blocks = 1

    def outcome(status: str) -> ScreenOutcome:
        cand_served = sum(len(v) for v in cand.values())
        return ScreenOutcome(status, test, counter.new, counter.served - counter.new,
                             max(0, len(order) * k * blocks - cand_served), blocks, seen)

    def over_budget() -> bool:
        return budget_left is not None and counter.new >= budget_left

    def block_fits(extra: range) -> bool:
        # The budget holds within one chunk: a chunk starts while any budget is left,
        # so it may overshoot by itself; a whole extra block may not overshoot more.
        need = (rollouts.unrequested(incumbent, "dev", order, extra)
                + rollouts.unrequested(candidate, "dev", order, extra))
        return budget_left is None or counter.new + need <= budget_left + 2 * size * k

    for start in range(0, len(order), size):
        if over_budget():
            return outcome("budget")
        part = order[start:start + size]
        inc.update(counter.get(incumbent, part, range(k)))
        cand.update(counter.get(candidate, part, range(k)))
        seen += len(part)
        test = _test(inc, cand, alpha, min_effect)
        last = start + size >= len(order)
        # Identical deltas on the first tasks say little about a sparse effect (a
        # setting that matters on a tenth of the tasks): no early stop on them until
        # half the tasks are in.
        informative = test.sd > 0 or seen >= len(order) / 2
        if (not last and test.n >= 2 and informative
                and test.upper(futility_level) <= min_effect):
            return outcome("futile")
    # Close to the line: more attempts on the same tasks, then decide.
    while blocks < max_blocks and alpha <= test.p_value < close_factor * alpha:
        extra = range(blocks * k, (blocks + 1) * k)
        if not block_fits(extra):
            return outcome("budget")
        blocks += 1
        for task_id, items in counter.get(incumbent, order, extra).items():
            inc.setdefault(task_id, []).extend(items)
        for task_id, items in counter.get(candidate, order, extra).items():
            cand.setdefault(task_id, []).extend(items)
        test = _test(inc, cand, alpha, min_effect)
    return outcome("pass" if test.p_value < alpha else "fail")


def _test(inc: TaskAttempts, cand: TaskAttempts, alpha: float, threshold: float) -> PairedTest:
    return paired_test(list(score_deltas(inc, cand).values()), alpha=alpha, threshold=threshold)
