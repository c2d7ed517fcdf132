"""The end of a search: the start config against the final one, and the test split.

When a search stops, :func:`finish` reports the start config against the final
incumbent on the dev and val tasks both ran (nothing more is run for it), then opens
the test split, once, after every decision is made: both configs on every test task,
:data:`~forge.search.options.TEST_K` attempts each (never fewer than k), and every
tolerance checked from the start to the final config (what ``forge promote`` reads).
:func:`stop_at_start` ends a search whose start config scored nothing, test unopened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from forge.bench.loader import Bench
from forge.config.registry import Config
from forge.gates.checks import tolerance_check, unscored_check
from forge.journal.records import (
    AnyRecord,
    AuxCheck,
    EndRecord,
    FirstFailure,
    PromotedMove,
    SplitDelta,
    StopReason,
    TestRecord,
    UnscoredCounts,
)
from forge.results.failures import unscored_counts
from forge.results.model import TaskAttempts
from forge.search.attempt_cache import AttemptCache, Fetch
from forge.search.outcome import SearchOutcome
from forge.stats.paired import PairedTest, paired_test
from forge.stats.pairs import score_deltas

__all__ = ["Ending", "two_sided"]


@dataclass
class Ending:
    """What the end of one search reads and writes."""

    bench: Bench
    rollouts: AttemptCache
    run_id: str
    start: Config
    k: int
    #: Attempts a test task; 0: the test split is left alone.
    test_attempts: int
    alpha: float
    emit: Callable[[AnyRecord], AnyRecord]
    records: list[AnyRecord]

    def finish(self, stop_reason: StopReason, steps: int, promotions: list[PromotedMove],
               final: Config) -> Fetch[SearchOutcome]:
        """The test split (unless left alone) and the end record, journaled."""
        # dev and val: the tasks both configs ran (the search runs no more to report).
        dev = _block(self._known(self.start, "dev"), self._known(final, "dev"))
        val = (_block(self._known(self.start, "val"), self._known(final, "val"))
               if "val" in self.bench.splits else SplitDelta())
        test = SplitDelta()
        if self.test_attempts and "test" in self.bench.splits:
            test = yield from self._test(final)
        end = self.emit(EndRecord(
            run_id=self.run_id, stop_reason=stop_reason, steps=steps, promotions=promotions,
            start_config=self.start.values, final_config=final.values,
            rollouts_used=self.rollouts.used, dev=dev, val=val, test=test,
            final_fingerprint=final.fingerprint, cost_total=self.rollouts.cost))
        assert isinstance(end, EndRecord)
        return self._outcome(end, unscored=self._unscored(final))

    def _test(self, final: Config) -> Fetch[SplitDelta]:
        """The test split, opened here, once, after every decision is made."""
        tasks = self.bench.tasks("test")
        k = range(self.test_attempts)
        start_test = yield from self.rollouts.fetch(self.start, "test", "test", tasks, k)
        final_test = yield from self.rollouts.fetch(final, "test", "test", tasks, k)
        test = _block(start_test, final_test)
        t = paired_test(list(score_deltas(start_test, final_test).values()), alpha=0.025)
        # Every tolerance from the start to the final config, as the gates promised
        # it: the reviewer's check, and what `forge promote` reads.
        aux = [tolerance_check(name, spec, start_test, final_test, alpha=self.alpha)
               for name, spec in self.bench.spec.metrics.items()]
        # The failure share too, checked like a tolerance: a final config that fails
        # where the start answered is what the means alone cannot show.
        aux.append(unscored_check(start_test, final_test, alpha=self.alpha,
                                  allowed=self.bench.spec.gates.unscored.max_increase))
        self.emit(TestRecord.model_validate(
            {**test.as_json(), "confidence": 0.95, "n_tasks": t.n, "k": len(k),
             "p_value_two_sided": two_sided(t),
             "aux": [AuxCheck.of_result(g) for g in aux],
             # Each config's failures, tasks never scored named: n_tasks counts neither.
             "unscored_start": unscored_counts(start_test, [t.id for t in tasks]),
             "unscored_final": unscored_counts(final_test, [t.id for t in tasks])}))
        return test

    def stop_at_start(self, failed: FirstFailure) -> SearchOutcome:
        """Stop before the first step, test split unopened: nothing was compared."""
        end = self.emit(EndRecord(
            run_id=self.run_id, stop_reason="start_failed", steps=0, promotions=[],
            start_config=self.start.values, final_config=self.start.values,
            rollouts_used=self.rollouts.used, dev=SplitDelta(), val=SplitDelta(),
            test=SplitDelta(), final_fingerprint=self.start.fingerprint,
            cost_total=self.rollouts.cost))
        assert isinstance(end, EndRecord)
        return self._outcome(end, failed, unscored=self._unscored(self.start))

    def _outcome(self, end: EndRecord, failed: FirstFailure | None = None, *,
                 unscored: dict[str, dict[str, UnscoredCounts]]) -> SearchOutcome:
        return SearchOutcome(end, [r.journal_json() for r in self.records],
                             failures=self.rollouts.failures, first_failure=failed,
                             unscored=unscored)

    def _unscored(self, final: Config) -> dict[str, dict[str, UnscoredCounts]]:
        """Per split compared, the start's and the final config's unscored attempts: on
        dev and val, over the tasks both ran (as the split's means), on the seeds every
        config shares; on test, over every task, as the test record has them."""
        out: dict[str, dict[str, UnscoredCounts]] = {}
        for split, k in (("dev", self.k), ("val", self.k), ("test", self.test_attempts)):
            if split not in self.bench.splits or not k:
                continue
            tasks = self.bench.tasks(split)
            start, last = (self.rollouts.peek(c, split, tasks, range(k))
                           for c in (self.start, final))
            if not (start and last):  # a split not compared (val unopened, no test)
                continue
            # Test ran every task: one that left no attempt is named too, as on its line.
            ids = [t.id for t in tasks] if split == "test" else [t for t in start if t in last]
            out[split] = {"start": unscored_counts(_only(start, ids), ids),
                          "final": unscored_counts(_only(last, ids), ids)}
        return out

    def _known(self, config: Config, split: str) -> TaskAttempts:
        """Every attempt of ``config`` on ``split``'s base block the search ran."""
        return self.rollouts.peek(config, split, self.bench.tasks(split), range(self.k))


def _only(attempts: TaskAttempts, tasks: list[str]) -> TaskAttempts:
    return TaskAttempts({t: attempts[t] for t in tasks if t in attempts})


def _block(before: TaskAttempts, after: TaskAttempts) -> SplitDelta:
    """Start against final on the tasks both ran (95% two-sided bounds)."""
    shared = TaskAttempts({t: v for t, v in before.items() if t in after})
    t = paired_test(list(score_deltas(shared, after).values()), alpha=0.025)
    return SplitDelta(start=shared.mean_score,
                      final=TaskAttempts({k: v for k, v in after.items()
                                          if k in shared}).mean_score,
                      delta=t.effect if t.n else None,
                      ci_low=t.ci_low if t.n > 1 else None,
                      ci_high=t.ci_high if t.n > 1 else None)


def two_sided(t: PairedTest) -> float:
    """Two-sided p-value of "no change" from a one-sided test against 0."""
    if t.n < 2:
        return 1.0
    if t.sd == 0:
        return 1.0 if t.effect == 0 else 0.0
    return min(1.0, 2 * min(t.p_value, 1 - t.p_value))
