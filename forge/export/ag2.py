"""A forge result as an AG2 run: the file ``ag2.eval.load_run`` reads and ``RunDiff`` compares.

``forge export ag2 RESULT.json OUT.json --bench BENCH`` writes the attempts of a saved
result (``forge eval --save``: one config on one split) as AG2's run JSON (schema
0.2). forge writes the file itself, from the attempts it ran, rather than running
AG2's runner again for the config: the export is then exactly what forge measured
(the same seeds, isolation, timeouts and failures), and costs no model call. The file
is made by AG2's own classes and serialiser (``RunResult`` and ``results.store.to_dict``),
written atomically, and read back with ``load_run`` before the command reports
success.

How forge's attempts become AG2 task results
    One AG2 task result per attempt. With K = 1 its ``task_id`` is the task's id; with
    K > 1 it is ``<id>#1`` .. ``<id>#K``, as ``run_agent(..., repeats=K)`` names its
    repeats, so a baseline AG2 ran with the same repeats lines up with it. ``inputs``
    and ``reference_outputs`` are the task's in AG2's terms (:mod:`forge.harness.ag2_sdk`): a
    task read from an AG2 suite gets its own back, so ``RunDiff`` finds the contents
    unchanged.

    ``feedback``: what the bench's ``ag2`` scorers gave the attempt (every feedback
    each of them returned, kept on the score, through composites), so the run has the
    keys an AG2 run scored by the same scorers has; for a bench scored by forge's own
    scorers only, one feedback ``forge`` with the verdict (passed, as a bool).

    An unscored attempt (an error, a timeout, a scorer failure) carries an
    ``exception`` (``TimeoutError`` or ``RuntimeError``, the message forge recorded)
    and no feedback: AG2 counts it in ``aggregates.errors``, never as a failed check.

    The events: the attempt's tool executions, model calls and token usage as AG2
    events (:func:`forge.harness.ag2_events.trace_of`), so the file's token totals are forge's.
    ``trace_ref.metadata`` records forge's attempt, seed and stop reason.

``RunDiff`` needs the same tasks and scorer keys on both sides: export the split the
baseline ran, scored by the same AG2 scorers, with K equal to its ``repeats``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge._util.files import atomic_write_text
from forge.bench.loader import Bench
from forge.core.task import Task
from forge.errors import ExportError
from forge.export.sft import task_inputs
from forge.harness import ag2_sdk as _ag2
from forge.harness.ag2_events import task_of, trace_of
from forge.results.model import AttemptResult, EvalResult
from forge.scorers.ag2 import FEEDBACK_KEY

__all__ = ["FORGE_KEY", "Ag2Export", "export_ag2"]

#: The feedback key of forge's own verdict, for a bench no AG2 scorer judged.
FORGE_KEY = "forge"


@dataclass(frozen=True)
class Ag2Export:
    """What ``forge export ag2`` wrote, as ``load_run`` read it back."""

    out: Path
    run_id: str
    split: str
    task_results: int
    errors: int
    keys: tuple[str, ...]
    pass_rate: dict[str, float]
    tokens: dict[str, int]


def export_ag2(result: EvalResult, bench: Bench, out: Path, *, source: Path,
               label: str | None = None, run_id: str | None = None) -> Ag2Export:
    """Write ``result`` as an AG2 run to ``out`` (see the module docstring)."""
    if out.resolve() == source.resolve():
        raise ExportError("the output would overwrite the result it is made from",
                          file=out)
    task_inputs(bench, result, source=source)  # the bench's split is the result's, or no
    tasks = {task.id: task for task in bench.tasks(result.split)}
    _ag2.require("forge export ag2", lambda message: ExportError(message, file=out))
    ev = _ag2.module("ag2.eval")
    task_results = tuple(_task_results(result, tasks))
    run = ev.RunResult(
        run_id=run_id or f"forge-{result.bench}-{result.split}-{result.config_fingerprint[:12]}",
        tasks=task_results,
        # One suite task per task result, as AG2's runner grades repeats.
        suite=ev.Suite([tr.task for tr in task_results], name=f"{result.bench}:{result.split}",
                       source=f"forge bench {result.bench}, split {result.split}"),
        target_path=f"forge:{result.bench}@{result.config_fingerprint[:12]}",
        concurrency=1, duration_ms=int(result.duration_s * 1000),
        created_at=result.started_at.isoformat(), label=label)
    document = _ag2.module("ag2.eval.results.store").to_dict(run)
    atomic_write_text(out, json.dumps(document, indent=2, default=str) + "\n")
    return _read_back(out, run, result.split)


def _task_results(result: EvalResult, tasks: dict[str, Task]) -> Iterator[Any]:
    ev = _ag2.module("ag2.eval")
    for task_result in result.tasks:
        task = tasks[task_result.task_id]
        for attempt in sorted(task_result.attempts, key=lambda a: a.attempt):
            task_id = task.id if result.k == 1 else f"{task.id}#{attempt.attempt + 1}"
            yield ev.TaskResult(
                task=task_of(task, task_id=task_id),
                trace=trace_of(attempt.output,
                               exception=_exception(attempt),
                               duration_ms=int(attempt.duration_s * 1000)),
                feedback=tuple(_feedback(ev, attempt)),
                trace_ref=ev.TraceRef(
                    trace_id=f"forge:{result.split}:{task.id}:{attempt.attempt}",
                    task_id=task_id,
                    metadata={"forge_attempt": attempt.attempt, "forge_seed": attempt.seed,
                              "forge_stop_reason": attempt.stop_reason}))


def _exception(attempt: AttemptResult) -> BaseException | None:
    if attempt.scored:
        return None
    reason = attempt.error or attempt.stop_reason
    if attempt.stop_reason == "timeout":
        return TimeoutError(f"timeout: {reason}")
    label = "scorer_failed" if attempt.stop_reason == "completed" else attempt.stop_reason
    return RuntimeError(f"{label}: {reason}")


def _feedback(ev: Any, attempt: AttemptResult) -> Iterator[Any]:
    if not attempt.scored or attempt.score is None:
        return
    found = list(_ag2_records(attempt.score.details))
    if not found:
        yield ev.Feedback(key=FORGE_KEY, score=attempt.score.passed,
                          comment=attempt.score.explanation)
        return
    for record in found:
        yield ev.Feedback(key=str(record.get("key")), score=_number(record.get("score")),
                          value=record.get("value"), comment=record.get("comment"),
                          detail=record.get("detail"))


def _ag2_records(details: Any) -> Iterator[dict[str, Any]]:
    """Every AG2 feedback record kept on a score, through composites' children."""
    if isinstance(details, dict):
        for key, value in details.items():
            if key == FEEDBACK_KEY and isinstance(value, list):
                yield from (r for r in value if isinstance(r, dict) and "key" in r)
            else:
                yield from _ag2_records(value)
    elif isinstance(details, list):
        for item in details:
            yield from _ag2_records(item)


def _number(value: Any) -> bool | int | float | None:
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def _read_back(out: Path, written: Any, split: str) -> Ag2Export:
    """The export as AG2 reads it; refused when it does not read back as written."""
    try:
        loaded = _ag2.module("ag2.eval").load_run(out)
    except Exception as exc:
        raise ExportError(f"ag2.eval.load_run cannot read the export: "
                          f"{type(exc).__name__}: {exc}", file=out) from None
    keys = tuple(sorted({fb.key for tr in loaded.tasks for fb in tr.feedback}))
    expected = tuple(sorted({fb.key for tr in written.tasks for fb in tr.feedback}))
    if len(loaded.tasks) != len(written.tasks) or keys != expected:
        raise ExportError(f"the export read back with {len(loaded.tasks)} task results and "
                          f"keys {list(keys)}, written with {len(written.tasks)} and "
                          f"{list(expected)}", file=out)
    tokens = written.aggregates.tokens  # load_run keeps no events: the written totals
    return Ag2Export(out=out, run_id=loaded.run_id, split=split,
                     task_results=len(loaded.tasks), errors=loaded.aggregates.errors,
                     keys=keys, pass_rate=dict(loaded.aggregates.pass_rate),
                     tokens={"input": tokens.input, "output": tokens.output})
