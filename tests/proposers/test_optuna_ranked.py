"""The Optuna proposer: trials from observed configs, TPE's per-setting suggestions,
resume by replay."""

from __future__ import annotations

import logging
import math
import random
import warnings
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from proposer_helpers import (
    MIXED,
    assert_legal,
    key,
    make_registry,
    mixed_registry,
    random_config,
    view,
)

from forge.config.moves import Move, apply_move, candidate_moves, neighbourhood
from forge.config.registry import Config, Registry
from forge.proposers import OptunaProposer, Proposal, Proposer, SearchView, build_proposer


def observations(registry: Registry, seed: int, n: int,
                 noise: float = 0.05) -> list[tuple[Config, float]]:
    """``n`` random configs scored ``x / 10`` plus noise: higher ``x`` is better."""
    rng = random.Random(seed)
    configs = [random_config(registry, rng) for _ in range(n)]
    return [(c, float(c.values["x"]) / 10 + rng.gauss(0, noise)) for c in configs]


def fed(registry: Registry, seed: int, obs: list[tuple[Config, float]]) -> OptunaProposer:
    proposer = OptunaProposer(registry, seed=seed)
    for config, score in obs:
        proposer.observe(config, score)
    return proposer


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def optuna_log() -> Iterator[_Records]:
    """Optuna at INFO, as a user might leave it, with its records collected."""
    handler = _Records()
    logger = logging.getLogger("optuna")
    previous = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(logging.INFO)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        optuna.logging.set_verbosity(previous)


def test_distributions_follow_the_registry() -> None:
    registry = make_registry({
        "even": {"type": "int", "min": 0, "max": 10, "step": 2, "default": 4},
        "uneven": {"type": "int", "min": 0, "max": 10, "step": 3, "default": 3},
        "width": {"type": "int", "min": 1, "max": 32, "default": 4, "scale": "log"},
        "temperature": {"type": "float", "min": 0.0, "max": 1.5, "step": 0.1, "default": 0.7},
        "rate": {"type": "float", "min": 1e-4, "max": 1.0, "default": 1e-2, "scale": "log"},
        "flag": {"type": "bool", "default": False},
        "mode": {"type": "enum", "choices": ["a", "b"], "default": "a"},
    })
    d = OptunaProposer(registry).distributions
    assert d["even"] == IntDistribution(0, 10, step=2)
    assert d["uneven"] == IntDistribution(0, 10, step=1)            # 10 % 3 != 0
    assert d["width"] == IntDistribution(1, 32, log=True)
    assert d["temperature"] == FloatDistribution(0.0, 1.5)          # no step: no grid
    assert d["rate"] == FloatDistribution(1e-4, 1.0, log=True)
    assert d["flag"] == CategoricalDistribution([False, True])
    assert d["mode"] == CategoricalDistribution(["a", "b"])


def test_observe_records_each_config_once_with_its_fingerprint() -> None:
    registry = mixed_registry()
    proposer = OptunaProposer(registry, seed=1)
    config = registry.defaults()
    proposer.observe(config, 0.5)
    proposer.observe(config, 0.9)           # the same config again: the first score stands
    unscored = random_config(registry, random.Random(1))
    proposer.observe(unscored, math.nan)    # nothing scored
    assert proposer.n_trials == 1
    # The first score is what TPE learns from: x's suggestion is the same as after 0.5
    # alone.
    alone = OptunaProposer(registry, seed=1)
    alone.observe(config, 0.5)
    assert proposer.suggest("x", config) == alone.suggest("x", config)


def test_observe_refuses_a_config_of_another_registry() -> None:
    other = make_registry({"y": {"type": "int", "min": 0, "max": 3, "default": 1}}, name="o")
    with pytest.raises(ValueError, match="another registry"):
        OptunaProposer(mixed_registry()).observe(other.defaults(), 0.5)


