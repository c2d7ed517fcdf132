"""Proposers: which move the search tries next.

Each proposer registers itself in :data:`PROPOSERS` next to its class, as scorers and
harnesses do; importing this package imports them all. A proposer's ``from_args``
gets its user options as ``args`` (JSON-able, so a journal can store the spec) and
the run's objects through :class:`ProposerContext` (the registry, the run folder,
the run seed), which is not journaled:

===========  ==========================================================================
name         what it does; options (defaults)
===========  ==========================================================================
``sweep``    the untried one-exchange neighbours in random order (ParamILS); none
``optuna``   untried neighbours ranked by TPE over the scored configs (a model kept
             in memory); n_startup_trials (4)
``reflect``  failure signals of the incumbent's dev attempts mapped through the
             registry's ``hints``; none
``auto``     ``reflect`` first, then ``optuna``; same options as ``optuna``
``llm``      one move per step from a model reading the incumbent's dev failures
             (endpoint from ``FORGE_OPENAI_BASE_URL`` / ``_MODEL`` / ``_API_KEY``);
             temperature (0.0), max_tokens (400); replies cached in
             ``run_dir/llm_proposer.jsonl`` for resume
===========  ==========================================================================

``build_proposer("auto", registry=..., run_dir=..., seed=...)`` is the short way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from forge.config.registry import Registry
from forge.core.spec import Spec
from forge.proposers.auto import AutoProposer
from forge.proposers.base import (
    PROPOSERS,
    EvaluatedConfig,
    Proposal,
    Proposer,
    ProposerContext,
    SearchView,
)
from forge.proposers.llm import LLMProposer
from forge.proposers.optuna_ranked import OptunaProposer
from forge.proposers.reflect import ReflectProposer
from forge.proposers.sweep import SweepProposer
from forge.secrets.masking import register_secret_envs

__all__ = [
    "PROPOSERS",
    "AutoProposer",
    "EvaluatedConfig",
    "LLMProposer",
    "OptunaProposer",
    "Proposal",
    "Proposer",
    "ProposerContext",
    "ReflectProposer",
    "SearchView",
    "SweepProposer",
    "build_proposer",
]


def build_proposer(name: str, *, registry: Registry, run_dir: Path | None, seed: int,
                   options: Mapping[str, Any] | None = None) -> Proposer:
    """The proposer ``name`` for one run.

    ``options`` are the proposer's own arguments (see the module table). An unknown
    name or a bad option is a :class:`~forge.errors.BenchError` naming the field
    ``proposer``, which the CLI prints as one line.
    """
    ctx = ProposerContext(base_dir=run_dir if run_dir is not None else Path.cwd(),
                          field="proposer", registry=registry, run_dir=run_dir, seed=seed)
    proposer = PROPOSERS.build(Spec(name=name, args=dict(options or {})), ctx)
    # The search builds its proposer before the start config runs: its key is masked
    # from then on, as the bench's are from the bench's loading.
    register_secret_envs(proposer.secret_envs())
    return proposer
