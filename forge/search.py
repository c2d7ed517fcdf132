"""The search loop: one move at a time, selected on few tasks, proven on the rest.

Each step the proposer offers candidate moves from the incumbent: one setting each,
a step (``±step``, the next choice) or a jump to any other legal value. Candidates
are *screened* in turn (:mod:`forge.screening`: a race over the dev chunks, attempt
block 0); the one that passed with the largest screening effect is *confirmed*
(:mod:`forge.confirm`): every gate a group-sequential test on data its selection
never read, stopped as soon as the evidence decides (with little budget left, the
first to pass, as ParamILS's first improvement). A promotion ends the step; a
refusal lets it go on. The search stops on ``max_steps``, ``patience``, a budget, or
when no untried move is left; then the start config and the final incumbent are each
evaluated once on the test split.

Why the guarantee holds: the j-th confirmation since the last promotion is tested at
``alpha_j = alpha * 6 / (pi^2 j^2)`` (summing to ``alpha``), spread over its looks by
:mod:`forge.sequential`. Its data are the candidate's attempts on tasks (or attempt
blocks) its selection did not read, against the incumbent's on the same seeds; under
"no move has an effect" the candidate's attempts are independent of everything that
chose it, so each confirmation passes falsely with probability at most ``alpha_j``,
whatever was selected before, and by the union bound a search promotes anything on a
no-effect bench with probability at most ``alpha``. Screening, the proposers and the
memory (:mod:`forge.memory`) only choose *which* candidate is confirmed.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from forge.attempt_cache import Rollouts
from forge.bench import Bench, BudgetSettings
from forge.confirm import Confirmation, ConfirmOutcome
from forge.executors import ExecutorSettings
from forge.gates import score_deltas, tolerance_check
from forge.journal import JournalWriter, RunOptions
from forge.memory import MoveMemory, MoveNote
from forge.moves import Move, apply_move, candidate_moves, expansion, move_kind
from forge.places import Places, TriedKey
from forge.progress import SearchProgress
from forge.proposers import Proposal, Proposer
from forge.proposers._base import EvaluatedConfig, SearchView
from forge.proposers._vet import offered
from forge.records import (
    AnyRecord,
    AuxCheck,
    AuxDetails,
    CandidateRecord,
    ConfirmBlock,
    DevBlock,
    EndRecord,
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
from forge.registry import Config, EnumSetting
from forge.results import TaskAttempts
from forge.screening import Screen, Screening
from forge.session import Session
from forge.stats import Interval, PairedTest, mean_interval, paired_test, spent_alpha
from forge.store import AttemptStore

__all__ = ["STOP_TEXT", "Search", "SearchOptions", "SearchOutcome"]

log = logging.getLogger(__name__)

_R = TypeVar("_R", bound=AnyRecord)


@dataclass(frozen=True)
class SearchOptions:
    max_steps: int
    patience: int
    budget: BudgetSettings
    k: int
    seed: int
    concurrency: int
    timeout_s: float
    candidates_per_step: int = 4
    # The screening chunks and each confirmation look are a 1/chunks share of a split.
    # Six, measured on the gate benches (40 seeds each, 2026-12-01): rollouts a decision
    # 283 / 272 (no effect / +10 points) with five, 257 / 243 with six, 246 / 244 with
    # seven; power 88%, 90%, 93%; on closedform six did best at 5k and 20k.
    chunks: int = 6
    # Screening selects with p below this after the last chunk (below a fifth of it
    # after an earlier one): selection only, it spends none of the error budget.
    screen_alpha: float = 0.05
    jumps: bool = True
    # Once an incumbent has no untried move, its close decisions (weak, or refused by
    # the dev gate, with a positive screening effect) are screened again on twice the
    # attempts a task, up to this many times (FocusedILS's runs per config, raised).
    precision_rounds: int = 2
    # Confirm the passing candidate of a step with the largest screening effect, not the
    # first to pass: on walksat at 5k, 0.977 against 0.953 (benchmarks/quality.py); the
    # others of the step are journaled as skipped, their screening kept by the memory.
    selection: Literal["first", "best"] = "best"
    # A proposer's value off the candidate moves (30,810 flips) is tried in the place of
    # the candidate move nearest it (32,768): without this, TPE's ever new values kept
    # one setting's moves untried and spent walksat's 20k budget on them.
    near_values: bool = True
    # A proposer's move whose place was already tried is journaled (proposal_invalid,
    # already_tried) as it is dropped; a run from before dropped it without a record.
    near_copy_records: bool = True
    # A step that covers an enum setting screens each of its other choices, not one:
    # choices are unordered, so one of them says nothing of the next, and a step that
    # drew the wrong one left the right one waiting for a step its setting may not get.
    # On walksat at 2k (10 seeds): 0.959 against 0.909 (benchmarks/quality.py).
    enum_choices: bool = True
    # A hint (a failure signal's direction) leads with the jump halfway to the bound,
    # the step once the jump is tried: a signal says which way, not how far, and a step
    # is often too small to screen through (walksat's max_flips x2: +0.047 in truth,
    # 1,070 rollouts to prove; halfway, x4, +0.06). On triage at 5k (10 seeds): 0.739
    # with no violation against 0.712 with 2 (benchmarks/quality.py).
    hint_jumps: bool = True
    # The improvement gate pairs the val tasks too, not dev's alone (val still has its
    # own non-inferiority gate): its power is bounded by tasks, not attempts (triage:
    # a +0.05 move reads p = 0.007 on 110 dev tasks at k 5, 10 and 20 alike). On
    # triage at 20k (10 seeds): 0.820 against 0.806; power on the effect bench (40
    # seeds) 93% against 90% (benchmarks/quality.py, benchmarks/gates.py).
    pooled_improvement: bool = True
    # Attempts a test task at the end (never fewer than k): the end check's bound is
    # over the test tasks, from their attempts' noise, so more attempts sharpen it where
    # more tasks are not to be had (the quickstart's harmful actions against +0.01:
    # the bound over tasks like them +0.0146 at 5 attempts, over these tasks +0.0071
    # at 20; benchmarks/end_check.py). 3,300 rollouts more on triage.
    test_k: int = 20
    # Before a numeric move that passed screening is confirmed, the farthest value of
    # its setting the same way is run on its screening attempts (pattern search's
    # expansion step), and confirmed first if it scores at least as well on every one:
    # where the dev tasks cannot tell the two apart, the farther value is the one that
    # still holds where the nearer runs out (walksat: max_flips 16384 and 65536 solve
    # every dev attempt alike; on test 0.982 and 1.000). One attempt below drops it,
    # mostly on its first task. Selection only, like every other candidate of a step.
    expansion: bool = True
    # A move a tolerance refused is offered first by the memory at an incumbent that has
    # since brought that metric down against the start (where the memory lets it be
    # confirmed again), ahead of the moves that lost the last step to the promoted one.
    # Before, it waited for a proposer to rank it again: walksat's max_flips x4, refused
    # for flips at the start's noise 0.1, came after those moves once noise 0.6 had
    # halved the flips, and the budget ran out on them (2k, 10 seeds: 0.999 against
    # 0.984; benchmarks/quality.py).
    room_recall: bool = True
    run_test: bool = True
    # Where attempts run; decisions are the same whichever (tested), so a resume may
    # not need the same one, but it uses the journaled one unless told otherwise.
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)

    @property
    def test_attempts(self) -> int:
        """Attempts a test task at the end: ``test_k``, never fewer than ``k``."""
        return max(self.k, self.test_k)

    def journal_form(self, *, proposer: str, proposer_info: dict[str, Any] | None,
                     first_moves: list[Move]) -> RunOptions:
        """The options as ``run.json`` keeps them, with the proposer's description."""
        return RunOptions(max_steps=self.max_steps, patience=self.patience,
                          budget=self.budget, k=self.k,
                          candidates_per_step=self.candidates_per_step, chunks=self.chunks,
                          screen_alpha=self.screen_alpha, jumps=self.jumps,
                          precision_rounds=self.precision_rounds, selection=self.selection,
                          near_values=self.near_values,
                          near_copy_records=self.near_copy_records,
                          enum_choices=self.enum_choices, hint_jumps=self.hint_jumps,
                          pooled_improvement=self.pooled_improvement,
                          test_k=self.test_k, expansion=self.expansion,
                          room_recall=self.room_recall, executor=self.executor,
                          proposer=proposer, proposer_info=proposer_info, first_moves=first_moves,
                          concurrency=self.concurrency)

    @classmethod
    def from_journal(cls, o: RunOptions, *, seed: int, concurrency: int, timeout_s: float,
                     executor: ExecutorSettings | None = None) -> SearchOptions:
        """The options a run was started with, for its resume; ``concurrency`` is used
        where the run did not journal one, ``executor`` instead of the journaled one."""
        defaults = cls(max_steps=0, patience=1, budget=o.budget, k=1, seed=0,
                       concurrency=1, timeout_s=1.0)
        return cls(max_steps=o.max_steps, patience=o.patience, budget=o.budget, k=o.k,
                   seed=seed, concurrency=o.concurrency or concurrency, timeout_s=timeout_s,
                   candidates_per_step=o.candidates_per_step, chunks=o.chunks,
                   screen_alpha=(defaults.screen_alpha if o.screen_alpha is None
                                 else o.screen_alpha),
                   jumps=defaults.jumps if o.jumps is None else o.jumps,
                   # A run journaled before precision rounds existed resumes without them.
                   precision_rounds=o.precision_rounds or 0,
                   # Likewise one from before these two: the first to pass, exact values.
                   selection=o.selection or "first", near_values=bool(o.near_values),
                   near_copy_records=bool(o.near_copy_records),
                   enum_choices=bool(o.enum_choices), hint_jumps=bool(o.hint_jumps),
                   pooled_improvement=bool(o.pooled_improvement),
                   # And before the test split had attempts of its own: k of them.
                   test_k=o.test_k or o.k, expansion=bool(o.expansion),
                   room_recall=bool(o.room_recall),
                   executor=executor or o.executor)


