"""The options of a search: what a user sets, and the constants the benchmarks chose.

:class:`SearchOptions` is what :class:`forge.search.loop.Search` runs with; a run journals
it as :class:`forge.journal.RunOptions` (:meth:`SearchOptions.journal_form`) and a
resume reads it back (:meth:`SearchOptions.from_journal`). Every field is set by a user:
``forge search``'s flags or the bench's ``search``/``rollouts`` sections (see
``docs``), or a library caller (``run_test``). The choices the contest benchmarks made
once for every search are module constants here, each with the figure that chose it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.bench.loader import BudgetSettings
from forge.config.moves import Move
from forge.errors import JournalError
from forge.executors import ExecutorSettings
from forge.journal import RunOptions
from forge.journal.run import JournaledFlags

__all__ = ["CHUNKS", "PRECISION_ROUNDS", "SCREEN_ALPHA", "TEST_K", "SearchOptions",
           "check_flags"]

#: Screening chunks and confirmation looks a split is cut into: six needed the fewest
#: rollouts a decision at 90% power on the gate benches (benchmarks/gates.py).
CHUNKS = 6
#: Screening selects below this p after its last chunk (a fifth of it before): selection
#: only, it spends none of the error budget.
SCREEN_ALPHA = 0.05
#: Precision rounds at a local optimum (close moves screened again on twice the attempts
#: a task, FocusedILS's runs per config, raised): walksat and triage gained in quality.py.
PRECISION_ROUNDS = 2
#: Attempts a test task at the end (never fewer than k): the end check's bound is over
#: the test tasks' attempt noise, which more attempts sharpen (benchmarks/end_check.py).
TEST_K = 20


@dataclass(frozen=True)
class SearchOptions:
    """How a search runs; every field is one a user sets."""

    max_steps: int
    patience: int
    budget: BudgetSettings
    k: int
    seed: int
    concurrency: int
    timeout_s: float
    candidates_per_step: int = 4
    #: False: leave the test split alone (a library caller's choice; the CLI runs it).
    run_test: bool = True
    # Where attempts run; decisions are the same whichever (tested), so a resume may
    # not need the same one, but it uses the journaled one unless told otherwise.
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)

    @property
    def test_attempts(self) -> int:
        """Attempts a test task at the end: :data:`TEST_K`, never fewer than ``k``."""
        return max(self.k, TEST_K)

    def journal_form(self, *, proposer: str, proposer_info: dict[str, Any] | None,
                     first_moves: list[Move]) -> RunOptions:
        """The options as ``run.json`` keeps them, with the proposer's description."""
        return RunOptions(max_steps=self.max_steps, patience=self.patience,
                          budget=self.budget, k=self.k,
                          candidates_per_step=self.candidates_per_step,
                          run_test=None if self.run_test else False, executor=self.executor,
                          proposer=proposer, proposer_info=proposer_info, first_moves=first_moves,
                          concurrency=self.concurrency)

    @classmethod
    def from_journal(cls, o: RunOptions, *, seed: int, concurrency: int, timeout_s: float,
                     executor: ExecutorSettings | None = None) -> SearchOptions:
        """The options a run was started with, for its resume; ``concurrency`` is used
        where the run did not journal one, ``executor`` instead of the journaled one."""
        return cls(max_steps=o.max_steps, patience=o.patience, budget=o.budget, k=o.k,
                   seed=seed, concurrency=o.concurrency or concurrency, timeout_s=timeout_s,
                   candidates_per_step=o.candidates_per_step, run_test=o.run_test is not False,
                   executor=executor or o.executor)


def _today(k: int) -> dict[str, object]:
    """What each flag an older ``run.json`` journaled must read for this search to be the
    one that run ran (its absence read as that run's behaviour then)."""
    return {"chunks": CHUNKS, "screen_alpha": SCREEN_ALPHA, "jumps": True,
            "precision_rounds": PRECISION_ROUNDS, "selection": "best", "near_values": True,
            "near_copy_records": True, "enum_choices": True, "hint_jumps": True,
            "pooled_improvement": True, "test_k": max(k, TEST_K), "expansion": True,
            "room_recall": True, "tolerance_extension": True, "netted_tolerances": True,
            "deferral": True, "floors_ahead": True, "start_check": True}


def _as_run(flags: JournaledFlags, k: int) -> dict[str, object]:
    """The behaviour an older run had, flag by flag (absent: what it did before the flag)."""
    return {"chunks": flags.chunks,
            "screen_alpha": SCREEN_ALPHA if flags.screen_alpha is None else flags.screen_alpha,
            "jumps": flags.jumps is not False, "precision_rounds": flags.precision_rounds or 0,
            "selection": flags.selection or "first", "near_values": bool(flags.near_values),
            "near_copy_records": bool(flags.near_copy_records),
            "enum_choices": bool(flags.enum_choices), "hint_jumps": bool(flags.hint_jumps),
            "pooled_improvement": bool(flags.pooled_improvement),
            "test_k": max(k, flags.test_k or k), "expansion": bool(flags.expansion),
            "room_recall": bool(flags.room_recall),
            "tolerance_extension": bool(flags.tolerance_extension),
            "netted_tolerances": bool(flags.netted_tolerances),
            "deferral": bool(flags.deferral), "floors_ahead": bool(flags.floors_ahead),
            "start_check": bool(flags.start_check)}


def check_flags(flags: JournaledFlags | None, *, k: int, file: Path, run_id: str) -> None:
    """Refuse to resume a run whose ``run.json`` (an older shape, with a field per flag)
    journaled a behaviour this search no longer has: its replay would diverge. A
    ``run.json`` of today's shape has no flags (None) and always passes."""
    if flags is None:
        return
    was, now = _as_run(flags, k), _today(k)
    for name, expected in now.items():
        if was[name] != expected:
            shown = "absent" if getattr(flags, name) is None else repr(getattr(flags, name))
            raise JournalError(
                f"cannot resume {run_id}: it was searched with {name} {shown}, which this "
                f"forge no longer does (it searches as {name} {expected!r}); review, report "
                "or promote it as it is", file=file, field=f"options.{name}")
