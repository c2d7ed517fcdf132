"""Evaluate one config of a bench on one split: a session's engine, fingerprints, grouping."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

from forge._util.digest import digest_of
from forge._util.interrupt import cancelling
from forge.bench.loader import Bench
from forge.config.registry import Config
from forge.core.task import Task
from forge.errors import BenchError, EvaluationInterrupted
from forge.evaluation.rollout import AttemptKey, RolloutEngine
from forge.evaluation.session import Session
from forge.executors import ExecutorSettings
from forge.results.model import AttemptResult, EvalResult, TaskResult

__all__ = ["DEFAULT_SEED", "EvaluateOptions", "env_components", "evaluate", "evaluate_async"]

#: Fixed so that two runs of the same command give the same result.
DEFAULT_SEED = 20261130


def env_components(bench: Bench, split: str, *, k: int, timeout_s: float) -> dict[str, Any]:
    """What must match for two results to be comparable; the config is not part of it."""
    return {
        "bench": bench.name,
        "split": split,
        "tasks": bench.split_digest(split),
        "scorer": bench.scorer.digest,
        "harness": bench.harness_identity,
        "timeout_s": timeout_s,
        "k": k,
    }


def select_tasks(bench: Bench, split: str, task_ids: Sequence[str] | None) -> list[Task]:
    tasks = bench.tasks(split)
    if not task_ids:
        return tasks
    by_id = {t.id: t for t in tasks}
    missing = [t for t in task_ids if t not in by_id]
    if missing:
        raise BenchError(f"no task {missing[0]!r} in split {split!r}", file=bench.path,
                         field=f"splits.{split}")
    return [by_id[t] for t in dict.fromkeys(task_ids)]


class EvaluateOptions(TypedDict, total=False):
    """The options of :func:`evaluate` and :func:`evaluate_async`, all optional."""

    split: str  # dev
    k: int | None  # the bench's
    seed: int  # DEFAULT_SEED
    concurrency: int | None  # the bench's
    timeout_s: float | None  # the bench's
    task_ids: Sequence[str] | None  # every task of the split
    on_attempt: Callable[[AttemptResult], None] | None  # called with each result
    on_engine: Callable[[RolloutEngine], None] | None  # with the engine, before it runs
    executor: ExecutorSettings | None  # the bench's executor field, else local


@dataclass(frozen=True)
class _Evaluation:
    """One evaluation as asked for: K attempts of each selected task of one split."""

    bench: Bench
    config: Config
    split: str
    k: int
    seed: int
    concurrency: int
    timeout_s: float
    tasks: list[Task]
    executor: ExecutorSettings
    on_attempt: Callable[[AttemptResult], None] | None
    on_engine: Callable[[RolloutEngine], None] | None

    @classmethod
    def of(cls, bench: Bench, config: Config, options: EvaluateOptions) -> _Evaluation:
        settings = bench.spec.rollouts
        split = options.get("split", "dev")
        k = options.get("k")
        timeout_s = options.get("timeout_s")
        # The tasks first: a missing split or task is bad input before anything opens.
        tasks = select_tasks(bench, split, options.get("task_ids"))
        return cls(bench, config, split, settings.k if k is None else k,
                   options.get("seed", DEFAULT_SEED),
                   options.get("concurrency") or settings.concurrency,
                   settings.timeout_s if timeout_s is None else timeout_s, tasks,
                   options.get("executor") or bench.executor_settings(),
                   options.get("on_attempt"), options.get("on_engine"))

    def session(self) -> Session:
        return Session(self.bench, self.executor, seed=self.seed,
                       concurrency=self.concurrency, timeout_s=self.timeout_s)

    async def run(self, engine: RolloutEngine) -> EvalResult:
        if self.on_engine is not None:
            self.on_engine(engine)
        keys = [AttemptKey(task, i) for task in self.tasks for i in range(self.k)]
        started = datetime.now(UTC)
        t0 = time.monotonic()
        attempts = await engine.run(self.config, keys, split=self.split,
                                    on_attempt=self.on_attempt)
        env = env_components(self.bench, self.split, k=self.k, timeout_s=self.timeout_s)
        result = EvalResult(
            bench=self.bench.name, split=self.split, k=self.k, seed=self.seed,
            config=self.config.as_dict(), config_fingerprint=self.config.fingerprint,
            env_fingerprint=digest_of(env), env=env, started_at=started,
            duration_s=time.monotonic() - t0, tasks=_group(self.tasks, attempts))
        if engine.cancelled:
            raise EvaluationInterrupted(result)
        return result


async def evaluate_async(bench: Bench, config: Config,
                         **options: Unpack[EvaluateOptions]) -> EvalResult:
    """K attempts per task of ``split``; raises :class:`EvaluationInterrupted` if cancelled.

    ``executor`` says where attempts run (default: the bench's ``executor`` field, else
    ``local``); the result is the same whichever runs them, except for latencies.
    """
    evaluation = _Evaluation.of(bench, config, options)
    async with evaluation.session() as session:
        return await evaluation.run(session.engine)


def _group(tasks: Sequence[Task], attempts: Sequence[AttemptResult]) -> list[TaskResult]:
    by_task: dict[str, list[AttemptResult]] = {t.id: [] for t in tasks}
    for a in attempts:
        by_task[a.task_id].append(a)
    return [TaskResult(task_id=t.id, tags=list(t.tags),
                       attempts=sorted(by_task[t.id], key=lambda a: a.attempt))
            for t in tasks]


def evaluate(bench: Bench, config: Config, **options: Unpack[EvaluateOptions]) -> EvalResult:
    """Synchronous :func:`evaluate_async`, on an event loop of its own. The first Ctrl-C
    (and SIGTERM, under the command line) cancels cleanly (attempts in flight end as
    ``cancelled``, :class:`EvaluationInterrupted` is raised); a second one goes to the
    handler there was before (Python's: KeyboardInterrupt)."""
    evaluation = _Evaluation.of(bench, config, options)
    with evaluation.session() as session:
        result = session.run(cancelling(session.engine.cancel,
                                        evaluation.run(session.engine)))
        session.check_executor()
        return result
