"""Paired tests and the alpha-spending sequence that carry the search's error guarantee."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy import stats as st

from forge.stats import paired


def _samples() -> list[list[float]]:
    rng = random.Random(3)
    return [
        [0.1, 0.3, -0.05, 0.2, 0.0, 0.25],
        [rng.gauss(0.05, 0.2) for _ in range(40)],
        [rng.gauss(-0.1, 0.3) for _ in range(12)],
        [rng.choice([-1.0, 0.0, 0.0, 0.5, 1.0]) for _ in range(30)],
    ]


@pytest.mark.parametrize("deltas", _samples())
@pytest.mark.parametrize("threshold", [0.0, 0.05, -0.02])
def test_p_value_matches_scipy_one_sided(deltas: list[float], threshold: float) -> None:
    got = paired.paired_test(deltas, alpha=0.05, threshold=threshold)
    want = st.ttest_1samp(deltas, popmean=threshold, alternative="greater")
    assert got.p_value == pytest.approx(want.pvalue, rel=1e-9, abs=1e-12)
    assert got.effect == pytest.approx(sum(deltas) / len(deltas))
    assert got.n == len(deltas)
    assert got.passed == (want.pvalue < 0.05)


@pytest.mark.parametrize("deltas", _samples())
@pytest.mark.parametrize("alpha", [0.05, 0.025, 0.2])
def test_bounds_are_one_sided_t_bounds(deltas: list[float], alpha: float) -> None:
    got = paired.paired_test(deltas, alpha=alpha)
    low = st.ttest_1samp(deltas, 0.0, alternative="greater").confidence_interval(1 - alpha)
    high = st.ttest_1samp(deltas, 0.0, alternative="less").confidence_interval(1 - alpha)
    assert got.ci_low == pytest.approx(low.low)
    assert got.ci_high == pytest.approx(high.high)
    # upper(level) is the same kind of bound at another level (futility uses 0.8).
    futility = st.ttest_1samp(deltas, 0.0, alternative="less").confidence_interval(0.8)
    assert got.upper(0.8) == pytest.approx(futility.high)
    assert got.ci_low < got.effect < got.ci_high


def test_the_bound_and_the_p_value_agree() -> None:
    # ci_low > threshold exactly when p < alpha: one decision, two ways to read it.
    rng = random.Random(7)
    for _ in range(200):
        deltas = [rng.gauss(0.05, 0.3) for _ in range(rng.randint(2, 30))]
        t = paired.paired_test(deltas, alpha=0.05, threshold=0.01)
        assert (t.ci_low > 0.01) == (t.p_value < 0.05)


@pytest.mark.parametrize("deltas", [[], [0.7]])
def test_fewer_than_two_tasks_conclude_nothing(deltas: list[float]) -> None:
    t = paired.paired_test(deltas, alpha=0.05)
    assert t.p_value == 1.0
    assert not t.passed
    assert t.ci_low == -math.inf
    assert t.ci_high == math.inf
    assert t.upper(0.8) == math.inf  # futility can never fire on one task
    assert t.n == len(deltas)


def test_zero_spread_decides_by_the_sign_of_the_mean() -> None:
    up = paired.paired_test([0.25] * 5, alpha=0.05)
    assert (up.p_value, up.ci_low, up.ci_high) == (0.0, 0.25, 0.25)
    assert up.passed
    flat = paired.paired_test([0.0] * 5, alpha=0.05)
    assert flat.p_value == 1.0  # no change is not an improvement
    assert not flat.passed
    assert flat.upper(0.8) == 0.0
    at_threshold = paired.paired_test([0.1] * 5, alpha=0.05, threshold=0.1)
    assert at_threshold.p_value == 1.0
    down = paired.paired_test([-0.5] * 4, alpha=0.05)
    assert down.p_value == 1.0


def test_as_dict_names_the_journaled_fields() -> None:
    d = paired.paired_test([0.1, 0.2, 0.3], alpha=0.05).as_dict()
    assert set(d) == {"effect", "ci_low", "ci_high", "p_value", "n_tasks", "alpha"}
    assert d["n_tasks"] == 3


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.2])
def test_spent_alpha_sums_to_at_most_alpha(alpha: float) -> None:
    levels = [paired.spent_alpha(j, alpha) for j in range(1, 100_001)]
    total = math.fsum(levels)
    assert total <= alpha
    assert total == pytest.approx(alpha, rel=1e-4)  # and nothing is wasted
    assert levels[0] == pytest.approx(alpha * 6 / math.pi ** 2)
    assert all(a > b for a, b in itertools.pairwise(levels))


def test_spent_alpha_starts_at_one() -> None:
    with pytest.raises(ValueError):
        paired.spent_alpha(0, 0.05)


def test_mean_interval_matches_scipy() -> None:
    values = [0.2, 0.5, 0.4, 0.9, 0.1, 0.6]
    got = paired.mean_interval(values, 0.95)
    assert got is not None
    low, high = st.t.interval(0.95, len(values) - 1, loc=sum(values) / len(values),
                              scale=st.sem(values))
    assert got.low == pytest.approx(low)
    assert got.high == pytest.approx(high)
    assert paired.mean_interval([]) is None
    one = paired.mean_interval([0.3])
    assert one is not None and (one.low, one.high) == (-math.inf, math.inf)
    flat = paired.mean_interval([0.5, 0.5])
    assert flat is not None and (flat.low, flat.high) == (0.5, 0.5)


@pytest.mark.parametrize(("a", "b", "low", "high"), [
    # Newcombe (1998), Statistics in Medicine 17:873, Table II, method 10.
    ((56, 70), (48, 80), 0.0524, 0.3339),
    ((9, 10), (3, 10), 0.1705, 0.8090),
    ((5, 56), (0, 29), -0.0381, 0.1926),
])
def test_drop_bound_matches_newcombes_published_intervals(
        a: tuple[int, int], b: tuple[int, int], low: float, high: float) -> None:
    assert paired.drop_lower_bound(*a, *b, alpha=0.025) == pytest.approx(low, abs=5e-5)
    assert -paired.drop_lower_bound(*b, *a, alpha=0.025) == pytest.approx(high, abs=5e-5)


def test_wilson_interval_does_not_collapse_at_all_or_nothing() -> None:
    z = st.norm.ppf(0.975)
    assert paired.wilson_interval(5, 5, z)[0] == pytest.approx(5 / (5 + z * z))
    assert paired.wilson_interval(0, 5, z)[0] == 0.0 and paired.wilson_interval(0, 5, z)[1] > 0.4
    # Nothing observed on a side: nothing can be claimed about the drop.
    assert paired.drop_lower_bound(3, 5, 0, 0, alpha=0.05) == -1.0


# -- the bound over fixed tasks (the end check's) ------------------------------------------


def test_fixed_tasks_bound_is_the_welch_satterthwaite_bound_over_the_tasks() -> None:
    diffs = [[0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]]
    b = paired.fixed_tasks_bound(diffs, alpha=0.05)
    assert b is not None
    # Per task: mean, and the variance of that mean (s^2 / k).
    v = [(1 / 3) / 4, (1 / 3) / 3, 0.0]
    # Satterthwaite's 3.9, capped at the two tasks whose attempts differ, less one.
    df = min(sum(v) ** 2 / (v[0] ** 2 / 3 + v[1] ** 2 / 2), 1)
    assert b.effect == pytest.approx((0.5 + 2 / 3 + 0.0) / 3)
    assert b.df == pytest.approx(df)
    assert b.bound == pytest.approx(b.effect + st.t.ppf(0.95, df) * math.sqrt(sum(v)) / 3)
    assert (b.n_tasks, b.n_pairs) == (3, 12)


def test_fixed_tasks_bound_needs_a_task_with_two_pairs() -> None:
    assert paired.fixed_tasks_bound([[1.0], [0.0], []], alpha=0.05) is None
    assert paired.fixed_tasks_bound([], alpha=0.05) is None


def test_a_task_with_one_pair_gets_the_widest_variance_seen() -> None:
    one = paired.fixed_tasks_bound([[0.0, 1.0], [0.0, 0.0], [1.0]], alpha=0.05)
    assert one is not None
    # The lone pair is charged var 0.5 / 1 (task 1's per-attempt variance), not 0.
    assert one.bound == pytest.approx(
        0.5 + st.t.ppf(0.95, one.df) * math.sqrt(0.25 + 0.0 + 0.5) / 3)


def test_attempts_that_never_differ_bound_the_regression_at_their_mean() -> None:
    b = paired.fixed_tasks_bound([[0.5, 0.5], [0.0, 0.0]], alpha=0.05)
    assert b is not None and b.bound == pytest.approx(0.25) and b.effect == pytest.approx(0.25)


def test_over_fixed_tasks_the_bound_holds_a_rare_event_in_about_1_minus_alpha() -> None:
    """The end check's promise: the tasks fixed, the attempts redrawn, the bound falls
    below the true mean difference in about alpha of runs — here for a rare event (a
    handful of 110 tasks where harm ever happens, paired 0/1 attempts), the case the
    paired t over tasks cannot decide."""
    rng = random.Random(11)
    # Per task: P(start harms), P(final harms); shared seeds make them correlated.
    tasks = [(0.0, 0.0)] * 100 + [(0.5, 0.8), (0.6, 0.8), (0.1, 0.2), (0.05, 0.1),
                                  (0.2, 0.15), (0.0, 0.05), (0.1, 0.1), (0.3, 0.35),
                                  (0.02, 0.06), (0.0, 0.02)]
    truth = sum(b - a for a, b in tasks) / len(tasks)
    misses, runs = 0, 2000
    for _ in range(runs):
        diffs = []
        for a, b in tasks:
            draws = [rng.random() for _ in range(20)]
            diffs.append([float(u < b) - float(u < a) for u in draws])
        got = paired.fixed_tasks_bound(diffs, alpha=0.05)
        assert got is not None
        misses += got.bound < truth
    # 3.2% on these draws; with Satterthwaite's df uncapped, 7.0% on the same draws.
    assert 0.01 <= misses / runs <= 0.05


def _restricted_p(worse: int, better: int, n: int, margin: float) -> float:
    # The score test solved another way: the restricted likelihood maximised numerically.
    from scipy.optimize import minimize_scalar

    rest = n - worse - better

    def nll(q: float) -> float:
        return -(worse * math.log(q + margin) + better * math.log(q)
                 + rest * math.log(1 - 2 * q - margin))

    q = minimize_scalar(nll, bounds=(1e-12, (1 - margin) / 2 - 1e-12), method="bounded",
                        options={"xatol": 1e-12}).x
    var = (2 * q + margin - margin * margin) / n
    return float(st.norm.cdf(((worse - better) / n - margin) / math.sqrt(var)))


@pytest.mark.parametrize(("worse", "better", "n", "margin"), [
    (14, 12, 2200, 0.01), (3, 1, 300, 0.01), (40, 25, 4400, 0.01), (5, 30, 1000, 0.02),
    (200, 150, 1000, 0.05)])
def test_net_regression_p_is_tangos_score_test(worse: int, better: int, n: int,
                                                margin: float) -> None:
    assert paired.net_regression_p(worse, better, n, margin) == pytest.approx(
        _restricted_p(worse, better, n, margin), rel=1e-4, abs=1e-9)


def test_net_regression_p_reads_the_net_rate_not_the_attempts_made_worse() -> None:
    # Harm moved between tasks: 20 attempts made worse, 18 made better, of 2,200: the
    # net rate (+0.001) is shown below +0.01, though 20 of 2,200 alone is not.
    assert paired.net_regression_p(20, 18, 2200, 0.01) < 0.005
    assert st.binom.cdf(20, 2200, 0.01) > 0.1  # the count of worse alone: not shown
    # At the margin itself: p one half; past it: not shown; no change on 300 attempts:
    # about what a zero count needs (0.99 ** 300 = 0.049).
    assert paired.net_regression_p(44, 0, 4400, 0.01) == pytest.approx(0.5)
    assert paired.net_regression_p(70, 10, 4400, 0.01) > 0.5
    assert 0.03 < paired.net_regression_p(0, 0, 300, 0.01) < 0.05
    assert paired.net_regression_p(0, 0, 10, 1.0) == 0.0
    assert paired.net_regression_p(0, 0, 10, 0.0) == 1.0
    with pytest.raises(ValueError, match="margin"):
        paired.net_regression_p(6, 5, 10, 0.01)


@pytest.mark.parametrize(("p_better", "n"), [(0.004, 2200), (0.02, 4400), (0.0, 1100)])
def test_net_regression_p_holds_its_level_at_the_margin(p_better: float, n: int) -> None:
    # Data drawn at the null's edge (p_worse = p_better + margin): rejections at 5%.
    rng = random.Random(7)
    margin, reps = 0.01, 1500
    p_worse = p_better + margin
    rejected = 0
    for _ in range(reps):
        worse = better = 0
        for _ in range(n):
            u = rng.random()
            worse += u < p_worse
            better += p_worse <= u < p_worse + p_better
        rejected += paired.net_regression_p(worse, better, n, margin) <= 0.05
    # 5% of 1,500: a binomial sd of 0.56 points; the score test runs near its level.
    assert rejected / reps < 0.068
