"""The LLM reflection proposer: a model reads the incumbent's dev failures and names one move.

Each :meth:`LLMProposer.propose` sends **one** request to an OpenAI-compatible endpoint
(:mod:`forge.llm`): a bounded summary of the view (:mod:`forge.proposers._llm_prompt`:
at most 12 failing dev attempts with 240-character output excerpts, 40 settings, 60
untried moves, 20 hints and the last 15 scored configs, the user message cut to
12,000 bytes as sent, so the request body stays under about 14 kB whatever the run)
and asks for one move as strict JSON, ``{"setting": ..., "value": ..., "reason": ...}``
(a ```json fence is accepted).

Why one setting, any legal value: every forge move changes one setting with an exact
inverse, so every score change has one cause and every promotion can be undone; the
value may be a step or a jump (the search journals which), but a second setting in the
reply would break the one-cause rule and is refused. A value out of bounds is refused,
not clamped, since the model's reason argued for it.

Why one request and one move per step: the next request then sees this step's outcome
in the history, which is what reflection is for; several moves from the same view
would cost several calls for guesses without new evidence. A step without a valid
move falls back to the search's sweep of the neighbourhood.

An invalid reply (not JSON, unknown setting, illegal value, more than one move, a
move already tried, no change, an endpoint failure) is handed to the search by
:meth:`LLMProposer.drain_rejections` and journaled as a ``proposal_invalid`` record.

Resume: a reply is not reproducible, so each one (or the endpoint failure) is appended
to ``run_dir/llm_proposer.jsonl`` (flushed and fsynced; a torn last line is ignored),
keyed by step and incumbent fingerprint, *before* it is used; a resumed run replays it
instead of calling the endpoint, so proposals are deterministic given the view, as the
:class:`~forge.proposers.Proposer` contract requires.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from forge.config.moves import Move, candidate_moves
from forge.config.registry import (
    BoolSetting,
    Config,
    EnumSetting,
    FloatSetting,
    IntSetting,
    Registry,
    same_value,
)
from forge.core.spec import BuildContext
from forge.errors import JournalError
from forge.journal.jsonl import cut_torn_tail, read_jsonl_tolerant
from forge.llm.client import ChatClient, Endpoint, LLMError
from forge.proposers._llm_prompt import MAX_PROMPT_BYTES, build_messages, clip
from forge.proposers.base import PROPOSERS, Proposal, Proposer, ProposerContext, SearchView
from forge.secrets.masking import redact

__all__ = ["CACHE_FILE", "MAX_PROMPT_BYTES", "LLMOptions", "LLMProposer", "build_messages"]

log = logging.getLogger(__name__)

#: The reply cache in the run folder.
CACHE_FILE = "llm_proposer.jsonl"
#: A model's reason as journaled; an excerpt of an invalid reply.
REASON_CHARS = 300
REPLY_EXCERPT_CHARS = 300
#: Stored replies are cut here; the parse reads the stored text, so a replay agrees.
_STORED_CHARS = 20_000

_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)


class _Invalid(Exception):
    """A reply that names no usable move: ``category`` for scripts, ``reason`` for people."""

    def __init__(self, category: str, reason: str) -> None:
        super().__init__(reason)
        self.category = category
        self.reason = reason


# -- reading a reply ----------------------------------------------------------------------


def _decode(content: str) -> Any:
    text = content.strip()
    fenced = _FENCE.search(text)
    if fenced is not None:
        text = fenced.group(1).strip()
    try:
        return json.loads(text)
    except ValueError:
        raise _Invalid("not_json", "the reply is not JSON (nor a ```json block)") from None


def _named_move(data: Any, registry: Registry) -> tuple[str, Any, str]:
    """``(setting, value, reason)`` from a decoded reply, or why it is not one move."""
    data = _one_object(data)
    given = data.get("reason")
    reason = given if isinstance(given, str) else ""
    named = [k for k in data if k in registry.settings and k not in ("setting", "value",
                                                                       "reason")]
    setting = data.get("setting")
    plain = _plainly_named(setting, named)
    if plain is not None:  # {"knob": 3}: one setting, plainly named
        return plain, data[plain], reason
    if not isinstance(setting, str) or "value" not in data:
        raise _Invalid("bad_shape", 'expected a JSON object {"setting", "value", "reason"}, '
                                    f"got keys {clip(', '.join(map(str, data)), 120)}")
    return setting, data["value"], reason


def _one_object(data: Any) -> dict[str, Any]:
    """The reply's one JSON object (alone or alone in a list), or why it is not one."""
    if isinstance(data, list):
        if len(data) != 1:
            raise _Invalid("not_single_move", f"{len(data)} moves in one reply; forge tries "
                                              "one move of one setting at a time")
        data = data[0]
    if not isinstance(data, dict):
        raise _Invalid("bad_shape", 'expected a JSON object {"setting", "value", "reason"}, '
                                    f"got {type(data).__name__}")
    return data


