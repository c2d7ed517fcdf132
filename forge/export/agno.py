"""forge's rollouts handed back to Agno: a saved result as an ``EnvironmentRunResult`` file.

``forge export agno RESULT.json OUT.json --bench BENCH`` writes the attempts of a
result (``forge eval --save``: one config, one split) as the file Agno's
``EnvironmentRunResult.save`` writes, built with Agno's own classes and written by
its own ``save``: ``EnvironmentRunResult.load(OUT.json)`` reads it, ``summary()``,
``learning_zone()``, ``errors()`` and ``to_sft_jsonl`` work on it, and ``.diff`` against
a baseline that Agno's ``run_rollouts`` made for the same environment compares them
task by task, because the fingerprints agree.

forge writes the file from the attempts it made rather than running Agno's runner
again: the export is the evidence forge decided on (the same seeds, the scores it
gated), and costs no rollout. What makes the fingerprints Agno's:

- the bench runs the ``agno`` harness, the split's tasks come from an Agno
  environment (the ``agno`` task source) and the scorer is that environment's
  (``scorer: {agno: "module:ENV"}``), so the tasks and the scoring rule are the
  environment's own;
- the agent is the factory's for the result's config, built as forge built it (the
  context ``None``), and Agno fingerprints it: ``env_fingerprint`` over the
  environment's tasks, scorer and timeout and that agent's tools, instructions and
  termination settings, ``policy_fingerprint`` over its model;
- the result ran with the environment's ``timeout_seconds`` (the bench's
  ``rollouts.timeout_s``): the fingerprint states a timeout, and attempts run under
  another would not be what it claims.

Each attempt keeps its Agno run (as forge recorded it; ``None`` for an attempt that
ended without one, as in Agno), its score (``value``, ``passed``, ``reason``,
``detail``), how it stopped, its duration, its error (with ``error_type`` the
exception's class) and ``tool_call_limit_hit``. A result of a subset of the split's
tasks is a subset run, as ``run_rollouts(env, tasks=...)`` makes one: the
fingerprint is the environment's, and ``diff`` names the tasks on one side only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge._util.files import atomic_write_text
from forge.bench.loader import Bench
from forge.errors import ExportError
from forge.harness.agno import AgnoHarness, build_agent
from forge.harness.agno_run import agno_run_dict
from forge.results.model import AttemptResult, EvalResult
from forge.scorers.agno import AgnoScorer
from forge.sources import SOURCES
from forge.sources.agno import AgnoSource, resolved_id

__all__ = ["AgnoExport", "export_agno"]

_ERROR_TYPE = re.compile(r"([A-Za-z_][\w.]*): ")


@dataclass(frozen=True)
class AgnoExport:
    """What was written."""

    out: Path
    env_name: str
    split: str
    k: int
    n_tasks: int
    n_attempts: int
    n_scored: int
    env_fingerprint: str
    policy_fingerprint: str

    def as_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "out": str(self.out)}


def export_agno(result: EvalResult, bench: Bench, out: Path, *,
                source: Path | None = None) -> AgnoExport:
    """Write ``result`` as Agno's ``EnvironmentRunResult`` file at ``out`` (atomically);
    :class:`ExportError` when the bench and result cannot give Agno's fingerprints."""
    env = _environment(bench, result, source)
    _check_timeout(result, env, bench, source)
    agent = _agent(bench, result)
    from agno.scorer import FingerprintError

    fingerprinted = dataclasses.replace(env, agent=agent)
    try:
        env_fingerprint = fingerprinted.env_fingerprint()
        policy_fingerprint = fingerprinted.policy_fingerprint()
    except FingerprintError as exc:
        raise ExportError(f"Agno cannot fingerprint the environment with this agent: {exc}",
                          file=bench.path, field="harness") from None
    by_id = {resolved_id(task, i): task for i, task in enumerate(env.tasks)}
    task_results = [_task_result(by_id, task.task_id, task.attempts, source)
                    for task in result.tasks]
    from agno.environments import EnvironmentRunResult

    run_result = EnvironmentRunResult(
        env_name=env.name, k=result.k, env_fingerprint=env_fingerprint,
        policy_fingerprint=policy_fingerprint, task_results=tuple(task_results),
        duration_seconds=result.duration_s)
    _save(run_result, out)
    return AgnoExport(out=out, env_name=env.name, split=result.split, k=result.k,
                      n_tasks=len(task_results), n_attempts=result.n_attempts,
                      n_scored=result.n_scored, env_fingerprint=env_fingerprint,
                      policy_fingerprint=policy_fingerprint)


