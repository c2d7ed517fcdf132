"""What the scorers share: option models, spec digests, and reading text and numbers.

Harness outputs arrive as whatever the harness returned (a string, a number, a
dict, ``None``); expected values as whatever the task line holds. These helpers give
every scorer the same reading of them, so ``exact`` and ``numeric`` agree on what
"a number" is and every scorer's explanation quotes values the same way.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar, Generic, Self, TypeVar

from pydantic import BaseModel, ConfigDict

from forge._util.digest import canonical_json, digest_of
from forge._util.show import preview
from forge.core.spec import BuildContext
from forge.scorers.base import Scorer
from forge.secrets.masking import clip

__all__ = [
    "OptionScorer",
    "Options",
    "as_text",
    "last_number",
    "parse_number",
    "quote",
    "spec_digest",
    "to_decimal",
]


class Options(BaseModel):
    """Base of every scorer's arguments: unknown keys are refused, values are frozen."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def spec_digest(name: str, options: BaseModel, **extra: Any) -> str:
    """sha256 of a scorer's canonical spec.

    The validated options are hashed with their defaults filled in, so ``exact`` and
    ``{exact: {case_sensitive: true}}`` (the same verdicts) share a digest, while any
    option that changes a verdict changes it.
    """
    return digest_of({"scorer": name, "options": options.model_dump(mode="json"), **extra})


OptionsT = TypeVar("OptionsT", bound=Options)


class OptionScorer(Scorer, Generic[OptionsT]):
    """Base of the scorers whose verdicts depend on their options alone.

    Subclasses set ``name`` and ``options_model``, implement ``score`` and register
    themselves; the digest is :func:`spec_digest` of the validated options, and
    ``from_args`` is the factory the scorer registry calls.
    """

    name: ClassVar[str]
    options_model: ClassVar[type[Options]]

    def __init__(self, options: OptionsT) -> None:
        self.options = options
        self._digest = spec_digest(self.name, options)

    @property
    def digest(self) -> str:
        return self._digest

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        return cls(cls.options_model.model_validate(args))  # type: ignore[arg-type]


# One spelling of "a number" for every scorer. A sign only counts when it does not
# follow a word character, so "3-5" reads as 3 and 5 rather than 3 and -5; thousands
# separators must come in groups of three, so "1,234" is 1234 but "1,2" is 1 and 2.
_NUMBER = (r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+(?!\d|,\d)|\d+)(?:\.\d*)?|\.\d+)"
           r"(?:[eE][-+]?\d+)?")
_NUMBER_IN_TEXT = re.compile(rf"(?<![\w.]){_NUMBER}")
_NUMBER_ALONE = re.compile(_NUMBER)


def to_decimal(value: Any) -> Decimal | None:
    """A finite int or float as an exact Decimal; bools and anything else give None.

    Floats go through ``repr`` so that ``0.1`` equals the text ``"0.1"`` rather than
    the binary fraction the float actually holds.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float) and math.isfinite(value):
        return Decimal(repr(value))
    return None


def parse_number(value: Any) -> Decimal | None:
    """``value`` as a number when it is one or is text holding exactly one, else None."""
    if not isinstance(value, str):
        return to_decimal(value)
    text = value.strip()
    if not _NUMBER_ALONE.fullmatch(text):
        return None
    return _decimal(text)


def last_number(value: Any) -> Decimal | None:
    """The number in ``value``, or the last number written in its text, else None.

    Free-text answers end with the result ("... so the total is 42."), which is why
    the last number is taken rather than the first.
    """
    if not isinstance(value, str):
        return to_decimal(value)
    for match in reversed(list(_NUMBER_IN_TEXT.finditer(value))):
        number = _decimal(match.group())
        if number is not None:
            return number
    return None


def _decimal(text: str) -> Decimal | None:
    try:
        number = Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def as_text(value: Any) -> str:
    """The text a pattern or substring is searched in.

    Strings are kept as they are; ``None`` is empty; JSON values (bools, numbers,
    lists, dicts) are written as canonical JSON so that ``True`` reads ``true`` and a
    dict has one spelling.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return str(value)


def quote(value: Any, limit: int = 80) -> str:
    """A short, single-line rendering of a value for an explanation.

    Redacted before it is cut (:func:`forge.secrets.masking.clip`), and read only as far as it
    is shown: an output of megabytes is neither copied nor serialised whole.
    """
    window = 4 * limit + 1024  # room for the runs of spaces that are joined below
    if isinstance(value, str):
        cut = len(value) > window
        text = repr(clip(value, window, marker=""))
    else:
        cut = False
        text = preview(value, window, style="canonical")
    text = " ".join(text.split())
    return text if len(text) <= limit and not cut else text[: limit - 3] + "..."
