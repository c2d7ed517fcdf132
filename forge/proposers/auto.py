"""The default proposer: reflection on failure signals first, then Optuna-ranked neighbours."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from forge.config.registry import Config, Registry
from forge.core.spec import BuildContext
from forge.proposers.base import PROPOSERS, Proposal, Proposer, ProposerContext, SearchView
from forge.proposers.optuna_ranked import OptunaOptions, OptunaProposer
from forge.proposers.reflect import ReflectProposer

__all__ = ["AutoProposer"]


@PROPOSERS.register("auto")
class AutoProposer(Proposer):
    """Reflection's hinted moves first, then the rest of ``view.untried`` ranked by TPE.

    A failure signal with a hint is direct evidence about the incumbent, so it goes
    first; the model-based ranking fills the remaining slots and covers settings no
    hint mentions. A move appears once (the first proposer to name it keeps it).
    Each proposal keeps the name of the part that made it (``"reflect"`` or
    ``"optuna"``), so the journal says who proposed what. :meth:`observe` feeds the
    Optuna part; reflection has no state.
    """

    name: str = "auto"
    options_model = OptunaOptions

    def __init__(self, registry: Registry, *, seed: int = 0, n_startup_trials: int = 4) -> None:
        self.reflect = ReflectProposer()
        self.optuna = OptunaProposer(registry, seed=seed, n_startup_trials=n_startup_trials)

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        run = ProposerContext.of(ctx)
        options = OptunaOptions.model_validate(args)
        return cls(run.registry, seed=run.seed, **options.model_dump())

    def propose(self, view: SearchView, n: int) -> list[Proposal]:
        """Up to ``n`` proposals: reflection's, then Optuna's, without repeats."""
        if n <= 0:
            return []
        proposals = self.reflect.propose(view, n)
        chosen = {p.move for p in proposals}
        if len(proposals) < n:
            # Ask Optuna for its whole ranking: some of its best may be reflection's.
            for proposal in self.optuna.propose(view, len(view.untried)):
                if proposal.move not in chosen:
                    chosen.add(proposal.move)
                    proposals.append(proposal)
                    if len(proposals) >= n:
                        break
        return proposals

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        """Forwarded to the Optuna part."""
        self.optuna.observe(config, dev_mean, constraints)
