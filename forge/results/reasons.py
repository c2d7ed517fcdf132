"""An unscored attempt's reason: how it stopped and its message, as one label, and the
labels counted.

The labels are what :mod:`forge.results.failures` groups and what a result's
``unscored_by_reason`` counts; they read an attempt only through
:class:`UnscoredAttempt`, so that the result model can count its own attempts without
importing the tallies that read it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Protocol

__all__ = ["JSON_REASONS", "OTHER_REASONS", "UnscoredAttempt", "count_reasons", "failure_stop",
           "reason_key", "unscored_label"]

#: How many reasons a count by reason (``--json``, the journal) names, the most frequent
#: first; the rest are summed under :data:`OTHER_REASONS`, so that the counts always add
#: up to the unscored attempts while a harness whose every message differs cannot make
#: the document grow with its attempts.
JSON_REASONS = 20
#: The key the reasons past :data:`JSON_REASONS` are summed under (a label always starts
#: with how its attempts stopped, so no reason is called that).
OTHER_REASONS = "other"
#: How much of a message the grouping reads (the first line, cut here).
_KEY_CHARS = 160

# What differs between two occurrences of one failure: numbers, hex ids, addresses.
_HEX = re.compile(r"\b(?:0x[0-9a-fA-F]+|(?=[0-9]*[a-fA-F])[0-9a-fA-F]{8,})\b")
_NUMBER = re.compile(r"\d+(?:\.\d+)*(?:[eE][-+]?\d+)?")  # 12, 3.2, 10.0.0.7, 1e-3
_SPACES = re.compile(r"\s+")
# The exception's class leading a message ("ValueError: ...", "httpx.ReadTimeout: ..."):
# kept as written, digits and all.
_CLASS = re.compile(r"^[A-Za-z_][\w.]*:\s")


class UnscoredAttempt(Protocol):
    """What a label reads of an attempt (:class:`forge.results.model.AttemptResult`)."""

    @property
    def task_id(self) -> str: ...

    @property
    def stop_reason(self) -> str: ...

    @property
    def error(self) -> str | None: ...

    @property
    def scored(self) -> bool: ...


def failure_stop(attempt: UnscoredAttempt) -> str:
    """How an unscored attempt stopped: its stop reason, or ``scorer_failed`` for one
    that completed and was not scored."""
    return "scorer_failed" if attempt.stop_reason == "completed" else attempt.stop_reason


def reason_key(message: str | None, task_id: str = "") -> str:
    """``message`` as a grouping key: its first line, the task's own id as ``<task>``,
    every number as ``#`` and every hex id as ``<hex>``, spaces collapsed, cut at
    160 characters. ``ValueError: no route to 10.0.0.7 for task dev-03 after 3.2 s``
    and the same on ``dev-11`` after 2.9 s are one reason."""
    if not message:
        return ""
    stripped = message.strip()
    text = stripped.splitlines()[0] if stripped else ""
    head = match.group(0) if (match := _CLASS.match(text)) else ""
    rest = text[len(head):]
    if task_id:
        rest = rest.replace(task_id, "<task>")
    rest = _NUMBER.sub("#", _HEX.sub("<hex>", rest))
    return _SPACES.sub(" ", head + rest).strip()[:_KEY_CHARS]


def unscored_label(attempt: UnscoredAttempt) -> str | None:
    """The reason ``attempt`` was not scored, as one label (:attr:`FailureReason.label`:
    ``stop`` or ``stop: normalised message``); None for a scored attempt."""
    if attempt.scored:
        return None
    stop, key = failure_stop(attempt), reason_key(attempt.error, attempt.task_id)
    return f"{stop}: {key}" if key else stop


def count_reasons(labels: Iterable[str], top: int = JSON_REASONS) -> dict[str, int]:
    """``{label: count}`` of ``labels``, the most frequent first (the first seen first
    among equals), the ``top`` first and the rest summed under :data:`OTHER_REASONS`."""
    ranked = Counter(labels).most_common()
    out = dict(ranked[:top])
    rest = sum(n for _, n in ranked[top:])
    if rest:
        out[OTHER_REASONS] = rest
    return out
