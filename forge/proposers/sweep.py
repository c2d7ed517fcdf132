"""The sweep proposer: the one-exchange neighbourhood in random order (ParamILS)."""

from __future__ import annotations

from collections.abc import Mapping

from forge.config.registry import Config
from forge.proposers.base import PROPOSERS, Proposal, Proposer, SearchView

__all__ = ["SweepProposer"]


@PROPOSERS.register("sweep")
class SweepProposer(Proposer):
    """Proposes the incumbent's untried neighbours in a random order.

    The order comes from ``view.rng`` alone, so a step's proposals are reproducible
    from the view. No model, no state: :meth:`observe` does nothing. This is the
    baseline every guided proposer has to beat, and the fallback that, given enough
    steps, tries every neighbour.
    """

    name: str = "sweep"

    def propose(self, view: SearchView, n: int) -> list[Proposal]:
        """Up to ``n`` moves of ``view.untried``, shuffled with ``view.rng``."""
        if n <= 0 or not view.untried:
            return []
        order = list(view.untried)
        view.rng.shuffle(order)
        total = len(order)
        return [Proposal(move=move, proposer=self.name,
                         reason=f"one-exchange neighbour, random order "
                                f"({i + 1} of {total} untried)")
                for i, move in enumerate(order[:n])]

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        """Nothing to learn: the sweep does not look at scores."""
