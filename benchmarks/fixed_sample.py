"""The information limit of a proof: the fixed number of paired tasks a one-sided paired
test needs to show a move's true effect (``benchmarks/proof_cost.py``).

forge's paired tests (``forge.stats.paired.paired_test``, read by racing and by the
confirmation) take a task as the unit: a task's delta is the mean over its K paired
attempts of the candidate's score less the incumbent's. With ``p_c(t)``, ``p_i(t)`` the
two configs' success probabilities on task t, over a set of tasks (a task drawn
uniformly from it)::

    delta   = mean_t (p_c(t) - p_i(t))
    sd_d^2  = var_t (p_c(t) - p_i(t)) + mean_t v(t) / K       (var_t: ddof 0)
    v(t)    = p_c (1 - p_c) + p_i (1 - p_i)    independent draws
            = |p_c - p_i| (1 - |p_c - p_i|)    one shared uniform draw (common random
                                               numbers: the outcomes differ only when
                                               it falls between the two rates)
    n       = ceil(((z_{1-alpha} + z_power) * sd_d / delta)^2)

(the law of total variance over the task, then the attempts; n is the normal
approximation of the one-sided test at level alpha with the given power).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from statistics import NormalDist

__all__ = ["attempt_variance", "fixed_sample_tasks", "paired_sd"]


def attempt_variance(p_inc: float, p_cand: float, *, shared: bool) -> float:
    """Variance of one paired attempt's difference (candidate minus incumbent, 0/1
    scores): independent Bernoulli draws, or one uniform draw for both."""
    if shared:
        gap = abs(p_cand - p_inc)
        return gap * (1.0 - gap)
    return p_cand * (1.0 - p_cand) + p_inc * (1.0 - p_inc)


def paired_sd(p_inc: Sequence[float], p_cand: Sequence[float], *, k: int,
              shared: bool) -> float:
    """The sd of a task's delta (the mean of its ``k`` paired attempts), the task drawn
    uniformly from those given: the spread of their true effects plus the mean attempt
    variance over ``k``."""
    if not p_inc or len(p_inc) != len(p_cand) or k < 1:
        raise ValueError(f"{len(p_inc)} and {len(p_cand)} tasks, k {k}: give the same "
                         "tasks on both sides and k >= 1")
    gaps = [c - i for i, c in zip(p_inc, p_cand, strict=True)]
    between = statistics.pvariance(gaps)
    within = math.fsum(attempt_variance(i, c, shared=shared)
                       for i, c in zip(p_inc, p_cand, strict=True)) / len(gaps)
    return math.sqrt(between + within / k)


def fixed_sample_tasks(delta: float, sd: float, *, alpha: float, power: float) -> int:
    """Pairs a one-sided paired test at ``alpha`` needs to detect a true mean difference
    ``delta`` (> 0) of sd ``sd`` with ``power``: ceil(((z_{1-alpha} + z_power) sd / delta)^2)."""
    if not delta > 0:
        raise ValueError(f"no fixed sample detects a true effect of {delta}")
    z = NormalDist()
    return math.ceil(((z.inv_cdf(1 - alpha) + z.inv_cdf(power)) * sd / delta) ** 2)