def test_ranking_is_deterministic_for_a_seed_and_observations() -> None:
    registry = mixed_registry()
    obs = observations(registry, seed=11, n=10)

    def ranking(seed: int) -> list[tuple[str, str]]:
        proposals = fed(registry, seed, obs).propose(view(registry, seed=0), 100)
        return [(str(key(p.move)), p.reason) for p in proposals]

    first = ranking(3)
    assert ranking(3) == first
    # Every untried move once, and at most one value off the grid per setting.
    untried = {str(key(m)) for m in candidate_moves(registry, registry.defaults())}
    ranked = [k for k, _ in first]
    assert len(set(ranked)) == len(ranked) and untried <= set(ranked)
    assert len(ranked) - len(untried) <= len(registry.settings)


def test_propose_is_repeatable_without_new_observations() -> None:
    registry = mixed_registry()
    proposer = fed(registry, 2, observations(registry, seed=2, n=8))
    first = [key(p.move) for p in proposer.propose(view(registry, seed=5), 100)]
    assert [key(p.move) for p in proposer.propose(view(registry, seed=5), 100)] == first


def x_proposal(proposer: OptunaProposer, v: SearchView) -> Proposal:
    return next(p for p in proposer.propose(v, 100) if p.move.target == "x")


def test_tpe_suggests_a_jump_towards_the_better_end_of_a_setting() -> None:
    # 20 random configs over five settings where only x matters (noise sd 0.05 against
    # an effect of 0.1 per unit of x). Measured over seeds 0-19: TPE, the other settings
    # held at the incumbent's, puts x at 10 in 17, at 9 in 2, at 7 in 1: a jump from 5,
    # not a step. Requiring 16 of 20 at 8 or more, and all above 5, leaves room for
    # another Optuna release to sample differently without the test flaking.
    registry = mixed_registry()
    far = 0
    for seed in range(20):
        proposer = fed(registry, seed, observations(registry, seed, n=20))
        v = view(registry, seed=seed)
        proposals = proposer.propose(v, 100)
        assert_legal(registry, v, proposals)
        x = x_proposal(proposer, v)
        # The suggestion is the setting's first move, and says where it comes from.
        assert x.move.after == proposer.suggest("x", v.incumbent)
        assert x.reason.startswith("TPE, the other settings held, suggests x")
        assert isinstance(x.move.after, int) and x.move.after > 5
        far += x.move.after >= 8
    assert far >= 16


def test_tpe_follows_the_data_down_as_well() -> None:
    # The same with lower x better: measured, x at 0 in 18 of 20 seeds, at 2 in 2.
    registry = mixed_registry()
    low = 0
    for seed in range(20):
        rng = random.Random(seed)
        configs = [random_config(registry, rng) for _ in range(20)]
        proposer = fed(registry, seed, [(c, -float(c.values["x"]) / 10 + rng.gauss(0, 0.05))
                                        for c in configs])
        value = proposer.suggest("x", registry.defaults())
        assert isinstance(value, int) and value < 5
        low += value <= 2
    assert low >= 16


def test_after_scoring_the_neighbourhood_tpe_jumps_past_the_best_step() -> None:
    # The search's own pattern: the incumbent and each of its steps, scored once (x 6 is
    # the best of them). Measured: TPE suggests x 9 for each of seeds 0-9.
    registry = mixed_registry()
    incumbent = registry.defaults()
    configs = [incumbent] + [apply_move(registry, incumbent, m)
                             for m in neighbourhood(registry, incumbent)]
    beyond = 0
    for seed in range(10):
        rng = random.Random(seed)
        obs = [(c, float(c.values["x"]) / 10 + rng.gauss(0, 0.02)) for c in configs]
        x = x_proposal(fed(registry, seed, obs), view(registry, seed=seed))
        assert x.reason.startswith("TPE, the other settings held, suggests")
        beyond += isinstance(x.move.after, int) and x.move.after > 6
    assert beyond >= 8


def test_each_setting_takes_a_turn_least_tried_first() -> None:
    registry = mixed_registry()
    proposer = fed(registry, 0, observations(registry, 0, n=16))
    v = view(registry, seed=0)
    ranked = proposer.rank(v)
    # One move per setting first (TPE's suggestion, flagged, where it has one), then
    # each setting's next move, and so on.
    first_round = [m.target for m, _ in ranked[:len(registry.settings)]]
    assert sorted(first_round) == sorted(registry.settings)
    assert all(not flagged for _, flagged in ranked[len(registry.settings):])
    # A setting with fewer untried moves left has been tried more: it goes later.
    partly = [m for m in v.untried if not (m.target == "x" and m.after != 4)]
    order = [m.target for m, _ in proposer.rank(view(registry, untried=partly, seed=0))]
    assert order.index("x") == len(registry.settings) - 1


