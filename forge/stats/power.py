"""What a bench can detect: the smallest gain a paired comparison of two configs proves.

A promotion is a one-sided paired t-test over tasks (:func:`forge.stats.paired_test`):
each task's delta is the candidate's mean score on it minus the incumbent's. Over
``n`` tasks whose deltas spread with standard deviation ``sd``, the test at level
``alpha`` detects a true mean gain ``delta`` with probability
``P(T' > t_{1-alpha, n-1})``, ``T'`` noncentral t with ``n - 1`` degrees of freedom
and noncentrality ``delta * sqrt(n) / sd``. :func:`minimum_detectable_effect` solves
that for the gain detected with probability ``power`` (90% by default, the power the
gate benchmark targets); for many tasks it is close to the textbook
``(t_{1-alpha} + t_{power}) * sd / sqrt(n)``.

The spread of the deltas cannot be read before there is a second config. It is
estimated from the start config's per-task mean scores (:func:`estimate_power`): the
deltas of two configs whose per-task scores were independent would spread
``sqrt(2)`` times as widely as one config's per-task means; pairing on the same tasks
and seeds usually narrows it (a hard task is hard for both), so the stand-in is
conservative for the test itself. The search proves a little less than one test at
``alpha`` would (it spends ``alpha`` over its looks and its candidates, and screens on
part of the data): on the gate benchmark's bench, 200 dev+val tasks at K 5, the figure
is 0.087 and the search promotes a +0.10 gain in 91% of its runs.

A larger K narrows only the part of the spread that comes from one task's attempts
disagreeing; with two or more attempts a task, that part is estimated too, and
:attr:`Power.mde_double_k` says what twice the attempts would buy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict
from scipy import optimize as _opt
from scipy import stats as _st

__all__ = ["DEFAULT_POWER", "USEFUL_EFFECT", "Power", "estimate_power",
           "minimum_detectable_effect", "tasks_for_effect"]

#: The power a bench is judged at: the gate benchmark's target for a real gain.
DEFAULT_POWER = 0.9
#: A bench that cannot detect a gain of this much on the mean score (10 points) is
#: told so, with the tasks that would bring it there.
USEFUL_EFFECT = 0.10
#: Past this many tasks :func:`tasks_for_effect` stops counting (None: "more").
_MOST_TASKS = 10 ** 7
#: Decimals :func:`estimate_power` keeps.
_DIGITS = 4


def minimum_detectable_effect(sd: float, n: int, *, alpha: float,
                              power: float = DEFAULT_POWER) -> float:
    """The smallest true mean gain a one-sided paired t-test at level ``alpha`` over
    ``n`` tasks detects with probability ``power``, when the per-task deltas spread
    with standard deviation ``sd``; infinite with fewer than two tasks."""
    if not (0 < alpha < 1 and 0 < power < 1) or sd < 0:
        raise ValueError(f"alpha {alpha} and power {power} in (0, 1), sd {sd} >= 0")
    if n < 2:
        return math.inf
    if sd == 0:
        return 0.0
    df = n - 1
    critical = float(_st.t.ppf(1 - alpha, df))

    def missed(ncp: float) -> float:  # detection probability at ncp, less power
        return float(_st.nct.sf(critical, df, ncp)) - power

    if missed(0.0) >= 0:  # a power of alpha or less: no gain is needed for it
        return 0.0
    # The normal approximation's ncp, widened until it brackets the root.
    high = critical + float(_st.norm.ppf(power)) + 1.0
    while missed(high) < 0:
        high *= 2
    ncp = float(_opt.brentq(missed, 0.0, high, xtol=1e-10))
    return ncp * sd / math.sqrt(n)


def tasks_for_effect(sd: float, effect: float, *, alpha: float,
                     power: float = DEFAULT_POWER) -> int | None:
    """The fewest tasks at which :func:`minimum_detectable_effect` is at most ``effect``
    (None past ten million)."""
    if effect <= 0:
        raise ValueError(f"effect {effect} must be positive")

    def enough(n: int) -> bool:
        return minimum_detectable_effect(sd, n, alpha=alpha, power=power) <= effect

    high = 2
    while not enough(high):
        if high >= _MOST_TASKS:
            return None
        high *= 2
    low = high // 2  # not enough (or 1, which never is)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


class Power(BaseModel):
    """What a bench can detect, as ``forge search`` and ``forge eval`` tell it.

    ``mde``: the smallest gain on the mean score detected at ``power`` by a one-sided
    paired test at ``alpha`` over ``n_tasks`` tasks at ``k`` attempts each (None when
    the spread is unknown: fewer than two tasks scored, or all alike); ``sd``: the
    estimated spread of per-task deltas, from ``sd_tasks`` tasks; ``tasks_needed``:
    the tasks that bring ``mde`` to :data:`USEFUL_EFFECT` at this K; ``mde_double_k``:
    ``mde`` at twice the attempts a task (None with fewer than two attempts a task)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mde: float | None
    n_tasks: int
    k: int
    alpha: float
    power: float
    sd: float | None
    sd_tasks: int
    tasks_needed: int | None = None
    mde_double_k: float | None = None

    @property
    def large(self) -> bool:
        """More than :data:`USEFUL_EFFECT`: a gain of that size would likely go unproven."""
        return self.mde is not None and self.mde > USEFUL_EFFECT