def _plainly_named(setting: Any, named: list[str]) -> str | None:
    """The one setting named as a key when ``setting`` is absent; refuses a reply that
    changes more than one setting."""
    if isinstance(setting, list | dict):
        raise _not_single([str(s) for s in setting])
    if setting is None:
        if len(named) == 1:
            return named[0]
        if named:
            raise _not_single(named)
    elif named:
        raise _not_single([str(setting), *named])
    return None


def _not_single(changed: list[str]) -> _Invalid:
    return _Invalid("not_single_move", f"changes {len(changed)} settings "
                                       f"({clip(', '.join(changed), 120)}); forge tries one "
                                       "move of one setting at a time")


def _coerce(setting: Any, raw: Any) -> Any:
    """The value a model most likely meant: ``"true"`` for a bool, ``3.0`` for an int."""
    if isinstance(raw, str) and isinstance(setting, BoolSetting | IntSetting | FloatSetting):
        try:
            raw = json.loads(raw.strip().lower() if isinstance(setting, BoolSetting)
                             else raw.strip())
        except ValueError:
            return raw
    if isinstance(setting, IntSetting) and isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(setting, EnumSetting) and not any(same_value(raw, c) for c in setting.choices):
        matches = [c for c in setting.choices if str(c) == str(raw)]
        return matches[0] if len(matches) == 1 else raw
    return raw


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (not isinstance(a, bool) and not isinstance(b, bool)
                and math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12))
    return same_value(a, b)


def _legal_move(view: SearchView, name: str, raw: Any) -> Move:
    """The untried move that sets ``name`` to ``raw``, or why there is none."""
    registry = view.registry
    setting = registry.settings.get(name)
    if setting is None:
        known = ", ".join(list(registry.settings)[:20])
        raise _Invalid("unknown_setting", f"unknown setting {clip(name, 64)!r}; the registry "
                                          f"has {known}")
    current = view.incumbent.values[name]
    try:
        value = setting.check(_coerce(setting, raw))
    except ValueError as exc:
        raise _Invalid("illegal_value", f"{name}: {clip(str(exc), 160)}") from None
    if _same(value, current):
        raise _Invalid("no_change", f"{name} is already {current!r}: the move changes nothing")
    move = Move(target=name, before=current, after=value)
    # A value the search offers on its own (a step or a grid jump) that is no longer
    # untried was tried against this incumbent; any other legal value is new.
    if move not in view.untried and move in candidate_moves(registry, view.incumbent):
        raise _Invalid("already_tried", f"{name} {current!r} -> {value!r} was already tried "
                                        "against this incumbent")
    return move


# -- the proposer -------------------------------------------------------------------------


