"""The runtime mutator: answers failure signals inside one live run, within narrow bounds.

A :class:`RuntimeMutator` is built once from a registry's ``runtime`` section and a
mode; each run of the harness opens its own :class:`RuntimeRun` on a private
working copy of the config::

    mutator = RuntimeMutator(registry, "observe", journal="runtime.jsonl")
    with mutator.run(config, run_id="task-7/0") as run:   # or: async with
        ...  run.config["max_iterations"] ...               # read settings from here
        run.signal("iteration_cap_hit")                     # at the point of failure
    # here run.config equals the original again, exactly

Modes:

- ``off``: ``signal()`` returns at once; nothing is decided, journaled or opened.
- ``observe``: every signal is decided and journaled as if ``act`` were on, against
  a *virtual* copy of the config that the harness never sees. ``run.config`` never
  changes, so the run behaves exactly as in ``off``; the journal shows the moves
  ``act`` would have made, in order, with its refusals (cap, bounds) included. (The
  signals that follow are those of the unchanged run, not of the run ``act`` would
  have produced: observe answers "what would it do here", not "what would happen".)
- ``act``: the move is applied to the run's working copy, which ``run.config`` shows
  live, so it takes effect within the run. At the end the inverses are applied in
  reverse order and the copy is checked to equal the original exactly.

A signal maps to the *first* rule listed for it. The rule's move is refused (and
journaled, never applied) when its target is not in ``allow``, its current value is
not valid for the registry, the target is already at its bound in that direction
(or already the enum choice), the move would return the setting to a value it held
earlier in this run (a toggle answering the same signal twice would oscillate), or
``max_moves_per_run`` moves were already made in this run.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Literal, cast, get_args

from forge.config.moves import Move
from forge.config.registry import (
    BoolSetting,
    EnumSetting,
    Registry,
    RuntimeRule,
    RuntimeSection,
    Scalar,
    Setting,
    same_value,
)
from forge.errors import OptionError, RuntimeMutatorError
from forge.runtime._journal import (
    JournalOutcome,
    RuntimeEndRecord,
    RuntimeJournal,
    RuntimeSignalRecord,
)

__all__ = [
    "JOURNAL_ENV",
    "MODE_ENV",
    "Mode",
    "Outcome",
    "RuntimeDecision",
    "RuntimeMutator",
    "RuntimeMutatorError",
    "RuntimeRun",
    "parse_mode",
    "step_value",
]

log = logging.getLogger(__name__)

Mode = Literal["off", "observe", "act"]
Outcome = Literal["off", "observed", "applied", "refused", "no_rule"]
MODES: tuple[Mode, ...] = get_args(Mode)
MODE_ENV = "FORGE_RUNTIME_MODE"
JOURNAL_ENV = "FORGE_RUNTIME_JOURNAL"

# Refusal reasons are fixed phrases, so that a report can count them.
NOT_ALLOWED = "not in runtime.allow"
INVALID = "current value invalid"
OUT_OF_BOUNDS = "would leave bounds"
ALREADY = "already at that choice"
UNDO = "would undo an earlier move"
CAP_REACHED = "cap reached"


@dataclass(frozen=True, slots=True)
class RuntimeDecision:
    """What the mutator made of one signal.

    ``outcome``: ``off`` (mode off: nothing decided), ``no_rule``, ``refused``
    (``reason`` says why; ``move`` is the would-be move when one exists),
    ``observed`` (observe mode: ``move`` is what act would have applied) or
    ``applied`` (act mode: ``run.config`` now holds ``move.after``).
    """

    signal: str
    outcome: Outcome
    rule: RuntimeRule | None = None
    move: Move | None = None
    reason: str | None = None

    @property
    def inverse(self) -> Move | None:
        """The move that undoes this one, for observed and applied moves."""
        if self.move is None or self.outcome not in ("observed", "applied"):
            return None
        return self.move.inverse()

    @property
    def applied(self) -> bool:
        return self.outcome == "applied"


def parse_mode(text: str | None, *, source: str = "mode") -> Mode:
    """``off`` / ``observe`` / ``act`` (case and spaces ignored; empty or None is ``off``).

    Anything else is an :class:`~forge.errors.OptionError` naming ``source`` (the
    environment variable or argument the text came from).
    """
    value = (text or "off").strip().lower() or "off"
    if value not in MODES:
        raise OptionError(f"runtime mode {text!r}; expected one of {', '.join(MODES)}",
                          option=source)
    return value


def step_value(setting: Setting, current: Any, direction: str) -> Scalar | None:
    """The value one step from ``current`` in ``direction``, or None if there is none.

    ``up`` / ``down``: the greater / smaller of the setting's neighbours (``±step``,
    or ×2 / ÷2 on a log scale, clamped to bounds), None at the bound; ``toggle``: the
    other boolean; an enum choice (as written in the registry): that choice, None if
    the setting already holds it. Raises ``ValueError`` if ``current`` is not valid.
    """
    if isinstance(setting, BoolSetting):
        return not setting.check(current)
    if isinstance(setting, EnumSetting):
        held = setting.check(current)
        choice = next((c for c in setting.choices if str(c) == direction), None)
        return None if choice is None or same_value(choice, held) else choice
    return _numeric_step(setting, setting.check(current), direction)


def _numeric_step(setting: Setting, value: Any, direction: str) -> Scalar | None:
    """The neighbour of ``value`` above it (``up``) or below it (``down``)."""
    side = [n for n in setting.neighbours(value)
            if (direction == "up" and cast(float, n) > value)
            or (direction == "down" and cast(float, n) < value)]
    return side[0] if side else None


def _identical(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Same keys, and per key the same type and value (``1``, ``1.0``, ``True`` differ)."""
    return a.keys() == b.keys() and all(
        a[k] is b[k] or (type(a[k]) is type(b[k]) and a[k] == b[k]) for k in a)