@dataclass(frozen=True)
class SearchOutcome:
    """A finished search: its ``end`` record, what ``forge search --json`` prints
    (:meth:`as_json`, a frozen contract), and the journal's records as written (each
    line's JSON object), for scripts that want them too."""

    end: EndRecord
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.end.run_id

    @property
    def stop_reason(self) -> str:
        return self.end.stop_reason

    @property
    def steps(self) -> int:
        return self.end.steps

    @property
    def promotions(self) -> list[dict[str, Any]]:
        """``{step, target, before, after}`` per promotion, in order."""
        return [p.model_dump() for p in self.end.promotions]

    @property
    def start_config(self) -> dict[str, Any]:
        return dict(self.end.start_config)

    @property
    def final_config(self) -> dict[str, Any]:
        return dict(self.end.final_config)

    @property
    def rollouts_used(self) -> int:
        return self.end.rollouts_used

    @property
    def dev(self) -> dict[str, Any]:
        """Start against final on dev: ``{start, final, delta, ci_low, ci_high}``."""
        return self.end.dev.as_json()

    @property
    def val(self) -> dict[str, Any]:
        """As :attr:`dev`, on val; ``{}`` for a bench without a val split."""
        return self.end.val.as_json()

    @property
    def test(self) -> dict[str, Any]:
        """As :attr:`dev`, on test; ``{}`` when the test split was not evaluated."""
        return self.end.test.as_json()

    def as_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "stop_reason": self.stop_reason, "steps": self.steps,
                "promotions": self.promotions, "start_config": self.start_config,
                "final_config": self.final_config, "rollouts_used": self.rollouts_used,
                "dev": self.dev, "val": self.val, "test": self.test}


