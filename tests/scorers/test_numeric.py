"""numeric: the last number in the output against the expected one, within tolerances."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge.errors import BenchError

from ._helpers import Build, judge, make, out, task

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@pytest.mark.parametrize(("spec", "expected", "output", "passed"), [
    ("numeric", 42, 42, True),
    ("numeric", 42, "so the answer is 42.", True),
    ("numeric", "42", "42.0", True),
    ("numeric", 3, "3 apples, then 5 more", False),
    ("numeric", 8, "3 apples, then 5 more makes 8", True),
    ("numeric", 1234, "the total is 1,234 dollars", True),
    ("numeric", -7, "it drops to -7", True),
    ("numeric", 5, "range 3-5", True),
    ("numeric", 0.0015, "1.5e-3", True),
    ("numeric", 3.14159, "pi is 3.14", False),
    ({"numeric": {"abs_tol": 0.01}}, 3.14159, "pi is 3.14", True),
    ({"numeric": {"abs_tol": "1e-2"}}, 3.14159, "pi is 3.14", True),
    ("numeric", 1000, 1010, False),
    ({"numeric": {"rel_tol": 0.01}}, 1000, 1010, True),
    ({"numeric": {"rel_tol": 0.005}}, 1000, 1010, False),
    ({"numeric": {"rel_tol": 0.01}}, -1000, -990, True),
    ("numeric", 1, True, False),
])
def test_numeric_verdicts(build: Build, spec: Any, expected: Any, output: Any,
                          passed: bool) -> None:
    score = judge(build(spec), task(expected), out(output))
    assert score.passed is passed
    assert score.value == (1.0 if passed else 0.0)


@pytest.mark.parametrize("output", [None, "", "no idea", "inf", "1e999", True])
def test_output_without_a_number_is_a_wrong_answer(build: Build, output: Any) -> None:
    score = judge(build("numeric"), task(42), out(output))
    assert (score.passed, score.value) == (False, 0.0)
    assert score.explanation is not None and "no number" in score.explanation


def test_wrong_number_explains_the_gap(build: Build) -> None:
    score = judge(build("numeric"), task(10), out("11"))
    assert score.explanation == "expected 10, got 11 (off by 1)"
    assert score.details == {"expected": 10.0, "actual": 11.0, "diff": 1.0}


@pytest.mark.parametrize("expected", [None, "about 5", "", [5], True, float("nan"), "1e999"])
def test_task_without_a_number_cannot_be_judged(build: Build, expected: Any) -> None:
    with pytest.raises(ValueError, match="'expected' must be a number"):
        build("numeric").score(task(expected), out("5"))


@pytest.mark.parametrize(("args", "field"), [
    ({"abs_tol": -1}, "scorer.numeric.abs_tol"),
    ({"rel_tol": "lots"}, "scorer.numeric.rel_tol"),
    ({"rel_tol": float("inf")}, "scorer.numeric.rel_tol"),
    ({"tolerance": 0.1}, "scorer.numeric.tolerance"),
])
def test_bad_tolerances_are_refused_naming_the_field(build: Build, args: dict[str, Any],
                                                     field: str) -> None:
    with pytest.raises(BenchError) as err:
        build({"numeric": args})
    assert str(err.value).startswith(f"bench.yaml: {field}: ")
    assert "\n" not in str(err.value)


@given(x=finite)
def test_a_number_written_at_the_end_of_a_sentence_is_read_back(x: float) -> None:
    score = judge(make("numeric"), task(x), out(f"After some thought, the answer is {x!r}."))
    assert score.passed


@given(a=finite, b=finite, tol=st.floats(min_value=0, max_value=1e6))
def test_verdict_is_the_absolute_tolerance_rule(a: float, b: float, tol: float) -> None:
    score = judge(make({"numeric": {"abs_tol": tol}}), task(b), out(a))
    assert score.passed is (abs(a - b) <= tol)
