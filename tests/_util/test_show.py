"""Values shown in messages (forge._util.show): read only as far as they are shown, redacted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from forge._text import printable
from forge._util.show import preview, short
from forge.secrets.masking import clear_secrets, register_secret


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    clear_secrets()
    yield
    clear_secrets()


def laughs(levels: int) -> list[Any]:
    """9^levels strings if written out: a YAML billion laughs, as PyYAML builds it."""
    value: list[Any] = ["lol"] * 9
    for _ in range(levels):
        value = [value] * 9
    return value


def cycle() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("make", "text"), [
    (lambda: "abc", "'abc'"),
    (lambda: {"a": [1, 2.5, None, True]}, '{"a": [1, 2.5, null, true]}'),
    (lambda: "x" * 10**8, "'" + "x" * 56 + "..."),
    (lambda: laughs(20), "[" * 21 + '"lol", "lol", "lol", "lol", "lol", "...'),
    (cycle, '{"a": 1, "self": {"a": 1, "self": {"a": 1, "self": {"a": ...'),
    (lambda: 10**5000, "<an integer of about 5001 digits>"),
    (lambda: b"\x00" * 10**7, '"b\'' + "\\\\x00" * 10 + '\\\\x0...'),
], ids=["str", "dict", "long str", "laughs", "cycle", "huge int", "bytes"])
def test_short_reads_a_value_only_as_far_as_it_shows_it(make: Any, text: str) -> None:
    value = make()
    started = time.perf_counter()
    assert short(value) == text
    assert time.perf_counter() - started < 1


def test_preview_styles_and_completeness() -> None:
    value = {"b": [1, "é"], "a": None}
    assert preview(value, 100) == '{"b": [1, "\\u00e9"], "a": null}'
    assert preview(value, 100, style="canonical") == '{"a":null,"b":[1,"é"]}'
    assert preview(value, 100, style="python") == "{'b': [1, 'é'], 'a': None}"
    assert len(preview(list(range(10**6)), 50)) > 50  # cut, but more than it will show


def test_every_string_is_redacted_before_it_is_cut() -> None:
    key = "Qz7Xw9Vk2Lp4Mn6Bt8Rc1Hs3Jd5Fg0Ya"
    register_secret(key)
    for offset in range(0, 70):
        shown = short({"k": "#" * offset + key + "#" * 100})
        assert not [key[i:i + 3] for i in range(len(key) - 2) if key[i:i + 3] in shown]


@pytest.mark.parametrize(("raw", "shown"), [
    ("plain text, é ü 日本 😀", "plain text, é ü 日本 😀"),
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # ANSI: no colour, no cursor move
    ("a\x00b\x07c\x7fd\x9be", "a\\x00b\\x07c\\x7fd\\x9be"),  # NUL, BEL, DEL, C1 CSI
    ("abc\u202edcba\u2066x\u2069", "abc\\u202edcba\\u2066x\\u2069"),  # bidi overrides
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("lone \udcff surrogate", "lone \\udcff surrogate"),
    ("two\nlines\tand\r", "two\\nlines\\tand\\r"),
])
def test_printable_escapes_what_a_terminal_would_act_on(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert printable(raw).isprintable()
    printable(raw).encode("utf-8")  # never an encoding error when printed


def test_printable_on_one_line_turns_line_breaks_into_spaces() -> None:
    assert printable("two\nlines\tand\r\x1b", breaks="space") == "two lines and \\x1b"
