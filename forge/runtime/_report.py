"""What a runtime journal says: rule statistics, and moves for the offline search to try first.

:func:`summarize_runtime_journal` counts, per (signal, rule), how often the rule
fired and how often its move was observed, applied or refused (with the reasons),
and which moves it made or would have made. :func:`runtime_first_moves` closes the
loop: the moves the mutator proposed most often, re-based on the search's start
config, go to the front of the search's candidate queue, where they pass every
gate like any other candidate.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.config.moves import Move, neighbourhood
from forge.config.registry import Config, Registry
from forge.runtime._journal import (
    RuntimeEndRecord,
    RuntimeJournalError,
    RuntimeSignalRecord,
    read_runtime_journal,
)
from forge.runtime._mutator import step_value

__all__ = ["RuleStats", "RuntimeReport", "runtime_first_moves", "summarize_runtime_journal"]

_PROPOSED = ("observed", "applied")


@dataclass
class RuleStats:
    """One row of the report: a signal and the rule that answered it (None: no rule)."""

    signal: str
    target: str | None
    direction: str | None
    observed: int = 0
    applied: int = 0
    refused: int = 0
    no_rule: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    #: (target, before, after) -> count: moves made (act) or that would have been (observe)
    moves: Counter[tuple[str, Any, Any]] = field(default_factory=Counter)
    #: the same for refused moves that had a move to refuse (cap, allow-list, undo)
    refused_moves: Counter[tuple[str, Any, Any]] = field(default_factory=Counter)

    @property
    def fired(self) -> int:
        """Times the signal arrived and this rule matched it (refusals included)."""
        return self.observed + self.applied + self.refused

    def as_json(self) -> dict[str, Any]:
        return {"signal": self.signal, "target": self.target, "direction": self.direction,
                "fired": self.fired, "observed": self.observed, "applied": self.applied,
                "refused": self.refused, "no_rule": self.no_rule,
                "reasons": dict(self.reasons.most_common()),
                "moves": _moves_json(self.moves),
                "refused_moves": _moves_json(self.refused_moves)}


def _moves_json(moves: Counter[tuple[str, Any, Any]]) -> list[dict[str, Any]]:
    return [{"target": t, "before": b, "after": a, "count": n}
            for (t, b, a), n in moves.most_common()]


@dataclass
class RuntimeReport:
    """The counts of a runtime journal. ``rows`` are ordered by how often they occurred."""

    path: str
    records: int
    runs: int
    modes: Counter[str]
    registries: dict[str, str]  # digest -> name
    rows: list[RuleStats]
    runs_with_moves: int = 0
    restore_failures: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"journal": self.path, "records": self.records, "runs": self.runs,
                "runs_with_moves": self.runs_with_moves,
                "restore_failures": self.restore_failures, "modes": dict(self.modes),
                "registries": [{"name": n, "digest": d} for d, n in self.registries.items()],
                "rules": [row.as_json() for row in self.rows]}


def summarize_runtime_journal(path: str | Path) -> RuntimeReport:
    """Read a runtime journal and count it; bad input raises :class:`RuntimeJournalError`."""
    records = read_runtime_journal(path)
    rows: dict[tuple[str, str | None, str | None], RuleStats] = {}
    modes: Counter[str] = Counter()
    registries: dict[str, str] = {}
    runs = with_moves = failures = 0
    for _, record in records:
        registries.setdefault(record.registry_digest, record.registry)
        if isinstance(record, RuntimeEndRecord):
            runs += 1
            modes[record.mode] += 1
            with_moves += bool(record.restored)
            failures += not record.restored_ok
            continue
        rule = record.rule
        key = (record.signal, rule.target if rule else None, rule.direction if rule else None)
        row = rows.get(key)
        if row is None:
            row = rows[key] = RuleStats(*key)
        setattr(row, record.outcome, getattr(row, record.outcome) + 1)
        if record.outcome == "refused":
            row.reasons[record.reason or "?"] += 1
        if record.move is not None:
            counter = row.refused_moves if record.outcome == "refused" else row.moves
            counter[(record.move.target, record.move.before, record.move.after)] += 1
    ordered = sorted(rows.values(), key=lambda r: (-(r.fired + r.no_rule), r.signal,
                                                   r.target or "", r.direction or ""))
    return RuntimeReport(path=str(path), records=len(records), runs=runs, modes=modes,
                         registries=registries, rows=ordered, runs_with_moves=with_moves,
                         restore_failures=failures)


def runtime_first_moves(path: str | Path, registry: Registry, start: Config) -> list[Move]:
    """The moves the mutator proposed most often, as moves from ``start``, most frequent first.

    Proposals are the observed and applied moves (a refused one was not made, and in
    observe mode would not have been). They are counted by (target, direction):
    their ``before`` is whatever the run held, which need not be ``start``'s value,
    so each is re-based as the step in the same direction from ``start``. A step that
    does not exist there (at a bound, already that choice) is dropped; every move
    returned is a one-setting neighbour of ``start``. Ties keep the journal's order.

    Refuses (:class:`RuntimeJournalError`, naming the line) a journal written for
    another registry: its moves would name settings and bounds of a different harness.
    """
    counts: Counter[tuple[str, str]] = Counter()
    for line, record in read_runtime_journal(path):
        if record.registry_digest != registry.digest:
            raise RuntimeJournalError(
                f"written for registry {record.registry!r} (digest "
                f"{record.registry_digest[:12]}), not for this bench's registry "
                f"{registry.name!r} (digest {registry.digest[:12]})",
                file=path, line=line, field="registry_digest")
        if (isinstance(record, RuntimeSignalRecord) and record.outcome in _PROPOSED
                and record.rule is not None):
            counts[(record.rule.target, record.rule.direction)] += 1
    legal = neighbourhood(registry, start)
    moves: list[Move] = []
    for (target, direction), _ in counts.most_common():  # stable: ties in journal order
        after = step_value(registry.settings[target], start.values[target], direction)
        if after is None:
            continue
        move = Move(target=target, before=start.values[target], after=after)
        if move in legal and move not in moves:
            moves.append(move)
    return moves
