"""Failure reasons (forge.results.failures): the same failure on two tasks is one reason, counted
and charged to the config that had it; the share unscored is judged against the
threshold; counts by reason add up, and the tasks never scored are named."""

from __future__ import annotations

import pytest

from forge.results.failures import (
    FAILURE_WARN_RATE,
    JSON_REASONS,
    NAMED_TASKS,
    OTHER_REASONS,
    FailureTally,
    count_reasons,
    failure_stop,
    reason_key,
    unscored_counts,
    unscored_label,
)
from forge.results.model import AttemptResult


def attempt(task: str = "dev-01", i: int = 0, *, stop: str = "error",
            error: str | None = None, scored: bool = False) -> AttemptResult:
    return AttemptResult.model_validate({
        "task_id": task, "attempt": i, "seed": 7, "duration_s": 0.1,
        "stop_reason": "completed" if scored else stop, "error": error,
        "score": {"value": 1.0, "passed": True} if scored else None})


def test_the_same_failure_on_other_tasks_and_numbers_is_one_reason() -> None:
    a = reason_key("ValueError: no route to 10.0.0.7 for task dev-03 after 3.2 s", "dev-03")
    b = reason_key("ValueError: no route to 10.0.0.9 for task val-11 after 12 s", "val-11")
    assert a == b == "ValueError: no route to # for task <task> after # s"
    # The class is kept as written; hex ids and addresses fold; only the first line.
    assert reason_key("HTTP2Error: object at 0x7f3a1c id 3fa85f64b7\nTraceback ...") == \
        "HTTP2Error: object at <hex> id <hex>"
    assert reason_key("KeyError: 'width'") != reason_key("KeyError: 'depth'")
    assert reason_key(None) == reason_key("  ") == ""


def test_a_tally_counts_groups_and_charges_each_reason_to_its_configs() -> None:
    tally = FailureTally()
    for i in range(3):
        tally.add(attempt(f"dev-0{i}", error=f"ValueError: bad input on dev-0{i}"), "start")
    tally.add(attempt("dev-04", error="ValueError: bad input on dev-04"), "cand")
    tally.add(attempt("dev-05", stop="timeout", error="AttemptTimeout: after 5.0 s"), "cand")
    tally.add(attempt("dev-06", stop="completed",
                      error="scorer failed: TypeError: expected str"), "cand")
    for i in range(4):
        tally.add(attempt(f"dev-1{i}", scored=True), "start")
    assert (tally.attempts, tally.unscored) == (10, 6)
    assert tally.rate == pytest.approx(0.6)
    top, *rest = tally.reasons()
    assert top.label == "error: ValueError: bad input on <task>"
    assert top.count == 4 and dict(top.configs) == {"start": 3, "cand": 1}
    # The example is the first attempt it was seen on, its message as the harness wrote it.
    assert (top.task_id, top.attempt, top.config, top.message) == (
        "dev-00", 0, "start", "ValueError: bad input on dev-00")
    assert [r.label for r in rest] == ["timeout: AttemptTimeout: after # s",
                                       "scorer_failed: scorer failed: TypeError: expected str"]
    assert [r.label for r in tally.reasons(top=1)] == [top.label]
    assert tally.n_reasons() == 3


def test_scorer_failures_are_named_apart_from_errors() -> None:
    assert failure_stop(attempt(stop="completed", error="scorer failed: x")) == "scorer_failed"
    assert failure_stop(attempt(stop="timeout")) == "timeout"


def test_the_warning_threshold_is_a_share_above_five_percent() -> None:
    assert FAILURE_WARN_RATE == 0.05
    at = FailureTally.of([attempt(error="E: x")] + [attempt(scored=True)] * 19)
    assert at.rate == pytest.approx(0.05) and not at.alarming  # 1 in 20: at, not above
    above = FailureTally.of([attempt(error="E: x")] * 2 + [attempt(scored=True)] * 18)
    assert above.alarming
    assert FailureTally().rate is None and not FailureTally().alarming



# -- counts by reason: --json, the journal, review -----------------------------------------


def test_an_attempts_label_is_how_it_stopped_and_its_normalised_message() -> None:
    assert unscored_label(attempt("dev-03", error="ValueError: bad JSON on dev-03")) == \
        "error: ValueError: bad JSON on <task>"
    assert unscored_label(attempt(stop="timeout")) == "timeout"  # no message: the stop alone
    assert unscored_label(attempt(stop="completed", error="scorer failed: x")) == \
        "scorer_failed: scorer failed: x"
    assert unscored_label(attempt(scored=True)) is None


def test_counts_by_reason_name_the_most_frequent_and_sum_the_rest_as_other() -> None:
    labels = ["timeout"] * 5 + ["error: A"] * 3 + [f"error: rare {i}" for i in range(30)]
    counts = count_reasons(labels)
    assert list(counts)[:2] == ["timeout", "error: A"]
    assert len(counts) == JSON_REASONS + 1 and counts[OTHER_REASONS] == 30 - (JSON_REASONS - 2)
    assert sum(counts.values()) == len(labels)  # they always add up
    assert count_reasons(["timeout"] * 2) == {"timeout": 2}
    assert count_reasons([]) == {}


def test_unscored_counts_name_the_tasks_that_were_never_scored() -> None:
    attempts = {
        "t-1": [attempt("t-1", 0, error="KeyError: x"), attempt("t-1", 1, scored=True)],
        "t-2": [attempt("t-2", i, stop="timeout") for i in range(3)],
        "t-3": [attempt("t-3", 0, scored=True)],
    }
    counts = unscored_counts(attempts, ["t-0", "t-1", "t-2", "t-3"])
    assert (counts.n_tasks, counts.n_attempts, counts.n_unscored) == (4, 6, 4)
    assert counts.unscored_by_reason == {"timeout": 3, "error: KeyError: x": 1}
    # A task with no attempt at all is one without a score too: never left out unsaid.
    assert counts.tasks_without_score == ["t-0", "t-2"] and counts.n_tasks_without_score == 2
    assert counts.rate == pytest.approx(4 / 6)
    many = unscored_counts({f"t-{i:03d}": [attempt(f"t-{i:03d}")] for i in range(NAMED_TASKS + 7)})
    assert many.n_tasks_without_score == NAMED_TASKS + 7
    assert many.tasks_without_score == [f"t-{i:03d}" for i in range(NAMED_TASKS)]
