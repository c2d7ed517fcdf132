"""The options of a search: each one a choice the contest benchmarks measured.

:class:`SearchOptions` is what :class:`forge.search.loop.Search` runs with; a run journals
it as :class:`forge.journal.RunOptions` (:meth:`SearchOptions.journal_form`) and a
resume reads it back (:meth:`SearchOptions.from_journal`), where a field a run from
before it did not journal takes the behaviour that run had, not today's default.
Each field's comment gives the figure that chose its default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from forge.bench import BudgetSettings
from forge.executors import ExecutorSettings
from forge.journal import RunOptions
from forge.moves import Move

__all__ = ["SearchOptions"]


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
    # A move whose confirmation passed dev and val but left a tolerance not shown either
    # way runs one more block of fresh attempts, it and the start, on every confirmation
    # task, and that tolerance is tested once more on all of them (the t-test at a
    # reserved share of its level, confirm.EXTENSION_SHARE; the exact test at one more
    # look). A tolerance of rare events needs attempts more than tasks: on triage, moves
    # within +0.01 harmful actions by +0.000 to +0.005 were left "not shown" on 1,100
    # paired attempts. It passes more moves within a tolerance (benchmarks/
    # tolerance_edge.py: harm +0.002 979 of 1,000 against 891, cost +4% 945 against 905)
    # but not triage's at 20k, read by the exact test (0.822 against 0.826; quality.py).
    tolerance_extension: bool = True
    # A tolerance whose metric changed on few tasks, every attempt by 0 or one unit (a
    # harmful action or none), some made worse and some better, is read by the netted
    # test (the net rate of attempts made worse; forge.stats.net_regression_p) in the
    # exact test's place: a move that trades harm between tasks was charged every
    # attempt it made worse. On triage at 20k (10 seeds): 0.845 against 0.822, with no
    # violation (benchmarks/quality.py); harm moved between tasks at net +0 promoted in
    # 607 of 1,000 searches against 320, at +0.01 (its edge) 44 against 25
    # (benchmarks/tolerance_edge.py).
    netted_tolerances: bool = True
    # A candidate that passed screening waits while the incumbent's other moves are
    # screened when the budget left is less than its confirmation projects to need even
    # at its screening effect (forge.search.deferral): a confirmation that cannot finish spends
    # the rest of the budget and proves nothing. On closedform at 2k (40 seeds) one
    # search changes: seed 7 holds `width` 2 -> 5 (1,254 rollouts projected, 1,000 left;
    # before, it took them all to prove +0.02) and proves `noise` 0.05 -> 0.65 (+0.19)
    # in 680: 0.408 -> 0.413 (benchmarks/quality.py).
    deferral: bool = True
    # A confirmation whose dev and val gates have passed runs the floors' tagged tasks
    # (both configs) before a tolerance's further chunks, and a floor that fails refuses
    # the candidate then: run last, a floor of a few tasks found the budget spent by a
    # tolerance that had just passed. On triage at 2k (80 seeds) 3 searches prove
    # `temperature` 0.8 -> 0.0 that were cut by the budget: 0.642 -> 0.646; 5k and 20k
    # as before (benchmarks/quality.py).
    floors_ahead: bool = True
    # A search whose start config scored nothing on its first evaluation (every attempt
    # an error, a timeout or unscorable: a broken harness) stops there, journaled as
    # start_failed, before it spends its budget comparing candidates that cannot be
    # scored either. A run from before went on, and resumes so.
    start_check: bool = True
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
                          room_recall=self.room_recall,
                          tolerance_extension=self.tolerance_extension,
                          netted_tolerances=self.netted_tolerances,
                          deferral=self.deferral, floors_ahead=self.floors_ahead,
                          start_check=self.start_check,
                          run_test=None if self.run_test else False, executor=self.executor,
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
                   tolerance_extension=bool(o.tolerance_extension),
                   netted_tolerances=bool(o.netted_tolerances),
                   deferral=bool(o.deferral), floors_ahead=bool(o.floors_ahead),
                   start_check=bool(o.start_check), run_test=o.run_test is not False,
                   executor=executor or o.executor)

