"""What a finished search hands back: its end record, its JSON contract, its records.

:class:`SearchOutcome` is what :meth:`forge.search.loop.Search.run` returns and what
``forge search --json`` prints (:meth:`SearchOutcome.as_json`, a frozen contract);
:data:`STOP_TEXT` says in words why a search stopped, for the journal and the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from forge.journal.records import EndRecord, FirstFailure, StopReason, UnscoredCounts
from forge.results.failures import FailureTally

__all__ = ["STOP_TEXT", "SearchOutcome"]


@dataclass(frozen=True)
class SearchOutcome:
    """A finished search: its ``end`` record, what ``forge search --json`` prints
    (:meth:`as_json`, a frozen contract), and the journal's records as written (each
    line's JSON object), for scripts that want them too; ``failures``, every attempt
    the search counted with the unscored by reason and config (:mod:`forge.results.failures`;
    not journaled, not in :meth:`as_json`), and on ``start_failed`` the first failure;
    ``unscored``, per split compared, the start's and the final config's unscored
    attempts by reason (``{split: {"start": counts, "final": counts}}``)."""

    end: EndRecord
    records: list[dict[str, Any]] = field(default_factory=list)
    failures: FailureTally = field(default_factory=FailureTally)
    first_failure: FirstFailure | None = None
    unscored: dict[str, dict[str, UnscoredCounts]] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.end.run_id

    @property
    def stop_reason(self) -> str:
        return self.end.stop_reason

    @property
    def steps(self) -> int:
        return self.end.steps

    @property
    def promotions(self) -> list[dict[str, Any]]:
        """``{step, target, before, after}`` per promotion, in order."""
        return [p.model_dump() for p in self.end.promotions]

    @property
    def start_config(self) -> dict[str, Any]:
        return dict(self.end.start_config)

    @property
    def final_config(self) -> dict[str, Any]:
        return dict(self.end.final_config)

    @property
    def rollouts_used(self) -> int:
        return self.end.rollouts_used

    @property
    def dev(self) -> dict[str, Any]:
        """Start against final on dev: ``{start, final, delta, ci_low, ci_high}``."""
        return self.end.dev.as_json()

    @property
    def val(self) -> dict[str, Any]:
        """As :attr:`dev`, on val; ``{}`` for a bench without a val split."""
        return self.end.val.as_json()

    @property
    def test(self) -> dict[str, Any]:
        """As :attr:`dev`, on test; ``{}`` when the test split was not evaluated."""
        return self.end.test.as_json()

    @property
    def power(self) -> dict[str, Any] | None:
        """What the bench can detect, as the start record told it
        (:class:`forge.stats.power.Power` as JSON); None for a run journaled before."""
        start = next((r for r in self.records if r.get("kind") == "start"), {})
        power: dict[str, Any] | None = start.get("power")
        return power

    def as_json(self) -> dict[str, Any]:
        # ``unscored`` came later than the rest: last, and ``{}`` for a split not compared.
        unscored = {split: {side: counts.model_dump(mode="json")
                            for side, counts in self.unscored.get(split, {}).items()}
                    for split in ("dev", "val", "test")}
        return {"run_id": self.run_id, "stop_reason": self.stop_reason, "steps": self.steps,
                "promotions": self.promotions, "start_config": self.start_config,
                "final_config": self.final_config, "rollouts_used": self.rollouts_used,
                "dev": self.dev, "val": self.val, "test": self.test, "unscored": unscored,
                "power": self.power}

STOP_TEXT: dict[StopReason, str] = {
    "max_steps": "reached max_steps",
    "patience": "no promotion in `patience` steps in a row",
    "budget_rollouts": "rollout budget spent",
    "budget_cost": "cost budget spent",
    "budget_wall_time": "wall-time budget spent",
    "local_optimum": "no untried move (step or jump) of the incumbent is left, nor a "
                     "close one to screen again with more attempts",
    "start_failed": "every attempt of the start config's first evaluation failed: there is "
                    "no score to improve on",
}
