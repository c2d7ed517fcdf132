"""The harness protocol (forge.harness.base): ``RunOutput.coerce`` turns what a harness
returned into a checked output, or says in one line what is wrong with it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from forge._util.bounds import MAX_METRIC, MAX_OUTPUT_BYTES
from forge.harness import RunOutput


@pytest.mark.parametrize(("value", "message"), [
    ({"output": 1, "usage": {"input_tokens": -1}}, "invalid output: usage.input_tokens: "),
    ({"output": 1, "bogus": True}, "invalid output: bogus: unknown field"),
    ([1], "invalid output: expected RunOutput or dict, got list"),
    ({"metrics": {"m": float("nan")}}, "invalid output: metric 'm' is nan"),
    # Finite but past what sums over an evaluation can hold: a search's means overflowed.
    ({"metrics": {"m": 1.7e308}}, "invalid output: metric 'm' is 1.7e+308, beyond ±1e+100"),
    ({"cost": 1e101}, "invalid output: cost is 1e+101, expected 0 to 1e+100"),
    # Money spent is never negative: it would refund a cost budget.
    ({"cost": -0.001}, "invalid output: cost is -0.001, expected 0 to 1e+100"),
    ({"output": threading.Lock()}, "output cannot be serialised"),
])
def test_run_output_coerce_says_what_is_wrong(value: Any, message: str) -> None:
    with pytest.raises(ValueError) as err:
        RunOutput.coerce(value)
    assert str(err.value).startswith(message)


def test_run_output_coerce_keeps_a_valid_output() -> None:
    out = RunOutput.coerce({"output": "x", "metrics": {"m": 1.0}})
    assert out == RunOutput(output="x", metrics={"m": 1.0})
    assert RunOutput.coerce({"cost": MAX_METRIC, "metrics": {"m": -MAX_METRIC}}).cost == 1e100
    assert RunOutput.coerce({"cost": 0.0}).cost == 0.0
    assert RunOutput.coerce(out) is out


def _laughs() -> list[Any]:
    value: list[Any] = ["lol"] * 9
    for _ in range(9):
        value = [value] * 9  # 9^10 strings, 15 GB of JSON, in a few hundred bytes
    return value


def _cycle() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("value", "message"), [
    ({"output": "x" * (MAX_OUTPUT_BYTES + 1)}, "output too large: more than 16 MiB as JSON"),
    ({"output": ["y" * 1000] * 20_000}, "output too large: more than 16 MiB"),
    ({"trace": {"log": "z" * MAX_OUTPUT_BYTES}}, "output too large"),
    ({"tool_calls": [{"name": "t", "result": "r" * MAX_OUTPUT_BYTES}]}, "output too large"),
    # Under the walk's bound, over the serialised one: each quote becomes \" in JSON.
    ({"output": '"' * (MAX_OUTPUT_BYTES // 2 + 10)}, "output too large: 16,777,3"),
    ({"output": _laughs()}, "output too large: more than 16 MiB"),
    ({"output": _cycle()}, "output cannot be serialised: it contains itself"),
])
def test_an_output_over_the_bound_is_refused_without_being_copied(value: Any,
                                                                  message: str) -> None:
    with pytest.raises(ValueError) as err:
        RunOutput.coerce(value)
    assert str(err.value).startswith(message), str(err.value)


def test_an_output_at_the_bound_and_a_list_shared_twice_are_kept() -> None:
    text = "x" * (MAX_OUTPUT_BYTES - 1000)
    assert RunOutput.coerce({"output": text}).output == text
    shared = [1, 2]
    assert RunOutput.coerce({"output": [shared, shared]}).output == [[1, 2], [1, 2]]
