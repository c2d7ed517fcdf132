"""What the HTML report shows, read from a run folder: ``run.json``, the journal, and
the attempt store.

The journal says what was decided; the attempt store says how well each incumbent
did. Per-step scores come from the store rather than the journal because the
journal records means on the *confirmation* streams (fresh seeds per segment), which
differ from one incumbent to the next; the screening stream ``dev`` and the ``val``
stream use the same seeds for every config, so their means line up across steps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.errors import JournalError
from forge.journal import RunInfo, load_run, read_records
from forge.stats import Interval, mean_interval
from forge.store import iter_jsonl_tolerant

__all__ = ["Incumbent", "RunReport", "ZoneTask", "load_report", "mapping", "number",
           "sequence"]

#: The attempt streams whose seeds every config shares: comparable across steps.
_STREAMS = ("dev", "val")

# (fingerprint, stream) -> task id -> attempt index -> (score value, passed)
_Scores = dict[tuple[str, str], dict[str, dict[int, tuple[float, bool]]]]


def number(value: Any) -> float | None:
    """``value`` as a finite float, or None (journals write None for unknown bounds,
    and a bool is not a number even though Python says it is)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def mapping(value: Any) -> dict[str, Any]:
    """A journal field that should be an object; anything else (a damaged or absent
    field) reads as empty, so one odd record cannot take the whole page down."""
    return value if isinstance(value, dict) else {}


def sequence(value: Any) -> list[Any]:
    """A journal field that should be a list; anything else reads as empty."""
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class Incumbent:
    """One incumbent of the run, from the step that promoted it (0: the start config)."""

    step: int
    fingerprint: str
    move: dict[str, Any] | None
    dev: Interval | None
    val: Interval | None


@dataclass(frozen=True)
class ZoneTask:
    """A dev task the final incumbent passes sometimes but not always."""

    task_id: str
    passed: int
    scored: int


@dataclass(frozen=True)
class RunReport:
    """Everything the page shows, already read and checked."""

    folder: Path
    info: RunInfo
    start: dict[str, Any]
    decisions: list[dict[str, Any]]
    stop: dict[str, Any] | None
    test: dict[str, Any] | None
    end: dict[str, Any] | None
    incumbents: list[Incumbent]
    last_step: int
    final_fingerprint: str
    has_attempts: bool
    zone: list[ZoneTask]
    dev_tasks_final: int
    k: int | None
    #: ``proposal_invalid`` records: replies a proposer refused (no move, no rollouts).
    invalid: list[dict[str, Any]] = field(default_factory=list)

    @property
    def promoted(self) -> list[dict[str, Any]]:
        return [d for d in self.decisions if d.get("verdict") == "promoted"]


