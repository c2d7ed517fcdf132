"""The options of a search: what a user sets, and the constants the benchmarks chose.

:class:`SearchOptions` is declared once, here: each field with its default, its bounds
and its help, which ``forge search`` reads to build its flags. The command builds one
(:func:`~forge.search.launch.search_options`: the flags given, the bench's settings for
the rest) and hands it to :func:`~forge.search.launch.launch_search`, which gives it to
:class:`forge.search.loop.Search`; a library caller may give ``launch_search`` the same
fields as keywords. A run journals it as :class:`forge.journal.RunOptions`
(:meth:`SearchOptions.journal_form`) and a resume reads it back
(:meth:`SearchOptions.from_journal`). The choices the contest benchmarks made once for
every search are module constants here, each with the figure that chose it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic.dataclasses import dataclass

from forge.bench.loader import BudgetSettings
from forge.config.moves import Move
from forge.errors import JournalError
from forge.evaluation.evaluate import DEFAULT_SEED
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


# Each description is the help of the field's ``forge search`` flag: the command reads
# it (and the lower bound, and the default) from here. The fields without a default are
# the bench's when not given (:func:`forge.search.launch.search_options`).
@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """How a search runs; every field is one a user sets."""

    max_steps: int = Field(
        ge=0, description="stop after N steps (default: the bench's search.max_steps)")
    patience: int = Field(
        ge=1, description="stop after N steps in a row without a promotion (default: the "
                          "bench's)")
    # --budget-rollouts N sets its rollouts, over the bench's budget.
    budget: BudgetSettings = Field(
        description="rollout budget: stop once N are spent, to within one screening chunk "
                    "(default: the bench's search.budget)")
    k: int = Field(ge=1, description="attempts per task")
    seed: int = Field(default=DEFAULT_SEED,
                      description="run seed: the same seed gives the same decisions")
    #: Attempts run at once (the bench's ``rollouts.concurrency``).
    concurrency: int
    #: Seconds an attempt may run (the bench's ``rollouts.timeout_s``).
    timeout_s: float
    candidates_per_step: int = Field(
        default=4, ge=1, description="moves of different settings per step (an enum among "
                                     "them brings its other choices too)")
    #: False: leave the test split alone (``--no-test``; the help is that flag's).
    run_test: bool = Field(default=True, description="end without the test split: quicker, "
                                                     "but the run cannot be promoted")
    # Where attempts run; decisions are the same whichever (tested), so a resume may
    # not need the same one, but it uses the journaled one unless told otherwise.
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings)

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
