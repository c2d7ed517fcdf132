"""What a running search is doing now: its phase, rollouts, incumbent and pace.

A live view reads :class:`SearchProgress` while the search writes it. The journal
says what was decided; this says what is being worked on between two decisions (a
screening passes without a record, and the confirmation after it can take longer
than everything before). :class:`~forge.search.loop.Search` keeps one current (it only
records; no decision reads it). The library itself draws nothing: ``forge.report.live``
does, on a terminal.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from forge.config.moves import Move
from forge.config.registry import Config
from forge.evaluation.session import Session
from forge.results.failures import FailureTally
from forge.results.model import AttemptResult
from forge.search.attempt_cache import AttemptCache
from forge.stats.paired import Interval

__all__ = ["Phase", "RunExit", "SearchProgress"]

Phase = Literal["starting", "start", "screening", "confirming", "test", "done"]
#: How a search ended: it finished (whatever its stop reason), a signal interrupted it,
#: or an error ended it (an executor lost, a disk full).
RunExit = Literal["finished", "interrupted", "failed"]


def _move_text(move: Move) -> str:
    return f"{move.target} {move.before!r} -> {move.after!r}"


@dataclass
class SearchProgress:
    """The state of one search as a live view shows it. Written by the search's
    thread, read by the view's: each field is replaced whole, never mutated in place."""

    budget_rollouts: int | None = None
    #: AttemptCache of the test split after the search (start and final, every test task
    #: k times): the rollout budget does not include them, the time left does.
    test_rollouts: int = 0
    phase: Phase = "starting"
    step: int = 0
    #: The move being screened or confirmed, its place among the step's proposals (M of
    #: N; 0 for one that is not among them: an expansion, a deferred candidate of an
    #: earlier step), and what it is then.
    move: str | None = None
    index: int = 0
    of: int = 0
    extra: str | None = None
    dev_looks: int = 0
    val_looks: int = 0
    on_val: bool = False  # the confirmation's looks have reached val
    promotions: int = 0
    #: The incumbent's mean over its dev tasks on the screening seeds, with its 95% interval.
    incumbent: Interval | None = None
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    #: How the search ended (set with ``phase`` "done"), and why it stopped if it did.
    ending: RunExit | None = None
    stop_reason: str | None = None
    #: The command that resumes this run, shown if a signal interrupts it (set by the
    #: command line, which knows the journals folder).
    resume: str | None = None
    _rollouts: AttemptCache | None = None
    _candidate: str | None = None
    _positions: dict[str, int] = field(default_factory=dict)  # the step's moves: M of N
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

    def attach(self, rollouts: AttemptCache, session: Session) -> None:
        """Follow ``rollouts`` (its budget count) and ``session`` (each batch as it
        starts, each attempt as it ends)."""
        self._rollouts = rollouts
        self.started = time.monotonic()  # the pace is the search's, not the bench loading's
        session.on_batch = self.batch
        session.on_attempt = self.attempt_done

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

    def begin(self) -> None:
        """The search starts running attempts."""
        self.phase = "start"
        if self.on_begin is not None:
            self.on_begin()
        self.changed()

    def end(self, ending: RunExit = "finished") -> None:
        """The search has ended, however it ended (``ending`` says how)."""
        self.finished = time.monotonic()
        self.phase, self.ending = "done", ending
        if self.on_end is not None:
            self.on_end()

    def begin_step(self, step: int, proposals: Sequence[Move], incumbent: Interval | None
                   ) -> None:
        """A step begins: ``proposals`` are its moves, in the order they are screened."""
        self.step, self.of, self.index = step, len(proposals), 0
        self._positions = {_move_text(m): i for i, m in enumerate(proposals, 1)}
        self.incumbent = incumbent

    def _place(self, move: Move, what: str) -> None:
        """Set the move shown and its place among the step's proposals (0 and ``what``
        for one that is not among them)."""
        text = _move_text(move)
        self.move, self.index = text, self._positions.get(text, 0)
        self.extra = None if self.index else what

    def screening(self, move: Move, *, proposer: str | None = None) -> None:
        """``move`` is being screened (``proposer`` "expansion": the farther value of a
        move that passed, screened before that move's confirmation)."""
        self._place(move, "expansion" if proposer == "expansion" else "further move")
        self.phase = "screening"
        self.changed()

    def confirming(self, move: Move, candidate: Config, *, proposer: str | None = None
                   ) -> None:
        """``candidate`` (``move`` applied) is being confirmed; one not among the step's
        proposals is an expansion (``proposer``) or a deferred candidate."""
        self._candidate = candidate.fingerprint
        self.dev_looks = self.val_looks = 0
        self.on_val = False
        self._place(move, "expansion" if proposer == "expansion" else "deferred move")
        self.phase = "confirming"
        self.changed()

    def testing(self) -> None:
        self._before_test = self.spent
        self.move, self.phase = None, "test"
        self.changed()

    # -- what the view reads ------------------------------------------------------------

    @property
    def failures(self) -> FailureTally | None:
        """Every attempt the search has counted, the unscored by reason."""
        return None if self._rollouts is None else self._rollouts.failures

    @property
    def elapsed_s(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def spent(self) -> int:
        """AttemptCache counted toward the budget, with those of the batch now running."""
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
