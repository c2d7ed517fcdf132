"""forge's errors (forge.errors): bad input renders as one printable line, whatever it quotes."""

from __future__ import annotations

import pytest

from forge.errors import BenchError, IncomparableError, OptionError, UserError


@pytest.mark.parametrize("error", [
    BenchError("name 'a\nb' is \x1b[31mred\x1b[0m", file="bench.yaml", field="name", line=3),
    OptionError("got 'x\r\ny'", option="--set"),
    IncomparableError("task 'a\x00b' \x9b differs"),
    BenchError("argv held \udcff", file="b\nad.yaml"),
])
def test_a_user_error_is_one_printable_line(error: UserError) -> None:
    text = str(error)
    assert text.isprintable(), text
    assert "\x1b" not in text and "\n" not in text
    text.encode("utf-8")  # a lone surrogate would make printing it fail


def test_a_control_character_is_shown_escaped_and_a_newline_as_a_space() -> None:
    error = BenchError("a\nb\x1bc", file="f.yaml", line=2)
    assert str(error) == "f.yaml:2: a b\\x1bc"
    assert error.message == "a\nb\x1bc"  # the message itself is kept for callers
