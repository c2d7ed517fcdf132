"""The proposer protocol: what a proposer may read, and what it returns.

A proposer sees the incumbent, the registry, the configs evaluated so far with
their *dev* scores, and the incumbent's *dev* attempts (outputs, signals, stop
reasons). It never sees val or test data: :class:`SearchView` does not carry them.

The proposer plugins register here, each next to its class (``@PROPOSERS.register``).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from forge.config.moves import Move
from forge.config.registry import Config, Registry, Scalar
from forge.core.spec import BuildContext, Plugin, PluginRegistry
from forge.results.model import AttemptResult

__all__ = ["PROPOSERS", "EvaluatedConfig", "Proposal", "Proposer", "ProposerContext",
           "SearchView"]


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


@dataclass(frozen=True, kw_only=True)
class ProposerContext(BuildContext):
    """A build context that also carries what a proposer needs from the run.

    ``run_dir`` is the run's folder (None: keep everything in memory); ``seed`` the
    run seed, from which model-based proposers derive their samplers' seeds.
    """

    registry: Registry
    run_dir: Path | None = None
    seed: int = 0

    @staticmethod
    def of(ctx: BuildContext) -> ProposerContext:
        """``ctx`` itself; ``TypeError`` unless it is a proposer context."""
        if not isinstance(ctx, ProposerContext):
            raise TypeError("a proposer is built with a ProposerContext (registry, run_dir, "
                            "seed)")
        return ctx


class Proposer(Plugin, ABC):
    """Proposes candidate moves. The contract:

    - ``propose(view, n)`` returns up to ``n`` proposals, best first. A proposal may
      be illegal (out of bounds, stale, or not in ``untried``): the search journals
      it as rejected and never applies it. Returning fewer than ``n``, or none, is
      fine; the search then falls back or stops.
    - ``observe(config, dev_mean, constraints)`` is called for every config the search
      screens, in order, including on resume, so a model-based proposer can rebuild
      its state by replay. ``constraints`` says per auxiliary metric how far past its
      tolerance against the start config the screening put it (feasible at <= 0). It
      must not do I/O that a replay would repeat differently.
    - Deterministic given the view (use ``view.rng`` for randomness).

    Optional hooks, which do nothing unless a proposer overrides them:
    :meth:`journal_form` (what run.json records about the proposer) and
    :meth:`drain_rejections` (what it refused since the last call).
    """

    name: str

    @abstractmethod
    def propose(self, view: SearchView, n: int) -> list[Proposal]: ...

    @abstractmethod
    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None: ...

    def journal_form(self) -> dict[str, Any] | None:
        """What run.json keeps about this proposer beyond its name; None: nothing."""
        return None

    def drain_rejections(self) -> list[dict[str, Any]]:
        """What the proposer refused since the last call (and forgets it), e.g. an unusable
        model reply; the search journals each as a ``proposal_invalid`` record
        (``step``, ``proposer``, ``incumbent`` added) right after ``propose``."""
        return []

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        ProposerContext.of(ctx)
        return super().from_args(args, ctx)


#: Every proposer by name; ``--proposer NAME`` and run.json's ``proposer`` name one.
PROPOSERS: PluginRegistry[Proposer] = PluginRegistry("proposer", Proposer)
