"""all / any / weighted: combined verdicts, nested specs, errors and async children."""

from __future__ import annotations

import asyncio
import gc
import inspect
import warnings
from typing import Any

import pytest

from forge.errors import BenchError
from forge.scorers import Score

from ._helpers import Build, WriteModule, judge, out, task

# Every case scores the output "42" for a task expecting 42.
PASS_EXACT = "exact"
FAIL_CONTAINS = {"contains": "43"}


@pytest.mark.parametrize(("spec", "value", "passed"), [
    ({"all": [PASS_EXACT, {"regex": "^4"}]}, 1.0, True),
    ({"all": [PASS_EXACT, FAIL_CONTAINS]}, 0.0, False),
    ({"all": [{"contains": ["4", "9"]}, PASS_EXACT]}, 0.5, False),
    ({"any": [FAIL_CONTAINS, PASS_EXACT]}, 1.0, True),
    ({"any": [FAIL_CONTAINS, {"contains": ["4", "9"]}]}, 0.5, False),
    ({"any": {"scorers": [FAIL_CONTAINS]}}, 0.0, False),
    ({"weighted": [{"scorer": PASS_EXACT, "weight": 3}, {"scorer": FAIL_CONTAINS}]}, 0.75, True),
    ({"weighted": {"scorers": [{"scorer": PASS_EXACT, "weight": 3}, {"scorer": FAIL_CONTAINS}],
                   "threshold": 0.8}}, 0.75, False),
    ({"weighted": [{"scorer": PASS_EXACT, "weight": 0}, {"scorer": FAIL_CONTAINS}]}, 0.0, False),
    ({"all": [PASS_EXACT, {"any": [FAIL_CONTAINS, {"numeric": {"abs_tol": 1}}]}]}, 1.0, True),
    ({"all": [PASS_EXACT, {"any": [FAIL_CONTAINS, {"regex": "^5"}]}]}, 0.0, False),
])
def test_combined_verdicts(build: Build, spec: Any, value: float, passed: bool) -> None:
    score = judge(build(spec), task(42), out("42"))
    assert (score.value, score.passed) == (value, passed)


def test_failing_children_are_named_and_every_child_is_reported(build: Build) -> None:
    score = judge(build({"all": [PASS_EXACT, FAIL_CONTAINS]}), task(42), out("42"))
    assert score.explanation is not None and score.explanation.startswith("contains: missing")
    children = score.details["children"]
    assert [(c["scorer"], c["passed"]) for c in children] == [("exact", True), ("contains", False)]


def test_weighted_reports_weights_and_threshold(build: Build) -> None:
    spec = {"weighted": [{"scorer": PASS_EXACT, "weight": 1}, {"scorer": FAIL_CONTAINS}]}
    score = judge(build(spec), task(42), out("42"))
    assert score.passed  # 0.5 meets the default threshold of 0.5
    assert [c["weight"] for c in score.details["children"]] == [1.0, 1.0]
    failing = judge(build({"weighted": {"scorers": spec["weighted"], "threshold": 0.6}}),
                    task(42), out("42"))
    assert failing.explanation is not None
    assert failing.explanation.startswith("weighted score 0.5 < threshold 0.6")


def test_a_child_that_cannot_judge_makes_the_composite_raise(build: Build) -> None:
    scorer = build({"any": [PASS_EXACT, "toolcall"]})  # the task has no expected_tools
    with pytest.raises(ValueError, match="expected_tools"):
        scorer.score(task(42), out("42"))


