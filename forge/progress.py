"""What a running search is doing now: its phase, rollouts, incumbent and pace.

A live view reads :class:`SearchProgress` while the search writes it. The journal
says what was decided; this says what is being worked on between two decisions (a
screening passes without a record, and the confirmation after it can take longer
than everything before). :class:`ObservedSearch` is the search with the few calls
that keep the progress current; it decides exactly what :class:`~forge.search.Search`
decides. The library itself draws nothing: ``forge.report.live`` does, on a terminal.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from forge.attempt_cache import Rollouts
from forge.moves import Move
from forge.proposers import Proposal
from forge.proposers._base import EvaluatedConfig
from forge.records import CandidateRecord, PromotedMove, StopReason
from forge.registry import Config
from forge.results import AttemptResult
from forge.screening import Screen
from forge.search import Search, SearchOutcome
from forge.stats import Interval, mean_interval

__all__ = ["ObservedSearch", "Phase", "SearchProgress"]

Phase = Literal["starting", "start", "screening", "confirming", "test", "done"]


def _move_text(move: Move) -> str:
    return f"{move.target} {move.before!r} -> {move.after!r}"


@dataclass
class SearchProgress:
    """The state of one search as a live view shows it. Written by the search's
    thread, read by the view's: each field is replaced whole, never mutated in place."""

    budget_rollouts: int | None = None
    #: Rollouts of the test split after the search (start and final, every test task
    #: k times): the rollout budget does not include them, the time left does.
    test_rollouts: int = 0
    phase: Phase = "starting"
    step: int = 0
    #: The move being screened or confirmed, its place in the step (M of N).
    move: str | None = None
    index: int = 0
    of: int = 0
    dev_looks: int = 0
    val_looks: int = 0
    on_val: bool = False  # the confirmation's looks have reached val
    promotions: int = 0
    #: The incumbent's mean over its dev tasks on the screening seeds, with its 95% interval.
    incumbent: Interval | None = None
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    _rollouts: Rollouts | None = None
    _candidate: str | None = None
    _executed: int = 0  # attempts this process ran, counted as each one ends
    _before_test: int = 0  # rollouts spent when the test split was opened
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: Called when the search starts running attempts and when it ends, however it
    #: ends (a view starts and stops drawing with them).
    on_begin: Callable[[], None] | None = None
    on_end: Callable[[], None] | None = None
    #: Called on the search's thread when the phase, the move or a look changes: a view
    #: redraws then, so that no phase goes by between two of its timed redraws.
    on_change: Callable[[], None] | None = None

    # -- what the search tells it ------------------------------------------------------

    def attach(self, rollouts: Rollouts) -> None:
        """Follow ``rollouts``: its budget count, and each attempt as it ends."""
        self._rollouts = rollouts
        self.started = time.monotonic()  # the pace is the search's, not the bench loading's
        rollouts.session.on_batch = self.batch
        rollouts.session.on_attempt = self.attempt_done

    def batch(self, config: Config, split: str, size: int) -> None:
        """A batch of ``size`` attempts of ``config`` on ``split`` is about to run."""
        # Every look of a confirmation runs the candidate first: one batch, one look.
        if self.phase == "confirming" and config.fingerprint == self._candidate:
            if split == "dev":
                self.dev_looks += 1
            elif split == "val":
                self.val_looks += 1
            self.on_val = split == "val"
            self.changed()

    def attempt_done(self, result: AttemptResult) -> None:
        """An attempt has ended (run now, not found in the store)."""
        with self._lock:  # an executor may end attempts on threads of its own
            self._executed += 1

    def changed(self) -> None:
        """Tell the view (on_change) that the phase, the move or a look changed."""
        if self.on_change is not None:
            self.on_change()

    def begin_step(self, step: int, proposals: int) -> None:
        self.step, self.of, self.index = step, proposals, 0

    def screening(self, move: Move) -> None:
        self.move, self.index, self.phase = _move_text(move), self.index + 1, "screening"
        self.changed()

    def confirming(self, move: Move, candidate: Config) -> None:
        self._candidate = candidate.fingerprint
        self.dev_looks = self.val_looks = 0
        self.on_val = False
        self.move, self.phase = _move_text(move), "confirming"
        self.changed()

    def testing(self) -> None:
        self._before_test = self.spent
        self.move, self.phase = None, "test"
        self.changed()

    # -- what the view reads ------------------------------------------------------------

    @property
    def elapsed_s(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def spent(self) -> int:
        """Rollouts counted toward the budget, with those of the batch now running."""
        if self._rollouts is None:
            return 0
        running = max(0, self._executed - self._rollouts.executed)
        return self._rollouts.used + running

    @property
    def rate(self) -> float | None:
        """Attempts run per second since the start (found in the store: not counted)."""
        elapsed = self.elapsed_s
        return self._executed / elapsed if self._executed and elapsed > 0 else None

    @property
    def rollouts_left(self) -> int | None:
        """What the budget allows still, plus the test split; None without a budget."""
        if self.budget_rollouts is None:
            return None
        if self.phase == "test":
            return max(0, self.test_rollouts - (self.spent - self._before_test))
        return max(0, self.budget_rollouts - self.spent) + self.test_rollouts

    @property
    def eta_s(self) -> float | None:
        """Seconds to the end if the search spends its whole budget at the pace so far
        (it stops sooner on patience or max_steps); None without a budget or a pace."""
        left, rate = self.rollouts_left, self.rate
        if self.phase == "done":
            return 0.0
        if left is None or rate is None or not math.isfinite(rate) or rate <= 0:
            return None
        return left / rate


class ObservedSearch(Search):
    """:class:`~forge.search.Search` keeping a :class:`SearchProgress` current."""

    def __init__(self, *args: Any, progress: SearchProgress, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.progress = progress
        progress.budget_rollouts = self.options.budget.rollouts
        progress.test_rollouts = (2 * self.options.k * len(self.bench.tasks("test"))
                                  if self.options.run_test and "test" in self.bench.splits
                                  else 0)

    def _run(self) -> SearchOutcome:
        p = self.progress
        p.attach(self.rollouts)
        p.phase = "start"
        if p.on_begin is not None:
            p.on_begin()
        p.changed()
        try:
            return super()._run()
        finally:
            p.finished = time.monotonic()
            p.phase = "done"
            if p.on_end is not None:
                p.on_end()

    def _proposals(self, step: int, incumbent: Config, untried: list[Move],
                   history: list[EvaluatedConfig]) -> list[Proposal]:
        proposals = super()._proposals(step, incumbent, untried, history)
        known = self.rollouts.peek(incumbent, "dev", self.dev_order, range(self.options.k))
        means = []
        for items in known.values():
            # Unscored attempts are left out, never counted as 0, as everywhere in forge.
            values = [a.score.value for a in items if a.scored and a.score is not None]
            if values:
                means.append(math.fsum(values) / len(values))
        self.progress.incumbent = mean_interval(means, 0.95)
        self.progress.begin_step(step, len(proposals))
        return proposals

    def head(self, step: int, incumbent: Config, proposal: Proposal
             ) -> partial[CandidateRecord]:
        self.progress.screening(proposal.move)
        return super().head(step, incumbent, proposal)

    def _confirm(self, step: int, incumbent: Config, screened: Screen,
                 head: partial[CandidateRecord]) -> tuple[Move, Config] | None:
        self.progress.confirming(screened.proposal.move, screened.candidate)
        promoted = super()._confirm(step, incumbent, screened, head)
        if promoted is not None:
            self.progress.promotions += 1
        return promoted

    def _finish(self, stop_reason: StopReason, steps: int, promotions: list[PromotedMove],
                final: Config) -> SearchOutcome:
        self.progress.testing()
        return super()._finish(stop_reason, steps, promotions, final)

