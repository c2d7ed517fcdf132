"""A step's candidates: each screened, the passing ones confirmed, one at most promoted.

:class:`StepRunner` runs one step of :class:`forge.search.loop.Search`, which builds it
once a run with its collaborators (the attempt cache, the budget, the screening, the
proposer, the deferrals, the memory, the record sink) and the run's :class:`RunState`
it shares with the loop: it screens the step's proposals in turn
(:mod:`forge.search.screening`), and confirms those that passed
(:mod:`forge.search.confirm`), the largest screening effect first, each after its
expansion if that passes (the farthest value of its setting the same way, screened
on its attempts); one the budget left cannot prove waits
(:mod:`forge.search.deferral`), and each left unconfirmed is journaled as skipped. A
promotion ends the step; a refusal lets it go on. Outside the precision rounds a race
is hasty (:func:`forge.search.racing.race`): a candidate it pauses waits, and its race
goes on (:meth:`StepRunner.resume_paused`) only once the incumbent has nothing else left
to screen. Which candidate goes first, and which
waits, is selection only: a confirmation never reads the data that chose it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from forge.bench.loader import Bench
from forge.config.moves import Move, apply_move, expansion, move_kind
from forge.config.registry import Config
from forge.core.task import Task
from forge.journal.records import (
    AnyRecord,
    CandidateRecord,
    DevBlock,
    GateRecord,
)
from forge.proposers import Proposal
from forge.proposers.base import EvaluatedConfig, Proposer
from forge.search.attempt_cache import AttemptCache, Fetch
from forge.search.budget import Budget
from forge.search.confirm import Confirmation, ConfirmOutcome
from forge.search.deferral import Deferrals, Held, confirmation_cost, unrun_share
from forge.search.memory import MoveMemory, MoveNote
from forge.search.options import PRECISION_ROUNDS, SearchOptions
from forge.search.places import Places, TriedKey
from forge.search.progress import SearchProgress
from forge.search.screening import Screen, Screening
from forge.stats.paired import spent_alpha

__all__ = ["CandidateHead", "Promoted", "RunState", "StepRunner"]


#: The fields of every candidate record of one proposal; called with the rest.
CandidateHead = partial[CandidateRecord]
#: A promotion: the move, and the config it made the incumbent.
Promoted = tuple[Move, Config]


@dataclass
class RunState:
    """What the loop and its step runner share of one run: the fixed task orders and
    chunk sizes, the level, and what moves as the search goes on."""

    dev_order: list[Task]
    val_order: list[Task]
    chunk: int
    val_chunk: int
    alpha: float
    #: The incumbent's regression of each auxiliary metric against the start config,
    #: as its promotion measured it on val (the start: none).
    standing: dict[str, float] = field(default_factory=dict)
    #: The incumbent's precision round: 0, then r while its close moves are screened
    #: on 2^r·K attempts a task (reset by a promotion).
    round: int = 0
    #: Confirmations since the last promotion: indexes the spending sequence.
    confirmations: int = 0


class StepRunner:
    """Screening and confirming a step's candidates, with the collaborators it is given."""

    def __init__(self, *, bench: Bench, start: Config, proposer: Proposer,
                 options: SearchOptions, state: RunState, rollouts: AttemptCache,
                 budget: Budget, screening: Screening, deferrals: Deferrals,
                 memory: MoveMemory, places: Places, progress: SearchProgress,
                 emit: Callable[[AnyRecord], Any]) -> None:
        self.bench = bench
        self.start = start
        self.proposer = proposer
        self.options = options
        self.state = state
        self.rollouts = rollouts
        self.budget = budget
        self.screening = screening
        self.deferrals = deferrals
        self.memory = memory
        self.places = places
        self.progress = progress
        self.emit = emit  # the record sink: the search's store
        #: Candidates whose hasty race paused, with the incumbent they were raced against.
        self.paused: list[tuple[str, Screen]] = []

    @property
    def attempts(self) -> int:
        """Attempts a task a screening of this precision round runs."""
        return self.options.k << self.state.round

    def head(self, step: int, incumbent: Config, proposal: Proposal) -> CandidateHead:
        move = proposal.move
        self.progress.screening(move, proposer=proposal.proposer)
        extra: dict[str, Any] = {"precision_round": self.state.round} if self.state.round else {}
        return partial(CandidateRecord, step=step, move=move, inverse=move.inverse(),
                       move_kind=move_kind(self.bench.registry, move),
                       proposer=proposal.proposer, reason=proposal.reason,
                       incumbent=incumbent.fingerprint, **extra)

    def run_step(self, step: int, incumbent: Config, proposals: list[Proposal],
              tried: set[TriedKey], history: list[EvaluatedConfig]) -> Fetch[Promoted | None]:
        """Screen the proposals in order, then confirm the passing ones, the largest
        screening effect first (with little budget left, each as soon as it passes). A
        promotion ends the step, a refusal lets it go on."""
        passed: list[tuple[Screen, CandidateHead]] = []
        for proposal in proposals:
            due = self.deferrals.due(self._cost(incumbent), self.budget.left(),
                                     2 * self.state.chunk * self.attempts)
            if due:
                promoted = yield from self.confirm_deferred(step, incumbent, tried, history,
                                                             due)
                if promoted is not None or self.budget.spent:
                    return promoted
            head = self.head(step, incumbent, proposal)
            outcome = yield from self._screen(step, incumbent, proposal, head, tried, history)
            if outcome is not False and outcome.status == "paused":
                self.paused.append((incumbent.fingerprint, outcome))
            screened = self._passing(outcome)
            if screened is None:
                if self.budget.spent:
                    break
                continue
            done, promoted = yield from self._pass_on(step, incumbent, passed, screened, head,
                                                      tried, history)
            if done:
                return promoted
        return (yield from self._confirm_passed(step, incumbent, passed, tried, history))

    def _pass_on(self, step: int, incumbent: Config,
                 passed: list[tuple[Screen, CandidateHead]], screened: Screen | None,
                 head: CandidateHead, tried: set[TriedKey], history: list[EvaluatedConfig]
                 ) -> Fetch[tuple[bool, Promoted | None]]:
        """``screened`` (if it passed) joins ``passed``; where the budget leaves no room to
        compare the rest of the step first, those are confirmed at once and ``passed`` is
        emptied. ``(True, promoted)`` when that ends the step: a promotion, or the budget
        spent."""
        if screened is None:
            return False, None
        passed.append((screened, head))
        if self._room_to_compare():
            return False, None
        promoted = yield from self._confirm_passed(step, incumbent, list(passed), tried,
                                                   history)
        passed.clear()
        return promoted is not None or self.budget.spent, promoted

    @staticmethod
    def _passing(screened: Screen | Literal[False]) -> Screen | None:
        """``screened`` if it passed; else None."""
        if screened is False or screened.status != "pass":
            return None
        return screened

    def _screen(self, step: int, incumbent: Config, proposal: Proposal,
                head: CandidateHead, tried: set[TriedKey], history: list[EvaluatedConfig],
                origin: Screen | None = None) -> Fetch[Screen | Literal[False]]:
        """``proposal``'s screening; False for a proposal journaled as illegal or
        already tried, which screens nothing. An
        expansion of ``origin``'s move is screened against ``origin`` attempt for
        attempt (:meth:`~forge.search.screening.Screening.expand`)."""
        try:
            candidate = apply_move(self.bench.registry, incumbent, proposal.move)
        except Exception as exc:  # an illegal proposal is journaled, never applied
            self.emit(head(verdict="rejected", gates=[
                GateRecord(name="legal", passed=False, reason=str(exc))]))
            return False
        key = self.places.tried_key(incumbent, proposal.move, self.state.round)
        if key in tried:
            self.emit(head(verdict="skipped", candidate=candidate.fingerprint, gates=[],
                            why="already tried against this incumbent"))
            return False
        tried.add(key)
        # Hasty outside the precision rounds: a race that pauses goes on later, patiently,
        # only if nothing else is left at this incumbent (resume_paused).
        screened = yield from (
            self.screening.run(step, incumbent, proposal, candidate, head,
                               attempts=self.attempts, patient=self.state.round > 0)
            if origin is None else
            self.screening.expand(step, incumbent, proposal, candidate, head, origin,
                                  attempts=self.attempts))
        if screened.tasks >= min(self.state.chunk, len(self.state.dev_order)):
            # The first chunk is the same tasks and seeds for every config screened (an
            # expansion dropped at its first task has no mean to compare).
            first = self.rollouts.peek(candidate, "dev", self.state.dev_order[:self.state.chunk],
                                       range(self.options.k))
            if first.mean_score is not None:
                history.append(EvaluatedConfig(candidate.values, candidate.fingerprint,
                                               first.mean_score, len(first)))
                self.proposer.observe(candidate, first.mean_score,
                                      self.screening.constraints(candidate))
        return screened

    def _expanded(self, step: int, incumbent: Config, screened: Screen,
                  tried: set[TriedKey], history: list[EvaluatedConfig]
                  ) -> Fetch[tuple[Screen, CandidateHead] | None]:
        """The expansion of ``screened``'s numeric move, screened just before that move's
        confirmation (so only for a candidate about to be confirmed): returned when it
        passed, to be confirmed first; None when none, tried, or refused (journaled)."""
        move = screened.proposal.move
        further = expansion(self.bench.registry, move)
        if further is None or self.places.was_tried(incumbent, further, tried, self.state.round):
            return None
        proposal = Proposal(move=further, proposer="expansion", reason=(
            f"{move.target} {move.before!r} -> {move.after!r} passed screening "
            f"({screened.test.effect:+.3f}): the farthest value the same way goes first "
            "if it scores at least as well on every screening attempt"))
        head = self.head(step, incumbent, proposal)
        result = self._passing((yield from self._screen(step, incumbent, proposal, head,
                                                        tried, history, screened)))
        return None if result is None else (result, head)

    def _room_to_compare(self) -> bool:
        """Whether the budget leaves room to screen the rest of a step before confirming
        one that passed: twice a confirmation on every dev and val task (candidate and
        incumbent). With less, the first to pass is confirmed at once: at 2k rollouts on
        triage, screening the whole step first left no confirmation room in 10 of 10."""
        full = 2 * (len(self.state.dev_order) + len(self.state.val_order)) * self.attempts
        return self.budget.holds(2 * full)

    def _cost(self, incumbent: Config) -> Callable[[Screen], float]:
        """What a confirmation against ``incumbent`` projects to cost
        (:mod:`forge.search.deferral`) of a screened candidate."""
        attempts = (range(self.attempts, 2 * self.attempts) if self.state.round
                    else range(self.attempts))
        level = spent_alpha(self.state.confirmations + 1, self.state.alpha)

        def cost(screened: Screen) -> float:
            # A precision round's confirmation reads every dev task on fresh attempts.
            order = self.state.dev_order
            dev = order if self.state.round else order[screened.tasks:]
            unrun = unrun_share(self.rollouts, incumbent, dev, self.state.val_order, attempts)
            return confirmation_cost(screened, level=level,
                                     min_effect=self.bench.spec.gates.min_effect,
                                     attempts=self.attempts, unrun=unrun)
        return cost

    def resume_paused(self, step: int, incumbent: Config, tried: set[TriedKey],
                      history: list[EvaluatedConfig]) -> Fetch[Promoted | None]:
        """Race patiently, the largest screening effect first, the candidates whose hasty
        race paused against ``incumbent`` (each goes on from where it stopped: the
        attempts it ran are served again at no cost), and confirm those that pass as a
        step does. Asked once this incumbent has nothing else left to screen."""
        here = [s for fingerprint, s in self.paused if fingerprint == incumbent.fingerprint]
        self.paused = []
        passed: list[tuple[Screen, CandidateHead]] = []
        for paused in sorted(here, key=lambda s: -s.test.effect):
            if self.budget.spent:
                break
            move = paused.proposal.move
            proposal = Proposal(move=move, proposer=paused.proposal.proposer, reason=(
                f"its race paused after {paused.tasks} screening tasks (screen "
                f"{paused.test.effect:+.3f}); nothing else is left to screen at this "
                "incumbent, so it goes on"))
            head = self.head(step, incumbent, proposal)
            screened = self._passing((yield from self.screening.run(
                step, incumbent, proposal, paused.candidate, head, attempts=self.attempts)))
            done, promoted = yield from self._pass_on(step, incumbent, passed, screened, head,
                                                      tried, history)
            if done:
                return promoted
        return (yield from self._confirm_passed(step, incumbent, passed, tried, history))

    def confirm_deferred(self, step: int, incumbent: Config, tried: set[TriedKey],
                          history: list[EvaluatedConfig], due: list[Held] | None = None
                          ) -> Fetch[Promoted | None]:
        """Confirm the ``due`` deferred candidates (default: all of them)."""
        items = self.deferrals.take() if due is None else due
        return (yield from self._confirm_passed(step, incumbent, items, tried, history,
                                                deferred=True))

    def drop_deferred(self, why: str) -> None:
        for screened, head in self.deferrals.take():
            self._skip(screened, head, why)

    def _skip(self, screened: Screen, head: CandidateHead, why: str) -> None:
        """Journal a candidate that passed screening and was not confirmed, with its
        screening and what it cost."""
        self.emit(head(
            verdict="skipped", candidate=screened.candidate.fingerprint, gates=[],
            why=f"passed screening ({screened.test.effect:+.3f}), not confirmed: {why}",
            dev=DevBlock(screen=screened.block), rollouts=screened.rollouts,
            tasks_screened=screened.tasks, screening_rollouts=screened.rollouts,
            **self.rollouts.totals()))

    def _confirm_passed(self, step: int, incumbent: Config,
                        passed: list[tuple[Screen, CandidateHead]], tried: set[TriedKey],
                        history: list[EvaluatedConfig], *, deferred: bool = False
                        ) -> Fetch[Promoted | None]:
        """Confirm ``passed``, the largest screening effect first, until one is promoted
        or the budget is out, each after its expansion if that passes (:meth:`_expanded`);
        each the budget left cannot prove is deferred (unless these are the ``deferred``);
        each left unconfirmed is journaled as skipped, with its screening and its
        rollouts."""
        promoted: Promoted | None = None
        extended: Screen | None = None  # the candidate whose expansion was promoted
        # Selection only: the confirmation never reads screening data, so which passing
        # candidate goes first, and which waits, costs its error guarantee nothing.
        for screened, head in sorted(passed, key=lambda item: -item[0].test.effect):
            why = (None if deferred or promoted is not None or self.budget.spent
                   else self.deferrals.hold(screened, self._cost(incumbent),
                                            self.budget.left()))
            if why is not None:
                self.deferrals.add(screened, head, why)
                continue
            if promoted is None and not self.budget.spent:
                expanded = yield from self._expanded(step, incumbent, screened, tried, history)
                if expanded is not None:
                    promoted = yield from self._confirm_one(step, incumbent, *expanded)
                    extended = screened if promoted is not None else None
            if promoted is not None or self.budget.spent:
                self._skip(screened, head, _unconfirmed(promoted, extended is screened))
                continue
            promoted = yield from self._confirm_one(step, incumbent, screened, head)
        return promoted

    def _confirm_one(self, step: int, incumbent: Config, screened: Screen,
                     head: CandidateHead) -> Fetch[Promoted | None]:
        self.progress.confirming(screened.proposal.move, screened.candidate,
                                 proposer=screened.proposal.proposer)
        promoted = yield from self._confirm(step, incumbent, screened, head)
        if promoted is not None:
            self.progress.promotions += 1
        return promoted

    def _confirm(self, step: int, incumbent: Config, screened: Screen, head: CandidateHead
                 ) -> Fetch[Promoted | None]:
        self.state.confirmations += 1
        level = spent_alpha(self.state.confirmations, self.state.alpha)
        outcome = yield from Confirmation(
            self.rollouts, self.bench, incumbent=incumbent, start=self.start,
            candidate=screened.candidate, level=level, dev_order=self.state.dev_order,
            screen_tasks=screened.tasks, look_tasks=self.state.chunk,
            val_order=self.state.val_order,
            val_look_tasks=self.state.val_chunk, k=self.options.k,
            fresh=range(self.attempts, 2 * self.attempts) if self.state.round else None,
            extension=self._extension()).run()
        self._record(head, screened, outcome)
        if self.budget.spent:  # the confirmation was cut short: nothing decided
            return None
        self._remember(step, incumbent, screened, outcome)
        return (screened.proposal.move, screened.candidate) if outcome.status == "promoted" \
            else None

    def _remember(self, step: int, incumbent: Config, screened: Screen,
                  outcome: ConfirmOutcome) -> None:
        """What the memory keeps of a decided confirmation, and, on a promotion, the new
        incumbent's standing against the start on each tolerance."""
        move = screened.proposal.move
        if outcome.status != "promoted":
            failing = next((g for g in outcome.gates if not g.passed), None)
            gate = failing.name if failing else "dev"
            self.memory.record(move, MoveNote(
                step, incumbent.fingerprint, "refused", screened.test.effect, screened.se,
                gate=gate, standing=(self.state.standing.get(gate[4:], 0.0)
                                     if gate.startswith("aux:") else None)))
            return
        self.memory.record(move, MoveNote(step, incumbent.fingerprint, "promoted",
                                          screened.test.effect, screened.se))
        for metric, reading in outcome.tolerances.items():
            sign = 1.0 if self.bench.spec.metrics[metric].direction == "lower" else -1.0
            self.state.standing[metric] = sign * (reading.after - reading.before)

    def _extension(self) -> range:
        """The attempts a confirmation's extension block runs: past every index a
        selection of any precision round reads (``k << PRECISION_ROUNDS``) and this
        confirmation's own, so that none of the data that chose a candidate decides it."""
        first = max(2 * self.attempts, self.options.k << PRECISION_ROUNDS)
        return range(first, first + self.attempts)

    def _record(self, head: CandidateHead, screened: Screen, outcome: ConfirmOutcome
                ) -> None:
        verdict = {"promoted": "promoted", "rejected": "rejected", "budget": "skipped"}[
            outcome.status]
        self.emit(head(
            verdict=verdict, candidate=screened.candidate.fingerprint,
            dev=DevBlock(screen=screened.block,
                         confirm=outcome.confirm_block(self.state.confirmations),
                         before=outcome.dev_means[0], after=outcome.dev_means[1]),
            val=outcome.val_block(), aux=outcome.aux_blocks(),
            gates=[GateRecord.of(g) for g in outcome.gates], gates_not_run=outcome.not_run,
            rollouts=screened.rollouts + outcome.rollouts, tasks_screened=screened.tasks,
            screening_rollouts=screened.rollouts, looks=outcome.looks,
            why="budget spent during confirmation" if outcome.status == "budget" else None,
            **self.rollouts.totals()))


def _unconfirmed(promoted: Promoted | None, by_expansion: bool) -> str:
    """Why a candidate that passed screening was skipped by its step's confirmations."""
    if promoted is None:
        return "budget spent before its confirmation"
    if by_expansion:
        return (f"this step promoted {promoted[0].target} {promoted[0].after!r}, farther "
                "the same way and no worse on any screening attempt")
    return "this step promoted a candidate of larger screening effect"