@pytest.mark.parametrize(("spec", "where"), [
    ({"all": [PASS_EXACT, {"regex": "(bad"}]}, "bench.yaml: scorer.all[1].regex: "),
    ({"any": [{"exact": {"case": True}}]}, "bench.yaml: scorer.any[0].exact.case: "),
    ({"all": [PASS_EXACT, {"any": ["nope"]}]}, "bench.yaml: scorer.all[1].any[0]: unknown"),
    ({"weighted": [{"scorer": {"numeric": {"abs_tol": -1}}}]},
     "bench.yaml: scorer.weighted.scorers[0].scorer.numeric.abs_tol: "),
    ({"weighted": [{"scorer": PASS_EXACT, "weight": -1}]},
     "bench.yaml: scorer.weighted.scorers[0].weight: "),
    ({"weighted": [{"weight": 1}]}, "bench.yaml: scorer.weighted.scorers[0].scorer: "),
    ({"weighted": [PASS_EXACT]}, "bench.yaml: scorer.weighted.scorers[0]: "),
    ({"weighted": [{"scorer": PASS_EXACT, "weight": 0}]}, "must not all be 0"),
    ({"weighted": {"scorers": [{"scorer": PASS_EXACT}], "threshold": 2}},
     "bench.yaml: scorer.weighted.threshold: "),
    ({"all": []}, "bench.yaml: scorer.all.scorers: "),
    ({"any": "exact"}, "bench.yaml: scorer.any.scorers: "),
])
def test_bad_children_are_refused_naming_their_place(build: Build, spec: Any,
                                                     where: str) -> None:
    with pytest.raises(BenchError) as err:
        build(spec)
    assert where in str(err.value)
    assert "\n" not in str(err.value)


def test_digest_follows_kind_children_weights_and_threshold(build: Build) -> None:
    specs: list[Any] = [
        {"all": [PASS_EXACT, FAIL_CONTAINS]},
        {"any": [PASS_EXACT, FAIL_CONTAINS]},
        {"all": [FAIL_CONTAINS, PASS_EXACT]},
        {"all": [{"exact": {"case_sensitive": False}}, FAIL_CONTAINS]},
        {"weighted": [{"scorer": PASS_EXACT}, {"scorer": FAIL_CONTAINS}]},
        {"weighted": [{"scorer": PASS_EXACT, "weight": 2}, {"scorer": FAIL_CONTAINS}]},
        {"weighted": {"scorers": [{"scorer": PASS_EXACT}, {"scorer": FAIL_CONTAINS}],
                      "threshold": 0.7}},
    ]
    digests = [build(spec).digest for spec in specs]
    assert len(set(digests)) == len(specs)
    assert digests == [build(spec).digest for spec in specs]


ASYNC_JUDGE = """
import asyncio

async def slow_yes(task, output):
    await asyncio.sleep(0)
    return True

async def slow_boom(task, output):
    await asyncio.sleep(0)
    raise RuntimeError("judge unavailable")
"""


def test_sync_children_give_a_sync_verdict(build: Build) -> None:
    assert isinstance(build({"all": [PASS_EXACT]}).score(task(42), out("42")), Score)


def test_an_async_child_makes_the_verdict_awaitable(build: Build,
                                                    write_module: WriteModule) -> None:
    write_module("async_judge", ASYNC_JUDGE)
    scorer = build({"all": [PASS_EXACT, {"any": [{"code": "async_judge:slow_yes"}]}]})
    pending = scorer.score(task(42), out("42"))
    assert inspect.isawaitable(pending)

    async def wait() -> Score:
        return await pending

    score = asyncio.run(wait())
    assert (score.value, score.passed) == (1.0, True)


def test_an_async_child_that_raises_makes_the_composite_raise(build: Build,
                                                              write_module: WriteModule) -> None:
    write_module("async_judge", ASYNC_JUDGE)
    scorer = build({"any": [{"code": "async_judge:slow_boom"}, {"code": "async_judge:slow_yes"}]})
    with pytest.raises(RuntimeError, match="judge unavailable"):
        judge(scorer, task(42), out("42"))


def test_a_sync_failure_does_not_leak_pending_async_children(build: Build,
                                                             write_module: WriteModule) -> None:
    write_module("async_judge", ASYNC_JUDGE)
    scorer = build({"all": [{"code": "async_judge:slow_yes"}, "toolcall"]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="expected_tools"):
            scorer.score(task(42), out("42"))
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
