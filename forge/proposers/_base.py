"""The proposer protocol: what a proposer may read, and what it returns.

A proposer sees the incumbent, the registry, the configs evaluated so far with
their *dev* scores, and the incumbent's *dev* attempts (outputs, signals, stop
reasons). It never sees val or test data: :class:`SearchView` does not carry them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from forge.moves import Move
from forge.registry import Config, Registry, Scalar
from forge.results import AttemptResult

__all__ = ["EvaluatedConfig", "Proposal", "Proposer", "SearchView"]


class Proposal(BaseModel):
    """One candidate move, who proposed it and why (journaled as is)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    move: Move
    proposer: str
    reason: str


@dataclass(frozen=True)
class EvaluatedConfig:
    """A config the search has scored on dev (screening attempts only)."""

    values: dict[str, Scalar]
    fingerprint: str
    dev_mean: float
    n_tasks: int


@dataclass(frozen=True)
class SearchView:
    """Everything a proposer may read. ``untried`` holds the incumbent's neighbours
    not yet tried against it, in registry order; ``dev_attempts`` the incumbent's
    dev attempts. ``rng`` is seeded per step, so proposals are reproducible."""

    registry: Registry
    incumbent: Config
    untried: list[Move]
    history: list[EvaluatedConfig]
    dev_attempts: list[AttemptResult]
    step: int
    rng: random.Random = field(repr=False)


@runtime_checkable
class Proposer(Protocol):
    """Proposes candidate moves. The contract:

    - ``propose(view, n)`` returns up to ``n`` proposals, best first. A proposal may
      be illegal (out of bounds, stale, or not in ``untried``): the search journals
      it as rejected and never applies it. Returning fewer than ``n``, or none, is
      fine; the search then falls back or stops.
    - ``observe(config, dev_mean)`` is called for every config the search scores,
      in order, including on resume, so a model-based proposer can rebuild its state
      by replay. It must not do I/O that a replay would repeat differently.
    - Deterministic given the view (use ``view.rng`` for randomness).

    Optional: ``drain_rejections() -> list[dict]`` returns (and forgets) what the
    proposer refused since the last call, e.g. an unusable model reply; the search
    journals each dict as a ``proposal_invalid`` record (``step``, ``proposer``,
    ``incumbent`` added) right after ``propose``.
    """

    name: str

    def propose(self, view: SearchView, n: int) -> list[Proposal]: ...

    def observe(self, config: Config, dev_mean: float) -> None: ...
