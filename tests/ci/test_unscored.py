"""The unscored share of two results compared: pairing by (task, seed), the exact
one-sided tests, the verdict's one line, and the error rates the gate promises."""

from __future__ import annotations

import random

import pytest
from scipy import stats

from ci.test_baseline import Outcomes, make_result
from forge.ci.unscored import (
    ShareSide,
    compare_unscored,
    fisher_greater_p,
    reasons_text,
    share_verdict,
    sign_test_p,
)
from forge.results.model import EvalResult

# -- the exact tails, against scipy ------------------------------------------------------


@pytest.mark.parametrize("new, recovered", [(0, 0), (0, 5), (1, 0), (5, 0), (3, 2), (12, 3),
                                            (40, 25), (300, 250), (2, 9)])
def test_the_sign_test_is_scipys_exact_binomial_tail(new: int, recovered: int) -> None:
    expected = 1.0 if new == 0 else stats.binomtest(new, new + recovered, 0.5,
                                                    alternative="greater").pvalue
    assert sign_test_p(new, recovered) == pytest.approx(expected, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("u_a, n_a, u_b, n_b", [(5, 20, 0, 20), (3, 96, 1, 96), (29, 96, 0, 96),
                                                (10, 40, 4, 60), (400, 2000, 330, 2100),
                                                (1, 1, 0, 1), (7, 30, 7, 30), (2, 50, 9, 50)])
def test_fishers_one_sided_p_is_scipys(u_a: int, n_a: int, u_b: int, n_b: int) -> None:
    p = fisher_greater_p(u_a, n_a, u_b, n_b)
    if u_a / n_a <= u_b / n_b:
        assert p == 1.0  # no more failures than the other sample: nothing to show
        return
    table = [[u_a, n_a - u_a], [u_b, n_b - u_b]]
    assert p == pytest.approx(stats.fisher_exact(table, alternative="greater").pvalue,
                              rel=1e-9, abs=1e-300)


def test_tails_of_many_attempts_neither_overflow_nor_underflow() -> None:
    assert sign_test_p(5000, 0) < 1e-300  # 2**-5000: no OverflowError on the way
    assert sign_test_p(10_000, 10_000) == pytest.approx(0.5, abs=0.01)
    assert fisher_greater_p(5000, 50_000, 4000, 50_000) < 1e-20


# -- pairing -------------------------------------------------------------------------------


def test_paired_on_shared_keys_counts_new_and_recovered_failures() -> None:
    base = make_result({"t1": [True, True, None, True], "t2": [False, True, True, True]})
    cur = make_result({"t1": [None, None, True, True], "t2": [False, None, True, True],
                       "t3": [None, None]})  # t3 is in current only: not compared
    c = compare_unscored(base, cur)
    assert c.paired
    assert (c.new, c.recovered) == (3, 1)
    assert (c.current.unscored, c.current.attempts) == (3, 8)
    assert (c.baseline.unscored, c.baseline.attempts) == (1, 8)
    assert c.rise == pytest.approx(2 / 8)
    assert c.tasks == (("t1", 2, 4), ("t2", 1, 4))  # most new failures first
    assert c.p_value == pytest.approx(5 / 16)  # P(X >= 3), X ~ Bin(4, 1/2)
    assert c.current.reasons == (("error: boom", 3),)


def test_another_seed_is_compared_unpaired_on_the_tasks_in_both() -> None:
    base = make_result({"t1": [True] * 8, "t2": [True] * 8, "gone": [None] * 8})
    cur = make_result({"t1": [None] * 4 + [True] * 4, "t2": [True] * 8}, seed=2)
    c = compare_unscored(base, cur)
    assert not c.paired
    assert (c.current.unscored, c.current.attempts) == (4, 16)
    assert (c.baseline.unscored, c.baseline.attempts) == (0, 16)  # "gone" left out
    assert c.tasks == (("t1", 4, 8),)
    assert c.p_value == pytest.approx(stats.fisher_exact([[4, 12], [0, 16]],
                                                         alternative="greater").pvalue)


# -- the verdict -----------------------------------------------------------------------


def _thirty_percent(seed: int = 1) -> EvalResult:
    rng = random.Random(seed)
    return make_result({f"dev-{i:02d}": [None if rng.random() < 0.3 else True for _ in range(4)]
                        for i in range(24)})


CLEAN: Outcomes = {f"dev-{i:02d}": [True] * 4 for i in range(24)}


def test_a_third_of_attempts_failing_fails_with_one_line_naming_both_shares() -> None:
    cur = _thirty_percent()
    failed = cur.n_attempts - cur.n_scored
    ok, text = share_verdict(compare_unscored(make_result(CLEAN), cur), 0.02, 0.05)
    assert not ok
    assert "\n" not in text
    share = f"{100 * failed / 96:.1f}%"
    assert text.startswith(f"unscored {share} ({failed} of 96: {failed} × error: boom) vs "
                           "0.0% (0 of 96) in the baseline, on 96 attempts paired by seed: "
                           f"up {share[:-1]} points > 2.0 allowed and beyond chance (p=")
    assert text.endswith("≤ α=0.05)")


@pytest.mark.parametrize("current, expected, passed", [
    ({"t": [True] * 50}, "no rise", True),
    ({"t": [True] * 49 + [None]}, "up 2.0 points ≤ 2.0 allowed", True),  # the allowance itself
    ({"t": [True] * 46 + [None] * 4}, "up 8.0 points > 2.0 allowed, but within chance "
                                      "(p=0.062 > α=0.05)", True),
    ({"t": [True] * 45 + [None] * 5}, "up 10.0 points > 2.0 allowed and beyond chance "
                                      "(p=0.031 ≤ α=0.05)", False),
])
def test_the_verdict_needs_a_rise_beyond_the_allowance_and_beyond_chance(
        current: Outcomes, expected: str, passed: bool) -> None:
    ok, text = share_verdict(compare_unscored(make_result({"t": [True] * 50}),
                                              make_result(current)), 0.02, 0.05)
    assert (ok, text.split(": ")[-1]) == (passed, expected)


def test_a_fall_in_the_share_passes_and_says_so() -> None:
    ok, text = share_verdict(compare_unscored(make_result({"t": [None, None, True, True]}),
                                              make_result({"t": [True] * 4})), 0.0, 0.05)
    assert ok and text.endswith("down 50.0 points")


def test_reasons_are_redacted_printable_and_capped() -> None:
    reasons = (("error: \x1b[31mred\x1b[0m", 5), ("timeout", 3), ("error: b", 2), ("error: c", 1))
    text = reasons_text(reasons)
    assert "\x1b" not in text and text.startswith("5 × error: \\x1b[31mred")
    assert text.endswith("3 × timeout, 2 × error: b, 1 more reason")
    assert reasons_text(()) == ""
    assert ShareSide.of([]).share is None


# -- what the gate promises ------------------------------------------------------------


def test_an_unchanged_agent_with_transient_errors_fails_at_most_alpha() -> None:
    """The same flaky agent run twice (errors at 5%, independent of the seed): with no
    allowance at all the exact test alone keeps false failures under alpha."""
    rng = random.Random(48)

    def run() -> EvalResult:
        return make_result({f"t{i:02d}": [None if rng.random() < 0.05 else True
                                          for _ in range(4)] for i in range(24)})

    runs = 400
    failures = sum(not share_verdict(compare_unscored(run(), run()), 0.0, 0.05)[0]
                   for _ in range(runs))
    assert failures / runs <= 0.05


def test_a_thirty_percent_failing_agent_is_caught_nearly_always() -> None:
    caught = sum(not share_verdict(compare_unscored(make_result(CLEAN), _thirty_percent(s)),
                                   0.02, 0.05)[0] for s in range(200))
    assert caught == 200
