"""Screening by racing: is a candidate worth confirming?

:func:`screen` races one candidate against the incumbent on the dev screening
seeds: tasks in a fixed random order, chunk by chunk, stopping as soon as the
candidate clearly cannot pass (futility), and adding a block of attempts only when
the decision is close. Attempts come from the search's attempt cache
(:class:`~forge.attempt_cache.Rollouts`), so what one decision ran, the next reuses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from forge.attempt_cache import Rollouts
from forge.gates import score_deltas
from forge.registry import Config
from forge.results import TaskAttempts
from forge.stats import PairedTest, paired_test
from forge.task import Task

__all__ = ["ScreenOutcome", "screen"]


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
            ) -> TaskAttempts:
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
    inc = TaskAttempts()
    cand = TaskAttempts()
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
        inc = inc.merged(counter.get(incumbent, part, range(k)))
        cand = cand.merged(counter.get(candidate, part, range(k)))
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
        inc = inc.merged(counter.get(incumbent, order, extra))
        cand = cand.merged(counter.get(candidate, order, extra))
        test = _test(inc, cand, alpha, min_effect)
    return outcome("pass" if test.p_value < alpha else "fail")


def _test(inc: TaskAttempts, cand: TaskAttempts, alpha: float, threshold: float) -> PairedTest:
    return paired_test(list(score_deltas(inc, cand).values()), alpha=alpha, threshold=threshold)
