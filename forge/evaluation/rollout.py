"""The rollout engine: attempts with seeds, isolation, timeouts, and their judging.

A failure of the harness is data. Whatever one attempt does (raise, hang, return
garbage, return something that cannot be serialised), the engine records a stop
reason and an error and goes on with the next attempt.

The engine prepares each attempt (its seed, private copies of config and task, its
deadline) and judges what came back (checked output, score, metrics); *where* the
harness is called is its executor's part (:mod:`forge.executors`: in-process lanes,
worker processes, Ray), so results are the same whichever runs them.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from pydantic_core import PydanticSerializationError

from forge.config.registry import Config
from forge.core.task import Task
from forge.executors import AttemptKey, Executor, LocalExecutor, Prepared
from forge.harness.base import AttemptContext, AttemptTimeout, Harness, RunOutput
from forge.results.model import AttemptResult, StopReason
from forge.scorers.base import Score, Scorer
from forge.secrets.masking import redact, redact_model

__all__ = ["AttemptKey", "RolloutEngine", "derive_seed"]

_MAX_ERROR_CHARS = 2000


def derive_seed(run_seed: int, split: str, task_id: str, attempt: int) -> int:
    """A 63-bit seed from (run seed, split, task id, attempt index).

    The config is deliberately not an input: two configs evaluated with the same run
    seed see the same seeds, so their comparison is paired attempt by attempt.
    """
    key = f"{run_seed}\x1f{split}\x1f{task_id}\x1f{attempt}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") >> 1


class RolloutEngine:
    """Runs attempts of configs against one harness and scorer, on one executor.

    ``run`` takes any list of attempt keys of one split, so callers can evaluate a
    whole split or add attempts to a close decision later (the seeds do not depend
    on the batch). One engine serves every batch of an evaluation or a search.
    """

    def __init__(self, harness: Harness, scorer: Scorer, *, run_seed: int,
                 concurrency: int, timeout_s: float, executor: Executor | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.harness = harness
        self.scorer = scorer
        self.run_seed = run_seed
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        # Attempts run in the executor's lanes or workers and come back here to be
        # judged, so scoring is the same whichever runs them.
        self.executor = executor if executor is not None else LocalExecutor()
        self._cancelling = False
        self._running: set[_Batch] = set()
        self._starting: asyncio.Future[None] | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelling

    def cancel(self) -> None:
        """Start no more attempts; end those in flight as ``cancelled``. Idempotent."""
        self._cancelling = True
        if self._starting is not None:
            self._starting.cancel()
        for batch in list(self._running):
            batch.cancel()

    async def run(self, config: Config, keys: Sequence[AttemptKey], *, split: str,
                  stream: str | None = None,
                  on_attempt: Callable[[AttemptResult], None] | None = None,
                  ) -> list[AttemptResult]:
        """Results in the order of ``keys``, attempts of ``split``.

        Seeds come from ``stream`` (by default the split's name): a search draws fresh
        seeds for confirmation runs from another stream of the same split. After
        :meth:`cancel`, the attempts that were in flight come back ``cancelled`` and
        those never started are left out, so the list may be shorter than ``keys``.
        """
        results: list[AttemptResult | None] = [None] * len(keys)
        if keys and not await self._start_harness():
            return []
        if keys:
            batch = _Batch(self, config, keys, split, stream or split, results, on_attempt)
            self._running.add(batch)
            try:
                await self.executor.run_batch(batch)
            finally:
                self._running.discard(batch)
        return [r for r in results if r is not None]

    async def _start_harness(self) -> bool:
        """Await the harness's ``astart`` (its time is no attempt's); False when the
        engine is cancelled first, which also cancels the start."""
        if type(self.harness).astart is Harness.astart:
            return True
        if self._cancelling:
            return False
        starting = self._starting = asyncio.ensure_future(self.harness.astart())
        try:
            await starting
        except asyncio.CancelledError:
            if not (self._cancelling and starting.cancelled()):
                raise
        finally:
            self._starting = None
        return not self._cancelling


class _Batch:
    """One run of the engine, as its executor sees it (:class:`forge.executors.Batch`)."""

    def __init__(self, engine: RolloutEngine, config: Config, keys: Sequence[AttemptKey],
                 split: str, stream: str, results: list[AttemptResult | None],
                 on_attempt: Callable[[AttemptResult], None] | None) -> None:
        self.engine = engine
        self.harness = engine.harness
        self.scorer = engine.scorer
        self.size = len(keys)
        self.split = split
        self.concurrency = engine.concurrency
        self.timeout_s = engine.timeout_s
        # A plain attribute, read before every attempt: set by cancel(), never cleared.
        self.cancelled = engine.cancelled
        self._run_seed = engine.run_seed
        self._config = config
        self._keys = keys
        self._stream = stream
        self._results = results
        self._on_attempt = on_attempt
        self._task_json: dict[str, str] = {}
        self._wake: Callable[[], None] | None = None

    def cancel(self) -> None:
        """Cancel the engine (so no later batch starts either), then wake the executor."""
        self.engine._cancelling = self.cancelled = True
        if self._wake is not None:
            self._wake()

    def on_cancel(self, wake: Callable[[], None] | None) -> None:
        self._wake = wake

    def record(self, i: int, result: AttemptResult) -> None:
        self._results[i] = result
        if self._on_attempt is not None:
            self._on_attempt(result)

    def prepare(self, i: int) -> Prepared:
        key = self._keys[i]
        seed = derive_seed(self._run_seed, self._stream, key.task.id, key.attempt)
        start = time.monotonic()
        # model_construct: these values are ours and already valid; validating them
        # again per attempt is a measurable share of the engine's overhead.
        ctx = AttemptContext.model_construct(seed=seed, attempt=key.attempt, split=self.split,
                                             timeout_s=self.timeout_s,
                                             deadline=start + self.timeout_s)
        # Private copies: nothing a harness writes can reach another attempt. Config
        # values are immutable scalars, so a new dict is a deep copy; a task is
        # rebuilt from its JSON, which is several times faster than copy.deepcopy.
        return Prepared(key, seed, start, dict(self._config.values),
                        _fresh_task(key.task, self._task_json), ctx)

    def task_text(self, p: Prepared) -> str:
        return self._task_json.get(p.key.task.id) or p.key.task.model_dump_json()

    def finish(self, p: Prepared, stop: StopReason, error: str | None = None,
               output: RunOutput | None = None, score: Score | None = None) -> AttemptResult:
        """The attempt's result. One that ran past its timeout is a ``timeout`` whatever
        its harness returned or raised, and what it returned is dropped (see
        :meth:`_overran`)."""
        duration = (p.end if p.end is not None else time.monotonic()) - p.start
        if stop in ("completed", "error") and self._overran(p):
            stop, output, score = "timeout", None, None
            error = (f"no result within {self.timeout_s:g} s "
                     f"(the attempt overran: it ended after {duration:.2f} s)")
        # Masked here, once: metric names, signals and tool calls are shown from memory
        # (tables, the live view) as well as written.
        output = None if output is None else redact_model(output)
        score = None if score is None else redact_model(score)
        return AttemptResult.model_construct(
            task_id=p.key.task.id, attempt=p.key.attempt, seed=p.seed, stop_reason=stop,
            error=_clip(error), duration_s=duration, output=output, score=score,
            metrics=_attempt_metrics(output, duration), stdout=_printed(p))

    def judge(self, p: Prepared, raw: Any, exc: BaseException | None
              ) -> AttemptResult | Coroutine[Any, Any, AttemptResult]:
        """The result of a returned call; a coroutine of it when the scorer is async."""
        if exc is not None:
            stop: StopReason = "timeout" if isinstance(exc, AttemptTimeout) else "error"
            return self.finish(p, stop, f"{type(exc).__name__}: {exc}")
        try:
            output = RunOutput.coerce(raw)
        except ValueError as err:
            return self.finish(p, "error", str(err))
        return self.score(p, output)

    def judge_here(self, p: Prepared, raw: Any, exc: BaseException | None,
                   loop: asyncio.AbstractEventLoop) -> AttemptResult:
        judged = self.judge(p, raw, exc)
        if not isinstance(judged, AttemptResult):
            judged = asyncio.run_coroutine_threadsafe(judged, loop).result()
        return judged

    def score(self, p: Prepared, output: RunOutput
              ) -> AttemptResult | Coroutine[Any, Any, AttemptResult]:
        if self._overran(p):  # a timeout: the scorer (a paid judge, maybe) is not asked
            return self.finish(p, "completed", None, output)
        try:
            verdict = self.scorer.score(p.key.task, output)
        except Exception as err:  # a scorer failure leaves the attempt unscored, not failed
            return self._unscored(p, output, err)
        if inspect.isawaitable(verdict):
            return self._await_verdict(p, output, verdict)
        return self._scored(p, output, verdict)

    async def _await_verdict(self, p: Prepared, output: RunOutput, verdict: Any
                             ) -> AttemptResult:
        try:
            verdict = await verdict
        except asyncio.CancelledError:
            raise
        except Exception as err:
            return self._unscored(p, output, err)
        return self._scored(p, output, verdict)

    def _overran(self, p: Prepared) -> bool:
        """The harness call took longer than the timeout, on the clock of its duration.

        An executor's watch can miss the deadline: a sync call that holds the GIL keeps
        the local monitor from running until it returns, and a worker's result can come
        back in the slack the parent allows. The measure is the call's own (``end``, set
        by the executor that ran it), never a wait for a worker before it started."""
        return p.end is not None and p.end - p.start > self.timeout_s

    def _scored(self, p: Prepared, output: RunOutput, verdict: Any) -> AttemptResult:
        if not isinstance(verdict, Score):
            return self._unscored(p, output, TypeError(
                f"scorer returned {type(verdict).__name__}, not a Score"))
        return self.finish(p, "completed", None, output, verdict)

    def _unscored(self, p: Prepared, output: RunOutput, err: BaseException) -> AttemptResult:
        return self.finish(p, "completed", f"scorer failed: {type(err).__name__}: {err}",
                           output)


def _fresh_task(task: Task, cache: dict[str, str]) -> Task:
    text = cache.get(task.id)
    if text is None:
        try:
            text = cache[task.id] = task.model_dump_json()
        except PydanticSerializationError:
            return task.model_copy(deep=True)
    return Task.model_validate_json(text)


def _attempt_metrics(output: RunOutput | None, duration: float) -> dict[str, float]:
    metrics = {"latency": duration}
    if output is None:
        return metrics
    if output.cost is not None:
        metrics["cost"] = output.cost
    metrics["input_tokens"] = float(output.usage.input_tokens)
    metrics["output_tokens"] = float(output.usage.output_tokens)
    metrics["tool_calls"] = float(len(output.tool_calls))
    # The harness's own metrics come first so that forge's measurement of latency,
    # which the gates compare across configs, cannot be overwritten by a report.
    return {**output.metrics, **metrics}


def _printed(p: Prepared) -> str | None:
    """What the attempt printed, redacted (the cut to its bound came first: the mark it
    leaves is one :func:`redact` looks behind for a piece of a secret)."""
    text = p.printed.text()
    return redact(text) if text else None


def _clip(text: str | None) -> str | None:
    if text is None:
        return None
    text = redact(text)  # before the clip, which could cut a secret in two
    if len(text) <= _MAX_ERROR_CHARS:
        return text
    return text[:_MAX_ERROR_CHARS] + f"... [{len(text) - _MAX_ERROR_CHARS} more chars]"
