"""Evaluate one config of a bench on one split: the engine plus fingerprints and grouping."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any

from forge._digest import digest_of
from forge.bench import Bench
from forge.errors import BenchError, EvaluationInterrupted
from forge.executors import ExecutorSettings
from forge.registry import Config
from forge.results import AttemptResult, EvalResult, TaskResult
from forge.rollout import AttemptKey, RolloutEngine
from forge.task import Task

__all__ = ["DEFAULT_SEED", "env_components", "evaluate", "evaluate_async"]

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


async def evaluate_async(
    bench: Bench,
    config: Config,
    *,
    split: str = "dev",
    k: int | None = None,
    seed: int = DEFAULT_SEED,
    concurrency: int | None = None,
    timeout_s: float | None = None,
    task_ids: Sequence[str] | None = None,
    on_attempt: Callable[[AttemptResult], None] | None = None,
    on_engine: Callable[[RolloutEngine], None] | None = None,
    executor: ExecutorSettings | None = None,
) -> EvalResult:
    """K attempts per task of ``split``; raises :class:`EvaluationInterrupted` if cancelled.

    ``executor`` says where attempts run (default: the bench's ``executor`` field, else
    ``local``); the result is the same whichever runs them, except for latencies.
    """
    settings = bench.spec.rollouts
    k = settings.k if k is None else k
    timeout_s = settings.timeout_s if timeout_s is None else timeout_s
    tasks = select_tasks(bench, split, task_ids)
    remote = bench.open_executor(executor or bench.executor_settings())
    harness = bench.build_harness()
    engine = RolloutEngine(harness, bench.scorer, split=split, run_seed=seed,
                           concurrency=concurrency or settings.concurrency, timeout_s=timeout_s,
                           executor=remote)
    if on_engine is not None:
        on_engine(engine)
    keys = [AttemptKey(task, i) for task in tasks for i in range(k)]
    started = datetime.now(UTC)
    t0 = time.monotonic()
    try:
        attempts = await engine.run(config, keys, on_attempt=on_attempt)
    finally:
        await harness.aclose()
        if remote is not None:
            remote.close()
    env = env_components(bench, split, k=k, timeout_s=timeout_s)
    result = EvalResult(
        bench=bench.name, split=split, k=k, seed=seed, config=config.as_dict(),
        config_fingerprint=config.fingerprint, env_fingerprint=digest_of(env), env=env,
        started_at=started, duration_s=time.monotonic() - t0,
        tasks=_group(tasks, attempts),
    )
    if engine.cancelled:
        raise EvaluationInterrupted(result)
    return result


def _group(tasks: Sequence[Task], attempts: Sequence[AttemptResult]) -> list[TaskResult]:
    by_task: dict[str, list[AttemptResult]] = {t.id: [] for t in tasks}
    for a in attempts:
        by_task[a.task_id].append(a)
    return [TaskResult(task_id=t.id, tags=list(t.tags),
                       attempts=sorted(by_task[t.id], key=lambda a: a.attempt))
            for t in tasks]


def evaluate(bench: Bench, config: Config, **options: Any) -> EvalResult:
    """Synchronous :func:`evaluate_async`. The first Ctrl-C cancels cleanly (attempts in
    flight end as ``cancelled``, :class:`EvaluationInterrupted` is raised); a second one
    stops at once."""

    async def main() -> EvalResult:
        loop = asyncio.get_running_loop()
        engines: list[RolloutEngine] = []
        user_hook = options.pop("on_engine", None)

        def keep(engine: RolloutEngine) -> None:
            engines.append(engine)
            if user_hook is not None:
                user_hook(engine)

        def interrupt() -> None:
            for engine in engines:
                engine.cancel()
            loop.remove_signal_handler(signal.SIGINT)

        handled = threading.current_thread() is threading.main_thread()
        if handled:
            loop.add_signal_handler(signal.SIGINT, interrupt)
        try:
            return await evaluate_async(bench, config, on_engine=keep, **options)
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)

    return _run_and_abandon(main())


#: How long leftover tasks get to end after the evaluation; the rest are abandoned.
_SHUTDOWN_GRACE_S = 0.2


def _run_and_abandon(coro: Coroutine[Any, Any, EvalResult]) -> EvalResult:
    """``asyncio.run`` without its last wait: ``asyncio.run`` cancels the tasks left over
    and waits for every one of them, so an async harness that ignores cancellation (its
    attempt already recorded as a timeout) would hold the evaluation forever. Leftovers
    get a short grace to end, then are abandoned with the loop."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(coro)
    finally:
        try:
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            if leftovers:
                loop.run_until_complete(asyncio.wait(leftovers, timeout=_SHUTDOWN_GRACE_S))
            for task in leftovers:
                if task.done() and not task.cancelled():
                    task.exception()  # retrieved: no "never retrieved" log
                elif not task.done():
                    task._log_destroy_pending = False  # type: ignore[attr-defined]
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
