"""code: a user function in the bench folder judges; its source is part of the digest."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import Any

import pytest

from forge.errors import BenchError
from forge.scorers import CodeScorer, Score

from ._helpers import Build, WriteModule, judge, out, task

JUDGES = """
from forge.scorers import Score

def same(task, output):
    return output.output == task.expected

def half(task, output):
    return 0.5

def seventy(task, output):
    return 0.7

def integer(task, output):
    return 1

def score_object(task, output):
    return Score(value=0.25, passed=True, explanation="lenient")

def score_dict(task, output):
    return {"value": 0.0, "passed": False, "explanation": "nope"}

def bad_dict(task, output):
    return {"value": 2.0, "passed": True}

def too_big(task, output):
    return 1.5

def nan(task, output):
    return float("nan")

def text(task, output):
    return "yes"

def nothing(task, output):
    return None

def boom(task, output):
    raise RuntimeError("judge crashed")

def np_bool(task, output):
    import numpy as np
    return np.mean([1.0, 1.0]) > 0.5

def np_float(task, output):
    import numpy as np
    return np.float64(0.75)

async def async_same(task, output):
    return output.output == task.expected

async def async_boom(task, output):
    raise RuntimeError("async judge crashed")

NOT_CALLABLE = 3
"""


async def _wait(pending: Awaitable[Score]) -> Score:
    return await pending


@pytest.fixture
def judges(write_module: WriteModule) -> None:
    write_module("judges", JUDGES)


@pytest.mark.usefixtures("judges")
@pytest.mark.parametrize(("spec", "value", "passed"), [
    ({"code": "judges:half"}, 0.5, True),
    ({"code": {"target": "judges:half", "threshold": 0.6}}, 0.5, False),
    ({"code": "judges:seventy"}, 0.7, True),
    ({"code": {"target": "judges:seventy", "threshold": 1.0}}, 0.7, False),
    ({"code": "judges:integer"}, 1.0, True),
    ({"code": "judges:score_object"}, 0.25, True),
    ({"code": "judges:score_dict"}, 0.0, False),
    ({"code": "judges:np_bool"}, 1.0, True),
    ({"code": "judges:np_float"}, 0.75, True),
])
def test_return_values_become_scores(build: Build, spec: Any, value: float,
                                     passed: bool) -> None:
    score = judge(build(spec), task("x"), out("x"))
    assert (score.value, score.passed) == (value, passed)


@pytest.mark.usefixtures("judges")
def test_bool_verdict_follows_the_function(build: Build) -> None:
    scorer = build({"code": "judges:same"})
    assert judge(scorer, task("Paris"), out("Paris")).passed
    assert judge(scorer, task("Paris"), out("Rome")).value == 0.0


@pytest.mark.usefixtures("judges")
def test_async_function_gives_an_awaitable_verdict(build: Build) -> None:
    scorer = build({"code": "judges:async_same"})
    pending = scorer.score(task("a"), out("a"))
    assert inspect.isawaitable(pending)
    assert asyncio.run(_wait(pending)).passed
    assert not judge(scorer, task("a"), out("b")).passed


@pytest.mark.usefixtures("judges")
@pytest.mark.parametrize(("target", "error", "match"), [
    ("judges:too_big", ValueError, r"must be in \[0, 1\]"),
    ("judges:nan", ValueError, r"must be in \[0, 1\]"),
    ("judges:text", ValueError, "returned str 'yes'"),
    ("judges:nothing", ValueError, "returned NoneType"),
    ("judges:bad_dict", ValueError, "less than or equal to 1"),
    ("judges:boom", RuntimeError, "judge crashed"),
    ("judges:async_boom", RuntimeError, "async judge crashed"),
])
def test_unusable_verdicts_raise_so_the_attempt_is_unscored(
        build: Build, target: str, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        judge(build({"code": target}), task("x"), out("x"))


@pytest.mark.usefixtures("judges")
@pytest.mark.parametrize(("target", "message"), [
    ("judges", "expected 'module:function'"),
    ("missing_module:fn", "cannot import 'missing_module'"),
    ("judges:absent", "has no attribute 'absent'"),
    ("judges:NOT_CALLABLE", "is not callable"),
])
def test_targets_that_cannot_be_used_are_refused_at_build(build: Build, target: str,
                                                         message: str) -> None:
    with pytest.raises(BenchError) as err:
        build({"code": target})
    assert str(err.value).startswith("bench.yaml: scorer.code: ")
    assert message in str(err.value)


@pytest.mark.usefixtures("judges")
@pytest.mark.parametrize(("args", "field"), [
    ({"target": "judges:half", "threshold": 1.5}, "scorer.code.threshold"),
    ({"threshold": 0.5}, "scorer.code.target"),
    ({"target": "judges:half", "thresold": 0.5}, "scorer.code.thresold"),
])
def test_bad_arguments_name_the_field(build: Build, args: dict[str, Any], field: str) -> None:
    with pytest.raises(BenchError) as err:
        build({"code": args})
    assert str(err.value).startswith(f"bench.yaml: {field}: ")


def test_digest_follows_the_module_source(build: Build, write_module: WriteModule) -> None:
    write_module("grader", "def grade(task, output):\n    return True\n")
    first = build({"code": "grader:grade"})
    again = build({"code": "grader:grade"})
    assert first.digest == again.digest

    write_module("grader", "def grade(task, output):\n    return False\n")
    edited = build({"code": "grader:grade"})
    assert edited.digest != first.digest
    assert isinstance(edited, CodeScorer) and isinstance(first, CodeScorer)
    assert edited.identity != first.identity


@pytest.mark.usefixtures("judges")
def test_digest_follows_threshold_and_target(build: Build) -> None:
    digests = {build(spec).digest for spec in [
        {"code": "judges:half"},
        {"code": {"target": "judges:half", "threshold": 0.9}},
        {"code": "judges:seventy"},
    ]}
    assert len(digests) == 3
    assert build({"code": {"target": "judges:half", "threshold": 0.5}}).digest == \
        build({"code": "judges:half"}).digest