def _environment(bench: Bench, result: EvalResult, source: Path | None) -> Any:
    """The Agno environment of the result's split, once the bench is the result's."""
    if bench.name != result.bench:
        raise ExportError(f"bench {bench.name!r} is not the result's bench {result.bench!r}",
                          file=bench.path, field="name")
    if bench.harness_spec.name != "agno":
        raise ExportError(f"the harness is {bench.harness_spec.name!r}; an Agno export needs "
                          "the agno harness (its factory builds the agent Agno fingerprints)",
                          file=bench.path, field="harness")
    for part, actual in (("harness", bench.harness_identity), ("scorer", bench.scorer.digest),
                         ("tasks", bench.split_digest(result.split))):
        if result.env.get(part) != actual:
            raise ExportError(f"the bench's {part} is not the one the result was evaluated "
                              "with (its code or tasks changed since): evaluate again",
                              file=source, field=f"env.{part}")
    field = f"splits.{result.split}"
    spec = bench.spec.splits.get(result.split)
    ctx = bench.context(field)
    if not isinstance(spec, dict) or SOURCES.parse(spec, ctx).name != "agno":
        raise ExportError(f"split {result.split!r} is not an Agno environment; an Agno export "
                          "needs its tasks from one ({agno: 'module:ENV'})",
                          file=bench.path, field=field)
    built = SOURCES.build(SOURCES.parse(spec, ctx), ctx)
    assert isinstance(built, AgnoSource)
    env = built.env
    scorer = bench.scorer
    if not isinstance(scorer, AgnoScorer) or scorer.scorer is not env.scorer:
        raise ExportError(f"the scorer is not environment {env.name!r}'s: an Agno export "
                          "needs the scores Agno's runner would give (scorer: {agno: "
                          "'module:ENV'}, the environment of the split)",
                          file=bench.path, field="scorer")
    return env


def _check_timeout(result: EvalResult, env: Any, bench: Bench, source: Path | None) -> None:
    timeout = result.env.get("timeout_s")
    if timeout != env.timeout_seconds:
        ran = (f"a timeout of {timeout:g} s" if isinstance(timeout, int | float)
               else "no recorded timeout")
        raise ExportError(f"the result ran with {ran} and environment "
                          f"{env.name!r} declares timeout_seconds={env.timeout_seconds}: its "
                          "fingerprint would state a timeout the attempts did not have; set "
                          f"rollouts.timeout_s: {env.timeout_seconds} and evaluate again",
                          file=source, field="env.timeout_s")


def _agent(bench: Bench, result: EvalResult) -> Any:
    """The agent the harness's factory builds for the result's config (context None)."""
    harness = bench.build_harness()
    assert isinstance(harness, AgnoHarness)

    async def build() -> Any:
        try:
            return await build_agent(harness.factory, harness.arity, dict(result.config), None)
        finally:
            await harness.aclose()

    try:
        return asyncio.run(build())
    except Exception as exc:  # the user's factory: its failure is the export's reason
        raise ExportError(f"the agent factory failed for the result's config: "
                          f"{type(exc).__name__}: {exc}", file=bench.path,
                          field="harness") from None


def _task_result(by_id: dict[str, Any], task_id: str, attempts: list[AttemptResult],
                 source: Path | None) -> Any:
    from agno.environments import TaskResult

    task = by_id.get(task_id)
    if task is None:
        raise ExportError(f"task {task_id!r} is not in the environment", file=source,
                          field="tasks")
    return TaskResult(task=dataclasses.replace(task, id=task_id),
                      attempts=tuple(_attempt(a, source) for a in attempts))


def _attempt(attempt: AttemptResult, source: Path | None) -> Any:
    from agno.environments import AttemptResult as AgnoAttempt
    from agno.environments import StopReason
    from agno.run.agent import RunOutput as AgnoRunOutput
    from agno.scorer import Score as AgnoScore

    output, score = attempt.output, attempt.score
    run = None
    if output is not None:
        try:
            run = AgnoRunOutput.from_dict(agno_run_dict(output))
        except Exception as exc:  # a record Agno cannot read back
            raise ExportError(f"attempt {attempt.attempt} of task {attempt.task_id!r}: its run "
                              f"does not read as an Agno run ({type(exc).__name__}: {exc})",
                              file=source, field="tasks") from None
    scored = attempt.scored and score is not None
    return AgnoAttempt(
        run=run,
        score=AgnoScore(value=score.value, passed=score.passed, reason=score.explanation,
                        detail=score.details or None) if scored and score else None,
        stop_reason=StopReason(attempt.stop_reason), duration_seconds=attempt.duration_s,
        error=attempt.error,
        tool_call_limit_hit=output is not None and "tool_call_limit_hit" in output.signals,
        error_type=_error_type(attempt.error))


def _error_type(error: str | None) -> str | None:
    """The exception class an error names first, past forge's AgnoRunError wrapper."""
    if not error:
        return None
    found = _ERROR_TYPE.match(error)
    if found and found.group(1) == "AgnoRunError":
        found = _ERROR_TYPE.match(error, found.end())
    return found.group(1) if found else None


def _save(run_result: Any, out: Path) -> None:
    """Agno's own ``save``, into a temporary file, then moved into place atomically."""
    with tempfile.TemporaryDirectory() as folder:
        staged = Path(folder) / "export.json"
        try:
            run_result.save(staged)
        except (TypeError, ValueError) as exc:
            raise ExportError(f"Agno cannot save these attempts: {exc}", file=out) from None
        text = staged.read_text(encoding="utf-8")
    try:
        atomic_write_text(out, text)
    except OSError as exc:
        raise ExportError(f"cannot write: {exc.strerror or exc}", file=out) from None
