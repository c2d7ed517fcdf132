"""Racing one candidate against the incumbent over the dev chunks: selection only.

:func:`race` screens tasks in a fixed random order, a chunk at a time, on attempts
``0..k`` of each task (block 0; a precision round passes a larger ``k``), and stops
as soon as the candidate is clearly out or clearly in:

- ``futile``: the estimated effect is at or below ``min_effect`` (once a chunk of
  identical deltas is no longer all there is to go on: a sparse effect is not dropped
  for being invisible on the first tasks; identical deltas count from half the tasks,
  or from :data:`~forge.stats.IDENTICAL_PAIRS` paired attempts);
- ``weak``: even a trend one standard error better than the estimate would not reach
  ``alpha`` on every task;
- ``paused``: in a hasty race (``patient=False``), from half the tasks on, the
  estimate as it stands would not reach ``alpha`` on every task, though a trend one
  standard error better still would: the race stops there, and the same race run
  patiently later goes on from there on the attempts it already has (the attempt
  cache serves them again at no cost);
- ``aux``: the caller's ``beyond`` says the screening data already put an auxiliary
  metric past its tolerance;
- ``pass``: the screening p is below ``alpha / 5`` after a chunk, or below ``alpha``
  after the last one;
- ``budget``: the next chunk does not fit the rollout budget.

:func:`no_worse` runs a farther value of a passing move's setting on the tasks and
attempts that move's race read, and says whether it scored at least as well on every
one (``pass``) or not (``worse``, at the first chunk that shows one below), stopping
too where ``beyond`` puts a tolerance out of reach (``aux``).

Racing decides which candidate is confirmed and nothing else: the confirmation
(:mod:`forge.search.confirm`) never reads the attempts a race used, so racing may stop
early, look after every chunk and use any threshold without costing an error.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from forge.config.registry import Config
from forge.core.task import Task
from forge.results.model import TaskAttempts
from forge.search.attempt_cache import AttemptCache, Fetch, allowed
from forge.stats.paired import IDENTICAL_PAIRS, PairedTest, paired_test
from forge.stats.pairs import score_deltas, score_pairs
from forge.stats.sequential import hopeless

__all__ = ["Beyond", "RaceOutcome", "RaceStatus", "no_worse", "race"]

RaceStatus = Literal["pass", "weak", "paused", "futile", "aux", "budget", "worse"]
#: After a chunk that is not the last, a candidate passes at once below alpha / this.
EARLY_PASS_FACTOR = 5.0


@dataclass(frozen=True)
class RaceOutcome:
    """How a candidate fared on the screening tasks, and what it cost."""

    status: RaceStatus
    test: PairedTest
    tasks: int  # the first ``tasks`` tasks of the order were raced (attempts 0..k)
    rollouts: int  # attempts newly asked for (candidate and incumbent)
    reused: int  # attempts served that an earlier decision had already asked for

    @property
    def se(self) -> float:
        """The standard error of the screening effect (infinite below two tasks)."""
        return self.test.sd / math.sqrt(self.test.n) if self.test.n > 1 else math.inf


Beyond = Callable[[int], Fetch[bool]]


def _chunk_status(test: PairedTest, inc: TaskAttempts, cand: TaskAttempts, *, seen: int,
                  total: int, last: bool, alpha: float, min_effect: float, patient: bool
                  ) -> RaceStatus | None:
    """How a race stands after a chunk: out (``futile``, ``weak``), stopped for now
    (``paused``), in (``pass``), or None to go on."""
    informative = (test.sd > 0 or seen >= total / 2
                   or score_pairs(inc, cand) >= IDENTICAL_PAIRS)
    if test.n >= 2 and informative and test.effect <= min_effect:
        return "futile"
    if test.p_value < (alpha if last else alpha / EARLY_PASS_FACTOR):
        return "pass"
    if last or test.n < 2 or not informative:
        return None
    if hopeless(test, seen / total, min_effect, alpha):
        return "weak"
    if not patient and seen >= total / 2 and hopeless(test, seen / total, min_effect, alpha,
                                                      optimism=0.0):
        return "paused"
    return None


def race(rollouts: AttemptCache, incumbent: Config, candidate: Config, order: Sequence[Task], *,
         chunk: int, k: int, alpha: float, min_effect: float,
         beyond: Beyond | None = None, patient: bool = True) -> Fetch[RaceOutcome]:
    """Race ``candidate`` against ``incumbent`` on ``order`` in chunks of ``chunk`` tasks;
    ``patient=False``: a hasty race, which may end ``paused``.

    A chunk starts only while the budget allows its new rollouts (a
    :class:`~forge.search.attempt_cache.Permit` yielded to whoever drives the race).
    ``beyond(tasks)`` is asked after each chunk whether the first ``tasks`` tasks put an
    auxiliary tolerance out of reach.
    """
    attempts = range(k)
    used_before = rollouts.used
    served = 0
    inc, cand = TaskAttempts(), TaskAttempts()
    test = paired_test([], alpha=alpha, threshold=min_effect)
    seen = 0
    chunks = [list(order[i:i + chunk]) for i in range(0, len(order), chunk)]
    status: RaceStatus = "weak"
    for index, tasks in enumerate(chunks):
        need = (rollouts.unrequested(candidate, "dev", tasks, attempts)
                + rollouts.unrequested(incumbent, "dev", tasks, attempts))
        if not (yield from allowed(need)):
            status = "budget"
            break
        got_inc = yield from rollouts.fetch(incumbent, "dev", "dev", tasks, attempts)
        got_cand = yield from rollouts.fetch(candidate, "dev", "dev", tasks, attempts)
        served += sum(len(v) for v in got_inc.values()) + sum(len(v) for v in got_cand.values())
        inc, cand = inc.merged(got_inc), cand.merged(got_cand)
        seen += len(tasks)
        test = paired_test(list(score_deltas(inc, cand).values()), alpha=alpha,
                           threshold=min_effect)
        verdict = _chunk_status(test, inc, cand, seen=seen, total=len(order),
                                last=index == len(chunks) - 1, alpha=alpha,
                                min_effect=min_effect, patient=patient)
        if verdict is not None:
            status = verdict
            break
        if beyond is not None and (yield from beyond(seen)):
            status = "aux"
            break
    if status == "pass" and beyond is not None and (yield from beyond(seen)):
        status = "aux"
    # Counted after the last ``beyond``: it may run the start config's attempts on the
    # tasks raced, and those belong to this candidate's record too.
    new = rollouts.used - used_before
    return RaceOutcome(status, test, seen, new, max(0, served - new))


def _below(farther: TaskAttempts, nearer: TaskAttempts) -> bool:
    """Whether some attempt of ``farther`` scored below ``nearer``'s on the same task and
    attempt index, or went unscored where ``nearer``'s was scored."""
    def scores(attempts: TaskAttempts) -> dict[tuple[str, int], float | None]:
        return {(task, a.attempt): a.score.value if a.scored and a.score is not None
                else None for task, items in attempts.items() for a in items}

    mine = scores(farther)
    for key, theirs in scores(nearer).items():
        value = mine.get(key)
        if theirs is not None and (value is None or value < theirs):
            return True
    return False


