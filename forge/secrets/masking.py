"""Secret hygiene: a secret forge reads from the environment never reaches a file or a log.

Every piece that takes a credential from the environment (the HTTP harness's
``headers_from_env``, the OpenAI harness, the LLM judge and proposer) reads it with
:func:`secret_from_env`, which registers the value; a plug-in names those variables in
:meth:`~forge.core.spec.Plugin.secret_envs`, registered (:func:`register_secret_envs`)
when the bench is loaded or the proposer built, before anything runs. Every place
where forge writes (the search journal and ``run.json``, the attempt store, saved
results, the runtime journal, the HTML report, attempt error texts, error lines)
passes its text through :func:`redact`, which replaces each registered value with
``***``; what a harness returned is masked as its attempt is recorded
(:func:`redact_model`), so tables and the live view show it masked too. Log records
are redacted as they are made (see :func:`register_secret`).

What is masked: the value in each of its forms (as written, JSON-escaped, in a
Python ``repr``, HTML-escaped, percent-encoded with upper- or lower-case hex, base64
standard and urlsafe, with or without padding), and, for a value of
:data:`MIN_PIECE_CHARS` (12) characters or more, every *piece* of one of those forms:
12 or more of its characters in a row, also with whitespace (or the ``\n``, ``\r``,
``\t`` escapes of JSON) or invisible characters (format characters such as zero-width
spaces and soft hyphens, raw or escaped) between them, and its base64 inside a longer base64 blob at
any byte alignment. A service that echoes 40 of a key's 48 characters, wraps it over
lines or base64-encodes it with other bytes is masked as well as one that echoes it
whole (:mod:`forge.secrets.pieces` says how, in a few milliseconds per megabyte).
A value of 8 to 11 characters is masked whole only, in each of its forms: a run that
short of it would be ordinary text too often.

Rules for callers:

- Redact *before* you truncate. A clip that cuts a secret in two leaves a prefix
  that no longer matches, so the half-secret would be written in the clear.
  :func:`clip` does both in that order, reading no more of a long text than the
  clip keeps. For a clip made where forge could not redact first (a harness that
  cut its own error text, a stream tail whose front was dropped as it arrived),
  :func:`redact` also masks a piece of a secret of :data:`MIN_FRAGMENT_CHARS` or
  more that ends at a cut mark (``...``, ``…``) or starts after a dropped-bytes mark
  (``[N earlier bytes dropped]``).
- Redact text, not a structure's ``repr``: the forms a value takes in JSON, in
  HTML, in a Python ``repr`` and in a URL are registered with it, so ``redact``
  works on JSON lines, HTML pages and exception messages alike.

What is not registered, with a warning naming the variable (never the value):

- values shorter than :data:`MIN_SECRET_CHARS` (8). Redaction replaces every
  occurrence of the value in everything forge writes; a short value (``"test"``,
  ``"abc123"``) also occurs in ordinary text, and replacing it there would mangle
  task inputs, outputs and file paths, and could make a resumed run's journal
  differ from itself. A value that short is no protection anyway. Refusing the
  secret instead would stop a run against a local service with a dummy key, so
  forge uses it and says it cannot keep it out of its files.
- values made only of digits and ``+-.eE``: those can occur inside a number of
  the JSON forge writes (a seed, a duration), and replacing part of a number
  with ``***`` would corrupt the file.

With no secret registered, :func:`redact` returns its argument after one check,
so writers call it unconditionally.
"""

from __future__ import annotations

import hashlib
import html
import json
import logging
import os
import re
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus

from pydantic import BaseModel

from forge.secrets.pieces import (
    MIN_PIECE_CHARS,
    PieceIndex,
    encoded_forms,
    findable_in_pieces,
    lower_hex,
    stripped_len,
)

__all__ = [
    "MASK",
    "MIN_FRAGMENT_CHARS",
    "MIN_PIECE_CHARS",
    "MIN_SECRET_CHARS",
    "RedactingFilter",
    "clear_secrets",
    "clip",
    "redact",
    "redact_model",
    "register_secret",
    "register_secret_envs",
    "secret_from_env",
    "secrets_registered",
]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

#: What a secret is replaced with.
MASK = "***"
#: Shorter values are not registered (see the module docstring).
MIN_SECRET_CHARS = 8
#: A piece of a secret at a cut mark is masked from this many characters on; a
#: shorter piece is too likely to be ordinary text (``s...`` for a key ``sk-...``).
MIN_FRAGMENT_CHARS = 3

#: What clips write where they cut the end of a text, in text and in JSON.
_CUT_MARKS = ("...", "\u2026", "\\u2026")
#: What a tail that dropped the start of a stream writes before what it kept.
_DROP_MARKS = ("bytes dropped]\n", "bytes dropped]\\n")

_NUMBER_LIKE = re.compile(r"[0-9+\-.eE]+")


