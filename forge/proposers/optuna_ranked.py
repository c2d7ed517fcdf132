"""The Optuna proposer: for each setting, the value TPE would pick with every other
setting held at the incumbent's.

forge keeps its one-setting-at-a-time search; Optuna picks the *value* of each move.
Every config the search screens becomes a COMPLETE trial of an in-memory model
(value: its mean score on the first dev chunk, the same tasks and seeds for every
config, so the values compare; constraints: how far each auxiliary metric is past its
tolerance against the start config on those tasks, so TPE learns where the feasible
region is). To propose, a throwaway study holds the same trials and asks Optuna's
``PartialFixedSampler`` over a univariate TPE for one setting, the others fixed at
the incumbent's values: TPE's own per-dimension suggestion, any legal value of that
setting (a step or a jump).

The model is never written to disk nor read from it: the ranking depends only on the
seed and on the ``observe`` calls of this process, which the search replays in order
on resume. Its first-chunk values are what selection reads, not what the search
proved, so the study people open (``optuna.journal``, :mod:`forge.report.dashboard`) is
written by the search from its journal instead.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any, Self

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import FrozenTrial, TrialState
from pydantic import BaseModel, ConfigDict, Field

from forge.config.keys import SpelledMove, one_change, spelled_move
from forge.config.moves import Move, candidate_moves
from forge.config.optuna_space import encode_values, optuna_param, quiet_optuna
from forge.config.registry import Config, Registry, Scalar, same_value
from forge.core.spec import BuildContext
from forge.proposers._common import describe_move
from forge.proposers.base import PROPOSERS, Proposal, Proposer, ProposerContext, SearchView

__all__ = ["OptunaOptions", "OptunaProposer", "quiet_optuna"]


class OptunaOptions(BaseModel):
    """The options of the proposers built on an Optuna study (``optuna``, ``auto``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    n_startup_trials: int = Field(default=4, ge=0)


@PROPOSERS.register("optuna")
class OptunaProposer(Proposer):
    """Proposes, per setting, the value TPE would pick with the others held fixed.

    Contract:

    - ``observe(config, dev_mean, constraints)`` records the config as a COMPLETE trial
      (maximise), with its constraint values (feasible when all are <= 0). A config is
      recorded once, by fingerprint: a second observation is ignored (the first score
      stands). A non-finite ``dev_mean`` (nothing scored) says nothing about the
      objective and is ignored.
    - ``propose(view, n)`` gives one move per setting: the setting's restricted TPE
      suggestion (:meth:`suggest`) when it is a legal, untried move, else one of the
      setting's untried moves at random; then the settings' other untried moves. The
      settings least tried against this incumbent come first, ties by ``view.rng``:
      a step spans several settings and none is left unexplored.
    - With fewer than ``n_startup_trials`` trials TPE samples at random, and the
      reason says so. Suggestions depend only on ``seed`` and the sequence of
      ``observe`` calls, which a resumed search replays in order.
    """

    name: str = "optuna"
    options_model = OptunaOptions

    def __init__(self, registry: Registry, *, seed: int = 0, n_startup_trials: int = 4) -> None:
        if n_startup_trials < 0:
            raise ValueError(f"n_startup_trials must be >= 0, got {n_startup_trials}")
        self.registry = registry
        self.seed = seed
        self.n_startup_trials = n_startup_trials
        self._params = {name: optuna_param(s) for name, s in registry.settings.items()}
        self._distributions = {name: p.distribution for name, p in self._params.items()}
        self._trials: list[FrozenTrial] = []  # observed in this process, in order
        self._observed: set[str] = set()
        #: (trials in it, the study suggestions are drawn from, its asked trial).
        self._models: tuple[int, optuna.Study, FrozenTrial] | None = None

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        run = ProposerContext.of(ctx)
        options = OptunaOptions.model_validate(args)
        return cls(run.registry, seed=run.seed, **options.model_dump())

    @property
    def distributions(self) -> dict[str, BaseDistribution]:
        """Each setting's Optuna distribution, as suggestions are drawn from it."""
        return dict(self._distributions)

    @property
    def n_trials(self) -> int:
        """Configs observed (distinct, with a finite score) in this process."""
        return len(self._trials)

    def _sampler(self, seed: int) -> optuna.samplers.TPESampler:
        # Univariate: with the other settings fixed, only this setting's own density
        # ratio decides, and it is estimated from every trial.
        return optuna.samplers.TPESampler(seed=seed % 2**32,
                                          n_startup_trials=self.n_startup_trials,
                                          multivariate=False)

    def observe(self, config: Config, dev_mean: float,
                constraints: Mapping[str, float] | None = None) -> None:
        """Record ``config`` as a trial of value ``dev_mean`` (once per fingerprint)."""
        if config.registry_digest != self.registry.digest:
            raise ValueError("config belongs to another registry than this proposer's")
        fingerprint = config.fingerprint
        if fingerprint in self._observed or not math.isfinite(dev_mean):
            return
        params, distributions = encode_values(self._params, config.values)
        finite = {k: float(v) for k, v in (constraints or {}).items() if math.isfinite(v)}
        trial = optuna.trial.create_trial(params=params, distributions=distributions,
                                          value=float(dev_mean),
                                          user_attrs={"fingerprint": fingerprint},
                                          constraints=finite or None)
        self._trials.append(trial)
        self._observed.add(fingerprint)

    def suggest(self, target: str, incumbent: Config) -> Scalar | None:
        """Where TPE puts ``target`` with every other setting at ``incumbent``'s value
        (Optuna's ``PartialFixedSampler`` over a univariate TPE fitted on every trial:
        the draw reads no other setting, so it is the same at every incumbent),
        snapped to a legal value; None before the first trial."""
        with quiet_optuna():
            return self._suggest(target)

    def _suggest(self, target: str) -> Scalar | None:
        """:meth:`suggest`, with Optuna quiet already (as once for a whole ranking)."""
        if not self._trials:
            return None
        param = self._params[target]
        # A seed per (run seed, trial count, setting): reproducible, fresh as the model
        # changes.
        seed = random.Random(f"forge-optuna:{self.seed}:{len(self._trials)}:{target}"
                             ).getrandbits(32)
        distribution = self._distributions[target]
        value: Any
        if distribution.single():  # as a trial's suggestion: its one value, no sampling
            value = (distribution.low if isinstance(distribution, IntDistribution
                                                    | FloatDistribution)
                     else distribution.choices[0] if isinstance(
                         distribution, CategoricalDistribution) else None)
        else:
            model, asked = self._model()
            # The univariate TPE's draw for this one setting, as Optuna's ask makes it
            # with every other setting fixed (PartialFixedSampler): a fixed setting
            # takes no draw from the sampler's random state and TPE reads only this
            # setting's values of the trials, so the draw is the same. Asking a study
            # of every setting, once per setting, cost the square of the settings.
            value = self._sampler(seed).sample_independent(model, asked, target, distribution)
        return param.setting.snap(param.decode(value))

    def _model(self) -> tuple[optuna.Study, FrozenTrial]:
        """An in-memory study of every trial observed so far, and a trial asked of it
        (running, as the one a suggestion is drawn for): built once for all the
        settings a ranking asks about, again when a trial has been observed since."""
        if self._models is None or self._models[0] != len(self._trials):
            with quiet_optuna():
                study = optuna.create_study(direction="maximize",
                                            sampler=optuna.samplers.RandomSampler(seed=0))
                study.add_trials(self._trials)
                study.ask()
            asked = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))[0]
            self._models = (len(self._trials), study, asked)
        return self._models[1], self._models[2]

    def rank(self, view: SearchView) -> list[tuple[Move, bool]]:
        """Every untried move of ``view``, TPE's suggestion first per setting (flagged
        True), settings least tried against the incumbent first and taken in turn."""
        candidates = candidate_moves(view.registry, view.incumbent)
        total: dict[str, int] = {}
        for m in candidates:
            total[m.target] = total.get(m.target, 0) + 1
        by_target: dict[str, list[tuple[Move, bool]]] = {}
        for m in view.untried:
            by_target.setdefault(m.target, []).append((m, False))
        offered = set(candidates)
        untried = set(view.untried)
        seen = _scored_moves(view)
        with quiet_optuna():  # once: setting Optuna's verbosity costs as much as a draw
            suggestions = {target: self._suggest(target) for target in by_target}
        for target, moves in by_target.items():
            view.rng.shuffle(moves)
            move = _fresh_suggestion(view, target, suggestions[target],
                                     offered=offered, untried=untried, seen=seen)
            if move is not None:
                moves[:] = [(move, True)] + [(m, f) for m, f in moves if m != move]
        return _interleaved(by_target, total, view.rng)

    def propose(self, view: SearchView, n: int) -> list[Proposal]:
        """The first ``n`` moves of :meth:`rank`."""
        if n <= 0 or not view.untried:
            return []
        trials = len(self._trials)
        random_phase = trials < self.n_startup_trials
        basis = (f"{trials} trials, fewer than {self.n_startup_trials}: TPE samples at random"
                 if random_phase else f"{trials} trials")
        out = []
        for move, suggested in self.rank(view)[:n]:
            what = describe_move(view.registry, move)
            reason = (f"TPE, the other settings held, suggests {what} ({basis})" if suggested
                      else f"{what}: explores the setting TPE has no other value for "
                           f"({basis})")
            out.append(Proposal(move=move, proposer=self.name, reason=reason))
        return out