def test_too_few_trials_say_that_tpe_samples_at_random() -> None:
    registry = mixed_registry()
    proposer = fed(registry, 0, observations(registry, 0, n=2))
    proposals = proposer.propose(view(registry, seed=0), 3)
    assert len(proposals) == 3
    assert all("(2 trials, fewer than 4: TPE samples at random)" in p.reason
               for p in proposals)
    assert all(p.proposer == "optuna" for p in proposals)
    empty = OptunaProposer(registry)
    assert len(empty.propose(view(registry), 2)) == 2   # no trial at all: still ranks
    assert all("explores the setting" in p.reason for p in empty.propose(view(registry), 5))
    assert empty.propose(view(registry), 0) == []
    assert empty.propose(view(registry, untried=[]), 3) == []


def test_only_untried_moves_are_ranked() -> None:
    registry = mixed_registry()
    untried = [m for m in candidate_moves(registry, registry.defaults()) if m.target != "x"]
    proposer = fed(registry, 0, observations(registry, 0, n=12))
    v = view(registry, untried=untried)
    proposals = proposer.propose(v, 100)
    assert {key(p.move) for p in proposals} >= {key(m) for m in untried}
    assert all(p.move.target != "x" for p in proposals)
    assert_legal(registry, v, proposals)


def test_a_suggestion_already_tried_against_the_incumbent_is_not_proposed() -> None:
    # The search leaves out of ``untried`` what it tried against this incumbent (and
    # every jump when jumps are off). Proposed anyway, the move is journaled "skipped:
    # already tried" and takes its setting's one place in the step, so the setting's
    # untried moves wait: a search can end on patience with moves left (see
    # test_search.py's test_a_step_is_not_spent_on_a_move_tried_before).
    registry = mixed_registry()
    proposer = fed(registry, 0, observations(registry, 0, n=12))
    incumbent = registry.defaults()
    value = proposer.suggest("x", incumbent)
    tried = Move(target="x", before=5, after=value)
    assert tried in candidate_moves(registry, incumbent)
    v = view(registry, untried=[m for m in candidate_moves(registry, incumbent) if m != tried])
    assert tried not in [p.move for p in proposer.propose(v, 100)]
    steps_only = view(registry, untried=neighbourhood(registry, incumbent))
    assert_legal(registry, steps_only, proposer.propose(steps_only, 100))


def test_a_resumed_proposer_ranks_alike_by_replay(tmp_path: Path) -> None:
    # The proposer keeps nothing on disk: a resumed search replays its configs in order,
    # and the ranking after the replay is the ranking of the first run at that point.
    registry = mixed_registry()
    obs = observations(registry, 6, n=12)
    first = fed(registry, 6, obs[:8])
    before = [key(p.move) for p in first.propose(view(registry, seed=1), 100)]
    resumed = fed(registry, 6, obs[:8])
    assert [key(p.move) for p in resumed.propose(view(registry, seed=1), 100)] == before
    assert not list(tmp_path.iterdir())
    built = build_proposer("optuna", registry=registry, run_dir=tmp_path, seed=6)
    for config, score in obs[:8]:
        built.observe(config, score)
    assert [key(p.move) for p in built.propose(view(registry, seed=1), 100)] == before
    assert not list(tmp_path.iterdir())  # the run folder is the search's to write


def test_optuna_stays_quiet(optuna_log: _Records) -> None:
    registry = mixed_registry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        proposer = fed(registry, 0, observations(registry, 0, n=6))
        proposer.propose(view(registry), 3)
    assert [str(w.message) for w in caught] == []
    assert [r.getMessage() for r in optuna_log.records] == []
    assert optuna.logging.get_verbosity() == logging.INFO   # the user's level is restored