@dataclass(frozen=True)
class _Secrets:
    """What redaction looks for. Replaced, never mutated: readers take it without the lock."""

    #: Every textual form of every secret, longest first: what a clip made before
    #: redaction may have left a prefix or suffix of at a cut mark.
    needles: tuple[str, ...] = ()
    #: Forms replaced whole with ``str.replace``: those of secrets shorter than
    #: MIN_PIECE_CHARS, and those the index cannot find whole (findable_in_pieces);
    #: longest first so that a longer form that contains a shorter one goes whole.
    whole: tuple[str, ...] = ()
    #: Forms found in pieces, and their index.
    piece_forms: frozenset[str] = frozenset()
    pieces: PieceIndex | None = None

    @property
    def longest(self) -> int:
        """Characters (whitespace left out, for pieces) of the longest thing masked."""
        return max([len(n) for n in self.needles[:1] + self.whole[:1]]
                   + [self.pieces.longest if self.pieces else 0])


_state = _Secrets()
_lock = threading.Lock()
_warned: set[str] = set()  # digests of refused values already warned about
_factory_installed = False


def secret_from_env(name: str) -> str | None:
    """The value of environment variable ``name``, registered as a secret.

    None when the variable is unset or empty: an empty credential is never meant,
    and callers then have one case to report.
    """
    value = os.environ.get(name)
    if not value:
        return None
    register_secret(value, name=name)
    return value


def register_secret_envs(names: Iterable[str]) -> None:
    """Register the value of each variable in ``names`` that is set (a plugin's
    :meth:`~forge.core.spec.Plugin.secret_envs`): called when the plugin is built, so
    its credentials are masked before anything it or its neighbours write."""
    for name in names:
        secret_from_env(name)


def redact_model(model: M) -> M:
    """``model`` with every registered secret masked in all its text, names and keys
    included (a metric named after a key, a tool call's arguments), as the files forge
    writes show it; ``model`` itself when there was nothing to mask. For what is shown
    from memory (the terminal's tables, the live view), not only written."""
    if not _state.needles:
        return model
    try:
        text = model.model_dump_json()
        clean = redact(text)
        return model if clean == text else type(model).model_validate_json(clean)
    except ValueError:  # content JSON cannot hold: no file can show it either
        return model


def secrets_registered() -> bool:
    """Whether any secret is registered: a caller with work to do before :func:`redact`
    (serialising a structure) skips it when there is nothing to mask."""
    return bool(_state.needles)


def register_secret(value: str, *, name: str | None = None) -> bool:
    """Redact ``value`` from everything forge writes from now on, in this process.

    Returns False (and logs a warning naming ``name``, never the value) when the
    value cannot be redacted safely: shorter than :data:`MIN_SECRET_CHARS`, or
    number-like. Registering a value twice is harmless.
    """
    if not isinstance(value, str):
        raise TypeError(f"a secret is a str, not {type(value).__name__}")
    why = None
    if len(value) < MIN_SECRET_CHARS:
        why = f"it is shorter than {MIN_SECRET_CHARS} characters"
    elif _NUMBER_LIKE.fullmatch(value):
        why = "it looks like a number"
    if why is not None:
        _warn_once(value, name, why)
        return False
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
             repr(value)[1:-1], html.escape(value), html.escape(value, quote=False),
             quote(value), quote(value, safe=""), quote_plus(value)}
    forms |= {lower_hex(form) for form in forms}
    encoded = encoded_forms(value)
    # A secret shorter than MIN_PIECE_CHARS is replaced whole only: a piece of it would
    # be ordinary text too often. So is a form the pieces' index cannot find whole.
    pieces = ({f for f in forms | encoded if stripped_len(f) >= MIN_PIECE_CHARS}
              if len(value) >= MIN_PIECE_CHARS else set())
    whole = (forms | encoded) - {f for f in pieces if findable_in_pieces(f)}
    global _state
    with _lock:
        old = _state
        piece_forms = old.piece_forms | pieces
        _state = _Secrets(
            needles=_longest_first(set(old.needles) | forms),
            whole=_longest_first(set(old.whole) | whole),
            piece_forms=piece_forms,
            pieces=old.pieces if piece_forms == old.piece_forms else PieceIndex.build(piece_forms))
    _install_log_redaction()
    return True


def _longest_first(forms: set[str]) -> tuple[str, ...]:
    return tuple(sorted(forms, key=lambda s: (-len(s), s)))


def redact(text: str) -> str:
    """``text`` with every registered secret (in any of its forms) replaced by ``***``,
    and any piece of one left at a cut mark by a clip made before (module docstring)."""
    state = _state
    if not state.needles:  # the fast path: no secret, nothing to look for
        return text
    for needle in state.whole:
        if needle in text:
            text = text.replace(needle, _whole_mask(needle))
    if state.pieces is not None:
        text = state.pieces.mask(text, MASK)
    if any(mark in text for mark in _CUT_MARKS + _DROP_MARKS):
        text = _mask_pieces(text, state.needles)
    return text