class RuntimeMutator:
    """Built from ``registry.runtime`` and a mode; opens one :class:`RuntimeRun` per run.

    ``journal``: a :class:`RuntimeJournal` (shared, not closed by the mutator) or a
    path (the mutator owns the journal it opens there; :meth:`close` closes it). In
    ``off`` mode the journal is ignored: no file is opened or created. A registry
    without a ``runtime`` section allows nothing and has no rules: every signal is
    ``no_rule``.
    """

    def __init__(self, registry: Registry, mode: Mode | str = "off", *,
                 journal: RuntimeJournal | str | Path | None = None) -> None:
        self.registry = registry
        self.mode: Mode = parse_mode(mode)
        section = registry.runtime or RuntimeSection()
        self.allow = frozenset(section.allow)
        self.max_moves = section.max_moves_per_run
        self.rules: dict[str, RuntimeRule] = {}
        for rule in section.rules:
            if rule.on in self.rules:
                log.warning("runtime rule %s -> %s %s is shadowed by the earlier rule for "
                            "the same signal and never fires", rule.on, rule.target,
                            rule.direction)
                continue
            self.rules[rule.on] = rule
        # Validated at each run start: a rule can only act on a value it can step from.
        self._watched = tuple(dict.fromkeys([*section.allow, *(r.target for r in section.rules)]))
        self._owns_journal = False
        self._warned = False
        self._warn_lock = threading.Lock()
        self.journal: RuntimeJournal | None = None
        if self.mode != "off" and journal is not None:
            if isinstance(journal, RuntimeJournal):
                self.journal = journal
            else:
                self.journal = RuntimeJournal(journal)
                self._owns_journal = True

    @classmethod
    def from_env(cls, registry: Registry, *, default_journal: str | Path | None = None,
                 environ: Mapping[str, str] | None = None) -> RuntimeMutator:
        """A mutator configured by ``FORGE_RUNTIME_MODE`` (default ``off``) and
        ``FORGE_RUNTIME_JOURNAL`` (default ``default_journal``)."""
        env = os.environ if environ is None else environ
        mode = parse_mode(env.get(MODE_ENV), source=MODE_ENV)
        journal = env.get(JOURNAL_ENV) or default_journal
        return cls(registry, mode, journal=journal)

    def run(self, config: Mapping[str, Any], *, run_id: str | None = None) -> RuntimeRun:
        """A run on a fresh working copy of ``config`` (``config`` itself is never changed).

        Use it as a context manager (``with`` or ``async with``), or call
        :meth:`RuntimeRun.close` when the run ends: that restores the config.
        """
        return RuntimeRun(self, config, run_id or uuid.uuid4().hex[:12])

    def _journal_failed(self, exc: OSError) -> None:
        with self._warn_lock:
            if not self._warned:
                self._warned = True
                log.error("runtime journal %s cannot be written (%s); observe mode goes on "
                          "without it", self.journal.path if self.journal else "?", exc)

    def close(self) -> None:
        """Close the journal this mutator opened (a shared one is left open)."""
        if self._owns_journal and self.journal is not None:
            self.journal.close()

    def __enter__(self) -> RuntimeMutator:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class RuntimeRun:
    """One run's working copy and its moves. Thread-safe; not shared between runs.

    ``config`` is a read-only live view of the working copy: the harness reads its
    settings there, and only the mutator (in act mode) changes it (``dict(run.config)``
    takes a snapshot, e.g. to serialise it). ``original`` is a read-only copy of the
    config the run started with; ``moves`` the moves made (act) or that would have
    been (observe), in order; ``counts`` the outcomes so far.

    ``signal()`` is synchronous in async code too: its journal append is one short
    write and fsync (pass ``RuntimeJournal(path, fsync=False)`` to skip the sync).
    """

    def __init__(self, mutator: RuntimeMutator, config: Mapping[str, Any], run_id: str) -> None:
        self.run_id = run_id
        self.mode: Mode = mutator.mode
        self._working: dict[str, Any] = dict(config)
        self.config: Mapping[str, Any] = MappingProxyType(self._working)
        self.original: Mapping[str, Any] = MappingProxyType(dict(config))
        self.closed = False
        self.moves: list[Move] = []  # applied (act) or would-be (observe), in order
        self.counts: Counter[str] = Counter()
        if self.mode == "off":
            return  # off costs these copies and nothing else
        self._mutator = mutator
        self._lock = threading.Lock()
        # What the rules step from: the working copy itself in act mode; in observe
        # mode a virtual copy, so the journal shows the sequence act would have made.
        self._state = self._working if self.mode == "act" else dict(config)
        self._held: dict[str, list[Any]] = {}
        self._invalid: set[str] = set()
        for target in mutator._watched:
            try:
                mutator.registry.settings[target].check(config[target])
                self._held[target] = [config[target]]
            except (KeyError, ValueError):
                self._invalid.add(target)
                log.warning("runtime run %s: %s is missing or invalid (%r); rules on it are "
                            "refused", run_id, target, config.get(target))

    # -- signals ------------------------------------------------------------------------

    def signal(self, name: str) -> RuntimeDecision:
        """Answer the failure signal ``name``: decide, journal, and in act mode apply."""
        if self.mode == "off":
            return RuntimeDecision(name, "off")
        with self._lock:
            if self.closed:
                raise RuntimeMutatorError(f"runtime run {self.run_id} has ended: a signal "
                                          "after close() cannot be answered or undone")
            rule = self._mutator.rules.get(name)
            decision = RuntimeDecision(name, "no_rule") if rule is None else self._decide(rule)
            # Journaled before it is applied: in act mode a move that cannot be journaled
            # raises here and is not made.
            self._journal_signal(decision)
            if decision.move is not None and decision.outcome in ("observed", "applied"):
                move = decision.move
                self._state[move.target] = move.after
                self._held[move.target].append(move.after)
                self.moves.append(move)
                log.info("runtime %s %s: %s on %s", self.run_id, decision.outcome, move, name)
            elif decision.outcome == "refused":
                log.info("runtime %s refused %s on %s: %s", self.run_id,
                         decision.move or decision.rule, name, decision.reason)
            self.counts[decision.outcome] += 1
        return decision

    def _decide(self, rule: RuntimeRule) -> RuntimeDecision:
        m = self._mutator
        target = rule.target
        if target in self._invalid:
            return RuntimeDecision(rule.on, "refused", rule, None, INVALID)
        current = self._state[target]
        after = step_value(m.registry.settings[target], current, rule.direction)
        move = None if after is None else Move(target=target, before=current, after=after)
        if target not in m.allow:
            return RuntimeDecision(rule.on, "refused", rule, move, NOT_ALLOWED)
        if move is None:
            at_choice = isinstance(m.registry.settings[target], EnumSetting)
            return RuntimeDecision(rule.on, "refused", rule, None,
                                   ALREADY if at_choice else OUT_OF_BOUNDS)
        if any(same_value(after, v) for v in self._held[target]):
            return RuntimeDecision(rule.on, "refused", rule, move, UNDO)
        if len(self.moves) >= m.max_moves:
            return RuntimeDecision(rule.on, "refused", rule, move, CAP_REACHED)
        return RuntimeDecision(rule.on, "applied" if self.mode == "act" else "observed",
                               rule, move)

    # -- the end ------------------------------------------------------------------------

    def close(self, error: BaseException | None = None) -> None:
        """End the run: apply the inverses in reverse order and check that the config
        equals the original exactly; journal an ``end`` record. Idempotent.

        Raises :class:`RuntimeMutatorError` if the restored config differs (the
        invariant every test checks; it cannot happen unless this class is broken).
        """
        if self.mode == "off":
            self.closed = True
            return
        with self._lock:
            if self.closed:
                return
            self.closed = True
            restored: list[Move] = []
            for move in reversed(self.moves):
                inverse = move.inverse()
                if not same_value(self._state[inverse.target], inverse.before):
                    break  # stale: cannot happen; the check below reports it
                self._state[inverse.target] = inverse.after
                restored.append(inverse)
            ok = _identical(self._state, self.original) and _identical(self._working,
                                                                        self.original)
            self._journal(RuntimeEndRecord(
                **self._header(), counts=dict(self.counts), restored=restored, restored_ok=ok,
                error=None if error is None else type(error).__name__))
        if not ok:
            raise RuntimeMutatorError(f"runtime run {self.run_id}: the config after the run "
                                      f"differs from the original: {dict(self._state)} != "
                                      f"{dict(self.original)}")

    def __enter__(self) -> RuntimeRun:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(exc)

    async def __aenter__(self) -> RuntimeRun:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close(exc)

    # -- journal ------------------------------------------------------------------------

    def _header(self) -> dict[str, Any]:
        registry = self._mutator.registry
        return {"at": datetime.now(UTC), "run_id": self.run_id, "mode": self.mode,
                "registry": registry.name, "registry_digest": registry.digest}

    def _journal_signal(self, d: RuntimeDecision) -> None:
        if self._mutator.journal is None:
            return
        outcome = cast(JournalOutcome, d.outcome)  # never "off": off returns before this
        self._journal(RuntimeSignalRecord(**self._header(), signal=d.signal, rule=d.rule,
                                          move=d.move, outcome=outcome, inverse=d.inverse,
                                          reason=d.reason))

    def _journal(self, record: RuntimeSignalRecord | RuntimeEndRecord) -> None:
        journal = self._mutator.journal
        if journal is None:
            return
        try:
            journal.write(record)
        except OSError as exc:
            if self.mode == "act":
                raise
            # Observe must never change the run, so a journal that cannot be written
            # costs the record (said once per mutator), not the harness's attempt.
            self._mutator._journal_failed(exc)