def estimate_power(task_scores: Sequence[Sequence[float]], *, n_tasks: int, k: int,
                   alpha: float, power: float = DEFAULT_POWER) -> Power:
    """:class:`Power` over ``n_tasks`` tasks at ``k`` attempts, its spread estimated
    from one config's scored attempts, ``task_scores`` (one list a task; a task with
    none is left out, never counted as zero)."""
    scored = [list(s) for s in task_scores if len(s) > 0]
    means = [math.fsum(s) / len(s) for s in scored]
    known = Power(mde=None, n_tasks=n_tasks, k=k, alpha=alpha, power=power, sd=None,
                  sd_tasks=len(means))
    if len(means) < 2 or n_tasks < 2:
        return known
    between = _variance(means)  # the spread of per-task means at (about) k attempts
    if between == 0:
        return known.model_copy(update={"sd": 0.0})
    sd = math.sqrt(2 * between)
    within = _within(scored)

    def mde_at(attempts: int) -> float:
        # The attempts' share of the per-task variance shrinks as 1/K, the rest stays:
        # the observed spread scaled by that ratio (the tasks' own share clamped at 0,
        # which sampling noise can take below).
        assert within is not None
        tasks_share = max(between - within / k, 0.0)
        ratio = (tasks_share + within / attempts) / (tasks_share + within / k)
        return minimum_detectable_effect(sd * math.sqrt(ratio), n_tasks, alpha=alpha,
                                         power=power)

    # Rounded: a guide to a bench's size, journaled; its last digits are the root
    # finder's and the library's, not the bench's.
    return known.model_copy(update={
        "mde": round(minimum_detectable_effect(sd, n_tasks, alpha=alpha, power=power),
                     _DIGITS),
        "sd": round(sd, _DIGITS),
        "tasks_needed": tasks_for_effect(sd, USEFUL_EFFECT, alpha=alpha, power=power),
        "mde_double_k": None if within is None else round(mde_at(2 * k), _DIGITS)})


def _variance(values: Sequence[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def _within(scored: Sequence[Sequence[float]]) -> float | None:
    """The variance of one task's attempts about the task's mean, pooled over the tasks
    of two or more scored attempts; None with none such."""
    pairs = [(_variance(s), len(s) - 1) for s in scored if len(s) > 1]
    dof = sum(d for _, d in pairs)
    return math.fsum(v * d for v, d in pairs) / dof if dof else None
