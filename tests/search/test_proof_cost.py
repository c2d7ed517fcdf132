"""The information limit benchmarks/proof_cost.py measures proofs against
(benchmarks/fixed_sample.py): the fixed sample of a one-sided paired test, and the sd of
a task's paired delta, checked against textbook values and a simulation of the draws."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from fixed_sample import attempt_variance, fixed_sample_tasks, paired_sd


def test_fixed_sample_matches_the_textbook_constants() -> None:
    # (z_{1-a} + z_{1-b})^2 from the tables: 8.56 (one-sided 0.05, power 0.90) and
    # 7.85 (one-sided 0.025, power 0.80); a standardised effect of 0.5 needs
    # 8.56 / 0.25 = 34.3 -> 35 and 7.85 / 0.25 = 31.4 -> 32 pairs.
    assert fixed_sample_tasks(0.5, 1.0, alpha=0.05, power=0.90) == 35
    assert fixed_sample_tasks(0.5, 1.0, alpha=0.025, power=0.80) == 32
    # Only the ratio sd / delta matters, squared.
    assert fixed_sample_tasks(0.05, 0.1, alpha=0.05, power=0.90) == 35
    assert fixed_sample_tasks(0.25, 1.0, alpha=0.05, power=0.90) == 138


def test_no_fixed_sample_proves_a_move_without_effect() -> None:
    with pytest.raises(ValueError, match="true effect"):
        fixed_sample_tasks(0.0, 0.3, alpha=0.05, power=0.90)


@pytest.mark.parametrize(("p_inc", "p_cand"), [(0.3, 0.45), (0.6, 0.2), (0.5, 0.5)])
def test_attempt_variance_is_that_of_the_joint_outcomes(p_inc: float, p_cand: float) -> None:
    # Independent draws: the four outcomes with their product probabilities.
    joint = {(a, b): (p_inc if a else 1 - p_inc) * (p_cand if b else 1 - p_cand)
             for a in (0, 1) for b in (0, 1)}
    mean = sum(w * (b - a) for (a, b), w in joint.items())
    var = sum(w * (b - a - mean) ** 2 for (a, b), w in joint.items())
    assert attempt_variance(p_inc, p_cand, shared=False) == pytest.approx(var)
    # One shared uniform u: success below each rate, so (1[u < p_c] - 1[u < p_i]) is
    # nonzero on the interval between the rates only.
    low, high = sorted((p_inc, p_cand))
    sign = 1.0 if p_cand > p_inc else -1.0
    pieces = [(low, 0.0), (high - low, sign), (1 - high, 0.0)]
    mean = sum(w * d for w, d in pieces)
    var = sum(w * (d - mean) ** 2 for w, d in pieces)
    assert attempt_variance(p_inc, p_cand, shared=True) == pytest.approx(var)


@pytest.mark.parametrize("shared", [False, True])
def test_paired_sd_is_the_sd_of_a_simulated_task_delta(shared: bool) -> None:
    # A task drawn at random from the set, its K attempts drawn as a harness draws
    # them (one uniform per attempt and config, or one for both), the delta their mean.
    rng = np.random.default_rng(7)
    p_inc = np.array([0.2, 0.35, 0.5, 0.7])
    p_cand = np.array([0.3, 0.35, 0.65, 0.72])
    k, draws = 5, 400_000
    task = rng.integers(0, len(p_inc), draws)
    u_inc = rng.random((draws, k))
    u_cand = u_inc if shared else rng.random((draws, k))
    delta = ((u_cand < p_cand[task, None]).astype(float)
             - (u_inc < p_inc[task, None]).astype(float)).mean(axis=1)
    expected = paired_sd(list(p_inc), list(p_cand), k=k, shared=shared)
    assert float(delta.std()) == pytest.approx(expected, rel=0.01)
    assert float(delta.mean()) == pytest.approx(float((p_cand - p_inc).mean()), abs=0.002)


def test_shared_draws_make_the_difference_less_noisy() -> None:
    p_inc, p_cand = [0.3, 0.4], [0.38, 0.48]
    assert paired_sd(p_inc, p_cand, k=5, shared=True) < paired_sd(p_inc, p_cand, k=5,
                                                                   shared=False)
