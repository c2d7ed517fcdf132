"""Scorers that compare the output's text with the task's expected value: exact, contains, regex.

All three are pass/fail on one attempt; ``contains`` with several needles gives the
fraction found as partial credit. They never raise on a wrong or missing output
(that is a wrong answer); they raise ``ValueError`` only when the task itself gives
them nothing to compare with, so the attempt is unscored rather than failed.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from forge._util.digest import canonical_json
from forge.core.task import Task
from forge.harness.base import RunOutput
from forge.scorers._values import (
    Options,
    OptionScorer,
    as_text,
    parse_number,
    quote,
    to_decimal,
)
from forge.scorers.base import SCORERS, Score

__all__ = ["ContainsScorer", "ExactScorer", "RegexScorer"]


class ExactOptions(Options):
    case_sensitive: bool = True
    normalize_whitespace: bool = True
    coerce: bool = True


@SCORERS.register("exact")
class ExactScorer(OptionScorer[ExactOptions]):
    """Passes when ``output.output`` equals ``task.expected``; value 1 or 0.

    Strings are stripped and their whitespace runs collapsed (``normalize_whitespace``)
    and compared case-insensitively when ``case_sensitive`` is false. With ``coerce``
    two numbers compare numerically whatever their spelling (``"42"`` = ``42``,
    ``"4.0"`` = ``4``, ``"1,000"`` = ``1000``), a bool equals ``"true"``/``"false"``,
    and text holding JSON is parsed when the other side is a list or dict. Lists and
    dicts compare item by item under the same rules (key order never matters); other
    objects by their JSON form. Without ``coerce``, ``4``, ``4.0``, ``"4"`` and
    ``true`` are all different. A task whose ``expected`` is null raises
    ``ValueError`` (unscored).
    """

    name: ClassVar[str] = "exact"
    options_model = ExactOptions

    def score(self, task: Task, output: RunOutput) -> Score:
        expected = task.expected
        if expected is None:
            raise ValueError(f"task {task.id!r} has no 'expected' value to compare with")
        actual = output.output
        if self.options.coerce:
            actual, expected = (_parse_json_side(actual, expected),
                                _parse_json_side(expected, actual))
        if self._key(actual) == self._key(expected):
            return Score(value=1.0, passed=True)
        return Score(value=0.0, passed=False,
                     explanation=f"expected {quote(task.expected)}, got {quote(output.output)}")

    def _key(self, value: Any) -> Any:
        """A hashable form of ``value`` in which equal-under-the-options values are equal."""
        if isinstance(value, bool):
            return ("bool", value)
        if isinstance(value, int | float):
            return self._number_key(value)
        if isinstance(value, str):
            return self._text_key(value)
        if value is None:
            return ("null",)
        if isinstance(value, list | tuple):
            return ("list", tuple(self._key(item) for item in value))
        if isinstance(value, dict):
            return ("dict", frozenset((str(k), self._key(v)) for k, v in value.items()))
        return self._other_key(value)

    def _number_key(self, value: int | float) -> tuple[Any, ...]:
        """With ``coerce``, ``2``, ``2.0`` and ``"2"`` share one key; without, int and
        float stay apart."""
        number = to_decimal(value) if self.options.coerce else None
        return ("num", number) if number is not None else (type(value).__name__, value)

    def _other_key(self, value: Any) -> Any:
        # Anything else a Python harness may return (a pydantic model, a set): compare
        # its JSON form, so a model equals the dict a task line spells it as.
        try:
            plain = json.loads(canonical_json(value))
        except (TypeError, ValueError):
            return ("other", repr(value))
        return self._key(plain)

    def _text_key(self, value: str) -> tuple[Any, ...]:
        """The key of a string: a number or a boolean when ``coerce`` reads it as one."""
        opts = self.options
        text = " ".join(value.split()) if opts.normalize_whitespace else value
        if opts.coerce:
            number = parse_number(text)
            if number is not None:
                return ("num", number)
            if text.strip().lower() in ("true", "false"):
                return ("bool", text.strip().lower() == "true")
        return ("str", text if opts.case_sensitive else text.casefold())



def _parse_json_side(value: Any, other: Any) -> Any:
    # A command harness can only print text; when the task expects a list or dict,
    # text that parses as one is what the harness meant.
    if isinstance(value, str) and isinstance(other, list | dict):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, list | dict):
            return parsed
    return value


class ContainsOptions(Options):
    text: str | list[str] | None = None
    case_sensitive: bool = False

    @field_validator("text")
    @classmethod
    def _not_empty(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value == "" or value == [] or (isinstance(value, list) and "" in value):
            raise ValueError("must be non-empty text (empty text is in every output)")
        return value


@SCORERS.register("contains", shorthand="text")
class ContainsScorer(OptionScorer[ContainsOptions]):
    """Passes when the output's text contains ``text`` (every item, when a list).

    ``text`` defaults to ``task.expected`` (a string or a list of strings; anything
    else raises ``ValueError``, unscored). Case-insensitive unless ``case_sensitive``.
    ``value`` is the fraction of items found, so a partial answer gets partial credit.
    """

    name: ClassVar[str] = "contains"
    options_model = ContainsOptions

    def score(self, task: Task, output: RunOutput) -> Score:
        needles = self._needles(task)
        haystack = as_text(output.output)
        if not self.options.case_sensitive:
            haystack = haystack.casefold()
        missing = [n for n in needles
                   if (n if self.options.case_sensitive else n.casefold()) not in haystack]
        found = len(needles) - len(missing)
        return Score(
            value=found / len(needles),
            passed=not missing,
            explanation=None if not missing else
            f"missing {', '.join(quote(m, 40) for m in missing)} in {quote(output.output)}",
            details={"missing": missing} if missing else {},
        )

    def _needles(self, task: Task) -> list[str]:
        text = self.options.text
        if text is None:
            text = task.expected
            if not _is_text_or_texts(text):
                raise ValueError(f"task {task.id!r}: 'expected' must be non-empty text or a list "
                                 f"of texts for 'contains', got {quote(text)}")
        return [text] if isinstance(text, str) else list(text)


def _is_text_or_texts(value: Any) -> bool:
    """Non-empty text, or a non-empty list of non-empty texts."""
    return bool(value) and (isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(t, str) and t for t in value)))



_FLAGS = {"IGNORECASE": re.IGNORECASE, "MULTILINE": re.MULTILINE, "DOTALL": re.DOTALL,
          "VERBOSE": re.VERBOSE, "ASCII": re.ASCII}
FlagName = Literal["IGNORECASE", "MULTILINE", "DOTALL", "VERBOSE", "ASCII"]


class RegexOptions(Options):
    pattern: str | None = None
    flags: list[FlagName] = Field(default_factory=list)
    mode: Literal["search", "fullmatch"] = "search"

    @field_validator("flags", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        # Accept `ignorecase` as well as `IGNORECASE`; order kept so errors name the item.
        if isinstance(value, list):
            return [v.upper() if isinstance(v, str) else v for v in value]
        return value

    @field_validator("flags")
    @classmethod
    def _canonical(cls, value: list[FlagName]) -> list[FlagName]:
        # Flags are OR-ed: one spelling per set, so the digest ignores order and repeats.
        return sorted(set(value))


@SCORERS.register("regex", shorthand="pattern")
class RegexScorer(OptionScorer[RegexOptions]):
    """Passes when ``pattern`` matches the output's text; value 1 or 0.

    ``mode: search`` finds the pattern anywhere, ``fullmatch`` needs all of the text.
    Without ``pattern`` the task's ``expected`` is the pattern; a task whose expected
    is not text, or not a valid pattern, raises ``ValueError`` (unscored). An invalid
    ``pattern`` in the spec is refused when the bench is built.
    """

    name: ClassVar[str] = "regex"
    options_model = RegexOptions

    def __init__(self, options: RegexOptions) -> None:
        super().__init__(options)
        self._flags = 0
        for flag in options.flags:
            self._flags |= _FLAGS[flag]
        self._pattern = None if options.pattern is None else _compile(options.pattern, self._flags)

    def score(self, task: Task, output: RunOutput) -> Score:
        pattern = self._pattern
        if pattern is None:
            if not isinstance(task.expected, str):
                raise ValueError(f"task {task.id!r}: 'expected' must be a regular expression "
                                 f"for 'regex', got {quote(task.expected)}")
            pattern = _compile(task.expected, self._flags)
        text = as_text(output.output)
        match = (pattern.search(text) if self.options.mode == "search"
                 else pattern.fullmatch(text))
        if match is None:
            verb = "does not match" if self.options.mode == "search" else "does not fully match"
            return Score(value=0.0, passed=False,
                         explanation=f"pattern {quote(pattern.pattern, 60)} {verb} "
                                     f"{quote(output.output)}")
        return Score(value=1.0, passed=True, details={"match": match.group()})



def _compile(pattern: str, flags: int) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None

