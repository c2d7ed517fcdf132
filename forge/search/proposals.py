"""A step's candidates: the incumbent's untried moves, and which of them a step screens.

:class:`StepProposals` lists the incumbent's untried candidate moves (in a precision
round, its close ones) and orders a step's proposals: the runtime mutator's first moves,
the memory's (a move a tolerance refused where this incumbent has made room since, then
one that looked better at an earlier incumbent), the proposer's, then the rest at
random; one move per setting, beside every other choice of an enum setting it covers.
A proposer's move whose place was tried already is journaled as it is dropped.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from forge.bench.loader import Bench
from forge.config.moves import Move, candidate_moves
from forge.config.registry import Config, EnumSetting
from forge.proposers import Proposal, Proposer
from forge.proposers.base import EvaluatedConfig, SearchView
from forge.proposers.vet import offered
from forge.results.model import AttemptResult
from forge.search.memory import MoveMemory
from forge.search.places import Places, TriedKey

__all__ = ["StepProposals"]


class StepProposals:
    """The moves a search's steps screen, in order (its proposer, memory and places)."""

    def __init__(self, *, bench: Bench, proposer: Proposer, memory: MoveMemory,
                 places: Places, first_moves: list[Move], candidates_per_step: int,
                 standing: Callable[[str], float],
                 refuse: Callable[[int, Config, dict[str, Any]], None]) -> None:
        self.bench = bench
        self.proposer = proposer
        self.memory = memory
        self.places = places
        self.first_moves = first_moves
        self.candidates_per_step = candidates_per_step
        self.standing = standing
        #: Journals a refused proposal (step, incumbent, its record's fields).
        self.refuse = refuse

    def untried(self, incumbent: Config, tried: set[TriedKey], step: int, round_: int
                ) -> list[Move]:
        """The incumbent's untried candidate moves; those the memory found futile a
        short while ago go last. In a precision round: its close moves not yet screened
        in this round, the largest screening effect first."""
        fresh = [m for m in candidate_moves(self.bench.registry, incumbent)
                 if self.places.key(incumbent, m, round_) not in tried]
        if round_:
            floor = self.bench.spec.gates.min_effect
            effects = {m: self.memory.close(m, incumbent.fingerprint, floor) for m in fresh}
            return sorted((m for m in fresh if effects[m] is not None),
                          key=lambda m: -(effects[m] or 0.0))
        cool = [m for m in fresh if self.memory.cooling(m, incumbent.fingerprint, step)]
        return [m for m in fresh if m not in cool] + cool

    def step(self, step: int, incumbent: Config, untried: list[Move],
             history: list[EvaluatedConfig], tried: set[TriedKey], *, round_: int,
             attempts: int, dev_attempts: list[AttemptResult], rng: random.Random,
             fallback: random.Random) -> list[Proposal]:
        """This step's proposals: the runtime mutator's first moves, then moves the
        memory offers, then the proposer's, then the rest of ``untried`` at random
        (``fallback``'s order); one move per setting, ``candidates_per_step``, and beside
        them the other choices of each enum setting they cover."""
        open_moves = set(untried)  # membership in a list of every move was O(settings)
        queued = [Proposal(move=m, proposer="runtime", reason="proposed most often by the "
                           "runtime mutator") for m in self.first_moves if m in open_moves]
        if round_:
            floor = self.bench.spec.gates.min_effect
            for m in untried:  # in a round, only close moves: each has its effect
                effect = self.memory.close(m, incumbent.fingerprint, floor) or 0.0
                queued.append(Proposal(move=m, proposer="memory", reason=(
                    f"close at this incumbent (screened {effect:+.3f}, not proven): "
                    f"precision round {round_}, screened on {attempts} attempts a task")))
        queued += self.remembered(incumbent, untried)
        view = SearchView(registry=self.bench.registry, incumbent=incumbent, untried=untried,
                          history=list(history), dev_attempts=dev_attempts, step=step,
                          rng=rng)
        proposed, refused = offered(self.proposer, view, len(untried))
        # A proposer may refuse what its own source produced (an LLM's unusable reply),
        # and the search what the proposer returned (an error, a NaN): each refusal is
        # journaled as a record of its own, and the step goes on.
        for item in [*self.proposer.drain_rejections(), *refused]:
            self.refuse(step, incumbent, item)
        rest = untried[:]
        fallback.shuffle(rest)
        offers = [*queued, *proposed, *(
            Proposal(move=m, proposer="sweep", reason="one-setting move the proposer did "
                     "not rank, in random order") for m in rest)]
        seen: set[Move] = set()
        unique = self._one_per_setting(step, incumbent, offers, set(proposed), tried, seen,
                                       round_)
        return unique + self._other_choices(incumbent, unique, untried, tried, seen, round_)

    def _one_per_setting(self, step: int, incumbent: Config, offers: Iterable[Proposal],
                         by_proposer: set[Proposal], tried: set[TriedKey], seen: set[Move],
                         round_: int) -> list[Proposal]:
        """The first ``candidates_per_step`` offers of distinct settings whose places were
        not tried: a step covers several settings, and a setting's other values wait for
        what this one shows. A proposer's copy of a tried place is journaled once."""
        targets: set[str] = set()
        unique: list[Proposal] = []
        for p in offers:
            if p.move in seen or p.move.target in targets:
                continue
            if self.places.was_tried(incumbent, p.move, tried, round_):
                if p in by_proposer:
                    self.refuse(step, incumbent, self.places.near_copy(incumbent, p.move))
                seen.add(p.move)  # one record for a move offered twice
                continue
            seen.add(p.move)
            targets.add(p.move.target)
            unique.append(p)
            if len(unique) >= self.candidates_per_step:
                break
        return unique

    def remembered(self, incumbent: Config, untried: list[Move]) -> list[Proposal]:
        """The moves the memory offers at ``incumbent``: those a tolerance refused at an
        earlier one when this one has made room under it since, then those that looked
        better at an earlier one and were not proven there, each kind in ``untried``'s
        order."""
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
            elif self.memory.made_room(m, incumbent.fingerprint, self.standing):
                metric = (note.gate or "")[4:]
                room.append(Proposal(move=m, proposer="memory", reason=(
                    f"screened {note.screen_effect:+.3f} at step {note.step}, refused there "
                    f"by the {metric} tolerance; this incumbent has brought {metric} down "
                    "against the start since: room under it now")))
        return room + promising

    def _other_choices(self, incumbent: Config, chosen: list[Proposal], untried: list[Move],
                       tried: set[TriedKey], seen: set[Move], round_: int) -> list[Proposal]:
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
                    and not self.places.was_tried(incumbent, m, tried, round_)):
                seen.add(m)
                out.append(Proposal(move=m, proposer="sweep", reason=(
                    f"another choice of {m.target}, screened beside the one proposed: an "
                    "enum's choices are unordered, one says nothing of the next")))
        return out
