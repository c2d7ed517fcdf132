"""The sweep proposer: the untried neighbourhood, shuffled by the view's rng."""

from __future__ import annotations

from proposer_helpers import assert_legal, key, mixed_registry, view

from forge.config.moves import neighbourhood
from forge.proposers import Proposer, SweepProposer


def test_sweep_is_a_permutation_of_untried() -> None:
    registry = mixed_registry()
    v = view(registry, seed=3)
    proposals = SweepProposer().propose(v, 100)
    assert sorted(key(p.move) for p in proposals) == sorted(key(m) for m in v.untried)
    assert all(p.proposer == "sweep" for p in proposals)
    assert all("one-exchange neighbour, random order" in p.reason for p in proposals)
    assert_legal(registry, v, proposals)


def test_sweep_is_reproducible_for_a_seeded_rng_and_varies_with_the_seed() -> None:
    registry = mixed_registry()

    def order(seed: int) -> list[tuple[str, str, str]]:
        return [key(p.move) for p in SweepProposer().propose(view(registry, seed=seed), 100)]

    assert order(7) == order(7)
    # 9 neighbours have 362880 orders: five seeds giving one order would be a broken shuffle.
    assert len({tuple(order(s)) for s in range(5)}) > 1


def test_sweep_returns_at_most_n_and_nothing_when_nothing_is_left() -> None:
    registry = mixed_registry()
    sweep = SweepProposer()
    full = [key(p.move) for p in sweep.propose(view(registry, seed=1), 100)]
    assert [key(p.move) for p in sweep.propose(view(registry, seed=1), 3)] == full[:3]
    assert sweep.propose(view(registry, seed=1), 0) == []
    assert sweep.propose(view(registry, seed=1, untried=[]), 5) == []


def test_sweep_proposes_only_untried_moves() -> None:
    registry = mixed_registry()
    untried = neighbourhood(registry, registry.defaults())[::2]
    v = view(registry, seed=2, untried=untried)
    proposals = SweepProposer().propose(v, 100)
    assert sorted(key(p.move) for p in proposals) == sorted(key(m) for m in untried)
    assert_legal(registry, v, proposals)


def test_sweep_satisfies_the_protocol_and_ignores_scores() -> None:
    sweep = SweepProposer()
    assert isinstance(sweep, Proposer)
    registry = mixed_registry()
    before = [key(p.move) for p in sweep.propose(view(registry, seed=4), 100)]
    sweep.observe(registry.defaults(), 0.9)
    assert [key(p.move) for p in sweep.propose(view(registry, seed=4), 100)] == before
