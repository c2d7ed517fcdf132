"""The search loop: one move at a time, screened, confirmed, gated, journaled.

Each step the proposer offers candidate moves from the incumbent. Every candidate
is *screened* on the dev screening seeds with racing; the strongest one that
passes is *confirmed* on fresh dev seeds at a level taken from an alpha-spending
sequence, then gated on auxiliary metrics, task floors and the val split. At most
one candidate is promoted per step. The search stops on ``max_steps``,
``patience``, a budget, or a local optimum; then the start config and the final
incumbent are each evaluated once on the test split.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from forge.attempt_cache import Rollouts
from forge.bench import Bench, BudgetSettings
from forge.executors import ExecutorSettings
from forge.gates import GateResult, aux_gate, dev_gate, floor_gate, score_deltas, val_gate
from forge.journal import JournalWriter, RunOptions
from forge.moves import Move, apply_move, neighbourhood
from forge.proposers import Proposal, Proposer
from forge.proposers._base import EvaluatedConfig, SearchView
from forge.racing import screen
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
    ScreenBlock,
    SplitDelta,
    StartRecord,
    StopReason,
    StopRecord,
    TestRecord,
    ValBlock,
)
from forge.registry import Config
from forge.results import TaskAttempts
from forge.session import Session
from forge.stats import PairedTest, paired_test, spent_alpha
from forge.store import AttemptStore
from forge.task import Task

__all__ = ["Search", "SearchOptions", "SearchOutcome"]

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
    chunks: int = 4
    max_blocks: int = 2
    # Measured in benchmarks/gates.py: futility at the point estimate (0.5) and a
    # narrow 'close' window cut rollouts per decision by about a third at no
    # measurable cost in power; screening carries no error guarantee to protect.
    futility_level: float = 0.5
    run_test: bool = True
    # Where attempts run; decisions are the same whichever (tested), so a resume may
    # not need the same one, but it uses the journaled one unless told otherwise.
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)

    def journal_form(self, *, proposer: str, proposer_info: dict[str, Any] | None,
                     first_moves: list[Move]) -> RunOptions:
        """The options as ``run.json`` keeps them, with the proposer's description."""
        return RunOptions(max_steps=self.max_steps, patience=self.patience,
                          budget=self.budget, k=self.k,
                          candidates_per_step=self.candidates_per_step, chunks=self.chunks,
                          max_blocks=self.max_blocks, futility_level=self.futility_level,
                          executor=self.executor, proposer=proposer,
                          proposer_info=proposer_info, first_moves=first_moves,
                          concurrency=self.concurrency)

    @classmethod
    def from_journal(cls, o: RunOptions, *, seed: int, concurrency: int, timeout_s: float,
                     executor: ExecutorSettings | None = None) -> SearchOptions:
        """The options a run was started with, for its resume; ``concurrency`` is used
        where the run did not journal one, ``executor`` instead of the journaled one."""
        return cls(max_steps=o.max_steps, patience=o.patience, budget=o.budget, k=o.k,
                   seed=seed, concurrency=o.concurrency or concurrency, timeout_s=timeout_s,
                   candidates_per_step=o.candidates_per_step, chunks=o.chunks,
                   max_blocks=o.max_blocks, futility_level=o.futility_level,
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


@dataclass(frozen=True)
class _Spent:
    """What screening a candidate cost, as its records journal it."""

    rollouts: int
    saved_by_racing: int
    reused: int
    blocks: int
    tasks_screened: int

    def fields(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclass
class _Screened:
    """A candidate that passed screening and waits for (or gives way to) confirmation."""

    proposal: Proposal
    candidate: Config
    head: _CandidateHead
    screen: ScreenBlock
    spent: _Spent
    test: PairedTest

    def skip(self, search: Search, why: str) -> None:
        search._emit(self.head(verdict="skipped", candidate=self.candidate.fingerprint,
                               dev=DevBlock(screen=self.screen), **self.spent.fields(),
                               gates=[], why=why, **search._totals()))


STOP_TEXT = {
    "max_steps": "reached max_steps",
    "patience": "no promotion in `patience` steps in a row",
    "budget_rollouts": "rollout budget spent",
    "budget_cost": "cost budget spent",
    "budget_wall_time": "wall-time budget spent",
    "local_optimum": "local optimum: every neighbour of the incumbent was tried and refused",
}


class Search:
    """One search run. ``run()`` is deterministic given the bench, options and seed."""

    def __init__(self, bench: Bench, start: Config, proposer: Proposer, options: SearchOptions,
                 *, run_id: str, folder: Path, first_moves: list[Move] | None = None,
                 on_record: Callable[[AnyRecord], None] | None = None) -> None:
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
        self._t0 = time.monotonic()
        self._confirmations = 0  # since the last promotion: indexes the spending sequence
        self._segment = 0  # promotions so far: each segment confirms on fresh seeds
        self._out_of_budget = False  # a decision was cut short: it did not fit the budget
        gates = bench.spec.gates
        self.alpha = gates.alpha
        self.tags = {t.id: list(t.tags) for s in bench.splits.values() for t in s}

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

    def _tasks(self, split: str) -> list[Task]:
        return self.bench.tasks(split)

    def _get(self, config: Config, split: str, stream: str,
             blocks: int = 1) -> TaskAttempts:
        k = self.options.k
        return self.rollouts.get(config, split, stream, self._tasks(split), range(k * blocks))

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

    def _compare(self, before: TaskAttempts,
                 after: TaskAttempts) -> PairedTest:
        # alpha 0.025 per side: the reported bounds form a 95% two-sided interval.
        return paired_test(list(score_deltas(before, after).values()), alpha=0.025)

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> SearchOutcome:
        # A damaged line mid-file raises JournalError: not something to run over.
        store = AttemptStore(self.folder / "attempts.jsonl")
        with Session(self.bench, self.options.executor, seed=self.options.seed,
                     concurrency=self.options.concurrency,
                     timeout_s=self.options.timeout_s) as session:
            self.rollouts = Rollouts(self.bench, session, store)
            return self._run()

    def _run(self) -> SearchOutcome:
        opts = self.options
        incumbent = self.start
        registry = self.bench.registry
        start_dev = self._get(incumbent, "dev", "dev")
        start_val = (self._get(incumbent, "val", "val") if "val" in self.bench.splits
                     else TaskAttempts())
        start_mean = start_dev.mean_score
        # Nothing scored gives NaN, which a model-based proposer skips, not a false 0.
        history = [EvaluatedConfig(incumbent.values, incumbent.fingerprint,
                                   math.nan if start_mean is None else start_mean,
                                   len(start_dev))]
        self.proposer.observe(incumbent, history[0].dev_mean)
        self._emit(StartRecord(config=incumbent.values, fingerprint=incumbent.fingerprint,
                               dev_mean=start_dev.mean_score,
                               val_mean=start_val.mean_score if start_val else None,
                               rollouts_total=self.rollouts.used))
        tried: set[tuple[str, str]] = set()
        promotions: list[PromotedMove] = []
        step = 0
        since_promotion = 0
        order = self._tasks("dev")[:]
        self._rng("dev-order").shuffle(order)
        stop_reason: StopReason | None = None
        while True:
            if step >= opts.max_steps:
                stop_reason = "max_steps"
            elif since_promotion >= opts.patience:
                stop_reason = "patience"
            else:
                stop_reason = self._budget_stop()
            untried = [m for m in neighbourhood(registry, incumbent)
                       if (incumbent.fingerprint,
                           apply_move(registry, incumbent, m).fingerprint) not in tried]
            if not stop_reason and not untried:
                stop_reason = "local_optimum"
            if stop_reason:
                break
            step += 1
            proposals = self._proposals(step, incumbent, untried, history)
            promoted = self._step(step, incumbent, proposals, untried, order, tried, history)
            if promoted is not None:
                move, incumbent = promoted
                promotions.append(PromotedMove.of(step, move))
                since_promotion = 0
            else:
                since_promotion += 1
        self._emit(StopRecord(reason=stop_reason, text=STOP_TEXT[stop_reason], step=step,
                              rollouts_total=self.rollouts.used, cost_total=self.rollouts.cost))
        return self._finish(stop_reason, step, promotions, incumbent, start_dev, start_val)

    def _proposals(self, step: int, incumbent: Config, untried: list[Move],
                   history: list[EvaluatedConfig]) -> list[Proposal]:
        n = self.options.candidates_per_step
        queued = [Proposal(move=m, proposer="runtime", reason="proposed most often by the "
                           "runtime mutator") for m in self.first_moves if m in untried]
        view = SearchView(registry=self.bench.registry, incumbent=incumbent, untried=untried,
                          history=list(history),
                          dev_attempts=[a for items in self._get(incumbent, "dev", "dev").values()
                                        for a in items],
                          step=step, rng=self._rng("propose", step))
        offered = queued + self.proposer.propose(view, n)
        # A proposer may refuse what its own source produced (an LLM's unusable reply):
        # each refusal is journaled as a record of its own, and the step goes on.
        for item in self.proposer.drain_rejections():
            self._emit(ProposalInvalidRecord.model_validate(
                {"proposer": self.proposer.name, **item, "step": step,
                 "incumbent": incumbent.fingerprint}))
        if not offered:  # a proposer with nothing to say falls back to the neighbourhood
            rest = untried[:]
            self._rng("fallback", step).shuffle(rest)
            offered = [Proposal(move=m, proposer="sweep", reason="fallback: the proposer "
                                "offered nothing; one-exchange neighbour") for m in rest]
        seen: list[Move] = []
        unique = []
        for p in offered:
            if p.move not in seen:
                seen.append(p.move)
                unique.append(p)
        return unique[:n]

    def _step(self, step: int, incumbent: Config, proposals: list[Proposal],
              untried: list[Move], order: list[Task], tried: set[tuple[str, str]],
              history: list[EvaluatedConfig]) -> tuple[Move, Config] | None:
        opts = self.options
        gates = self.bench.spec.gates
        passing: list[_Screened] = []
        for proposal in proposals:
            head = self._candidate_head(step, incumbent, proposal)
            try:
                candidate = apply_move(self.bench.registry, incumbent, proposal.move)
            except Exception as exc:  # an illegal proposal is journaled, never applied
                self._emit(head(verdict="rejected", gates=[
                    Gate(name="legal", passed=False, reason=str(exc))]))
                continue
            if proposal.move not in neighbourhood(self.bench.registry, incumbent):
                # Legal but more than one step: the one-move rule keeps causes single.
                self._emit(head(verdict="rejected", gates=[
                    Gate(name="legal", passed=False, reason=f"{proposal.move} is not a "
                         "neighbour of the incumbent (one step of one setting)")]))
                continue
            if proposal.move not in untried:
                self._emit(head(verdict="skipped", candidate=candidate.fingerprint, gates=[],
                                why="already tried against this incumbent"))
                continue
            used_before = self.rollouts.used
            outcome = screen(self.rollouts, incumbent, candidate, order, k=opts.k,
                             alpha=gates.alpha, min_effect=gates.min_effect, chunks=opts.chunks,
                             max_blocks=opts.max_blocks, futility_level=opts.futility_level,
                             budget_left=self._budget_left())
            mean = self.rollouts.peek(candidate, "dev", order, range(opts.k)).mean_score
            if outcome.status != "budget" and mean is not None:
                history.append(EvaluatedConfig(candidate.values, candidate.fingerprint, mean,
                                               outcome.tasks_seen))
                self.proposer.observe(candidate, mean)
            spent = _Spent(rollouts=self.rollouts.used - used_before,
                           saved_by_racing=outcome.saved_by_racing, reused=outcome.reused,
                           blocks=outcome.blocks, tasks_screened=outcome.tasks_seen)
            screened = ScreenBlock.of(outcome.status, outcome.test)
            if outcome.status == "pass":
                passing.append(_Screened(proposal, candidate, head, screened, spent,
                                         outcome.test))
                continue
            tried.add((incumbent.fingerprint, candidate.fingerprint))
            why = {"futile": "stopped early: cannot plausibly improve (futility)",
                   "fail": "no significant dev improvement on screening seeds",
                   "budget": "budget spent during screening"}[outcome.status]
            verdict = "skipped" if outcome.status == "budget" else "rejected"
            self._emit(head(verdict=verdict, candidate=candidate.fingerprint,
                            dev=DevBlock(screen=screened), **spent.fields(), gates=[
                                Gate(name="dev", passed=False,
                                     reason=f"{why}: screen {outcome.test.effect:+.3f}, "
                                            f"p={outcome.test.p_value:.3g}")],
                            **self._totals()))
            if outcome.status == "budget":
                self._out_of_budget = True
                return None
        passing = [item for item in passing if self._aux_prescreen(incumbent, item, order, tried)]
        if not passing:
            return None
        passing.sort(key=lambda item: -item.test.effect)
        best = passing[0]
        need, left = self._confirm_cost(incumbent, best.candidate), self._budget_left()
        chunk = 2 * opts.k * -(-len(order) // max(1, opts.chunks))
        if left is not None and need > left + chunk:
            # The rollout budget is honoured within one screening chunk: a confirmation
            # that would overshoot it by more is not started (the candidates stay untried).
            for item in passing:
                item.skip(self, f"passed screening; budget spent: confirming needs {need} "
                                f"rollouts, {left} left")
            self._out_of_budget = True
            return None
        for item in passing[1:]:
            item.skip(self, f"passed screening; the stronger {best.proposal.move} was "
                            "confirmed first")
        tried.add((incumbent.fingerprint, best.candidate.fingerprint))
        return self._confirm(step, incumbent, best)

    def _aux_prescreen(self, incumbent: Config, item: _Screened, order: list[Task],
                       tried: set[tuple[str, str]]) -> bool:
        """Refuse, before confirming, a candidate whose screening data already break an
        auxiliary tolerance: a confirmation would spend a level of the error budget on
        a candidate the same gate would refuse. Only selection reads screening data,
        so this costs the confirmation's guarantee nothing."""
        attempts = range(self.options.k * item.spent.blocks)
        inc = self.rollouts.peek(incumbent, "dev", order, attempts)
        cand = self.rollouts.peek(item.candidate, "dev", order, attempts)
        failed = [g for name, spec in self.bench.spec.metrics.items()
                  if not (g := aux_gate(name, spec, inc, cand, alpha=self.alpha)).passed]
        if not failed:
            return True
        tried.add((incumbent.fingerprint, item.candidate.fingerprint))
        self._emit(item.head(verdict="rejected", candidate=item.candidate.fingerprint,
                             dev=DevBlock(screen=item.screen), **item.spent.fields(),
                             gates=[Gate.of(g, reason=f"{g.reason} (on the screening seeds)")
                                    for g in failed],
                             why="passed dev screening but breaks an auxiliary tolerance; "
                                 "not worth a confirmation", **self._totals()))
        return False

    def _confirm_cost(self, incumbent: Config, candidate: Config) -> int:
        """Rollouts a confirmation would add at most (val counted as if it runs)."""
        k = range(self.options.k)
        stream = f"dev#confirm{self._segment}"
        need = sum(self.rollouts.unrequested(c, stream, self._tasks("dev"), k)
                   for c in (incumbent, candidate))
        if "val" in self.bench.splits:
            need += sum(self.rollouts.unrequested(c, "val", self._tasks("val"), k)
                        for c in (incumbent, candidate))
        return need

    def _candidate_head(self, step: int, incumbent: Config, proposal: Proposal
                        ) -> _CandidateHead:
        move = proposal.move
        return partial(CandidateRecord, step=step, move=move, inverse=move.inverse(),
                       proposer=proposal.proposer, reason=proposal.reason,
                       incumbent=incumbent.fingerprint)

    def _totals(self) -> dict[str, float]:
        return {"rollouts_total": self.rollouts.used, "cost_total": self.rollouts.cost,
                "elapsed_s": time.monotonic() - self._t0}

    def _confirm(self, step: int, incumbent: Config, best: _Screened
                 ) -> tuple[Move, Config] | None:
        candidate, screen_test = best.candidate, best.test
        gates_cfg = self.bench.spec.gates
        used_before = self.rollouts.used - best.spent.rollouts
        self._confirmations += 1
        level = spent_alpha(self._confirmations, gates_cfg.alpha)
        # Fresh seeds for each incumbent: the incumbent's own confirmation attempts
        # were selected for passing, and reusing them would bias later tests.
        stream = f"dev#confirm{self._segment}"
        inc_dev = self._get(incumbent, "dev", stream)
        cand_dev = self._get(candidate, "dev", stream)
        confirm = paired_test(list(score_deltas(inc_dev, cand_dev).values()),
                              alpha=gates_cfg.alpha, threshold=gates_cfg.min_effect)
        results: list[GateResult] = [dev_gate(confirm, level=level, screen=screen_test)]
        results += [aux_gate(name, spec, inc_dev, cand_dev, alpha=gates_cfg.alpha)
                    for name, spec in self.bench.spec.metrics.items()]
        floor_checks: list[tuple[str, Any, Any]] = [("dev", inc_dev, cand_dev)]
        floors = [floor_gate(tag, floor, floor_checks, self.tags)
                  for tag, floor in gates_cfg.task_floors.items()]
        val_info: ValBlock | None = None
        not_run: list[str] = []
        # val is opened only for a candidate that passed every dev-side gate (floors too).
        if all(g.passed for g in results + floors) and "val" in self.bench.splits:
            inc_val = self._get(incumbent, "val", "val")
            cand_val = self._get(candidate, "val", "val")
            val_test = paired_test(list(score_deltas(inc_val, cand_val).values()),
                                   alpha=gates_cfg.alpha, threshold=-gates_cfg.val_margin)
            results.append(val_gate(val_test, margin=gates_cfg.val_margin))
            val_info = ValBlock.of(val_test, before=inc_val.mean_score,
                                   after=cand_val.mean_score)
            floor_checks.append(("val", inc_val, cand_val))
            floors = [floor_gate(tag, floor, floor_checks, self.tags)
                      for tag, floor in gates_cfg.task_floors.items()]
        elif "val" in self.bench.splits:
            not_run.append("val")
        results += floors
        promoted = all(g.passed for g in results)
        aux = {g.name[4:]: AuxDetails.model_validate(g.details) for g in results
               if g.name.startswith("aux:")}
        spent = dataclasses.replace(best.spent, rollouts=self.rollouts.used - used_before)
        self._emit(best.head(
            verdict="promoted" if promoted else "rejected", candidate=candidate.fingerprint,
            dev=DevBlock(screen=best.screen,
                         confirm=ConfirmBlock.of(confirm, level=level,
                                                 index=self._confirmations, stream=stream),
                         before=inc_dev.mean_score, after=cand_dev.mean_score),
            val=val_info, aux=aux, gates=[Gate.of(g) for g in results], gates_not_run=not_run,
            **spent.fields(), **self._totals()))
        if not promoted:
            return None
        self._segment += 1
        self._confirmations = 0
        return best.proposal.move, candidate

    def _finish(self, stop_reason: StopReason, steps: int, promotions: list[PromotedMove],
                final: Config, start_dev: TaskAttempts,
                start_val: TaskAttempts) -> SearchOutcome:
        def block(before: TaskAttempts, after: TaskAttempts
                  ) -> SplitDelta:
            t = self._compare(before, after)
            return SplitDelta(start=before.mean_score, final=after.mean_score,
                              delta=t.effect if t.n else None,
                              ci_low=t.ci_low if t.n > 1 else None,
                              ci_high=t.ci_high if t.n > 1 else None)

        dev = block(start_dev, self._get(final, "dev", "dev"))
        val = block(start_val, self._get(final, "val", "val")) if start_val else SplitDelta()
        test = SplitDelta()
        if self.options.run_test and "test" in self.bench.splits:
            # The test split is opened here, once, after every decision is made.
            start_test = self._get(self.start, "test", "test")
            final_test = self._get(final, "test", "test")
            test = block(start_test, final_test)
            t = self._compare(start_test, final_test)
            # The gates hold each move to the tolerances against its own incumbent, so
            # several moves can add up past them: the whole way from the start is
            # checked here, on test, for the reviewer (it decides nothing).
            aux = [aux_gate(name, spec, start_test, final_test, alpha=self.alpha)
                   for name, spec in self.bench.spec.metrics.items()]
            self._emit(TestRecord.model_validate(
                {**test.as_json(), "confidence": 0.95, "n_tasks": t.n,
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
