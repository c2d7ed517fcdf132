"""exact, contains and regex: the options a bench sets change the verdicts they should."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from forge.errors import BenchError

from ._helpers import Build, judge, make, out, task

# ---------------------------------------------------------------- exact


@pytest.mark.parametrize(("spec", "expected", "output", "passed"), [
    ("exact", "Paris", "Paris", True),
    ("exact", "Paris", "London", False),
    ("exact", "Paris", "  Paris \n", True),
    ("exact", "new york", "new   york", True),
    ({"exact": {"normalize_whitespace": False}}, "new york", "new   york", False),
    ({"exact": {"normalize_whitespace": False}}, "Paris", " Paris", False),
    ("exact", "Paris", "paris", False),
    ({"exact": {"case_sensitive": False}}, "Paris", "PARIS", True),
    ("exact", 42, "42", True),
    ("exact", 4, "4.0", True),
    ("exact", "4.0", 4, True),
    ("exact", 1000, "1,000", True),
    ("exact", 0.1, "0.1", True),
    ("exact", 42, "42 apples", False),
    ("exact", True, "true", True),
    ("exact", False, " FALSE ", True),
    ("exact", True, "false", False),
    ("exact", True, 1, False),
    ({"exact": {"coerce": False}}, 42, "42", False),
    ({"exact": {"coerce": False}}, 4, 4.0, False),
    ({"exact": {"coerce": False}}, True, "true", False),
    ({"exact": {"coerce": False}}, 42, 42, True),
    ("exact", {"a": [1, 2], "b": "x"}, {"b": "x", "a": [1, 2]}, True),
    ("exact", {"a": [1, 2]}, {"a": [2, 1]}, False),
    ("exact", {"a": 1}, {"a": 1, "b": 2}, False),
    ("exact", {"a": [1, 2]}, '{"a": [1, 2.0]}', True),
    ({"exact": {"coerce": False}}, {"a": [1, 2]}, '{"a": [1, 2]}', False),
    ("exact", ["x", "y"], "not json", False),
    ("exact", "Paris", None, False),
])
def test_exact_verdicts(build: Build, spec: Any, expected: Any, output: Any,
                        passed: bool) -> None:
    score = judge(build(spec), task(expected), out(output))
    assert score.passed is passed
    assert score.value == (1.0 if passed else 0.0)


def test_exact_failure_names_expected_and_actual(build: Build) -> None:
    score = judge(build("exact"), task("Paris"), out("London"))
    assert score.explanation is not None
    assert "'Paris'" in score.explanation and "'London'" in score.explanation


class Answer(BaseModel):
    city: str
    population: int


def test_exact_compares_objects_by_their_json_form(build: Build) -> None:
    expected = {"city": "Paris", "population": 2100000}
    assert judge(build("exact"), task(expected), out(Answer(city="Paris", population=2100000)))\
        .passed
    assert not judge(build("exact"), task(expected), out(Answer(city="Paris", population=1)))\
        .passed


def test_exact_without_expected_cannot_judge(build: Build) -> None:
    with pytest.raises(ValueError, match="no 'expected'"):
        build("exact").score(task(None), out("anything"))


ascii_text = st.text(alphabet=string.ascii_letters + " ", min_size=1)


@given(words=st.lists(st.text(alphabet=string.ascii_letters, min_size=1), min_size=1),
       gaps=st.lists(st.sampled_from([" ", "  ", "\t", "\n", " \n "]), min_size=1))
def test_exact_ignores_whitespace_layout(words: list[str], gaps: list[str]) -> None:
    spaced = "".join(w + gaps[i % len(gaps)] for i, w in enumerate(words))
    score = judge(make("exact"), task(" ".join(words)), out("\n " + spaced))
    assert score.passed


@given(text=ascii_text)
def test_exact_case_option_decides_on_case_only_differences(text: str) -> None:
    output = out(text.swapcase())
    assert judge(make({"exact": {"case_sensitive": False}}), task(text), output).passed
    same = text.swapcase() == text or text.strip().lower() in ("true", "false")
    assert judge(make("exact"), task(text), output).passed is same


@given(value=st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False)))
def test_exact_numbers_equal_their_text(value: float) -> None:
    assert judge(make("exact"), task(value), out(repr(value))).passed
    assert judge(make("exact"), task(repr(value)), out(value)).passed


# ---------------------------------------------------------------- contains


@pytest.mark.parametrize(("spec", "expected", "output", "value"), [
    ({"contains": "paris"}, None, "The capital is Paris.", 1.0),
    ({"contains": {"text": "paris", "case_sensitive": True}}, None, "It is Paris.", 0.0),
    ({"contains": ["paris", "france"]}, None, "Paris, France", 1.0),
    ({"contains": ["paris", "france"]}, None, "Paris, Texas", 0.5),
    ("contains", "Paris", "the answer: paris!", 1.0),
    ("contains", ["a", "zzz"], "abc", 0.5),
    ("contains", "42", 1421, 1.0),
    ("contains", "x", None, 0.0),
])
def test_contains_verdicts(build: Build, spec: Any, expected: Any, output: Any,
                           value: float) -> None:
    score = judge(build(spec), task(expected), out(output))
    assert score.value == value
    assert score.passed is (value == 1.0)


def test_contains_names_what_is_missing(build: Build) -> None:
    score = judge(build({"contains": ["paris", "france"]}), task(), out("Paris, Texas"))
    assert score.explanation is not None and "'france'" in score.explanation
    assert score.details["missing"] == ["france"]


@pytest.mark.parametrize("expected", [None, 42, "", ["ok", 3]])
def test_contains_needs_text_to_look_for(build: Build, expected: Any) -> None:
    with pytest.raises(ValueError, match="'expected' must be non-empty text"):
        build("contains").score(task(expected), out("anything"))


@pytest.mark.parametrize("text", ["", [], ["a", ""]])
def test_contains_refuses_empty_text_at_build(build: Build, text: Any) -> None:
    with pytest.raises(BenchError) as err:
        build({"contains": {"text": text}})
    assert "bench.yaml: scorer.contains.text:" in str(err.value)


# ---------------------------------------------------------------- regex


@pytest.mark.parametrize(("spec", "expected", "output", "passed"), [
    ({"regex": r"\d+"}, None, "it is 42", True),
    ({"regex": {"pattern": r"\d+", "mode": "fullmatch"}}, None, "it is 42", False),
    ({"regex": {"pattern": r"\d+", "mode": "fullmatch"}}, None, "42", True),
    ({"regex": "^yes$"}, None, "YES", False),
    ({"regex": {"pattern": "^yes$", "flags": ["IGNORECASE"]}}, None, "YES", True),
    ({"regex": {"pattern": "^b$"}}, None, "a\nb", False),
    ({"regex": {"pattern": "^b$", "flags": ["MULTILINE"]}}, None, "a\nb", True),
    ({"regex": {"pattern": "a.b", "flags": ["dotall"]}}, None, "a\nb", True),
    ("regex", r"^\d{3}$", "123", True),
    ("regex", r"^\d{3}$", "1234", False),
    ({"regex": "^42$"}, None, 42, True),
    ({"regex": "."}, None, None, False),
])
def test_regex_verdicts(build: Build, spec: Any, expected: Any, output: Any,
                        passed: bool) -> None:
    score = judge(build(spec), task(expected), out(output))
    assert score.passed is passed
    assert score.value == (1.0 if passed else 0.0)


def test_regex_reports_the_match(build: Build) -> None:
    score = judge(build({"regex": r"\d+"}), task(), out("it is 42 now"))
    assert score.details["match"] == "42"


def test_regex_invalid_pattern_is_refused_at_build(build: Build) -> None:
    with pytest.raises(BenchError) as err:
        build({"regex": "(unclosed"})
    assert str(err.value).startswith("bench.yaml: scorer.regex: invalid regular expression")


def test_regex_unknown_flag_is_refused_naming_it(build: Build) -> None:
    with pytest.raises(BenchError) as err:
        build({"regex": {"pattern": "x", "flags": ["IGNORECASE", "FANCY"]}})
    assert "bench.yaml: scorer.regex.flags[1]" in str(err.value)


@pytest.mark.parametrize("expected", [None, 42, "(bad"])
def test_regex_from_task_needs_a_valid_pattern(build: Build, expected: Any) -> None:
    with pytest.raises(ValueError, match="regular expression"):
        build("regex").score(task(expected), out("anything"))


def test_regex_flag_spelling_does_not_change_digest(build: Build) -> None:
    a = build({"regex": {"pattern": "x", "flags": ["ignorecase", "DOTALL"]}})
    b = build({"regex": {"pattern": "x", "flags": ["DOTALL", "IGNORECASE"]}})
    c = build({"regex": {"pattern": "x", "flags": ["DOTALL"]}})
    assert a.digest == b.digest != c.digest
