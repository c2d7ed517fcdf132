"""Failure shares on shared (task, seed) pairs, and the one-sided test of more failures
(forge.stats.unscored); the score deltas that count a one-sided failure as a loss."""

from __future__ import annotations

import pytest
from scipy import stats as st

from forge.gates.checks import unscored_check
from forge.results.model import AttemptResult, StopReason, TaskAttempts
from forge.scorers.base import Score
from forge.stats.pairs import score_deltas, score_pairs
from forge.stats.unscored import SPARSE_TASKS, failure_increase, failure_pairs


def attempt(task: str, seed: int, how: str | float) -> AttemptResult:
    """``how``: a score in [0, 1], or a stop reason (``error``, ``timeout``,
    ``cancelled``), or ``unjudged`` (completed, no score)."""
    if isinstance(how, float):
        return AttemptResult(task_id=task, attempt=seed, seed=seed, stop_reason="completed",
                             duration_s=0.0, score=Score(value=how, passed=how >= 1.0))
    if how == "unjudged":
        return AttemptResult(task_id=task, attempt=seed, seed=seed, stop_reason="completed",
                             duration_s=0.0)
    reason: StopReason = how  # type: ignore[assignment]
    return AttemptResult(task_id=task, attempt=seed, seed=seed, stop_reason=reason,
                         error="boom", duration_s=0.0)


def config(rows: dict[str, list[str | float]]) -> TaskAttempts:
    return TaskAttempts({t: [attempt(t, s, how) for s, how in enumerate(items)]
                         for t, items in rows.items()})


def test_a_failure_on_one_side_is_that_sides_loss_and_both_failing_is_left_out() -> None:
    inc = config({"a": [1.0, 1.0, "error", 0.5], "b": ["error", "error"]})
    cand = config({"a": ["timeout", 0.0, 1.0, "error"], "b": ["error", "cancelled"]})
    # a: seed 0 cand failed vs 1.0 -> -1; seed 1: -1; seed 2 inc failed vs 1.0 -> +1;
    # seed 3 cand failed vs 0.5 -> -0.5. b: both failed, or cancelled: no pair left.
    assert score_deltas(inc, cand) == {"a": pytest.approx((-1 - 1 + 1 - 0.5) / 4)}
    assert score_pairs(inc, cand) == 4


def test_an_unjudged_output_fails_and_a_cancelled_attempt_pairs_with_nothing() -> None:
    start = config({"a": [1.0, 1.0, 1.0]})
    cand = config({"a": ["unjudged", "cancelled", 1.0]})
    pairs = failure_pairs(start, cand)
    assert (pairs.pairs, pairs.before, pairs.after, pairs.worse, pairs.better) == (2, 0, 1, 1, 0)
    assert pairs.per_task == {"a": 0.5}


def test_no_failure_of_the_candidate_alone_shows_no_increase() -> None:
    start = config({f"t{i}": ["error", 1.0] for i in range(20)})
    cand = config({f"t{i}": ["error", 1.0] for i in range(20)})
    found = failure_increase(failure_pairs(start, cand), allowed=0.0, level=0.05)
    assert (found.p, found.test) == (1.0, "none")


def test_sparse_failures_are_read_by_the_exact_sign_test() -> None:
    # 3 tasks where only the candidate failed, once each; one where only the start did.
    rows_start = {f"t{i}": [1.0] * 5 for i in range(30)}
    rows_cand = {f"t{i}": [1.0] * 5 for i in range(30)}
    for i in range(3):
        rows_cand[f"t{i}"] = ["error", 1.0, 1.0, 1.0, 1.0]
    rows_start["t9"] = ["error", 1.0, 1.0, 1.0, 1.0]
    pairs = failure_pairs(config(rows_start), config(rows_cand))
    assert pairs.changed_tasks == 4 < SPARSE_TASKS
    found = failure_increase(pairs, allowed=0.0, level=0.05)
    assert found.test == "sign"
    assert found.p == pytest.approx(st.binom.sf(2, 4, 0.5))  # P(X >= 3), X ~ Bin(4, 1/2)
    assert not found.shown(0.05)


def test_failures_on_many_tasks_are_read_by_the_t_test_over_tasks() -> None:
    start = config({f"t{i}": [1.0] * 4 for i in range(40)})
    # The candidate fails every attempt of a hard quarter of the tasks.
    cand = config({f"t{i}": ["error"] * 4 if i % 4 == 0 else [1.0] * 4 for i in range(40)})
    found = failure_increase(failure_pairs(start, cand), allowed=0.0, level=0.05)
    assert found.test == "t" and found.effect == pytest.approx(0.25)
    assert found.shown(0.001)
    # An allowance of 30 points covers a 25-point increase.
    assert not failure_increase(failure_pairs(start, cand), allowed=0.30, level=0.05).shown(0.05)


def test_an_allowance_on_sparse_failures_uses_the_score_test() -> None:
    start = config({f"t{i}": [1.0] * 10 for i in range(20)})
    cand = config({f"t{i}": (["error"] + [1.0] * 9) if i < 5 else [1.0] * 10
                   for i in range(20)})
    pairs = failure_pairs(start, cand)  # 5 of 200 pairs worse: +2.5 pts
    within = failure_increase(pairs, allowed=0.05, level=0.05)
    assert within.test == "score" and not within.shown(0.05)
    assert failure_increase(pairs, allowed=0.0, level=0.05).shown(0.05)  # sign: 1/32


def test_the_end_check_says_beyond_only_when_shown() -> None:
    start = config({f"t{i}": [1.0] * 4 for i in range(40)})
    cand = config({f"t{i}": ["error"] * 4 if i % 4 == 0 else [1.0] * 4 for i in range(40)})
    beyond = unscored_check(start, cand, allowed=0.0, alpha=0.05)
    assert not beyond.passed and beyond.details["status"] == "beyond"
    assert "0/160 -> 40/160" in beyond.reason
    one = config({f"t{i}": ["error", 1.0, 1.0, 1.0] if i == 0 else [1.0] * 4
                  for i in range(40)})
    unclear = unscored_check(start, one, allowed=0.0, alpha=0.05)
    assert unclear.passed and unclear.details["status"] == "unclear"
    same = unscored_check(start, start, allowed=0.0, alpha=0.05)
    assert same.passed and same.details["status"] == "within"
    nothing = unscored_check(start, TaskAttempts(), allowed=0.0, alpha=0.05)
    assert not nothing.passed and nothing.details["status"] == "absent"
