"""The smallest gain a bench detects: against simulation, the closed form, and the
estimate from one config's attempts."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats as st

from forge.stats.paired import paired_test
from forge.stats.power import (
    USEFUL_EFFECT,
    estimate_power,
    minimum_detectable_effect,
    tasks_for_effect,
)


def _detected(deltas: np.ndarray, alpha: float) -> np.ndarray:
    """Per row of per-task deltas: does the one-sided paired t-test reject "no gain"?"""
    n = deltas.shape[1]
    t = deltas.mean(axis=1) / (deltas.std(axis=1, ddof=1) / math.sqrt(n))
    return np.asarray(t > st.t.ppf(1 - alpha, n - 1))


@pytest.mark.parametrize(("n", "sd", "alpha"), [(8, 0.3, 0.05), (30, 0.4, 0.05),
                                                 (100, 0.25, 0.025)])
def test_the_paired_test_detects_the_mde_nine_times_in_ten(n: int, sd: float,
                                                            alpha: float) -> None:
    # Normal per-task deltas whose mean is the MDE: the paired test rejects "no gain"
    # in 90% of 20,000 benches (a standard error of 0.2%).
    mde = minimum_detectable_effect(sd, n, alpha=alpha, power=0.9)
    rng = np.random.default_rng(7)
    deltas = rng.normal(mde, sd, size=(20_000, n))
    detected = _detected(deltas, alpha)
    assert detected.mean() == pytest.approx(0.9, abs=0.01)
    # The same verdicts as forge's own test (forge.stats.paired_test), row by row.
    assert [paired_test(list(row), alpha=alpha).passed for row in deltas[:300]] == \
        list(detected[:300])
    # ... and a gain two thirds as large is detected much less often.
    assert _detected(rng.normal(mde * 2 / 3, sd, size=(20_000, n)), alpha).mean() < 0.75


def test_it_meets_the_closed_forms() -> None:
    # Many tasks: the normal-theory (z_{1-a} + z_{power}) sd / sqrt(n).
    z = st.norm.ppf(0.95) + st.norm.ppf(0.9)
    assert minimum_detectable_effect(0.3, 10_000, alpha=0.05) == pytest.approx(
        z * 0.3 / 100, rel=1e-3)
    # Few: near the textbook t form, which the noncentral t refines.
    for n in (5, 12, 40):
        approx = (st.t.ppf(0.95, n - 1) + st.t.ppf(0.9, n - 1)) * 0.3 / math.sqrt(n)
        assert minimum_detectable_effect(0.3, n, alpha=0.05) == pytest.approx(approx,
                                                                              rel=0.03)
    # Power exactly alpha: the critical value itself, nothing to add.
    assert minimum_detectable_effect(1.0, 20, alpha=0.05, power=0.05) == pytest.approx(
        0.0, abs=1e-6)


def test_edges() -> None:
    assert minimum_detectable_effect(0.3, 1, alpha=0.05) == math.inf
    assert minimum_detectable_effect(0.0, 10, alpha=0.05) == 0.0
    with pytest.raises(ValueError):
        minimum_detectable_effect(0.3, 10, alpha=0.0)


@pytest.mark.parametrize("sd", [0.2, 0.42, 0.6])
def test_tasks_for_effect_is_the_fewest(sd: float) -> None:
    n = tasks_for_effect(sd, USEFUL_EFFECT, alpha=0.05)
    assert n is not None
    assert minimum_detectable_effect(sd, n, alpha=0.05) <= USEFUL_EFFECT
    assert minimum_detectable_effect(sd, n - 1, alpha=0.05) > USEFUL_EFFECT


def _bench(rates: list[float], k: int, rng: random.Random) -> list[list[float]]:
    """One config's pass/fail attempts: k a task, at each task's success rate."""
    return [[float(rng.random() < p) for _ in range(k)] for p in rates]


def test_the_estimate_from_one_config() -> None:
    rng = random.Random(5)
    rates = [rng.uniform(0.2, 0.9) for _ in range(400)]
    scores = _bench(rates, 5, rng)
    power = estimate_power(scores, n_tasks=200, k=5, alpha=0.05)
    # sqrt(2) times the spread of per-task means: Var(p) + E[p(1-p)] / k for these rates.
    means = [sum(s) / 5 for s in scores]
    assert power.sd == pytest.approx(math.sqrt(2 * np.var(means, ddof=1)), abs=1e-4)
    expected = math.sqrt(2 * (np.var(rates) + np.mean([p * (1 - p) for p in rates]) / 5))
    assert power.sd == pytest.approx(expected, rel=0.1)
    assert power.mde == pytest.approx(minimum_detectable_effect(power.sd, 200, alpha=0.05),
                                      abs=2e-4)
    assert power.sd_tasks == 400 and power.k == 5 and power.power == 0.9
    assert power.tasks_needed == tasks_for_effect(power.sd, 0.10, alpha=0.05)
    # Twice the attempts narrow only the attempts' part of the spread.
    assert power.mde_double_k is not None and power.mde_double_k < power.mde
    floor = minimum_detectable_effect(math.sqrt(2 * np.var(rates)), 200, alpha=0.05)
    assert power.mde_double_k > floor * 0.9


def test_tasks_that_always_agree_gain_nothing_from_a_larger_k() -> None:
    scores = [[1.0] * 3] * 5 + [[0.0] * 3] * 5
    power = estimate_power(scores, n_tasks=10, k=3, alpha=0.05)
    assert power.mde is not None and power.mde_double_k == pytest.approx(power.mde)


def test_what_cannot_be_estimated_says_so() -> None:
    one = estimate_power([[0.5, 1.0], []], n_tasks=40, k=2, alpha=0.05)
    assert (one.mde, one.sd, one.sd_tasks) == (None, None, 1)  # the unscored task left out
    alike = estimate_power([[1.0], [1.0], [1.0]], n_tasks=40, k=1, alpha=0.05)
    assert (alike.mde, alike.sd, alike.large) == (None, 0.0, False)
    single = estimate_power([[0.0], [1.0], [0.5]], n_tasks=40, k=1, alpha=0.05)
    assert single.mde is not None and single.mde_double_k is None  # k 1: no attempts' part
    assert single.large