def load_report(folder: Path) -> RunReport:
    """Read a run folder; a missing or damaged run raises :class:`JournalError`."""
    info = load_run(folder)
    records = read_records(folder)
    journal = folder / "journal.jsonl"
    start = next((r for r in records if r.get("kind") == "start"), None)
    if start is None:
        raise JournalError("no start record: the run has not evaluated its start config yet",
                           file=journal)
    decisions = [r for r in records if r.get("kind") == "candidate"]
    for index, record in enumerate(records, start=1):
        if record.get("kind") == "candidate":
            _check_decision(record, index, journal)
    stop, test, end = (_last(records, kind) for kind in ("stop", "test", "end"))

    chain: list[tuple[int, str, dict[str, Any] | None]] = [
        (0, str(start.get("fingerprint") or info.start_fingerprint), None)]
    chain += [(int(d["step"]), str(d["candidate"]), d["move"])
              for d in decisions if d.get("verdict") == "promoted"]
    final = str(end["final_fingerprint"]) if end and end.get("final_fingerprint") else chain[-1][1]
    k = info.options.get("k")
    k = k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None

    attempts_path = folder / "attempts.jsonl"
    has_attempts = attempts_path.exists()
    scores = _read_scores(attempts_path, {fp for _, fp, _ in chain} | {final}, k)

    incumbents = [Incumbent(step=step, fingerprint=fp, move=move,
                            dev=_interval(scores.get((fp, "dev"))),
                            val=_interval(scores.get((fp, "val"))))
                  for step, fp, move in chain]
    steps = [int(d["step"]) for d in decisions]
    stop_step = stop.get("step") if stop else None
    last_step = max([0, *steps, *([stop_step] if isinstance(stop_step, int) else [])])
    final_dev = scores.get((final, "dev"), {})
    zone = [ZoneTask(task_id, passed, scored)
            for task_id, passed, scored in (_counts(task_id, items)
                                            for task_id, items in final_dev.items())
            if 0 < passed < scored]
    zone.sort(key=lambda z: (z.passed / z.scored, z.task_id))
    return RunReport(folder=folder, info=info, start=start, decisions=decisions, stop=stop,
                     test=test, end=end, incumbents=incumbents, last_step=last_step,
                     final_fingerprint=final, has_attempts=has_attempts, zone=zone,
                     dev_tasks_final=len(final_dev), k=k,
                     invalid=[r for r in records if r.get("kind") == "proposal_invalid"])


def _last(records: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    found = [r for r in records if r.get("kind") == kind]
    return found[-1] if found else None


def _check_decision(record: dict[str, Any], index: int, journal: Path) -> None:
    """The fields every chart reads without a second look; anything else is optional."""
    step, move = record.get("step"), record.get("move")
    problem = None
    if not isinstance(step, int) or isinstance(step, bool) or step < 1:
        problem = "step is not a positive integer"
    elif not isinstance(move, dict) or not isinstance(move.get("target"), str):
        problem = "move has no target"
    elif record.get("verdict") == "promoted" and not isinstance(record.get("candidate"), str):
        problem = "a promoted decision names no candidate config"
    if problem is not None:
        raise JournalError(f"damaged candidate record {index}: {problem}", file=journal)


def _read_scores(path: Path, wanted: set[str], k: int | None) -> _Scores:
    """Scored attempts of the ``wanted`` configs on the shared-seed streams.

    Only attempt indices below ``k`` count: the search's own means use those, and
    the extra blocks racing adds for close calls exist for a few configs only.
    Unscored attempts are left out (never counted as 0), as everywhere in forge.
    """
    out: _Scores = defaultdict(lambda: defaultdict(dict))
    try:
        for record in iter_jsonl_tolerant(path):
            fp, stream, result = record.get("config"), record.get("stream"), record.get("result")
            if (not isinstance(fp, str) or fp not in wanted or stream not in _STREAMS
                    or not isinstance(result, dict)):
                continue
            attempt, score = result.get("attempt"), result.get("score")
            if (not isinstance(attempt, int) or isinstance(attempt, bool)
                    or (k is not None and attempt >= k)):
                continue
            if result.get("stop_reason") != "completed" or not isinstance(score, dict):
                continue
            value = number(score.get("value"))
            if value is None:
                continue
            # Later lines win, as in the store itself.
            out[(fp, str(stream))][str(result.get("task_id"))][attempt] = (
                value, score.get("passed") is True)
    except ValueError as exc:  # a damaged line mid-file, not a torn tail
        raise JournalError(f"{exc}; the run's attempt store is damaged") from None
    return out


def _interval(tasks: dict[str, dict[int, tuple[float, bool]]] | None) -> Interval | None:
    """95% t-interval of the mean over tasks of each task's mean score."""
    if not tasks:
        return None
    means = [math.fsum(v for v, _ in items.values()) / len(items)
             for items in tasks.values() if items]
    return mean_interval(means, 0.95)


def _counts(task_id: str, items: dict[int, tuple[float, bool]]) -> tuple[str, int, int]:
    return task_id, sum(1 for _, ok in items.values() if ok), len(items)
