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

import hashlib
import logging
import math
import random
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from forge.bench import Bench
from forge.dashboard import DashboardStudy
from forge.failures import failure_stop
from forge.journal import JournalWriter
from forge.journal.records import (
    AnyRecord,
    AuxCheck,
    AuxDetails,
    CandidateRecord,
    ConfirmBlock,
    DevBlock,
    EndRecord,
    FirstFailure,
    Gate,
    PromotedMove,
    ProposalInvalidRecord,
    SplitDelta,
    StartRecord,
    StopReason,
    StopRecord,
    TestRecord,
    ValBlock,
)
from forge.journal.store import AttemptStore, store_file
from forge.moves import Move, apply_move, candidate_moves, expansion, move_kind
from forge.proposers import Proposal, Proposer
from forge.proposers._base import EvaluatedConfig, SearchView
from forge.proposers._vet import offered
from forge.registry import Config, EnumSetting
from forge.results import TaskAttempts
from forge.search.attempt_cache import Rollouts
from forge.search.budget import Budget
from forge.search.confirm import Confirmation, ConfirmOutcome
from forge.search.deferral import Deferrals, Held, confirmation_cost, unrun_share
from forge.search.memory import MoveMemory, MoveNote
from forge.search.options import SearchOptions
from forge.search.outcome import STOP_TEXT, SearchOutcome
from forge.search.places import Places, TriedKey
from forge.search.progress import Ending, SearchProgress
from forge.search.screening import Screen, Screening
from forge.session import Session
from forge.stats.gates import score_deltas, tolerance_check
from forge.stats.paired import Interval, PairedTest, mean_interval, paired_test, spent_alpha

__all__ = ["Search"]

log = logging.getLogger(__name__)

_R = TypeVar("_R", bound=AnyRecord)

#: A search stops on ``start_failed`` only once this many of the start's dev attempts
#: have failed with none scored (or its dev split has no more): a harness failing on 40%
#: of tasks fails a whole first chunk of two tasks at k=1 in 16% of searches, but eight
#: attempts in a row in under 1%.
START_CHECK_ATTEMPTS = 8


#: The fields of every candidate record of one proposal; called with the rest.
_CandidateHead = partial[CandidateRecord]