def _whole_mask(needle: str) -> str:
    """The mask of a whole form, keeping the double quotes at its ends: in JSON text a
    raw quote is a string's end, never part of a secret, so a mask that took it would
    leave a line no reader accepts (an escaped quote, ``\\"``, is masked with its
    backslash)."""
    core = needle.strip('"')
    if not core or core.endswith("\\"):
        return MASK
    lead = len(needle) - len(needle.lstrip('"'))
    trail = len(needle) - len(needle.rstrip('"'))
    return '"' * lead + MASK + '"' * trail


def clip(text: str, limit: int, *, marker: str = "...") -> str:
    """``text`` redacted, then cut to ``limit`` characters followed by ``marker``.

    Reads a window of ``text`` just long enough for the cut to fall where it would in
    the whole redacted text: every secret that starts before the cut is whole in the
    window, so it is masked whole, never cut. A text that fits is only redacted.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    longest = _state.longest
    end = limit + longest + 1
    while True:
        window = redact(text[:end])
        if end >= len(text):
            return window if len(window) <= limit else window[:limit] + marker
        # The window's last ``longest`` characters may hold the start of a secret that
        # continues past it; once they lie beyond the cut, the cut is where it would be.
        # Counted without whitespace: a piece may have any amount of it inside.
        if len(window) > limit + longest and stripped_len(window[limit:]) > longest:
            return window[:limit] + marker
        end *= 2


def _mask_pieces(text: str, needles: tuple[str, ...]) -> str:
    """Mask the longest prefix of a needle that ends at a cut mark and the longest
    suffix of one that starts after a dropped-bytes mark (at least
    :data:`MIN_FRAGMENT_CHARS` long)."""
    spans = _cut_spans(text, needles) + _drop_spans(text, needles)
    if not spans:
        return text
    return _mask_spans(text, spans)


def _fragment_sizes(needle: str) -> range:
    """The lengths of a needle's fragments worth masking, longest first."""
    return range(len(needle) - 1, MIN_FRAGMENT_CHARS - 1, -1)


def _cut_spans(text: str, needles: tuple[str, ...]) -> list[tuple[int, int]]:
    """The spans of needle prefixes that end where a cut mark starts."""
    spans: list[tuple[int, int]] = []
    for mark in _CUT_MARKS:
        at = text.find(mark)
        while at >= 0:
            size = max((k for n in needles for k in _fragment_sizes(n)
                        if k <= at and text.startswith(n[:k], at - k)), default=0)
            if size:
                spans.append((at - size, at))
            at = text.find(mark, at + len(mark))
    return spans


def _drop_spans(text: str, needles: tuple[str, ...]) -> list[tuple[int, int]]:
    """The spans of needle suffixes that start right after a dropped-bytes mark."""
    spans: list[tuple[int, int]] = []
    for mark in _DROP_MARKS:
        at = text.find(mark)
        while at >= 0:
            start = at + len(mark)
            size = max((k for n in needles for k in _fragment_sizes(n)
                        if text.startswith(n[-k:], start)), default=0)
            if size:
                spans.append((start, start + size))
            at = text.find(mark, start)
    return spans


def _mask_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span replaced by the mask, overlapping spans under one mask."""
    out: list[str] = []
    done = 0
    for start, end in sorted(spans):
        if start < done:  # overlapping pieces: one mask covers both
            start = done
        out += [text[done:start], MASK] if end > start else [text[done:start]]
        done = max(done, end)
    out.append(text[done:])
    return "".join(out)


def clear_secrets() -> None:
    """Forget every registered secret (for tests; a process keeps its secrets)."""
    global _state
    with _lock:
        _state = _Secrets()
        _warned.clear()


def _warn_once(value: str, name: str | None, why: str) -> None:
    key = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    where = f"the value of {name}" if name else "a secret"
    log.warning("%s is not redacted from forge's files and logs: %s", where, why)


# -- logging -----------------------------------------------------------------------------


def _redact_record(record: logging.LogRecord) -> None:
    """Redact a record's message, exception text and stack in place."""
    if not _state.needles:
        return
    try:
        message = record.getMessage()
    except Exception:  # bad format args: logging reports them itself, later
        return
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        # Formatter.format uses exc_text when set, so the traceback, which holds the
        # exception's message, is written redacted.
        record.exc_text = redact("".join(traceback.format_exception(*record.exc_info))
                                 ).rstrip("\n")
    elif record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


class RedactingFilter(logging.Filter):
    """A filter that redacts records passing through it; never drops one.

    forge does not need it (it redacts records as they are made, below); it is for
    an application that replaces the log record factory without chaining it: attach
    it to your handlers.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        _redact_record(record)
        return True


def _install_log_redaction() -> None:
    """Redact every log record of the process as it is made, once a secret exists.

    Not a filter on the ``forge`` logger: a logger's filters see only the records
    logged on that very logger, not those of ``forge.journal.store`` or ``forge.harness.http``
    propagating through it, and a filter on handlers misses handlers added later
    (pytest's, an application's). The record factory sees every record, whatever
    its logger and handlers, including a harness's own logging that echoes a
    secret. The previous factory is chained, not replaced.
    """
    global _factory_installed
    with _lock:
        if _factory_installed:
            return
        previous: Callable[..., logging.LogRecord] = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _redact_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _factory_installed = True