def no_worse(rollouts: AttemptCache, incumbent: Config, nearer: Config, farther: Config,
             order: Sequence[Task], screened: RaceOutcome, *, chunk: int, k: int,
             alpha: float, min_effect: float, beyond: Beyond | None = None
             ) -> Fetch[RaceOutcome]:
    """Run ``farther`` on the tasks and attempts ``screened`` (``nearer``'s race against
    ``incumbent``) read, its first task and then a chunk at a time: ``pass`` when it
    scored at least as well as ``nearer`` on every attempt, ``worse`` as soon as one
    scored below, ``aux`` as soon as ``beyond(tasks)`` says so, ``budget`` as
    :func:`race`. Its test is its own against the incumbent, on the tasks run."""
    attempts = range(k)
    used_before = rollouts.used
    served = 0
    raced = list(order[:screened.tasks])
    cand = TaskAttempts()
    seen = 0
    status: RaceStatus = "pass" if raced else "worse"
    # The first task alone first: a value that is worse mostly shows it there already,
    # at a chunk's fraction of the cost.
    cuts = sorted({0, 1, *range(chunk, len(raced), chunk), len(raced)}) if raced else []
    for lo, hi in itertools.pairwise(cuts):
        tasks = raced[lo:hi]
        if not (yield from allowed(rollouts.unrequested(farther, "dev", tasks, attempts))):
            status = "budget"
            break
        got = yield from rollouts.fetch(farther, "dev", "dev", tasks, attempts)
        served += sum(len(v) for v in got.values())
        cand = cand.merged(got)
        seen += len(tasks)
        if _below(got, rollouts.peek(nearer, "dev", tasks, attempts)):
            status = "worse"
            break
        if beyond is not None and (yield from beyond(seen)):
            status = "aux"
            break
    test = paired_test(list(score_deltas(rollouts.peek(incumbent, "dev", raced[:seen],
                                                       attempts), cand).values()),
                       alpha=alpha, threshold=min_effect)
    new = rollouts.used - used_before
    return RaceOutcome(status, test, seen, new, max(0, served - new))
