"""Proposers: which move the search tries next.

One :class:`PluginRegistry` by name, as for scorers and harnesses. A proposer's
factory gets its user options as ``args`` (JSON-able, so a journal can store the
spec) and the run's objects through :class:`ProposerContext` (the registry, the
run folder, the run seed), which is not journaled:

===========  ==========================================================================
name         what it does; options (defaults)
===========  ==========================================================================
``sweep``    the untried one-exchange neighbours in random order (ParamILS); none
``optuna``   untried neighbours ranked by TPE over the scored configs;
             n_startup_trials (4), n_samples (32); trials go to
             ``run_dir/optuna.journal`` when there is a run folder
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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from forge.llm.client import Endpoint
from forge.proposers._base import EvaluatedConfig, Proposal, Proposer, SearchView
from forge.proposers.auto import AutoProposer
from forge.proposers.llm import LLMProposer
from forge.proposers.optuna_ranked import OptunaProposer
from forge.proposers.reflect import ReflectProposer
from forge.proposers.sweep import SweepProposer
from forge.registry import Registry
from forge.spec import BuildContext, PluginRegistry, Spec

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


@dataclass(frozen=True, kw_only=True)
class ProposerContext(BuildContext):
    """A build context that also carries what a proposer needs from the run.

    ``run_dir`` is the run's folder (None: keep everything in memory); ``seed`` the
    run seed, from which model-based proposers derive their samplers' seeds.
    """

    registry: Registry
    run_dir: Path | None = None
    seed: int = 0


PROPOSERS: PluginRegistry[Proposer] = PluginRegistry("proposer")


class _NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _OptunaOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n_startup_trials: int = Field(default=4, ge=0)
    n_samples: int = Field(default=32, ge=1)


def _context(ctx: BuildContext) -> ProposerContext:
    if not isinstance(ctx, ProposerContext):
        raise TypeError("a proposer is built with a ProposerContext (registry, run_dir, seed)")
    return ctx


@PROPOSERS.register("sweep")
def _sweep(args: dict[str, Any], ctx: BuildContext) -> Proposer:
    _context(ctx)
    _NoOptions.model_validate(args)
    return SweepProposer()


@PROPOSERS.register("reflect")
def _reflect(args: dict[str, Any], ctx: BuildContext) -> Proposer:
    _context(ctx)
    _NoOptions.model_validate(args)
    return ReflectProposer()


def _optuna_backed(kind: type[OptunaProposer] | type[AutoProposer]
                   ) -> Callable[[dict[str, Any], BuildContext], Proposer]:
    """The factory of a proposer built on an Optuna study (same options, same run)."""
    def build(args: dict[str, Any], ctx: BuildContext) -> Proposer:
        run = _context(ctx)
        options = _OptunaOptions.model_validate(args)
        return kind(run.registry, run_dir=run.run_dir, seed=run.seed,
                    n_startup_trials=options.n_startup_trials, n_samples=options.n_samples)
    return build


PROPOSERS.register("optuna")(_optuna_backed(OptunaProposer))
PROPOSERS.register("auto")(_optuna_backed(AutoProposer))


class _LLMOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=400, ge=16, le=8192)


@PROPOSERS.register("llm")
def _llm(args: dict[str, Any], ctx: BuildContext) -> Proposer:
    run = _context(ctx)
    options = _LLMOptions.model_validate(args)
    # A missing FORGE_OPENAI_BASE_URL is a UserError here, before any run folder exists.
    endpoint = Endpoint.from_env(what="--proposer llm")
    return LLMProposer(run.registry, endpoint, run_dir=run.run_dir,
                       temperature=options.temperature, max_tokens=options.max_tokens)


def build_proposer(name: str, *, registry: Registry, run_dir: Path | None, seed: int,
                   options: Mapping[str, Any] | None = None) -> Proposer:
    """The proposer ``name`` for one run.

    ``options`` are the proposer's own arguments (see the module table). An unknown
    name or a bad option is a :class:`~forge.errors.BenchError` naming the field
    ``proposer``, which the CLI prints as one line.
    """
    ctx = ProposerContext(base_dir=run_dir if run_dir is not None else Path.cwd(),
                          field="proposer", registry=registry, run_dir=run_dir, seed=seed)
    return PROPOSERS.build(Spec(name=name, args=dict(options or {})), ctx)