class Search:
    """One search run. ``run()`` is deterministic given the bench, options and seed."""

    def __init__(self, bench: Bench, start: Config, proposer: Proposer, options: SearchOptions,
                 *, run_id: str, folder: Path, first_moves: list[Move] | None = None,
                 on_record: Callable[[AnyRecord], None] | None = None,
                 progress: SearchProgress | None = None) -> None:
        self.bench = bench
        self.start = start
        self.proposer = proposer
        self.options = options
        self.run_id = run_id
        self.folder = folder
        self.first_moves = list(first_moves or [])
        self.on_record = on_record
        self.journal = JournalWriter(folder)
        #: The Optuna study people open (optuna-dashboard): written from the records.
        self.dashboard = DashboardStudy(folder, bench.registry)
        self.records: list[AnyRecord] = []
        self.memory = MoveMemory()
        #: The incumbent's regression of each auxiliary metric against the start config,
        #: as its promotion measured it on val (the start: none).
        self.standing: dict[str, float] = {}
        self._t0 = time.monotonic()
        self._confirmations = 0  # since the last promotion: indexes the spending sequence
        #: The incumbent's precision round: 0, then r while its close moves are screened
        #: on 2^r·K attempts a task (reset by a promotion).
        self.round = 0
        # Where each move stands among those tried: its place and its tried-key.
        self.places = Places(bench.registry, jumps=options.jumps,
                             near_values=options.near_values)
        self._out_of_budget = False  # a decision was cut short: it did not fit the budget
        self.deferrals = Deferrals()  # the incumbent's passing candidates held back
        self.alpha = bench.spec.gates.alpha
        # Fixed random task orders: the chunks of screening and of each look.
        dev = list(bench.tasks("dev"))
        self._rng("dev-order").shuffle(dev)
        self.dev_order = dev
        self.chunk = max(2, math.ceil(len(dev) / max(1, options.chunks)))
        val = list(bench.splits.get("val", []))
        self._rng("val-order").shuffle(val)
        self.val_order = val
        self.val_chunk = max(2, math.ceil(len(val) / max(1, options.chunks))) if val else 0
        # What a live view shows between two records; kept whether or not one watches.
        self.progress = progress if progress is not None else SearchProgress()
        self.progress.budget_rollouts = options.budget.rollouts
        self.progress.test_rollouts = (2 * options.test_attempts * len(bench.tasks("test"))
                                       if options.run_test and "test" in bench.splits else 0)

    # -- plumbing -----------------------------------------------------------------------

    def _emit(self, record: _R) -> _R:
        stored = self.journal.write(record)
        self.records.append(stored)
        self.dashboard.add(stored, len(self.records))
        if self.on_record is not None:
            self.on_record(stored)
        return stored

    def _rng(self, *parts: object) -> random.Random:
        text = "\x1f".join(str(p) for p in (self.options.seed, *parts))
        return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))

    def _budget_stop(self) -> StopReason | None:
        b = self.options.budget
        if self._out_of_budget or (b.rollouts is not None and self.rollouts.used >= b.rollouts):
            return "budget_rollouts"
        if b.cost is not None and self.rollouts.cost >= b.cost:
            return "budget_cost"
        if b.wall_time_s is not None and time.monotonic() - self._t0 >= b.wall_time_s:
            return "budget_wall_time"
        return None

    def _budget_left(self) -> int | None:
        b = self.options.budget
        return None if b.rollouts is None else max(0, b.rollouts - self.rollouts.used)

    @property
    def slack(self) -> int:
        """The rollout budget holds to within one chunk of two configs' attempts."""
        return 2 * self.options.k * self.chunk

    def _totals(self) -> dict[str, float]:
        return {"rollouts_total": self.rollouts.used, "cost_total": self.rollouts.cost,
                "elapsed_s": time.monotonic() - self._t0}

    def _first_chunk(self, config: Config) -> TaskAttempts:
        """``config``'s block-0 attempts on the first dev chunk: every config screened
        runs it, so its mean compares across configs (what the proposers learn from)."""
        return self.rollouts.get(config, "dev", "dev", self.dev_order[:self.chunk],
                                 range(self.options.k))

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> SearchOutcome:
        # A damaged line mid-file raises JournalError: not something to run over.
        store = AttemptStore(store_file(self.folder))
        with Session(self.bench, self.options.executor, seed=self.options.seed,
                     concurrency=self.options.concurrency,
                     timeout_s=self.options.timeout_s) as session:
            self.rollouts = Rollouts(self.bench, session, store)
            self.screening = Screening(
                bench=self.bench, rollouts=self.rollouts, start=self.start,
                memory=self.memory, order=self.dev_order, chunk=self.chunk, k=self.options.k,
                alpha=self.options.screen_alpha, budget_left=self._budget_left,
                slack=self.slack, emit=self._emit, totals=self._totals,
                standing=lambda metric: self.standing.get(metric, 0.0))
            self.progress.attach(self.rollouts)
            self.progress.begin()
            ending: Ending = "failed"
            try:
                outcome = self._run()
                ending = "finished"
                return outcome
            except KeyboardInterrupt:  # a signal (forge.interrupt): the view says so
                ending = "interrupted"
                raise
            finally:
                self.progress.end(ending)

    def _run(self) -> SearchOutcome:
        opts = self.options
        incumbent = self.start
        # Only the first chunk now: the rest of the start's evaluation is run when a
        # screening or a confirmation first needs it, chunk by chunk.
        first = self._first_chunk(incumbent)
        start_mean = first.mean_score
        # Nothing scored gives NaN, which a model-based proposer skips, not a false 0.
        history = [EvaluatedConfig(incumbent.values, incumbent.fingerprint,
                                   math.nan if start_mean is None else start_mean, len(first))]
        self.proposer.observe(incumbent, history[0].dev_mean)
        self._emit(StartRecord(config=incumbent.values, fingerprint=incumbent.fingerprint,
                               dev_mean=start_mean, val_mean=None, dev_tasks=len(first),
                               rollouts_total=self.rollouts.used))
        failed = self._start_failure(self._start_evidence(first)) if opts.start_check else None
        if failed is not None:
            return self._stop_at_start(failed)
        tried: set[TriedKey] = set()
        promotions: list[PromotedMove] = []
        step = 0
        since_promotion = 0
        stop_reason: StopReason | None = None
        while True:
            if step >= opts.max_steps:
                stop_reason = "max_steps"
            elif since_promotion >= opts.patience:
                stop_reason = "patience"
            else:
                stop_reason = self._budget_stop()
            untried = self._untried(incumbent, tried, step + 1)
            while not stop_reason and not untried and self.round < opts.precision_rounds:
                self.round += 1
                untried = self._untried(incumbent, tried, step + 1)
            if not stop_reason and not untried:
                stop_reason = "local_optimum"
            if stop_reason:
                break
            step += 1
            proposals = self._proposals(step, incumbent, untried, history, tried)
            self.progress.begin_step(step, [p.move for p in proposals],
                                     self._incumbent_interval(incumbent))
            promoted = self._step(step, incumbent, proposals, tried, history)
            if promoted is None and self.deferrals and not self._out_of_budget and (
                    not self._untried(incumbent, tried, step + 1) or step >= opts.max_steps
                    or since_promotion + 1 >= opts.patience):
                # Nothing else left to screen here, or no step after this one.
                promoted = self._confirm_deferred(step, incumbent, tried, history)
            if promoted is not None:
                self._drop_deferred("this incumbent promoted another candidate first")
                move, incumbent = promoted
                promotions.append(PromotedMove.of(step, move))
                since_promotion = 0
                self._confirmations = 0
                self.round = 0
            else:
                since_promotion += 1
        self._drop_deferred(f"the search stopped first ({stop_reason})")
        self.progress.stop_reason = stop_reason
        self._emit(StopRecord(reason=stop_reason, text=STOP_TEXT[stop_reason], step=step,
                              rollouts_total=self.rollouts.used, cost_total=self.rollouts.cost))
        return self._finish(stop_reason, step, promotions, incumbent)

    def _start_evidence(self, first: TaskAttempts) -> TaskAttempts:
        """The start's first chunk, and when none of its attempts was scored, its next dev
        chunks too until one is scored or :data:`START_CHECK_ATTEMPTS` have failed: a
        chunk of two tasks at k=1 failing whole is what a harness failing on some tasks
        does often, and must not stop the search. The chunks run here are the ones the
        first screening runs for the start anyway (same seeds, stored once)."""
        seen = dict(first)  # task id -> attempts
        position = self.chunk
        while (not any(a.scored for items in seen.values() for a in items)
               and sum(len(items) for items in seen.values()) < START_CHECK_ATTEMPTS
               and position < len(self.dev_order)):
            seen.update(self.rollouts.get(self.start, "dev", "dev",
                                          self.dev_order[position:position + self.chunk],
                                          range(self.options.k)))
            position += self.chunk
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
        end = self._emit(EndRecord(
            run_id=self.run_id, stop_reason=reason, steps=0, promotions=[],
            start_config=self.start.values, final_config=self.start.values,
            rollouts_used=self.rollouts.used, dev=SplitDelta(), val=SplitDelta(),
            test=SplitDelta(), final_fingerprint=self.start.fingerprint,
            cost_total=self.rollouts.cost))
        return SearchOutcome(end, [r.journal_json() for r in self.records],
                             failures=self.rollouts.failures, first_failure=failed)

    @property
    def attempts(self) -> int:
        """Attempts a task a screening of this precision round runs."""
        return self.options.k << self.round

    def _untried(self, incumbent: Config, tried: set[TriedKey], step: int) -> list[Move]:
        """The incumbent's untried candidate moves; those the memory found futile a
        short while ago go last. In a precision round: its close moves not yet screened
        in this round, the largest screening effect first."""
        registry = self.bench.registry
        fresh = [m for m in candidate_moves(registry, incumbent, jumps=self.options.jumps)
                 if self.places.key(incumbent, m, self.round) not in tried]
        if self.round:
            floor = self.bench.spec.gates.min_effect
            effects = {m: self.memory.close(m, incumbent.fingerprint, floor) for m in fresh}
            return sorted((m for m in fresh if effects[m] is not None),
                          key=lambda m: -(effects[m] or 0.0))
        cool = [m for m in fresh if self.memory.cooling(m, incumbent.fingerprint, step)]
        return [m for m in fresh if m not in cool] + cool

    def _proposals(self, step: int, incumbent: Config, untried: list[Move],
                   history: list[EvaluatedConfig], tried: set[TriedKey]
                   ) -> list[Proposal]:
        """This step's proposals: the runtime mutator's first moves, then moves the
        memory found promising at an earlier incumbent, then the proposer's, then the
        rest of ``untried`` at random; one move per setting, ``candidates_per_step``."""
        open_moves = set(untried)  # membership in a list of every move was O(settings)
        queued = [Proposal(move=m, proposer="runtime", reason="proposed most often by the "
                           "runtime mutator") for m in self.first_moves if m in open_moves]
        if self.round:
            floor = self.bench.spec.gates.min_effect
            for m in untried:  # in a round, only close moves: each has its effect
                effect = self.memory.close(m, incumbent.fingerprint, floor) or 0.0
                queued.append(Proposal(move=m, proposer="memory", reason=(
                    f"close at this incumbent (screened {effect:+.3f}, not proven): "
                    f"precision round {self.round}, screened on {self.attempts} attempts "
                    "a task")))
        queued += self._remembered(incumbent, untried)
        view = SearchView(registry=self.bench.registry, incumbent=incumbent, untried=untried,
                          history=list(history),
                          dev_attempts=[a for items in self._first_chunk(incumbent).values()
                                        for a in items],
                          step=step, rng=self._rng("propose", step),
                          hint_jumps=self.options.hint_jumps)
        proposed, refused = offered(self.proposer, view, len(untried))
        offers = queued + proposed
        by_proposer = set(proposed)
        # A proposer may refuse what its own source produced (an LLM's unusable reply),
        # and the search what the proposer returned (an error, a NaN): each refusal is
        # journaled as a record of its own, and the step goes on.
        for item in [*self.proposer.drain_rejections(), *refused]:
            self._refuse(step, incumbent, item)
        rest = untried[:]
        self._rng("fallback", step).shuffle(rest)
        offers += [Proposal(move=m, proposer="sweep", reason="one-setting move the proposer "
                            "did not rank, in random order") for m in rest]
        # One move per setting in a step: a step covers several settings, and a setting's
        # other values wait for what this one shows.
        seen: set[Move] = set()
        targets: set[str] = set()
        unique: list[Proposal] = []
        for p in offers:
            if p.move in seen or p.move.target in targets:
                continue
            if self.places.was_tried(incumbent, p.move, tried, self.round):
                if self.options.near_copy_records and p in by_proposer:
                    self._refuse(step, incumbent, self.places.near_copy(incumbent, p.move))
                seen.add(p.move)  # one record for a move offered twice
                continue
            seen.add(p.move)
            targets.add(p.move.target)
            unique.append(p)
            if len(unique) >= self.options.candidates_per_step:
                break
        if self.options.enum_choices:
            unique += self._other_choices(incumbent, unique, untried, tried, seen)
        return unique

    def _remembered(self, incumbent: Config, untried: list[Move]) -> list[Proposal]:
        """The moves the memory offers at ``incumbent``: (``room_recall``) those a
        tolerance refused at an earlier one when this one has made room under it since,
        then those that looked better at an earlier one and were not proven there, each
        kind in ``untried``'s order."""
        room: list[Proposal] = []
        promising: list[Proposal] = []
        for m in untried:
            note = self.memory.last(m)
            if note is None or note.screen_effect is None:
                continue
            if self.memory.promise(m, incumbent.fingerprint) is not None:
                promising.append(Proposal(move=m, proposer="memory", reason=(
                    f"screened {note.screen_effect:+.3f} at step {note.step} against an "
                    "earlier incumbent, not proven there: likely good here too")))
            elif self.options.room_recall and self.memory.made_room(
                    m, incumbent.fingerprint, lambda metric: self.standing.get(metric, 0.0)):
                metric = (note.gate or "")[4:]
                room.append(Proposal(move=m, proposer="memory", reason=(
                    f"screened {note.screen_effect:+.3f} at step {note.step}, refused there "
                    f"by the {metric} tolerance; this incumbent has brought {metric} down "
                    "against the start since: room under it now")))
        return room + promising

    def _other_choices(self, incumbent: Config, chosen: list[Proposal], untried: list[Move],
                       tried: set[TriedKey], seen: set[Move]) -> list[Proposal]:
        """The untried other choices of each enum setting ``chosen`` covers, in the
        registry's order: screened side by side with the one a proposer picked."""
        settings = self.bench.registry.settings
        # Only beside a legal move: an illegal or stale one is refused, not screened.
        legal = set(untried)
        targets = {p.move.target for p in chosen
                   if p.move in legal and isinstance(settings.get(p.move.target), EnumSetting)}
        out = []
        for m in untried:
            if (m.target in targets and m not in seen
                    and not self.places.was_tried(incumbent, m, tried, self.round)):
                seen.add(m)
                out.append(Proposal(move=m, proposer="sweep", reason=(
                    f"another choice of {m.target}, screened beside the one proposed: an "
                    "enum's choices are unordered, one says nothing of the next")))
        return out

    def _refuse(self, step: int, incumbent: Config, item: dict[str, Any]) -> None:
        self._emit(ProposalInvalidRecord.model_validate(
            {"proposer": self.proposer.name, **item, "step": step,
             "incumbent": incumbent.fingerprint}))

    def _incumbent_interval(self, incumbent: Config) -> Interval | None:
        """The incumbent's mean over the dev tasks it has run on the screening seeds,
        with its 95% interval (for the live view; nothing is run for it)."""
        known = self.rollouts.peek(incumbent, "dev", self.dev_order, range(self.options.k))
        means = []
        for items in known.values():
            # Unscored attempts are left out, never counted as 0, as everywhere in forge.
            values = [a.score.value for a in items if a.scored and a.score is not None]
            if values:
                means.append(math.fsum(values) / len(values))
        return mean_interval(means, 0.95)

    def head(self, step: int, incumbent: Config, proposal: Proposal) -> _CandidateHead:
        move = proposal.move
        self.progress.screening(move, proposer=proposal.proposer)
        extra: dict[str, Any] = {"precision_round": self.round} if self.round else {}
        return partial(CandidateRecord, step=step, move=move, inverse=move.inverse(),
                       move_kind=move_kind(self.bench.registry, move),
                       proposer=proposal.proposer, reason=proposal.reason,
                       incumbent=incumbent.fingerprint, **extra)

    def _step(self, step: int, incumbent: Config, proposals: list[Proposal],
              tried: set[TriedKey], history: list[EvaluatedConfig]
              ) -> tuple[Move, Config] | None:
        """Screen the proposals in order, then confirm the passing ones, the largest
        screening effect first (``selection: first``: each as soon as it passes). A
        promotion ends the step, a refusal lets it go on."""
        passed: list[tuple[Screen, _CandidateHead]] = []
        for proposal in proposals:
            due = self.deferrals.due(self._cost(incumbent), self._budget_left(),
                                     2 * self.chunk * self.attempts)
            if due:
                promoted = self._confirm_deferred(step, incumbent, tried, history, due)
                if promoted is not None or self._out_of_budget:
                    return promoted
            head = self.head(step, incumbent, proposal)
            screened = self._passing(self._screen(step, incumbent, proposal, head, tried,
                                                  history))
            if screened is None:
                if self._out_of_budget:
                    break
                continue
            passed.append((screened, head))
            if self.options.selection == "first" or not self._room_to_compare():
                promoted = self._confirm_passed(step, incumbent, passed, tried, history)
                if promoted is not None or self._out_of_budget:
                    return promoted
                passed = []
        return self._confirm_passed(step, incumbent, passed, tried, history)

    def _passing(self, screened: Screen | Literal[False] | None) -> Screen | None:
        """``screened`` if it passed; else None, and the budget marked spent where it cut
        the screening short."""
        if screened is False:
            return None
        if screened is None or screened.status == "budget":
            self._out_of_budget = True
        if screened is not None and screened.status != "pass":
            return None
        return screened

    def _screen(self, step: int, incumbent: Config, proposal: Proposal,
                head: _CandidateHead, tried: set[TriedKey], history: list[EvaluatedConfig],
                origin: Screen | None = None) -> Screen | Literal[False] | None:
        """``proposal``'s screening (None: the budget allowed not even a chunk); False
        for a proposal journaled as illegal or already tried, which screens nothing. An
        expansion of ``origin``'s move is screened against ``origin`` attempt for
        attempt (:meth:`~forge.search.screening.Screening.expand`)."""
        try:
            candidate = apply_move(self.bench.registry, incumbent, proposal.move)
        except Exception as exc:  # an illegal proposal is journaled, never applied
            self._emit(head(verdict="rejected", gates=[
                Gate(name="legal", passed=False, reason=str(exc))]))
            return False
        key = self.places.tried_key(incumbent, proposal.move, self.round)
        if key in tried:
            self._emit(head(verdict="skipped", candidate=candidate.fingerprint, gates=[],
                            why="already tried against this incumbent"))
            return False
        tried.add(key)
        screened = (self.screening.run(step, incumbent, proposal, candidate, head,
                                       attempts=self.attempts) if origin is None else
                    self.screening.expand(step, incumbent, proposal, candidate, head, origin,
                                          attempts=self.attempts))
        if screened is not None and screened.tasks >= min(self.chunk, len(self.dev_order)):
            # The first chunk is the same tasks and seeds for every config screened (an
            # expansion dropped at its first task has no mean to compare).
            first = self.rollouts.peek(candidate, "dev", self.dev_order[:self.chunk],
                                       range(self.options.k))
            if first.mean_score is not None:
                history.append(EvaluatedConfig(candidate.values, candidate.fingerprint,
                                               first.mean_score, len(first)))
                self.proposer.observe(candidate, first.mean_score,
                                      self.screening.constraints(candidate))
        return screened

    def _expanded(self, step: int, incumbent: Config, screened: Screen,
                  tried: set[TriedKey], history: list[EvaluatedConfig]
                  ) -> tuple[Screen, _CandidateHead] | None:
        """The expansion of ``screened``'s numeric move, screened just before that move's
        confirmation (so only for a candidate about to be confirmed): returned when it
        passed, to be confirmed first; None when off, tried, or refused (journaled)."""
        if not self.options.expansion:
            return None
        move = screened.proposal.move
        further = expansion(self.bench.registry, move)
        if further is None or self.places.was_tried(incumbent, further, tried, self.round):
            return None
        proposal = Proposal(move=further, proposer="expansion", reason=(
            f"{move.target} {move.before!r} -> {move.after!r} passed screening "
            f"({screened.test.effect:+.3f}): the farthest value the same way goes first "
            "if it scores at least as well on every screening attempt"))
        head = self.head(step, incumbent, proposal)
        result = self._passing(self._screen(step, incumbent, proposal, head, tried, history,
                                            screened))
        return None if result is None else (result, head)

    def _room_to_compare(self) -> bool:
        """Whether the budget leaves room to screen the rest of a step before confirming
        one that passed: twice a confirmation on every dev and val task (candidate and
        incumbent). With less, the first to pass is confirmed at once: at 2k rollouts on
        triage, screening the whole step first left no confirmation room in 10 of 10."""
        left = self._budget_left()
        if left is None:
            return True
        full = 2 * (len(self.dev_order) + len(self.val_order)) * self.attempts
        return left >= 2 * full

    def _cost(self, incumbent: Config) -> Callable[[Screen], float]:
        """What a confirmation against ``incumbent`` projects to cost (:mod:`forge.search.deferral`)
        of a screened candidate."""
        attempts = (range(self.attempts, 2 * self.attempts) if self.round
                    else range(self.attempts))
        level = spent_alpha(self._confirmations + 1, self.alpha)

        def cost(screened: Screen) -> float:
            # A precision round's confirmation reads every dev task on fresh attempts.
            dev = self.dev_order if self.round else self.dev_order[screened.tasks:]
            unrun = unrun_share(self.rollouts, incumbent, dev, self.val_order, attempts)
            return confirmation_cost(screened, level=level,
                                     min_effect=self.bench.spec.gates.min_effect,
                                     attempts=self.attempts, unrun=unrun)
        return cost

    def _confirm_deferred(self, step: int, incumbent: Config, tried: set[TriedKey],
                          history: list[EvaluatedConfig],
                          due: list[Held] | None = None
                          ) -> tuple[Move, Config] | None:
        """Confirm the ``due`` deferred candidates (default: all of them)."""
        items = self.deferrals.take() if due is None else due
        return self._confirm_passed(step, incumbent, items, tried, history, deferred=True)

    def _drop_deferred(self, why: str) -> None:
        for screened, head in self.deferrals.take():
            self._skip(screened, head, why)

    def _skip(self, screened: Screen, head: _CandidateHead, why: str) -> None:
        """Journal a candidate that passed screening and was not confirmed, with its
        screening and what it cost."""
        self._emit(head(
            verdict="skipped", candidate=screened.candidate.fingerprint, gates=[],
            why=f"passed screening ({screened.test.effect:+.3f}), not confirmed: {why}",
            dev=DevBlock(screen=screened.block), rollouts=screened.rollouts,
            tasks_screened=screened.tasks, screening_rollouts=screened.rollouts,
            **self._totals()))

    def _confirm_passed(self, step: int, incumbent: Config,
                        passed: list[tuple[Screen, _CandidateHead]], tried: set[TriedKey],
                        history: list[EvaluatedConfig], *, deferred: bool = False
                        ) -> tuple[Move, Config] | None:
        """Confirm ``passed``, the largest screening effect first, until one is promoted
        or the budget is out, each after its expansion if that passes (:meth:`_expanded`);
        each the budget left cannot prove is deferred (unless these are the ``deferred``);
        each left unconfirmed is journaled as skipped, with its screening and its
        rollouts."""
        promoted: tuple[Move, Config] | None = None
        extended: Screen | None = None  # the candidate whose expansion was promoted
        # Selection only: the confirmation never reads screening data, so which passing
        # candidate goes first, and which waits, costs its error guarantee nothing.
        for screened, head in sorted(passed, key=lambda item: -item[0].test.effect):
            why = (None if deferred or promoted is not None or self._out_of_budget
                   or not self.options.deferral
                   else self.deferrals.hold(screened, self._cost(incumbent),
                                            self._budget_left()))
            if why is not None:
                self.deferrals.add(screened, head, why)
                continue
            if promoted is None and not self._out_of_budget:
                expanded = self._expanded(step, incumbent, screened, tried, history)
                if expanded is not None:
                    promoted = self._confirm_one(step, incumbent, *expanded)
                    extended = screened if promoted is not None else None
            if promoted is not None or self._out_of_budget:
                if promoted is None:
                    why = "budget spent before its confirmation"
                elif extended is screened:
                    why = (f"this step promoted {promoted[0].target} {promoted[0].after!r}, "
                           "farther the same way and no worse on any screening attempt")
                else:
                    why = "this step promoted a candidate of larger screening effect"
                self._skip(screened, head, why)
                continue
            promoted = self._confirm_one(step, incumbent, screened, head)
        return promoted

    def _confirm_one(self, step: int, incumbent: Config, screened: Screen,
                     head: _CandidateHead) -> tuple[Move, Config] | None:
        self.progress.confirming(screened.proposal.move, screened.candidate,
                                 proposer=screened.proposal.proposer)
        promoted = self._confirm(step, incumbent, screened, head)
        if promoted is not None:
            self.progress.promotions += 1
        return promoted

    def _confirm(self, step: int, incumbent: Config, screened: Screen, head: _CandidateHead
                 ) -> tuple[Move, Config] | None:
        self._confirmations += 1
        level = spent_alpha(self._confirmations, self.alpha)
        outcome = self.rollouts.drive(Confirmation(
            self.rollouts, self.bench, incumbent=incumbent, start=self.start,
            candidate=screened.candidate, level=level, dev_order=self.dev_order,
            screen_tasks=screened.tasks, look_tasks=self.chunk, val_order=self.val_order,
            val_look_tasks=self.val_chunk, k=self.options.k,
            budget=Budget(self.options.budget, self.rollouts, slack=self.slack),
            fresh=range(self.attempts, 2 * self.attempts) if self.round else None,
            extension=self._extension() if self.options.tolerance_extension else None).run())
        self._record(head, screened, outcome, level)
        move = screened.proposal.move
        if outcome.status == "budget":
            self._out_of_budget = True
            return None
        failing = next((g for g in outcome.gates if not g.passed), None)
        if outcome.status != "promoted":
            gate = failing.name if failing else "dev"
            self.memory.record(move, MoveNote(
                step, incumbent.fingerprint, "refused", screened.test.effect, screened.se,
                gate=gate, standing=(self.standing.get(gate[4:], 0.0)
                                     if gate.startswith("aux:") else None)))
            return None
        self.memory.record(move, MoveNote(step, incumbent.fingerprint, "promoted",
                                          screened.test.effect, screened.se))
        for metric, info in outcome.aux.items():
            spec = self.bench.spec.metrics[metric]
            before, after = info.get("before"), info.get("after")
            if isinstance(before, int | float) and isinstance(after, int | float):
                sign = 1.0 if spec.direction == "lower" else -1.0
                self.standing[metric] = sign * (float(after) - float(before))
        return move, screened.candidate

    def _extension(self) -> range:
        """The attempts a confirmation's extension block runs: past every index a
        selection of any precision round reads (``k << precision_rounds``) and this
        confirmation's own, so that none of the data that chose a candidate decides it."""
        first = max(2 * self.attempts, self.options.k << self.options.precision_rounds)
        return range(first, first + self.attempts)

    def _record(self, head: _CandidateHead, screened: Screen, outcome: ConfirmOutcome,
                level: float) -> None:
        verdict = {"promoted": "promoted", "rejected": "rejected", "budget": "skipped"}[
            outcome.status]
        confirm = None
        if outcome.dev:
            confirm = ConfirmBlock.model_validate({
                **outcome.dev, "level": level, "index": self._confirmations, "stream": "dev",
                **({"splits": ["dev", "val"]} if outcome.pooled else {})})
        self._emit(head(
            verdict=verdict, candidate=screened.candidate.fingerprint,
            dev=DevBlock(screen=screened.block, confirm=confirm, before=outcome.dev_means[0],
                         after=outcome.dev_means[1]),
            val=None if outcome.val is None else ValBlock.model_validate(outcome.val),
            aux={m: AuxDetails.model_validate(d) for m, d in outcome.aux.items()},
            gates=[Gate.of(g) for g in outcome.gates], gates_not_run=outcome.not_run,
            rollouts=screened.rollouts + outcome.rollouts, tasks_screened=screened.tasks,
            screening_rollouts=screened.rollouts, looks=outcome.looks,
            why="budget spent during confirmation" if outcome.status == "budget" else None,
            **self._totals()))

    # -- the end --------------------------------------------------------------------

    def _block(self, before: TaskAttempts, after: TaskAttempts) -> SplitDelta:
        """Start against final on the tasks both ran (95% two-sided bounds)."""
        shared = TaskAttempts({t: v for t, v in before.items() if t in after})
        t = paired_test(list(score_deltas(shared, after).values()), alpha=0.025)
        return SplitDelta(start=shared.mean_score,
                          final=TaskAttempts({k: v for k, v in after.items()
                                              if k in shared}).mean_score,
                          delta=t.effect if t.n else None,
                          ci_low=t.ci_low if t.n > 1 else None,
                          ci_high=t.ci_high if t.n > 1 else None)

    def _known(self, config: Config, split: str) -> TaskAttempts:
        """Every attempt of ``config`` on ``split``'s base block the search ran."""
        return self.rollouts.peek(config, split, self.bench.tasks(split),
                                  range(self.options.k))

    def _finish(self, stop_reason: StopReason, steps: int, promotions: list[PromotedMove],
                final: Config) -> SearchOutcome:
        self.progress.testing()
        # dev and val: the tasks both configs ran (the search runs no more to report).
        dev = self._block(self._known(self.start, "dev"), self._known(final, "dev"))
        val = (self._block(self._known(self.start, "val"), self._known(final, "val"))
               if "val" in self.bench.splits else SplitDelta())
        test = SplitDelta()
        if self.options.run_test and "test" in self.bench.splits:
            # The test split is opened here, once, after every decision is made.
            tasks = self.bench.tasks("test")
            k = range(self.options.test_attempts)
            start_test = self.rollouts.get(self.start, "test", "test", tasks, k)
            final_test = self.rollouts.get(final, "test", "test", tasks, k)
            test = self._block(start_test, final_test)
            t = paired_test(list(score_deltas(start_test, final_test).values()), alpha=0.025)
            # Every tolerance from the start to the final config, as the gates promised
            # it: the reviewer's check, and what `forge promote` reads.
            aux = [tolerance_check(name, spec, start_test, final_test, alpha=self.alpha)
                   for name, spec in self.bench.spec.metrics.items()]
            self._emit(TestRecord.model_validate(
                {**test.as_json(), "confidence": 0.95, "n_tasks": t.n, "k": len(k),
                 "p_value_two_sided": _two_sided(t),
                 "aux": [AuxCheck.of_result(g) for g in aux]}))
        end = self._emit(EndRecord(
            run_id=self.run_id, stop_reason=stop_reason, steps=steps, promotions=promotions,
            start_config=self.start.values, final_config=final.values,
            rollouts_used=self.rollouts.used, dev=dev, val=val, test=test,
            final_fingerprint=final.fingerprint, cost_total=self.rollouts.cost))
        return SearchOutcome(end, [r.journal_json() for r in self.records],
                             failures=self.rollouts.failures)


def _two_sided(t: PairedTest) -> float:
    """Two-sided p-value of "no change" from a one-sided test against 0."""
    if t.n < 2:
        return 1.0
    if t.sd == 0:
        return 1.0 if t.effect == 0 else 0.0
    return min(1.0, 2 * min(t.p_value, 1 - t.p_value))