def _scored_moves(view: SearchView) -> set[SpelledMove]:
    """The scored configs one move from the incumbent, by that move: whether a
    suggestion's config was scored, without fingerprinting it (config_keys)."""
    return {key for c in view.history
            if (key := one_change(view.incumbent.values, c.values)) is not None}


def _fresh_suggestion(view: SearchView, target: str, value: Any, *, offered: set[Move],
                      untried: set[Move], seen: set[SpelledMove]) -> Move | None:
    """TPE's suggested ``value`` for ``target`` as a move, or None when it is no move.

    A suggestion the search has left out of ``untried`` (tried against this incumbent,
    or a jump with jumps off), or whose config was scored already, would be journaled
    "already tried" and take its setting's place in the step.
    """
    current = view.incumbent.values[target]
    if value is None or same_value(value, current):
        return None
    move = Move(target=target, before=current, after=value)
    if (move in offered and move not in untried) or spelled_move(
            target, view.registry.settings[target].check(value)) in seen:
        return None
    return move


def _interleaved(by_target: dict[str, list[tuple[Move, bool]]], total: dict[str, int],
                 rng: random.Random) -> list[tuple[Move, bool]]:
    """The moves taken a setting at a time, settings least tried against the incumbent
    first (ties in random order)."""
    left = {t: len(ms) for t, ms in by_target.items()}
    order = sorted(by_target, key=lambda t: (total.get(t, 0) - left[t], rng.random()))
    out: list[tuple[Move, bool]] = []
    for depth in range(max(left.values(), default=0)):
        out += [by_target[t][depth] for t in order if depth < left[t]]
    return out
