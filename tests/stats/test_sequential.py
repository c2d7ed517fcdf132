"""Group-sequential boundaries (forge.stats.sequential): the numbers every confirmation's
looks are tested at, against published tables and a Monte Carlo of the null."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats as st

from forge.stats.sequential import (
    DEFAULT_RHO,
    efficacy_boundaries,
    nominal_level,
    power_spending,
    rare_event_boundary,
)


def obrien_fleming_spending(alpha: float) -> Callable[[float], float]:
    """Lan & DeMets' O'Brien-Fleming-type spending function (one-sided ``alpha``)."""
    z = float(st.norm.isf(alpha / 2))
    return lambda t: 0.0 if t <= 0 else float(2 * st.norm.sf(z / math.sqrt(min(1.0, t))))


def test_obrien_fleming_type_boundaries_match_the_published_table() -> None:
    # 4 equally spaced looks, one-sided 0.025 (Jennison & Turnbull 2000, table 7.5;
    # gsDesign's sfLDOF gives the same).
    bounds = efficacy_boundaries([0.25, 0.5, 0.75, 1.0], obrien_fleming_spending(0.025))
    assert bounds == pytest.approx([4.3326, 2.9631, 2.3590, 2.0141], abs=1e-3)


def test_one_look_is_the_plain_normal_quantile() -> None:
    [c] = efficacy_boundaries([1.0], power_spending(0.05, DEFAULT_RHO))
    assert c == pytest.approx(float(st.norm.isf(0.05)), abs=1e-9)
    assert nominal_level([1.0], 0.05) == pytest.approx(0.05, abs=1e-9)


def _crossing_probability(fractions: list[float], bounds: list[float], n: int,
                          seed: int) -> float:
    """P(Z_k >= c_k at some look) for Z the standardized partial sums of a null
    Brownian motion observed at ``fractions``."""
    rng = np.random.default_rng(seed)
    steps = np.diff([0.0, *fractions])
    increments = rng.standard_normal((n, len(fractions))) * np.sqrt(steps)
    z = np.cumsum(increments, axis=1) / np.sqrt(fractions)
    return float(np.mean(np.any(z >= np.asarray(bounds), axis=1)))


@pytest.mark.parametrize("fractions", [[0.2, 0.4, 0.6, 0.8, 1.0], [0.15, 0.5, 0.65, 1.0]])
def test_power_spending_crosses_under_the_null_with_probability_alpha(
        fractions: list[float]) -> None:
    # What the confirmation's error guarantee rests on: looking after every chunk at
    # these boundaries rejects a true null with probability alpha, not more.
    alpha, n = 0.05, 200_000
    bounds = efficacy_boundaries(fractions, power_spending(alpha, DEFAULT_RHO))
    p = _crossing_probability(fractions, bounds, n, seed=14)
    se = math.sqrt(alpha * (1 - alpha) / n)
    assert abs(p - alpha) < 3 * se, (p, bounds)
    # Each look spends what the spending function allots it, not just in total.
    first = _crossing_probability(fractions[:1], bounds[:1], n, seed=15)
    assert abs(first - alpha * fractions[0] ** DEFAULT_RHO) < 3 * math.sqrt(
        alpha * fractions[0] ** 2 / n)


def test_repeated_looks_at_a_fixed_level_would_inflate_the_error() -> None:
    # Why the boundaries exist: the same Monte Carlo at 1.645 every look is far above.
    fractions = [0.2, 0.4, 0.6, 0.8, 1.0]
    naive = _crossing_probability(fractions, [float(st.norm.isf(0.05))] * 5, 100_000, seed=3)
    assert naive > 0.1


def test_boundaries_are_deterministic_and_nominal_levels_follow_them() -> None:
    fractions = [0.2, 0.45, 0.7, 1.0]
    spend = power_spending(0.05, DEFAULT_RHO)
    first = efficacy_boundaries(fractions, spend)
    assert efficacy_boundaries(fractions, spend) == first  # bit for bit: resume replays
    levels = [nominal_level(fractions[:i + 1], 0.05) for i in range(len(fractions))]
    assert levels == [pytest.approx(float(st.norm.sf(c)), abs=1e-12) for c in first]
    assert [nominal_level(fractions[:i + 1], 0.05) for i in range(4)] == levels
    # Early looks are stricter than the last, and every look is stricter than alpha.
    assert levels == sorted(levels) and levels[-1] < 0.05
    # An earlier look changes the later boundary: the looks are not independent.
    assert nominal_level([0.45, 1.0], 0.05) != nominal_level([0.2, 1.0], 0.05)


def test_a_look_with_nothing_to_spend_cannot_pass() -> None:
    def flat(t: float) -> float:  # spends everything at t = 0.5
        return 0.05 if t >= 0.5 else 0.0

    bounds = efficacy_boundaries([0.25, 0.5, 0.75], flat)
    assert bounds[0] == math.inf and math.isfinite(bounds[1]) and bounds[2] == math.inf


@pytest.mark.parametrize("fractions", [[0.5, 0.5], [0.6, 0.3], [0.0, 1.0], [0.5, 1.2]])
def test_fractions_must_increase_strictly_within_the_unit_interval(
        fractions: list[float]) -> None:
    with pytest.raises(ValueError, match="fractions"):
        efficacy_boundaries(fractions, power_spending(0.05, 2.0))


def test_power_spending_checks_its_parameters() -> None:
    spend = power_spending(0.05, 2.0)
    assert (spend(0.0), spend(0.5), spend(1.0), spend(1.5)) == pytest.approx(
        (0.0, 0.0125, 0.05, 0.05))
    with pytest.raises(ValueError, match="alpha"):
        power_spending(1.0, 2.0)
    with pytest.raises(ValueError, match="rho"):
        power_spending(0.05, 0.0)
    assert efficacy_boundaries([], spend) == []


# -- the exact test for rare events ---------------------------------------------------------


@pytest.mark.parametrize(("n", "rate"), [(300, 0.01), (475, 0.01), (1000, 0.005), (200, 0.1)])
def test_a_rare_event_boundary_at_one_look_is_the_exact_binomial_test(n: int,
                                                                      rate: float) -> None:
    c = rare_event_boundary([n], [1.0], rate, 0.05)
    assert st.binom.cdf(c, n, rate) <= 0.05 < st.binom.cdf(c + 1, n, rate)


def test_no_event_in_299_attempts_shows_a_rate_below_one_percent() -> None:
    # 0.99**298 > 0.05 > 0.99**299: the zero-count bound, exact.
    assert rare_event_boundary([298], [1.0], 0.01, 0.05) == -1
    assert rare_event_boundary([299], [1.0], 0.01, 0.05) == 0


#: Irregular looks, as a confirmation's chunks of dev and val tasks give them.
LOOKS = [57, 95, 190, 285, 380, 475, 570, 760, 1100]


def passes_any_look(looks: list[int], rate: float, true_rate: float, reps: int,
                    seed: int = 0) -> float:
    bounds = [rare_event_boundary(looks[:j + 1], [n / looks[-1] for n in looks[:j + 1]], rate,
                                  0.05) for j in range(len(looks))]
    rng = np.random.default_rng(seed)
    counts = np.cumsum(rng.binomial(np.diff([0, *looks]), true_rate, size=(reps, len(looks))),
                       axis=1)
    return float(np.mean((counts <= np.array(bounds)).any(axis=1)))


def test_the_rare_event_test_holds_its_level_over_every_look() -> None:
    # At the null's edge (1%): at most alpha over nine looks (Monte Carlo, se 0.0005);
    # a fixed-level exact test at every look would pass in far more.
    at_edge = passes_any_look(LOOKS, 0.01, 0.01, 200_000)
    assert 0.02 < at_edge <= 0.05 + 0.0015
    naive = np.mean((np.cumsum(np.random.default_rng(1).binomial(
        np.diff([0, *LOOKS]), 0.01, size=(200_000, len(LOOKS))), axis=1)
        <= np.array([rare_event_boundary([n], [1.0], 0.01, 0.05) for n in LOOKS])).any(axis=1))
    assert naive > 0.07
    # Past the edge it passes less; far within it, nearly always.
    assert passes_any_look(LOOKS, 0.01, 0.015, 100_000) < 0.01
    assert passes_any_look(LOOKS, 0.01, 0.002, 20_000) > 0.9


def test_a_look_past_the_last_fraction_gets_what_the_looks_before_left() -> None:
    # A confirmation's extension block: its look comes at a fraction of 1 again, after a
    # last look at 1, and may spend only what that left; over both, alpha at the edge
    # (Monte Carlo, se 0.0005), and it passes more than the first look alone.
    looks, fractions = [1100, 2200], [1.0, 1.0]
    bounds = [rare_event_boundary(looks[:j + 1], fractions[:j + 1], 0.01, 0.05)
              for j in range(2)]
    assert bounds[0] == rare_event_boundary([1100], [1.0], 0.01, 0.05)
    rng = np.random.default_rng(3)
    counts = np.cumsum(rng.binomial([1100, 1100], 0.01, size=(200_000, 2)), axis=1)
    passed = (counts <= np.array(bounds)).any(axis=1)
    assert np.mean(passed) <= 0.05 + 0.0015
    assert np.mean(passed) > np.mean(counts[:, 0] <= bounds[0])


def test_the_rare_event_test_holds_its_level_on_large_counts() -> None:
    # Counts of thousands, where the chances are convolved by FFT.
    assert passes_any_look([6000, 12000, 18000], 0.3, 0.3, 200_000) <= 0.05 + 0.0015


def test_the_rare_event_test_refuses_malformed_looks() -> None:
    with pytest.raises(ValueError, match="one count"):
        rare_event_boundary([10, 20], [1.0], 0.01, 0.05)
    with pytest.raises(ValueError, match="must not decrease"):
        rare_event_boundary([20, 10], [0.5, 1.0], 0.01, 0.05)
    with pytest.raises(ValueError, match="alpha"):
        rare_event_boundary([10], [1.0], 0.01, 1.5)
    assert rare_event_boundary([10], [1.0], 0.0, 0.05) == -1
    assert rare_event_boundary([10], [1.0], 1.0, 0.05) == 10