#: The fields of every candidate record of one proposal; called with the rest.
_CandidateHead = partial[CandidateRecord]

STOP_TEXT: dict[StopReason, str] = {
    "max_steps": "reached max_steps",
    "patience": "no promotion in `patience` steps in a row",
    "budget_rollouts": "rollout budget spent",
    "budget_cost": "cost budget spent",
    "budget_wall_time": "wall-time budget spent",
    "local_optimum": "no untried move (step or jump) of the incumbent is left, nor a "
                     "close one to screen again with more attempts",
}


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
        store = AttemptStore(self.folder / "attempts.jsonl")
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
            try:
                return self._run()
            finally:
                self.progress.end()

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
        self.proposer.annotate(incumbent, {"step": 0, "verdict": "start", "tasks": len(first)})
        self._emit(StartRecord(config=incumbent.values, fingerprint=incumbent.fingerprint,
                               dev_mean=start_mean, val_mean=None, dev_tasks=len(first),
                               rollouts_total=self.rollouts.used))
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
            self.progress.begin_step(step, len(proposals), self._incumbent_interval(incumbent))
            promoted = self._step(step, incumbent, proposals, tried, history)
            if promoted is not None:
                move, incumbent = promoted
                promotions.append(PromotedMove.of(step, move))
                since_promotion = 0
                self._confirmations = 0
                self.round = 0
            else:
                since_promotion += 1
        self._emit(StopRecord(reason=stop_reason, text=STOP_TEXT[stop_reason], step=step,
                              rollouts_total=self.rollouts.used, cost_total=self.rollouts.cost))
        return self._finish(stop_reason, step, promotions, incumbent)

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
        queued = [Proposal(move=m, proposer="runtime", reason="proposed most often by the "
                           "runtime mutator") for m in self.first_moves if m in untried]
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
                if self.options.near_copy_records and p in proposed:
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
        self.progress.screening(move)
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
            head = self.head(step, incumbent, proposal)
            screened = self._passing(step, self._screen(step, incumbent, proposal, head,
                                                        tried, history))
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

    def _passing(self, step: int, screened: Screen | Literal[False] | None) -> Screen | None:
        """``screened`` if it passed; else None, the proposer told what became of a
        screen, and the budget marked spent where it cut the screening short."""
        if screened is False:
            return None
        if screened is None or screened.status == "budget":
            self._out_of_budget = True
        if screened is not None and screened.status != "pass":
            self._annotate(step, screened, None)
            return None
        return screened

    def _screen(self, step: int, incumbent: Config, proposal: Proposal,
                head: _CandidateHead, tried: set[TriedKey], history: list[EvaluatedConfig],
                origin: Screen | None = None) -> Screen | Literal[False] | None:
        """``proposal``'s screening (None: the budget allowed not even a chunk); False
        for a proposal journaled as illegal or already tried, which screens nothing. An
        expansion of ``origin``'s move is screened against ``origin`` attempt for
        attempt (:meth:`~forge.screening.Screening.expand`)."""
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
        result = self._passing(step, self._screen(step, incumbent, proposal, head, tried,
                                                  history, screened))
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

    def _confirm_passed(self, step: int, incumbent: Config,
                        passed: list[tuple[Screen, _CandidateHead]], tried: set[TriedKey],
                        history: list[EvaluatedConfig]) -> tuple[Move, Config] | None:
        """Confirm ``passed``, the largest screening effect first, until one is promoted
        or the budget is out, each after its expansion if that passes (:meth:`_expanded`);
        each left unconfirmed is journaled as skipped, with its screening and its
        rollouts."""
        promoted: tuple[Move, Config] | None = None
        extended: Screen | None = None  # the candidate whose expansion was promoted
        # Selection only: the confirmation never reads screening data, so which passing
        # candidate goes first costs its error guarantee nothing.
        for screened, head in sorted(passed, key=lambda item: -item[0].test.effect):
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
                self._emit(head(
                    verdict="skipped", candidate=screened.candidate.fingerprint, gates=[],
                    why=f"passed screening ({screened.test.effect:+.3f}), not confirmed: {why}",
                    dev=DevBlock(screen=screened.block), rollouts=screened.rollouts,
                    tasks_screened=screened.tasks, screening_rollouts=screened.rollouts,
                    **self._totals()))
                continue
            promoted = self._confirm_one(step, incumbent, screened, head)
        return promoted

    def _confirm_one(self, step: int, incumbent: Config, screened: Screen,
                     head: _CandidateHead) -> tuple[Move, Config] | None:
        self.progress.confirming(screened.proposal.move, screened.candidate)
        promoted = self._confirm(step, incumbent, screened, head)
        if promoted is not None:
            self.progress.promotions += 1
        return promoted

    def _annotate(self, step: int, screened: Screen, outcome: ConfirmOutcome | None) -> None:
        """Tell the proposer what became of a screened config (its Optuna study shows it)."""
        record = self.records[-1] if self.records else None
        failing = None
        verdict = None
        if isinstance(record, CandidateRecord) and record.candidate == \
                screened.candidate.fingerprint:
            verdict = record.verdict
            failing = next((g for g in record.gates if not g.passed), None)
        move = screened.proposal.move
        attrs: dict[str, str | float | int | None] = {
            "step": step, "move": f"{move.target}: {move.before!r} -> {move.after!r}",
            "move_kind": move_kind(self.bench.registry, move),
            "proposer": screened.proposal.proposer, "verdict": verdict,
            "screen": screened.status, "tasks": self.chunk,
            "failing_gate": failing.name if failing else None,
            "failing_reason": failing.reason[:200] if failing else None,
            "looks": outcome.looks if outcome is not None else None}
        for metric, value in self.screening.constraints(screened.candidate).items():
            attrs[f"aux:{metric} past allowance"] = round(value, 6)
        self.proposer.annotate(screened.candidate, attrs)

    def _confirm(self, step: int, incumbent: Config, screened: Screen, head: _CandidateHead
                 ) -> tuple[Move, Config] | None:
        self._confirmations += 1
        level = spent_alpha(self._confirmations, self.alpha)
        outcome = Confirmation(
            self.rollouts, self.bench, incumbent=incumbent, start=self.start,
            candidate=screened.candidate, level=level, dev_order=self.dev_order,
            screen_tasks=screened.tasks, look_tasks=self.chunk, val_order=self.val_order,
            val_look_tasks=self.val_chunk, k=self.options.k, budget_left=self._budget_left,
            slack=self.slack,
            fresh=range(self.attempts, 2 * self.attempts) if self.round else None,
            pooled=self.options.pooled_improvement).run()
        self._record(head, screened, outcome, level)
        self._annotate(step, screened, outcome)
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
        return SearchOutcome(end, [r.journal_json() for r in self.records])


def _two_sided(t: PairedTest) -> float:
    """Two-sided p-value of "no change" from a one-sided test against 0."""
    if t.n < 2:
        return 1.0
    if t.sd == 0:
        return 1.0 if t.effect == 0 else 0.0
    return min(1.0, 2 * min(t.p_value, 1 - t.p_value))
