"""The search loop: one move at a time, selected on few tasks, proven on the rest.

Each step the proposer offers candidate moves from the incumbent: one setting each,
a step (``±step``, the next choice) or a jump to any other legal value. Candidates
are *screened* in turn (:mod:`forge.search.screening`: a race over the dev chunks, attempt
block 0); the one that passed with the largest screening effect is *confirmed*
(:mod:`forge.search.confirm`): every gate a group-sequential test on data its selection
never read, stopped as soon as the evidence decides (with little budget left, the
first to pass, as ParamILS's first improvement; one the budget left cannot prove
waits while other moves are screened, :mod:`forge.search.deferral`). A promotion ends the
step; a refusal lets it go on. The search stops on ``max_steps``, ``patience``, a
budget, or when no untried move is left; then the start config and the final
incumbent are each evaluated once on the test split.

The loop is here; a step's proposals are :mod:`forge.search.proposals`, its screening and
confirming :mod:`forge.search.candidates` (a step runner the search composes, built once
a run with its collaborators and the :class:`~forge.search.candidates.RunState` both
share), the end :mod:`forge.search.ending`. The search
runs no attempt itself: it yields a :class:`~forge.search.attempt_cache.RolloutRequest`
for the attempts its store lacks and takes their results (:meth:`Search.ask`,
:meth:`Search.tell`), so whoever drives it runs them where it likes; :meth:`Search.run`
runs them on a session of its own.

Why the guarantee holds: the j-th confirmation since the last promotion is tested at
``alpha_j = alpha * 6 / (pi^2 j^2)`` (summing to ``alpha``), spread over its looks by
:mod:`forge.stats.sequential`. Its data are the candidate's attempts on tasks (or attempt
blocks) its selection did not read, against the incumbent's on the same seeds; under
"no move has an effect" the candidate's attempts are independent of everything that
chose it, so each confirmation passes falsely with probability at most ``alpha_j``,
whatever was selected before, and by the union bound a search promotes anything on a
no-effect bench with probability at most ``alpha``. Screening, the proposers and the
memory (:mod:`forge.search.memory`) and deferral only choose *which* candidate is confirmed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from forge.bench.loader import Bench
from forge.config.moves import Move
from forge.config.registry import Config
from forge.evaluation.session import Session
from forge.journal.records import (
    AnyRecord,
    FirstFailure,
    PromotedMove,
    ProposalInvalidRecord,
    StartRecord,
    StopReason,
    StopRecord,
)
from forge.journal.run_store import RunStore
from forge.proposers import Proposer
from forge.proposers.base import EvaluatedConfig
from forge.results.failures import failure_stop
from forge.results.model import AttemptResult, TaskAttempts
from forge.search.attempt_cache import AttemptCache, Fetch, Permit, RolloutRequest
from forge.search.budget import Budget
from forge.search.candidates import Promoted, RunState, StepRunner
from forge.search.deferral import Deferrals
from forge.search.ending import Ending
from forge.search.memory import MoveMemory
from forge.search.options import CHUNKS, PRECISION_ROUNDS, SCREEN_ALPHA, SearchOptions
from forge.search.outcome import STOP_TEXT, SearchOutcome
from forge.search.places import Places, TriedKey
from forge.search.progress import RunExit, SearchProgress
from forge.search.proposals import StepProposals
from forge.search.screening import Screening
from forge.stats.paired import Interval, mean_interval
from forge.stats.power import estimate_power

__all__ = ["START_CHECK_ATTEMPTS", "Search", "open_session"]

log = logging.getLogger(__name__)

_R = TypeVar("_R", bound=AnyRecord)

#: A search stops on ``start_failed`` only once this many of the start's dev attempts
#: have failed with none scored (or its dev split has no more): a harness failing on 40%
#: of tasks fails a whole first chunk of two tasks at k=1 in 16% of searches, but eight
#: attempts in a row in under 1%.
START_CHECK_ATTEMPTS = 8


@dataclass
class _Path:
    """Where a search stands between steps: its incumbent and what led there."""

    incumbent: Config
    history: list[EvaluatedConfig]
    tried: set[TriedKey] = field(default_factory=set)
    promotions: list[PromotedMove] = field(default_factory=list)
    step: int = 0
    since_promotion: int = 0


class Search:
    """One search run, deterministic given the bench, options and seed.

    An ask/tell object: :meth:`begin` it, then :meth:`ask` for the next
    :class:`~forge.search.attempt_cache.RolloutRequest` and :meth:`tell` it the results,
    until :meth:`ask` returns None; :attr:`outcome` is then set. :meth:`run` does all of
    that on a session of its own.
    """

    def __init__(self, bench: Bench, start: Config, proposer: Proposer, options: SearchOptions,
                 *, run_id: str, store: RunStore, first_moves: list[Move] | None = None,
                 progress: SearchProgress | None = None) -> None:
        self.bench = bench
        self.start = start
        self.proposer = proposer
        self.options = options
        self.run_id = run_id
        #: Where the run's records and attempts go (opened by whoever chose the folder);
        #: its subscribers (the dashboard study, a live view) are told each record.
        self.store = store
        self.first_moves = list(first_moves or [])
        self.memory = MoveMemory()
        # Where each move stands among those tried: its place and its tried-key.
        self.places = Places(bench.registry)
        self.deferrals = Deferrals()  # the incumbent's passing candidates held back
        self.state = self._run_state()
        self.proposals = StepProposals(
            bench=bench, proposer=proposer, memory=self.memory, places=self.places,
            first_moves=self.first_moves, candidates_per_step=options.candidates_per_step,
            standing=lambda metric: self.state.standing.get(metric, 0.0), refuse=self._refuse)
        # What a live view shows between two records; kept whether or not one watches.
        self.progress = progress if progress is not None else SearchProgress()
        self.progress.budget_rollouts = options.budget.rollouts
        self.progress.test_rollouts = (2 * options.test_attempts * len(bench.tasks("test"))
                                       if options.run_test and "test" in bench.splits else 0)
        #: The finished search (set once :meth:`ask` has returned None).
        self.outcome: SearchOutcome | None = None
        self._fetch: Fetch[SearchOutcome] | None = None
        self._asked: RolloutRequest | None = None

    def _run_state(self) -> RunState:
        """The run's state, built once: fixed random task orders (the chunks of
        screening and of each look) and the level; nothing decided yet."""
        dev = list(self.bench.tasks("dev"))
        self._rng("dev-order").shuffle(dev)
        val = list(self.bench.splits.get("val", []))
        self._rng("val-order").shuffle(val)
        return RunState(dev_order=dev, val_order=val, chunk=max(2, math.ceil(len(dev) / CHUNKS)),
                        val_chunk=max(2, math.ceil(len(val) / CHUNKS)) if val else 0,
                        alpha=self.bench.spec.gates.alpha)

    # -- ask/tell -----------------------------------------------------------------------

    def begin(self) -> None:
        """Set the search up: what :meth:`ask` and :meth:`tell` drive. The search runs
        no attempt itself; whoever drives it runs each request (:meth:`RolloutRequest.run
        <forge.search.attempt_cache.RolloutRequest.run>` on a session, or anywhere)."""
        self.rollouts = AttemptCache(self.bench, self.store.attempts)
        #: The rollout budget holds to within one chunk of two configs' attempts.
        self.budget = Budget(self.options.budget, self.rollouts,
                             slack=2 * self.options.k * self.state.chunk)
        self.screening = Screening(
            bench=self.bench, rollouts=self.rollouts, start=self.start,
            memory=self.memory, order=self.state.dev_order, chunk=self.state.chunk,
            k=self.options.k,
            alpha=SCREEN_ALPHA, emit=self._emit,
            standing=lambda metric: self.state.standing.get(metric, 0.0))
        self.ending = Ending(
            bench=self.bench, rollouts=self.rollouts, run_id=self.run_id, start=self.start,
            k=self.options.k,
            test_attempts=self.options.test_attempts if self.options.run_test else 0,
            alpha=self.state.alpha, emit=self._emit, records=self.records)
        self.steps = StepRunner(
            bench=self.bench, start=self.start, proposer=self.proposer, options=self.options,
            state=self.state, rollouts=self.rollouts, budget=self.budget,
            screening=self.screening, deferrals=self.deferrals, memory=self.memory,
            places=self.places, progress=self.progress, emit=self._emit)
        self._fetch = self._run()

    def ask(self) -> RolloutRequest | None:
        """The attempts the search needs run next; None once it has finished (then
        :attr:`outcome` is set). Asked again before :meth:`tell`, the same request."""
        if self._asked is not None or self.outcome is not None:
            return self._asked
        if self._fetch is None:
            raise RuntimeError("Search.ask before Search.begin()")
        return self._advance(lambda fetch: next(fetch))

    def tell(self, request: RolloutRequest, results: Sequence[AttemptResult]) -> None:
        """The results of ``request``, the one :meth:`ask` returned: one a key, each
        answering its task and attempt index."""
        if self._fetch is None or request is not self._asked:
            raise ValueError("Search.tell: not the request Search.ask returned last")
        wanted = sorted((k.task.id, k.attempt) for k in request.keys)
        got = sorted((r.task_id, r.attempt) for r in results)
        if got != wanted:
            raise ValueError(f"Search.tell: {len(results)} results for {len(wanted)} "
                             f"attempts of {request.config.fingerprint[:12]} on "
                             f"{request.split}, not one for each (task, attempt) asked")
        self._asked = None
        self._advance(lambda fetch: fetch.send(results))

    def _advance(self, step: Callable[[Fetch[SearchOutcome]], RolloutRequest | Permit]
                 ) -> RolloutRequest | None:
        """The search run on to its next request (or its end), each permit a part asks
        answered by the budget: the one place it is asked."""
        fetch = self._fetch
        assert fetch is not None
        try:
            asked = step(fetch)
            while isinstance(asked, Permit):
                asked = fetch.send(self.budget.grants(asked))
            self._asked = asked
        except StopIteration as done:
            self.outcome = done.value
        return self._asked

    def run(self, session: Session | None = None) -> SearchOutcome:
        """The whole search, each request run as it comes: on ``session`` (the caller
        opened it and closes it), or on a session of its own (:func:`open_session`)."""
        with contextlib.ExitStack() as stack:
            if session is None:
                session = stack.enter_context(open_session(self.bench, self.options))
            self.begin()
            self.progress.attach(self.rollouts, session)
            self.progress.begin()
            ending: RunExit = "failed"
            try:
                while (request := self.ask()) is not None:
                    self.tell(request, request.run(session))
                ending = "finished"
                assert self.outcome is not None
                return self.outcome
            except KeyboardInterrupt:  # a signal (forge._util.interrupt): the view says so
                ending = "interrupted"
                raise
            finally:
                self.progress.end(ending)

    # -- plumbing -----------------------------------------------------------------------

    @property
    def records(self) -> list[AnyRecord]:
        """Every record the run has written (or replayed) so far, in journal order."""
        return self.store.records

    def _emit(self, record: _R) -> _R:
        return self.store.write(record)

    def _rng(self, *parts: object) -> random.Random:
        text = "\x1f".join(str(p) for p in (self.options.seed, *parts))
        return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))

    def _refuse(self, step: int, incumbent: Config, item: dict[str, object]) -> None:
        self._emit(ProposalInvalidRecord.model_validate(
            {"proposer": self.proposer.name, **item, "step": step,
             "incumbent": incumbent.fingerprint}))

    def _first_chunk(self, config: Config) -> Fetch[TaskAttempts]:
        """``config``'s block-0 attempts on the first dev chunk: every config screened
        runs it, so its mean compares across configs (what the proposers learn from)."""
        return self.rollouts.fetch(config, "dev", "dev", self.state.dev_order[:self.state.chunk],
                                   range(self.options.k))

    # -- the loop -----------------------------------------------------------------------

    def _run(self) -> Fetch[SearchOutcome]:
        incumbent = self.start
        # Only the first chunk now: the rest of the start's evaluation is run when a
        # screening or a confirmation first needs it, chunk by chunk.
        first = yield from self._first_chunk(incumbent)
        start_mean = first.mean_score
        # Nothing scored gives NaN, which a model-based proposer skips, not a false 0.
        path = _Path(incumbent, [EvaluatedConfig(
            incumbent.values, incumbent.fingerprint,
            math.nan if start_mean is None else start_mean, len(first))])
        self.proposer.observe(incumbent, path.history[0].dev_mean)
        self._emit(StartRecord(config=incumbent.values, fingerprint=incumbent.fingerprint,
                               dev_mean=start_mean, val_mean=None, dev_tasks=len(first),
                               rollouts_total=self.rollouts.used,
                               dev_split_tasks=len(self.state.dev_order), power=self._power(first)))
        failed = self._start_failure((yield from self._start_evidence(first)))
        if failed is not None:
            return self._stop_at_start(failed)
        while True:
            stop_reason, untried = self._stop_or_untried(path)
            if stop_reason:
                break
            yield from self._one_step(path, untried)
        self.steps.drop_deferred(f"the search stopped first ({stop_reason})")
        self.progress.stop_reason = stop_reason
        self._emit(StopRecord(reason=stop_reason, text=STOP_TEXT[stop_reason], step=path.step,
                              rollouts_total=self.rollouts.used, cost_total=self.rollouts.cost))
        self.progress.testing()
        return (yield from self.ending.finish(stop_reason, path.step, path.promotions,
                                              path.incumbent))

    def _power(self, first: TaskAttempts) -> dict[str, float | int | None]:
        """What the bench can detect (forge.stats.power): over the dev and val tasks a
        confirmation pools, its spread estimated from the start's first chunk."""
        scores = [[a.score.value for a in items if a.scored and a.score is not None]
                  for items in first.values()]
        return estimate_power(scores, n_tasks=len(self.state.dev_order) + len(self.state.val_order),
                              k=self.options.k, alpha=self.state.alpha).model_dump(mode="json")

    def _stop_or_untried(self, path: _Path) -> tuple[StopReason | None, list[Move]]:
        """Why the search stops before its next step, or that step's untried moves (a
        precision round begun where the incumbent has none left)."""
        opts = self.options
        stop_reason: StopReason | None
        if path.step >= opts.max_steps:
            stop_reason = "max_steps"
        elif path.since_promotion >= opts.patience:
            stop_reason = "patience"
        else:
            stop_reason = self.budget.stop_reason()
        untried = self._untried(path, path.step + 1)
        while not stop_reason and not untried and self.state.round < PRECISION_ROUNDS:
            self.state.round += 1
            untried = self._untried(path, path.step + 1)
        if not stop_reason and not untried:
            stop_reason = "local_optimum"
        return stop_reason, untried

    def _untried(self, path: _Path, step: int) -> list[Move]:
        return self.proposals.untried(path.incumbent, path.tried, step, self.state.round)

    def _one_step(self, path: _Path, untried: list[Move]) -> Fetch[None]:
        """One step from ``path``'s incumbent: its proposals screened, the passing ones
        confirmed (the deferred too where no step can follow), ``path`` moved on."""
        opts = self.options
        path.step += 1
        step, incumbent = path.step, path.incumbent
        first = yield from self._first_chunk(incumbent)
        proposals = self.proposals.step(
            step, incumbent, untried, path.history, path.tried, round_=self.state.round,
            attempts=self.steps.attempts,
            dev_attempts=[a for items in first.values() for a in items],
            rng=self._rng("propose", step), fallback=self._rng("fallback", step))
        self.progress.begin_step(step, [p.move for p in proposals],
                                 self._incumbent_interval(incumbent))
        promoted: Promoted | None = yield from self.steps.run_step(step, incumbent, proposals,
                                                          path.tried, path.history)
        # Nothing else left to screen here, or no step after this one: what waited goes on.
        last_here = promoted is None and (
            not self._untried(path, step + 1) or step >= opts.max_steps
            or path.since_promotion + 1 >= opts.patience)
        if last_here and self.deferrals and not self.budget.spent:
            promoted = yield from self.steps.confirm_deferred(step, incumbent, path.tried,
                                                         path.history)
        if last_here and promoted is None and self.steps.paused and not self.budget.spent:
            promoted = yield from self.steps.resume_paused(step, incumbent, path.tried,
                                                           path.history)
        if promoted is None:
            path.since_promotion += 1
            return
        self.steps.drop_deferred("this incumbent promoted another candidate first")
        self.steps.paused.clear()  # raced against the old incumbent: journaled, done
        move, path.incumbent = promoted
        path.promotions.append(PromotedMove.of(step, move))
        path.since_promotion = 0
        self.state.confirmations = 0
        self.state.round = 0

    def _start_evidence(self, first: TaskAttempts) -> Fetch[TaskAttempts]:
        """The start's first chunk, and when none of its attempts was scored, its next dev
        chunks too until one is scored or :data:`START_CHECK_ATTEMPTS` have failed: a
        chunk of two tasks at k=1 failing whole is what a harness failing on some tasks
        does often, and must not stop the search. The chunks run here are the ones the
        first screening runs for the start anyway (same seeds, stored once)."""
        seen = dict(first)  # task id -> attempts
        position = self.state.chunk
        while (not any(a.scored for items in seen.values() for a in items)
               and sum(len(items) for items in seen.values()) < START_CHECK_ATTEMPTS
               and position < len(self.state.dev_order)):
            seen.update((yield from self.rollouts.fetch(
                self.start, "dev", "dev",
                self.state.dev_order[position:position + self.state.chunk],
                range(self.options.k))))
            position += self.state.chunk
        return TaskAttempts(seen)

    def _start_failure(self, first: TaskAttempts) -> FirstFailure | None:
        """The first of the start's first-chunk attempts when none of them was scored:
        the harness (or the scorer) fails every attempt, and no candidate can be told
        apart from the start. None when any was scored."""
        attempts = [a for items in first.values() for a in items]
        if not attempts or any(a.scored for a in attempts):
            return None
        a = attempts[0]
        return FirstFailure(task_id=a.task_id, attempt=a.attempt, stop=failure_stop(a),
                            error=a.error, unscored=len(attempts))

    def _stop_at_start(self, failed: FirstFailure) -> SearchOutcome:
        """Stop before the first step, test split unopened: nothing was compared."""
        reason: StopReason = "start_failed"
        self.progress.stop_reason = reason
        self._emit(StopRecord(reason=reason, text=STOP_TEXT[reason], step=0,
                              rollouts_total=self.rollouts.used, cost_total=self.rollouts.cost,
                              failure=failed))
        return self.ending.stop_at_start(failed)

    def _incumbent_interval(self, incumbent: Config) -> Interval | None:
        """The incumbent's mean over the dev tasks it has run on the screening seeds,
        with its 95% interval (for the live view; nothing is run for it)."""
        known = self.rollouts.peek(incumbent, "dev", self.state.dev_order, range(self.options.k))
        means = []
        for items in known.values():
            # Unscored attempts are left out, never counted as 0, as everywhere in forge.
            values = [a.score.value for a in items if a.scored and a.score is not None]
            if values:
                means.append(math.fsum(values) / len(values))
        return mean_interval(means, 0.95)


def open_session(bench: Bench, options: SearchOptions) -> Session:
    """The session a search with ``options`` runs on: its executor opened (a Ray
    cluster joined, within its bound), its harness built."""
    return Session(bench, options.executor, seed=options.seed,
                   concurrency=options.concurrency, timeout_s=options.timeout_s)
