"""Building proposers by name: the plugin registry and ``build_proposer``."""

from __future__ import annotations

from pathlib import Path

import pytest
from proposer_helpers import mixed_registry

from forge.core.spec import BuildContext, Spec
from forge.errors import BenchError, UserError
from forge.proposers import (
    PROPOSERS,
    AutoProposer,
    OptunaProposer,
    Proposer,
    ProposerContext,
    ReflectProposer,
    SweepProposer,
    build_proposer,
)


def test_every_proposer_is_registered() -> None:
    assert PROPOSERS.names() == ["auto", "llm", "optuna", "reflect", "sweep"]


@pytest.mark.parametrize(("name", "cls"), [("sweep", SweepProposer),
                                           ("reflect", ReflectProposer),
                                           ("optuna", OptunaProposer),
                                           ("auto", AutoProposer)])
def test_build_proposer_by_name(name: str, cls: type, tmp_path: Path) -> None:
    proposer = build_proposer(name, registry=mixed_registry(), run_dir=tmp_path, seed=7)
    assert isinstance(proposer, cls)
    assert isinstance(proposer, Proposer)
    assert proposer.name == name


def test_the_seed_and_options_reach_the_optuna_part(tmp_path: Path) -> None:
    auto = build_proposer("auto", registry=mixed_registry(), run_dir=tmp_path, seed=7,
                          options={"n_startup_trials": 2})
    assert isinstance(auto, AutoProposer)
    assert auto.optuna.seed == 7
    assert auto.optuna.n_startup_trials == 2
    assert not list(tmp_path.iterdir())  # the model stays in memory


def test_unknown_names_and_bad_options_are_one_line_user_errors() -> None:
    registry = mixed_registry()
    with pytest.raises(BenchError, match="unknown proposer 'greedy'; known: auto, llm, optuna"):
        build_proposer("greedy", registry=registry, run_dir=None, seed=0)
    with pytest.raises(UserError, match="proposer"):
        build_proposer("sweep", registry=registry, run_dir=None, seed=0, options={"x": 1})
    with pytest.raises(UserError, match="n_startup_trials"):
        build_proposer("optuna", registry=registry, run_dir=None, seed=0,
                       options={"n_startup_trials": -1})
    # Issue 14 dropped n_samples (TPE's own suggestion replaced the sampled ranking):
    # a bench that still names it is told so, not silently ignored.
    with pytest.raises(UserError, match="n_samples: unknown field"):
        build_proposer("auto", registry=registry, run_dir=None, seed=0,
                       options={"n_samples": 8})


def test_factories_need_a_proposer_context() -> None:
    spec = Spec(name="sweep")
    with pytest.raises(BenchError, match="ProposerContext"):
        PROPOSERS.build(spec, BuildContext(base_dir=Path.cwd()))
    ctx = ProposerContext(base_dir=Path.cwd(), registry=mixed_registry())
    assert isinstance(PROPOSERS.build(spec, ctx), SweepProposer)
