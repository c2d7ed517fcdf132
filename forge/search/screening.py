"""Screening a proposed move: the race, the tolerance prescreen, the memory's say.

:class:`Screening` races one candidate (:func:`forge.search.racing.race`) and decides whether
it goes on to a confirmation. It refuses, journaling why:

- a candidate the race found futile or weak on the dev screening tasks;
- one whose screening data against the *start* config already put an auxiliary
  metric past its tolerance, or its failure share past the ``unscored`` allowance
  (with 80% confidence): a confirmation would spend a level of the error budget on a
  move the same gate would refuse;
- one the memory holds back: refused by val or a floor at an earlier incumbent with
  no new evidence since, or by a tolerance that its screening data still break;
- an expansion (:meth:`Screening.expand`) that scores below the nearer value on some
  attempt that value's race read.

A candidate that passes is handed back, unjournaled: its confirmation's record
carries the screening too. Every refusal goes into the memory. Nothing here reads val
or test, and nothing decides a promotion: screening only selects.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from forge.bench.loader import Bench
from forge.config.registry import Config
from forge.core.task import Task
from forge.gates.checks import aux_text
from forge.journal.records import AnyRecord, CandidateRecord, DevBlock, GateRecord, ScreenBlock
from forge.proposers import Proposal
from forge.results.model import TaskAttempts
from forge.search.attempt_cache import AttemptCache, Fetch
from forge.search.memory import MoveFate, MoveMemory, MoveNote
from forge.search.racing import RaceOutcome, no_worse, race
from forge.stats.paired import PairedTest, paired_test
from forge.stats.pairs import metric_deltas, regression_allowance, regressions
from forge.stats.unscored import failure_increase, failure_pairs

__all__ = ["Screen", "Screening"]

#: Confidence with which screening data must put a metric past its tolerance to refuse.
PRESCREEN_CONFIDENCE = 0.8


@dataclass(frozen=True)
class Screen:
    """A screened candidate: how its race went, what it cost, and what screening made of
    it (``status``: the race's, or ``aux`` / ``held`` when refused after a passing race)."""

    proposal: Proposal
    candidate: Config
    race: RaceOutcome
    status: str = ""

    def __post_init__(self) -> None:
        if not self.status:
            object.__setattr__(self, "status", self.race.status)

    @property
    def test(self) -> PairedTest:
        return self.race.test

    @property
    def tasks(self) -> int:
        return self.race.tasks

    @property
    def rollouts(self) -> int:
        return self.race.rollouts

    @property
    def se(self) -> float:
        return self.race.se

    @property
    def block(self) -> ScreenBlock:
        return ScreenBlock.of(self.status, self.race.test)


class Screening:
    """Screens candidates of one search (its rollouts, memory and journal)."""

    def __init__(self, *, bench: Bench, rollouts: AttemptCache, start: Config, memory: MoveMemory,
                 order: list[Task], chunk: int, k: int, alpha: float,
                 emit: Callable[[AnyRecord], Any],
                 standing: Callable[[str], float]) -> None:
        self.bench = bench
        self.rollouts = rollouts
        self.start = start
        self.memory = memory
        self.order = order
        self.chunk = chunk
        self.k = k
        self.alpha = alpha
        self.emit = emit
        # The incumbent's regression of a metric against the start (0 for the start).
        self.standing = standing

    def run(self, step: int, incumbent: Config, proposal: Proposal, candidate: Config,
            head: partial[CandidateRecord], *, attempts: int | None = None,
            patient: bool = True) -> Fetch[Screen]:
        """The candidate's screen on ``attempts`` attempts a task (K unless a precision
        round asks for more), its race hasty unless ``patient``; every outcome but a pass
        is journaled here. One the budget cut short (status ``budget``, perhaps before
        its first chunk) is journaled as skipped; the budget is spent then; so is a
        paused one, which the caller may screen again patiently."""
        gates = self.bench.spec.gates
        outcome = yield from race(
            self.rollouts, incumbent, candidate, self.order, chunk=self.chunk,
            k=attempts or self.k, alpha=self.alpha, min_effect=gates.min_effect,
            beyond=lambda tasks: self._broken(candidate, tasks), patient=patient)
        screen = Screen(proposal, candidate, outcome)
        t = outcome.test
        common = self._common(screen)
        if outcome.status == "budget":
            return self._cut(screen, head, common)
        move = proposal.move
        if outcome.status == "paused":
            self.emit(head(verdict="skipped", gates=[], why=(
                f"paused after {outcome.tasks} screening tasks (screen {t.effect:+.3f}, "
                f"p={t.p_value:.3g}): its estimate as it stands cannot reach p < "
                f"{self.alpha:g} with every task in; its race goes on only if this "
                "incumbent has nothing else left to screen"), **common))
            self.memory.record(move, MoveNote(step, incumbent.fingerprint, "weak", t.effect,
                                              outcome.se))
            return screen
        if outcome.status in {"futile", "weak"}:
            why = ("cannot plausibly improve (futility)" if outcome.status == "futile"
                   else f"no dev improvement clear enough to confirm (p >= "
                        f"{self.alpha:g} within reach on the screening tasks)")
            self.emit(head(verdict="rejected", why=why, gates=[GateRecord(
                name="dev", passed=False,
                reason=f"{why}: screen {t.effect:+.3f}, p={t.p_value:.3g}, "
                       f"{outcome.tasks} tasks")], **common))
            kind: MoveFate = "futile" if outcome.status == "futile" else "weak"
            self.memory.record(move, MoveNote(step, incumbent.fingerprint, kind, t.effect,
                                              outcome.se))
            return screen
        refused = yield from self._past_tolerance(step, incumbent, screen, head, common)
        if refused is not None:
            return refused
        held = self.held_back(screen)
        if held is not None:
            self.emit(head(verdict="rejected", gates=[], why=held, **{
                **common, "dev": DevBlock(screen=ScreenBlock.of("held", t))}))
            return Screen(proposal, candidate, outcome, "held")
        self.memory.record(move, MoveNote(step, incumbent.fingerprint, "screened", t.effect,
                                          outcome.se))
        return screen

    def expand(self, step: int, incumbent: Config, proposal: Proposal, candidate: Config,
               head: partial[CandidateRecord], nearer: Screen, *, attempts: int | None = None
               ) -> Fetch[Screen]:
        """An expansion of ``nearer``'s passing move (:func:`forge.config.moves.expansion`), run
        by :func:`~forge.search.racing.no_worse` on the tasks and attempts ``nearer``'s race
        read. It passes only when it scores at least as well on every attempt and its
        own screening data keep every tolerance by their estimate (checked after each
        chunk, as the race does); any other outcome is journaled here (as
        :meth:`run`)."""
        # Held to the estimate, not the 80% bound: a farther value is only worth its
        # confirmation's share of the level if it likely keeps every tolerance, since
        # the nearer value stands without it.
        outcome = yield from no_worse(
            self.rollouts, incumbent, nearer.candidate, candidate, self.order, nearer.race,
            chunk=self.chunk, k=attempts or self.k, alpha=self.alpha,
            min_effect=self.bench.spec.gates.min_effect,
            beyond=lambda tasks: self._broken(candidate, tasks, confidence=0.5))
        screen = Screen(proposal, candidate, outcome)
        common = self._common(screen)
        if outcome.status == "budget":
            return self._cut(screen, head, common)
        if outcome.status == "worse":
            move = nearer.proposal.move
            why = (f"scored below {move.target} {move.after!r} on a screening attempt: the "
                   "nearer value stands")
            self.emit(head(verdict="rejected", why=why, gates=[GateRecord(
                name="dev", passed=False, reason=f"{why} (screen {outcome.test.effect:+.3f}, "
                f"{outcome.tasks} tasks run)")], **common))
            return screen
        if outcome.status == "aux":  # no_worse checked every chunk: journal the refusal
            refused = yield from self._past_tolerance(step, incumbent, screen, head, common,
                                                      confidence=0.5)
            return refused or screen
        return screen

    def _common(self, screen: Screen) -> dict[str, Any]:
        """The fields every record of a screening outcome carries."""
        outcome = screen.race
        return {"candidate": screen.candidate.fingerprint, "rollouts": outcome.rollouts,
                "reused": outcome.reused, "tasks_screened": outcome.tasks,
                "dev": DevBlock(screen=screen.block), **self.rollouts.totals()}

    def _cut(self, screen: Screen, head: partial[CandidateRecord], common: dict[str, Any]
             ) -> Screen:
        self.emit(head(verdict="skipped", gates=[], why=f"budget spent during screening "
                       f"({screen.tasks} tasks screened)", **common))
        return screen

    def _past_tolerance(self, step: int, incumbent: Config, screen: Screen,
                        head: partial[CandidateRecord], common: dict[str, Any], *,
                        confidence: float = PRESCREEN_CONFIDENCE) -> Fetch[Screen | None]:
        """The screen refused (journaled, remembered) when its data against the start
        config put an auxiliary metric past its tolerance (with ``confidence``, as
        :meth:`beyond`); None when they do not."""
        outcome = screen.race
        broken = yield from self.beyond(screen.candidate, outcome.tasks, confidence=confidence)
        if not broken:
            return None
        t = outcome.test
        self.emit(head(verdict="rejected", gates=[
            GateRecord(name=name, passed=False, reason=f"{text} (on the {outcome.tasks} "
                 "screening tasks, vs the start config)") for name, text in broken],
            why=f"its screening data against the start config put "
                f"{', '.join(name.removeprefix('aux:') for name, _ in broken)} past the "
                "tolerance: not worth a confirmation", **{**common, "dev": DevBlock(
                    screen=ScreenBlock.of("aux", t))}))
        first = broken[0][0]
        self.memory.record(screen.proposal.move, MoveNote(
            step, incumbent.fingerprint, "refused", t.effect, outcome.se, gate=first,
            standing=self.standing(first[4:]) if first.startswith("aux:") else None))
        return Screen(screen.proposal, screen.candidate, outcome, "aux")

    def _broken(self, candidate: Config, tasks: int, *,
                confidence: float = PRESCREEN_CONFIDENCE) -> Fetch[bool]:
        """Whether :meth:`beyond` finds any tolerance broken (a race's ``beyond``)."""
        return bool((yield from self.beyond(candidate, tasks, confidence=confidence)))

    def beyond(self, candidate: Config, tasks: int, *, confidence: float = PRESCREEN_CONFIDENCE
               ) -> Fetch[list[tuple[str, str]]]:
        """The tolerances (``aux:<metric>``, and ``unscored`` for the failure share) that
        the first ``tasks`` screening tasks put past their allowance against the start
        config (the lower ``confidence`` bound of the regression above the allowance;
        ``confidence`` 0.5: the point estimate), each with its reason. The start's
        attempts are run where missing: it is the reference of every tolerance, and its
        evaluation is lazy (for the failure share, only once the candidate failed)."""
        chunk = self.order[:tasks]
        attempts = range(self.k)
        cand = self.rollouts.peek(candidate, "dev", chunk, attempts)
        failed = any(a.failed for items in cand.values() for a in items)
        if not self.bench.spec.metrics and not failed:
            return []
        start = yield from self.rollouts.fetch(self.start, "dev", "dev", chunk, attempts)
        out = self._failure_share(start, cand, confidence) if failed else []
        return out + self._metrics_beyond(start, cand, confidence)

    def _failure_share(self, start: TaskAttempts, cand: TaskAttempts, confidence: float
                       ) -> list[tuple[str, str]]:
        """``unscored`` with its reason when the candidate's failure share is past its
        allowance over the start's (with ``confidence``); else nothing."""
        allowed = self.bench.spec.gates.unscored.max_increase
        pairs = failure_pairs(start, cand)
        if failure_increase(pairs, allowed=allowed, level=1 - confidence).shown(
                1 - confidence):
            return [("unscored", f"{pairs.text()}, allowed +{100 * allowed:g} pts")]
        return []

    def _metrics_beyond(self, start: TaskAttempts, cand: TaskAttempts, confidence: float
                        ) -> list[tuple[str, str]]:
        """Each auxiliary metric (``aux:<metric>``) the candidate regresses past its
        tolerance against the start (with ``confidence``), with its reason."""
        out: list[tuple[str, str]] = []
        for metric, spec in self.bench.spec.metrics.items():
            deltas, before, after = metric_deltas(start, cand, metric)
            if before is None or after is None or len(deltas) < 2:
                continue
            sign = 1.0 if spec.direction == "lower" else -1.0
            t = paired_test([sign * d for d in deltas.values()], alpha=1 - confidence)
            allowed = regression_allowance(spec, before)
            bound = t.effect if confidence <= 0.5 else t.ci_low
            if math.isfinite(bound) and bound > allowed + 1e-12:
                out.append((f"aux:{metric}", aux_text(metric, spec, before, after,
                                                      t.ci_high, allowed)))
        return out

    def constraints(self, candidate: Config) -> dict[str, float]:
        """Per auxiliary metric, how far past its tolerance against the start config the
        first chunk puts ``candidate`` (its regression estimate minus the allowance;
        feasible at <= 0): what a constrained model-based proposer learns from."""
        chunk = self.order[:self.chunk]
        start = self.rollouts.peek(self.start, "dev", chunk, range(self.k))
        cand = self.rollouts.peek(candidate, "dev", chunk, range(self.k))
        out: dict[str, float] = {}
        for metric, spec in self.bench.spec.metrics.items():
            worse, before, _ = regressions(spec, start, cand, metric)
            if before is not None and worse:
                out[metric] = math.fsum(worse) / len(worse) - regression_allowance(spec, before)
        return out

    def held_back(self, screen: Screen) -> str | None:
        """Why the memory holds a screened candidate back from confirmation, if it does."""
        refusal = self.memory.refusal(screen.proposal.move)
        if refusal is None or refusal.gate is None:
            return None
        if refusal.gate.startswith("aux:"):
            # New evidence for a tolerance: the incumbent has brought the metric down
            # against the start since, leaving more room under the allowance.
            if self.memory.more_room(screen.proposal.move, self.standing(refusal.gate[4:])):
                return None
            return (f"refused by {refusal.gate} at step {refusal.step}, and the incumbent "
                    "has left no more room under that tolerance since: not confirmed again")
        if self.memory.new_evidence(screen.proposal.move, screen.test.effect, screen.se):
            return None
        return (f"refused by {refusal.gate} at step {refusal.step}, and its screening here "
                "brings no new evidence: not confirmed again")