class LLMOptions(BaseModel):
    """The ``llm`` proposer's options: how the model is asked."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=400, ge=16, le=8192)


@PROPOSERS.register("llm")
class LLMProposer(Proposer):
    """One request per step to ``endpoint``; one move back, or a journaled refusal.

    ``run_dir`` None keeps replies in memory (no resume). :meth:`observe` does
    nothing: the history reaches the model through the view.
    """

    name: str = "llm"
    options_model = LLMOptions

    def __init__(self, registry: Registry, endpoint: Endpoint, *, run_dir: Path | None = None,
                 temperature: float = 0.0, max_tokens: int = 400) -> None:
        self.registry = registry
        self.endpoint = endpoint
        self.temperature = temperature
        self.max_tokens = max_tokens
        # Made now: the client registers the API key as a secret before anything is written.
        self._client = ChatClient(endpoint)
        self._rejections: list[dict[str, Any]] = []
        self._cache: dict[tuple[int, str], dict[str, Any]] = {}
        self.cache_path = None if run_dir is None else run_dir / CACHE_FILE
        if self.cache_path is not None:
            self._load_cache(self.cache_path)

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        run = ProposerContext.of(ctx)
        options = LLMOptions.model_validate(args)
        # A missing FORGE_OPENAI_BASE_URL is a UserError here, before any run folder exists.
        endpoint = Endpoint.from_env(what="--proposer llm")
        return cls(run.registry, endpoint, run_dir=run.run_dir,
                   temperature=options.temperature, max_tokens=options.max_tokens)

    def secret_envs(self) -> tuple[str, ...]:
        key = self.endpoint.api_key_env
        return (key,) if key else ()

    def journal_form(self) -> dict[str, Any]:
        """What run.json records about this proposer: which model, how asked (no key)."""
        return {"endpoint": self.endpoint.identity, "base_url": self.endpoint.base_url,
                "model": self.endpoint.model, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "cache": CACHE_FILE}

    def _load_cache(self, path: Path) -> None:
        cut_torn_tail(path)  # the next append starts on a fresh line
        entries = [entry for _, entry in read_jsonl_tolerant(
            path, JournalError, what="the llm proposer's reply cache",
            damaged="damaged record in the llm proposer's reply cache")
            if isinstance(entry, dict)]
        for entry in entries:
            key = (entry.get("step"), entry.get("incumbent"))
            if isinstance(key[0], int) and isinstance(key[1], str):
                self._cache.setdefault((key[0], key[1]), entry)  # the first one was used
        if entries and entries[-1].get("endpoint") != self.endpoint.identity:
            log.warning("llm proposer: earlier steps were proposed by %s; new steps will be "
                        "proposed by %s (see %s)", entries[-1].get("endpoint"),
                        self.endpoint.identity, path)

    def propose(self, view: SearchView, n: int) -> list[Proposal]:
        """The model's move for this step, or nothing (its reply is then a rejection)."""
        if n <= 0 or not view.untried:
            return []
        entry = self._cache.get((view.step, view.incumbent.fingerprint)) or self._ask(view)
        content = entry.get("content")
        try:
            if entry.get("error") is not None:
                raise _Invalid("endpoint", f"no usable reply: {clip(str(entry['error']), 240)}")
            if not isinstance(content, str) or not content.strip():
                raise _Invalid("no_content", "the reply has no text (a tool call or an empty "
                                             "message)")
            setting, raw, reason = _named_move(_decode(content), view.registry)
            move = _legal_move(view, setting, raw)
        except _Invalid as bad:
            # info, not warning: the journal and the live view already show it.
            log.info("llm proposer, step %d: invalid reply (%s): %s", view.step,
                     bad.category, bad.reason)
            self._rejections.append({
                "proposer": self.name, "category": bad.category, "reason": bad.reason,
                "reply": clip(content, REPLY_EXCERPT_CHARS) if isinstance(content, str)
                else None, "endpoint": entry.get("endpoint")})
            return []
        return [Proposal(move=move, proposer=self.name,
                         reason=clip(reason, REASON_CHARS) or "the model gave no reason")]

    def drain_rejections(self) -> list[dict[str, Any]]:
        """The invalid replies since the last call, for the search to journal."""
        out, self._rejections = self._rejections, []
        return out

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        """Nothing to learn: the model sees the history in the next view."""

    def _ask(self, view: SearchView) -> dict[str, Any]:
        entry: dict[str, Any] = {"step": view.step, "incumbent": view.incumbent.fingerprint,
                                 "endpoint": self.endpoint.identity, "content": None,
                                 "error": None, "finish_reason": None, "input_tokens": 0,
                                 "output_tokens": 0, "retries": 0}
        try:
            reply = self._client.chat_sync(build_messages(view), temperature=self.temperature,
                                           max_tokens=self.max_tokens)
        except LLMError as exc:
            entry.update(error=redact(str(exc)), retries=exc.retries)
        else:
            content = None if reply.content is None else redact(reply.content)[:_STORED_CHARS]
            entry.update(content=content, finish_reason=reply.finish_reason,
                         input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                         retries=reply.retries)
        finally:
            self._client.close()
        entry["at"] = datetime.now(UTC).isoformat()
        # Stored before it is used: a run killed after this line replays the same reply.
        entry = json.loads(json.dumps(entry))
        if self.cache_path is not None:
            with self.cache_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        self._cache[(view.step, view.incumbent.fingerprint)] = entry
        return entry
