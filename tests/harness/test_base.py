"""The harness protocol (forge.harness._base): ``RunOutput.coerce`` turns what a harness
returned into a checked output, or says in one line what is wrong with it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from forge.harness import RunOutput


@pytest.mark.parametrize(("value", "message"), [
    ({"output": 1, "usage": {"input_tokens": -1}}, "invalid output: usage.input_tokens: "),
    ({"output": 1, "bogus": True}, "invalid output: bogus: unknown field"),
    ([1], "invalid output: expected RunOutput or dict, got list"),
    ({"metrics": {"m": float("nan")}}, "invalid output: metric 'm' is nan"),
    ({"output": threading.Lock()}, "output cannot be serialised"),
])
def test_run_output_coerce_says_what_is_wrong(value: Any, message: str) -> None:
    with pytest.raises(ValueError) as err:
        RunOutput.coerce(value)
    assert str(err.value).startswith(message)


def test_run_output_coerce_keeps_a_valid_output() -> None:
    out = RunOutput.coerce({"output": "x", "metrics": {"m": 1.0}})
    assert out == RunOutput(output="x", metrics={"m": 1.0})
    assert RunOutput.coerce(out) is out
