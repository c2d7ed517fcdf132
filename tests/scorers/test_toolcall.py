"""toolcall: expected tools executed cleanly, args as subsets, extras and order on demand."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge.scorers.toolcall import args_match

from ._helpers import Build, judge, make, out, task

SEARCH = {"name": "search", "args": {"q": "paris"}}
WEATHER = {"name": "weather", "args": {"city": "Paris"}}


def call(name: str, ok: bool = True, error: str | None = None, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "ok": ok, "error": error}


def test_all_expected_tools_called_cleanly_passes(build: Build) -> None:
    score = judge(build("toolcall"), task(tools=[SEARCH, WEATHER]),
                  out(calls=[call("weather", city="Paris"), call("search", q="paris")]))
    assert (score.value, score.passed, score.explanation) == (1.0, True, None)
    assert score.details["matched"] == [[0, 1], [1, 0]]


def test_missing_tool_gives_partial_credit_and_names_it(build: Build) -> None:
    score = judge(build("toolcall"), task(tools=[SEARCH, WEATHER]),
                  out(calls=[call("search", q="paris")]))
    assert (score.value, score.passed) == (0.5, False)
    assert score.explanation is not None and score.explanation.startswith("missing weather(")
    assert score.details["missing"] == ["weather"]


@pytest.mark.parametrize(("expected", "actual", "passed"), [
    ({"q": "paris"}, {"q": "paris", "limit": 5}, True),
    ({"q": "paris"}, {"q": "rome"}, False),
    ({"q": "paris"}, {"query": "paris"}, False),
    ({}, {"anything": 1}, True),
    ({"filter": {"lang": "en"}}, {"filter": {"lang": "en", "year": 2020}}, True),
    ({"filter": {"lang": "en"}}, {"filter": {"lang": "fr", "year": 2020}}, False),
    ({"filter": {"lang": "en"}}, {"filter": "en"}, False),
    ({"n": 2}, {"n": 2.0}, True),
    ({"n": 2.5}, {"n": 2}, False),
    ({"flag": True}, {"flag": 1}, False),
    ({"n": 1}, {"n": True}, False),
    ({"n": 2}, {"n": "2"}, False),
    ({"ids": [1, 2]}, {"ids": [1.0, 2]}, True),
    ({"ids": [1, 2]}, {"ids": [1, 2, 3]}, False),
    ({"rows": [{"id": 1}]}, {"rows": [{"id": 1, "name": "x"}]}, True),
    ({"x": None}, {"x": None}, True),
    ({"x": None}, {}, False),
])
def test_expected_args_match_as_a_subset(build: Build, expected: dict[str, Any],
                                         actual: dict[str, Any], passed: bool) -> None:
    score = judge(build("toolcall"), task(tools=[{"name": "lookup", "args": expected}]),
                  out(calls=[call("lookup", **actual)]))
    assert score.passed is passed


def test_wrong_args_are_explained(build: Build) -> None:
    score = judge(build("toolcall"), task(tools=[SEARCH]), out(calls=[call("search", q="rome")]))
    assert score.explanation is not None
    assert "missing search(" in score.explanation
    assert "1 call(s) with other args" in score.explanation and "rome" in score.explanation


@pytest.mark.parametrize("bad", [call("search", ok=False, q="paris"),
                                 call("search", error="timeout", q="paris")])
def test_failed_calls_do_not_count_as_matches(build: Build, bad: dict[str, Any]) -> None:
    score = judge(build("toolcall"), task(tools=[SEARCH]), out(calls=[bad]))
    assert (score.value, score.passed) == (0.0, False)
    assert score.explanation is not None and "1 failed call(s)" in score.explanation
    assert score.details["failed_calls"] == 1


@pytest.mark.parametrize("allow_additional", [True, False])
def test_retry_after_a_failed_call_passes(build: Build, allow_additional: bool) -> None:
    scorer = build({"toolcall": {"allow_additional": allow_additional}})
    score = judge(scorer, task(tools=[SEARCH]),
                  out(calls=[call("search", ok=False, error="rate limited", q="paris"),
                             call("delete_all", ok=False),
                             call("search", q="paris")]))
    assert score.passed


def test_unexpected_clean_call_fails_only_when_extras_are_disallowed(build: Build) -> None:
    calls = out(calls=[call("search", q="paris"), call("delete_user", id=7)])
    assert judge(build("toolcall"), task(tools=[SEARCH]), calls).passed
    strict = judge(build({"toolcall": {"allow_additional": False}}), task(tools=[SEARCH]), calls)
    assert strict.passed is False
    assert strict.value == 0.5  # 1 matched of 1 expected + 1 disallowed call
    assert strict.explanation is not None and "unexpected call delete_user(" in strict.explanation
    assert strict.details["unexpected"] == ["delete_user"]


def test_repeating_an_expected_call_is_not_an_extra(build: Build) -> None:
    score = judge(build({"toolcall": {"allow_additional": False}}), task(tools=[SEARCH]),
                  out(calls=[call("search", q="paris"), call("search", q="paris", page=2)]))
    assert score.passed


def test_each_expected_tool_needs_its_own_call(build: Build) -> None:
    score = judge(build("toolcall"), task(tools=[SEARCH, SEARCH]),
                  out(calls=[call("search", q="paris")]))
    assert (score.value, score.passed) == (0.5, False)
    assert score.explanation is not None and "already counted" in score.explanation


def test_best_assignment_is_found_when_a_greedy_one_would_strand_a_tool(build: Build) -> None:
    # Taken in order, `search{}` would grab the only call that fits `search{q: paris}`.
    score = judge(build("toolcall"),
                  task(tools=[{"name": "search"}, SEARCH]),
                  out(calls=[call("search", q="paris"), call("search", q="rome")]))
    assert score.passed


def test_order_matters_only_when_asked(build: Build) -> None:
    calls = out(calls=[call("weather", city="Paris"), call("search", q="paris")])
    assert judge(build("toolcall"), task(tools=[SEARCH, WEATHER]), calls).passed
    ordered = judge(build({"toolcall": {"ordered": True}}), task(tools=[SEARCH, WEATHER]), calls)
    assert (ordered.value, ordered.passed) == (0.5, False)
    assert ordered.explanation is not None and "not in the expected order" in ordered.explanation


def test_ordered_credit_counts_the_longest_run_in_order(build: Build) -> None:
    tools = [{"name": n} for n in "abcd"]
    calls = out(calls=[call(n) for n in "dabc"])
    score = judge(build({"toolcall": {"ordered": True}}), task(tools=tools), calls)
    assert score.value == 0.75
    assert score.details["missing"] == ["d"]


def test_task_without_expected_tools_cannot_be_judged(build: Build) -> None:
    with pytest.raises(ValueError, match="no 'expected_tools'"):
        build("toolcall").score(task("x"), out(calls=[call("search")]))


def test_no_expected_tools_means_no_calls_when_extras_are_disallowed(build: Build) -> None:
    calls = out(calls=[call("search", q="x")])
    assert judge(build("toolcall"), task(tools=[]), calls).passed
    assert judge(build({"toolcall": {"allow_additional": False}}), task(tools=[]), out()).passed
    strict = judge(build({"toolcall": {"allow_additional": False}}), task(tools=[]), calls)
    assert (strict.value, strict.passed) == (0.0, False)


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=10)
json_args = st.dictionaries(st.text(max_size=5), json_value, max_size=4)


@given(expected=json_args, extra=json_args)
def test_actual_args_with_more_keys_still_match(expected: dict[str, Any],
                                                extra: dict[str, Any]) -> None:
    assert args_match(expected, {**extra, **expected})


names = st.sampled_from(["search", "weather", "fetch"])
calls_strategy = st.lists(st.fixed_dictionaries({
    "name": names, "args": st.fixed_dictionaries({"q": st.sampled_from(["a", "b"])}),
    "ok": st.booleans()}), max_size=6)
tools_strategy = st.lists(st.fixed_dictionaries({
    "name": names, "args": st.sampled_from([{}, {"q": "a"}, {"q": "b"}])}), max_size=4)


@given(tools=tools_strategy, calls=calls_strategy, data=st.data())
def test_unordered_verdict_ignores_call_order(tools: list[dict[str, Any]],
                                              calls: list[dict[str, Any]],
                                              data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(calls))
    for allow in (True, False):
        scorer = make({"toolcall": {"allow_additional": allow}})
        a = judge(scorer, task(tools=tools), out(calls=calls))
        b = judge(scorer, task(tools=tools), out(calls=shuffled))
        assert (a.value, a.passed) == (b.value, b.passed)
        assert a.passed is (a.value == 1.0)
