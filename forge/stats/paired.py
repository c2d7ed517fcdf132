"""Statistics with their uncertainty: confidence intervals over tasks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from scipy import stats as _st

__all__ = ["IDENTICAL_PAIRS", "FixedTasksBound", "Interval", "PairedTest", "drop_lower_bound",
           "fixed_tasks_bound", "mean_interval", "net_regression_p", "paired_test",
           "spent_alpha", "wilson_interval"]

#: Paired attempts past which identical deltas are read as they are before half a test's
#: tasks. Identical deltas on fewer tasks decide nothing (a rare event, a harmful action
#: in fifty attempts, can be absent from a chunk by chance, and a t-test reads its absence
#: as certainty); but with no attempt differing among 3,000, the rate of attempts that
#: differ at all is below 0.1% at 95% (exact, zero-count: 0.999 ** 3000 < 0.05). Half of
#: a small bench's tasks is fewer attempts (500 on closedform, 2,200 on triage at its
#: largest precision round), so there this changes nothing; on a bench of 5,000 dev
#: tasks "half the tasks" was 16,000 paired attempts, and a +0.35 move decided at its
#: first look waited on unchanged metrics until a 40,000-rollout budget ran out.
IDENTICAL_PAIRS = 3000


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided confidence interval over ``n`` independent units."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """Student-t interval of the mean of per-task values (tasks are the independent units;
    the K attempts of one task are not independent draws of the bench)."""
    n = len(values)
    if n == 0:
        return None
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, -math.inf, math.inf, n, confidence)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    if var == 0:
        return Interval(mean, mean, mean, n, confidence)
    half = float(_st.t.ppf(0.5 + confidence / 2, n - 1)) * math.sqrt(var / n)
    return Interval(mean, mean - half, mean + half, n, confidence)


@dataclass(frozen=True)
class PairedTest:
    """A one-sided paired t-test over tasks of H0 ``effect <= threshold``.

    ``effect`` is the mean of the per-task deltas; ``ci_low``/``ci_high`` are the
    one-sided ``1 - alpha`` bounds (together a ``1 - 2 alpha`` two-sided interval);
    ``p_value`` is for the alternative ``effect > threshold``.
    """

    effect: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    sd: float
    alpha: float
    threshold: float

    @property
    def passed(self) -> bool:
        return self.p_value < self.alpha

    def upper(self, level: float) -> float:
        """One-sided upper bound at confidence ``level`` (used for futility)."""
        return _bound(self.effect, self.sd, self.n, level, upper=True)

    def as_dict(self) -> dict[str, float | int | None]:
        """JSON-safe (journal records): a bound that is infinite (fewer than two
        tasks) is None."""
        return {"effect": self.effect, "ci_low": _finite(self.ci_low),
                "ci_high": _finite(self.ci_high), "p_value": self.p_value, "n_tasks": self.n,
                "alpha": self.alpha}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _bound(mean: float, sd: float, n: int, level: float, *, upper: bool) -> float:
    if n < 2:
        return math.inf if upper else -math.inf
    if sd == 0:
        return mean
    half = float(_st.t.ppf(level, n - 1)) * sd / math.sqrt(n)
    return mean + half if upper else mean - half


def paired_test(deltas: Sequence[float], *, alpha: float, threshold: float = 0.0
                ) -> PairedTest:
    """One-sided paired t-test that the mean per-task delta exceeds ``threshold``.

    Tasks are the independent units (each delta averages a task's paired attempts),
    so the test generalises over tasks like the ones in the split, which is what a
    promotion claims. With fewer than two tasks nothing can be concluded (p = 1).
    """
    n = len(deltas)
    if n == 0:
        return PairedTest(0.0, -math.inf, math.inf, 1.0, 0, 0.0, alpha, threshold)
    mean = math.fsum(deltas) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in deltas) / (n - 1)) if n > 1 else 0.0
    if n < 2:
        p = 1.0
    elif sd == 0:
        p = 0.0 if mean > threshold else 1.0
    else:
        t = (mean - threshold) / (sd / math.sqrt(n))
        p = float(_st.t.sf(t, n - 1))
    return PairedTest(mean, _bound(mean, sd, n, 1 - alpha, upper=False),
                      _bound(mean, sd, n, 1 - alpha, upper=True), p, n, sd, alpha, threshold)


def net_regression_p(worse: int, better: int, n: int, margin: float) -> float:
    """One-sided p of ``H0: p_worse - p_better >= margin`` on ``n`` paired 0/1 attempts,
    ``worse`` of them made worse by one unit and ``better`` made better (Tango's score
    test for a difference of paired proportions, Tango 1998); small: the net rate of
    regressions is shown below ``margin``.

    The test of a tolerance on a rare event that a change moves between attempts: a
    count of the attempts made worse alone charges every one of them, however many
    were made better. The variance is taken at the restricted maximum-likelihood
    estimate of ``p_better`` under ``p_worse = p_better + margin``, the positive root
    of ``2n q^2 + (margin (2n - worse + better) - worse - better) q
    - better margin (1 - margin) = 0``, which keeps the test near its level where
    events are few (the Wald variance at the observed rates is zero with none).
    """
    if n <= 0 or worse < 0 or better < 0 or worse + better > n or not margin >= 0:
        raise ValueError(f"{n} paired attempts, {worse} worse, {better} better, margin "
                         f"{margin}: counts within n, a margin of at least 0")
    if margin >= 1:
        return 0.0  # no rate of regressions exceeds all of the attempts
    a = 2.0 * n
    b = margin * (2 * n - worse + better) - (worse + better)
    c = -better * margin * (1 - margin)
    q = (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
    var = (2 * q + margin - margin * margin) / n
    if var <= 0:
        return 1.0  # no change and no margin: nothing to show
    return _NORMAL.cdf(((worse - better) / n - margin) / math.sqrt(var))


@dataclass(frozen=True)
class FixedTasksBound:
    """A one-sided upper bound of the mean paired difference over a fixed set of tasks,
    from the noise of their attempts alone (:func:`fixed_tasks_bound`)."""

    effect: float
    bound: float
    se: float
    df: float
    n_tasks: int
    n_pairs: int


def fixed_tasks_bound(diffs: Sequence[Sequence[float]], *, alpha: float
                      ) -> FixedTasksBound | None:
    """Upper ``1 - alpha`` bound of the mean over *these* tasks of each task's expected
    paired difference (``diffs``: per task, candidate minus start on each shared seed).

    Unlike :func:`paired_test`, which generalises over tasks like these (its spread is
    the spread between tasks), this one holds the tasks fixed: its uncertainty is the
    variance of each task's paired attempts, ``sum(s_t^2 / k_t) / n^2``, with
    Satterthwaite's degrees of freedom capped at the number of tasks whose attempts
    differ less one, so that a spread found in a few tasks (a rare event) widens the t
    quantile. A task with one pair gets the largest per-attempt variance seen; with no
    task of two pairs nothing is known (None).
    """
    tasks = [list(d) for d in diffs if len(d) > 0]
    parts = _mean_variances(tasks)
    if parts is None:
        return None
    n = len(tasks)
    effect = math.fsum(math.fsum(d) / len(d) for d in tasks) / n
    var = math.fsum(v for v, _ in parts)
    pairs = sum(len(d) for d in tasks)
    if var == 0:
        return FixedTasksBound(effect, effect, 0.0, math.inf, n, pairs)
    df = _capped_df(parts, var)
    se = math.sqrt(var) / n
    return FixedTasksBound(effect, effect + float(_st.t.ppf(1 - alpha, df)) * se, se, df, n,
                           pairs)


def _mean_variances(tasks: Sequence[Sequence[float]]) -> list[tuple[float, int]] | None:
    """Per task, the variance of its mean paired difference and its degrees of freedom;
    a task with one pair gets the largest per-attempt variance seen (one degree). None
    with no task of two pairs."""
    spreads = [_sample_var(d) if len(d) > 1 else None for d in tasks]
    seen = [s for s in spreads if s is not None]
    if not seen:
        return None
    return [(s / len(d), len(d) - 1) if s is not None else (max(seen), 1)
            for d, s in zip(tasks, spreads, strict=True)]


def _capped_df(parts: Sequence[tuple[float, int]], var: float) -> float:
    """Satterthwaite's degrees of freedom of ``var``, the sum of ``parts``' variances,
    capped at the tasks whose attempts differ, less one."""
    # Satterthwaite's estimate runs high when a few tasks carry all the variance (a rare
    # event): no more degrees of freedom than tasks whose attempts differ, less one.
    # On benchmarks/end_check.py's simulated rare events at k 20 the bound then misses
    # 0.1-2.8% (uncapped, 6-12%); where many tasks differ the cap changes nothing.
    varied = sum(1 for v, _ in parts if v > 0)
    return min(var ** 2 / math.fsum(v * v / dof for v, dof in parts if v > 0),
               max(varied - 1, 1))


def _sample_var(values: Sequence[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def spent_alpha(index: int, alpha: float) -> float:
    """The level of the ``index``-th (1-based) confirmatory test of a search.

    ``alpha * 6 / (pi^2 j^2)`` sums to ``alpha`` over all j, so the chance that any
    confirmatory test of a search rejects a true null is at most ``alpha`` (a union
    bound: no independence between the tests is needed).
    """
    if index < 1:
        raise ValueError("confirmation index starts at 1")
    return alpha * 6.0 / (math.pi ** 2 * index ** 2)


_NORMAL = NormalDist()  # the stdlib's: scipy's ppf costs ~0.3 ms a call


def wilson_interval(successes: int, n: int, z: float) -> tuple[float, float]:
    """Wilson's score interval of a binomial proportion, at normal quantile ``z``.

    Unlike the Wald interval it does not collapse to a point at 0/n or n/n, the pass
    rates a CI run sees most.
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def drop_lower_bound(passed_a: int, n_a: int, passed_b: int, n_b: int, *,
                     alpha: float) -> float:
    """One-sided ``1 - alpha`` lower bound of ``p_a - p_b`` for two *independent*
    binomial samples (Newcombe's hybrid score interval, method 10 of Newcombe 1998).

    For samples that cannot be paired (other seeds): each side's Wilson interval is
    combined, which keeps near-nominal coverage at a handful of attempts per side and
    takes a non-zero margin directly, where Fisher's exact test has none.
    """
    if n_a <= 0 or n_b <= 0:
        return -1.0
    z = _NORMAL.inv_cdf(1 - alpha)
    p_a, p_b = passed_a / n_a, passed_b / n_b
    low_a, _ = wilson_interval(passed_a, n_a, z)
    _, high_b = wilson_interval(passed_b, n_b, z)
    return p_a - p_b - math.sqrt((p_a - low_a) ** 2 + (high_b - p_b) ** 2)