def test_enum_choices_that_python_confuses_keep_apart() -> None:
    # 1 == True in Python, so Optuna would read True as the choice 1: labels keep them apart.
    registry = make_registry({
        "x": {"type": "int", "min": 0, "max": 10, "default": 5},
        "odd": {"type": "enum", "choices": [1, True, "two"], "default": 1},
    })
    proposer = OptunaProposer(registry, seed=0)
    rng = random.Random(0)
    for _ in range(8):
        config = random_config(registry, rng)
        proposer.observe(config, float(config.values["x"]))
    config = registry.with_values(registry.defaults(), {"odd": True})
    proposer.observe(config, 0.0)
    assert proposer.suggest("odd", registry.defaults()) in (1, True, "two")
    v = view(registry, seed=0)
    proposals = proposer.propose(v, 100)
    assert_legal(registry, v, proposals)
    assert ("odd", "1", "True") in {key(p.move) for p in proposals}


def test_an_off_grid_hand_config_is_recorded(optuna_log: _Records) -> None:
    registry = make_registry({
        "k": {"type": "int", "min": 0, "max": 9, "step": 3, "default": 3},
        "flag": {"type": "bool", "default": False},
    })
    proposer = OptunaProposer(registry, seed=0)
    assert proposer.distributions["k"] == IntDistribution(0, 9, step=3)
    for k in (0, 3, 6, 9, 4):   # 4 is off the step-3 grid
        for flag in (False, True):
            config = registry.validate_config({"k": k, "flag": flag})
            proposer.observe(config, k / 9 + 0.1 * flag)
    assert proposer.n_trials == 10
    v = view(registry, seed=0)
    proposals = proposer.propose(v, 10)
    assert_legal(registry, v, proposals)
    assert optuna_log.records == []


def test_optuna_satisfies_the_protocol() -> None:
    assert isinstance(OptunaProposer(mixed_registry()), Proposer)


def asked_of_a_whole_study(proposer: OptunaProposer, target: str, incumbent: Config) -> object:
    """TPE's suggestion for ``target`` as an Optuna ask over every setting makes it, the
    others fixed at the incumbent's (PartialFixedSampler): how the proposer drew it
    before, at a cost that grew with the square of the settings."""
    params = proposer._params
    fixed = {n: params[n].encode(incumbent.values[n]) for n in params if n != target}
    seed = random.Random(f"forge-optuna:{proposer.seed}:{proposer.n_trials}:{target}"
                         ).getrandbits(32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optuna.logging.set_verbosity(logging.WARNING)
        study = optuna.create_study(direction="maximize", sampler=(
            optuna.samplers.PartialFixedSampler(fixed, proposer._sampler(seed))))
        study.add_trials(proposer._trials)
        value = study.ask(proposer.distributions).params[target]
    return params[target].setting.snap(params[target].decode(value))


def test_each_suggestion_is_the_draw_of_an_ask_over_every_setting() -> None:
    # The suggestion is drawn for its one setting from a study built once per ranking;
    # it must be the draw a whole study's ask makes, bit for bit, before and after TPE's
    # startup trials, with constraints, ambiguous enum labels, an off-grid int and a
    # setting of one value.
    registry = make_registry({
        **MIXED,
        "odd": {"type": "enum", "choices": [1, True, "x"], "default": 1},
        "k": {"type": "int", "min": 0, "max": 9, "step": 3, "default": 3},
        "fixed": {"type": "float", "min": 0.5, "max": 0.5, "default": 0.5},
        "wide": {"type": "float", "min": 0.1, "max": 100.0, "default": 1.0, "scale": "log"},
    })
    for seed in range(12):
        rng = random.Random(seed)
        proposer = OptunaProposer(registry, seed=seed)
        for _ in range(rng.randint(0, 14)):
            config = random_config(registry, rng)
            if rng.random() < 0.2:
                config = registry.with_values(config, {"k": 4})  # off the step-3 grid
            constraints = {"cost": rng.uniform(-1, 1)} if rng.random() < 0.5 else None
            proposer.observe(config, rng.random(), constraints)
        incumbent = random_config(registry, rng)
        for target in registry.settings:
            expected = (None if not proposer.n_trials
                        else asked_of_a_whole_study(proposer, target, incumbent))
            got = proposer.suggest(target, incumbent)
            assert type(got) is type(expected) and got == expected, (seed, target)
