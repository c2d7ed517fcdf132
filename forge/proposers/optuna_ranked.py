"""The Optuna proposer: untried neighbours ranked by where a TPE sampler would go next.

forge keeps its one-setting-at-a-time search; Optuna only *ranks* the incumbent's
neighbours. Every config the search scores becomes a COMPLETE trial (value = dev
mean, maximised). To rank, throwaway studies holding the same trials draw TPE
suggestions, and each move is scored by how strongly the suggestions point from the
incumbent's value towards the move's ``after`` value (see :class:`OptunaProposer`).

With a ``run_dir`` the trials are also written to ``run_dir / "optuna.journal"``
(study ``"forge"``), so ``optuna-dashboard run_dir/optuna.journal`` can show them.
That file is a mirror for people, never an input to the ranking: the ranking
depends only on the seed and on the ``observe`` calls of this process, which the
search replays in order on resume. A run killed between writing a trial and
journaling its step therefore still reaches the same decisions when resumed.
"""

from __future__ import annotations

import logging
import math
import random
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import FrozenTrial
from pydantic import BaseModel, ConfigDict, Field

from forge.moves import Move
from forge.proposers._base import PROPOSERS, Proposal, Proposer, ProposerContext, SearchView
from forge.proposers._common import describe_move
from forge.registry import (
    BoolSetting,
    Config,
    EnumSetting,
    FloatSetting,
    IntSetting,
    Registry,
    Scalar,
    Setting,
    same_value,
)
from forge.spec import BuildContext

__all__ = ["JOURNAL_FILE", "STUDY_NAME", "OptunaOptions", "OptunaProposer", "quiet_optuna"]

JOURNAL_FILE = "optuna.journal"
STUDY_NAME = "forge"
_FINGERPRINT = "fingerprint"  # user attr that ties a trial to its config
_Draws = list[dict[str, Any]]


@contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna at WARNING and without ExperimentalWarning, for the duration only.

    Optuna logs every study creation at INFO; in a search loop that is noise on the
    user's console. The previous verbosity is restored so that a caller who asked
    for Optuna's INFO logs elsewhere still gets them.
    """
    previous = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(max(previous, logging.WARNING))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(previous)


@dataclass(frozen=True)
class _Param:
    """One setting as an Optuna parameter: its distribution and how values are encoded."""

    setting: Setting
    distribution: BaseDistribution
    # Categorical choices as Optuna sees them. Optuna finds a choice with ``==``, so
    # an enum holding both 1 and True would be read wrong; such enums use repr labels.
    labels: tuple[Any, ...] | None = None

    def encode(self, value: Scalar) -> Any:
        if self.labels is None:
            return value
        choices = self.setting.choices if isinstance(self.setting, EnumSetting) else []
        for choice, label in zip(choices, self.labels, strict=True):
            if same_value(choice, value):
                return label
        raise ValueError(f"{value!r} is not a choice")

    def distribution_for(self, value: Scalar) -> BaseDistribution:
        """The distribution to record ``value`` under.

        A stepped int distribution only holds values on its grid; a config given by
        hand may sit off it, so that one trial records the setting with step 1
        (Optuna accepts mixed steps of one kind of distribution in a study).
        """
        dist = self.distribution
        if (isinstance(dist, IntDistribution) and dist.step != 1
                and isinstance(value, int) and (value - dist.low) % dist.step):
            return IntDistribution(dist.low, dist.high, log=dist.log, step=1)
        return dist


def _param(setting: Setting) -> _Param:
    if isinstance(setting, IntSetting):
        log = setting.scale == "log"
        # Optuna wants (high - low) % step == 0; the default must also sit on the grid,
        # or every config near it would fall off. Otherwise step 1 holds every value.
        on_grid = ((setting.max - setting.min) % setting.step == 0
                   and (setting.default - setting.min) % setting.step == 0)
        step = setting.step if not log and on_grid else 1
        return _Param(setting, IntDistribution(setting.min, setting.max, log=log, step=step))
    if isinstance(setting, FloatSetting):
        # No step: configs need not lie on a grid (hand-written ones, clamped moves).
        return _Param(setting, FloatDistribution(setting.min, setting.max,
                                                 log=setting.scale == "log"))
    if isinstance(setting, BoolSetting):
        return _Param(setting, CategoricalDistribution([False, True]))
    choices = list(setting.choices)
    ambiguous = any(a == b for i, a in enumerate(choices) for b in choices[i + 1:])
    if ambiguous:
        labels = tuple(repr(c) for c in choices)
        return _Param(setting, CategoricalDistribution(list(labels)), labels)
    return _Param(setting, CategoricalDistribution(choices))


class OptunaOptions(BaseModel):
    """The options of the proposers built on an Optuna study (``optuna``, ``auto``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    n_startup_trials: int = Field(default=4, ge=0)
    n_samples: int = Field(default=32, ge=1)


@PROPOSERS.register("optuna")
class OptunaProposer(Proposer):
    """Ranks ``view.untried`` with a TPE sampler fed by every observed config.

    Contract:

    - ``observe(config, dev_mean)`` records the config as a COMPLETE trial (maximise).
      A config is recorded once, by fingerprint: a second observation of the same
      config is ignored (the first score stands, as in the journal file, whose
      trials cannot be changed). A non-finite ``dev_mean`` (nothing scored) says
      nothing about the objective and is ignored.
    - ``propose(view, n)`` scores every move of ``view.untried`` and returns the best
      ``n``, ties broken by ``view.rng``. The scores depend only on ``seed`` and the
      sequence of ``observe`` calls: the same sequence gives the same ranking.
    - With fewer than ``n_startup_trials`` trials, TPE samples at random; the
      ranking is then close to a shuffle, and the reason says so.

    Move score, in [-1, 1]. The *vote* of one suggestion ``s`` for a move is
    ``(|s - before| - |s - after|) / |after - before|`` for numbers (on the log
    scale for log settings): +1 at or beyond ``after``, -1 at or beyond ``before``;
    for bools and enums it is ``[s == after] - [s == before]``. Votes lie in
    [-1, 1] whatever the setting's type or range, so moves of different settings
    compare on one scale. The score is half of: the mean vote of ``n_samples``
    suggestions of a maximising TPE, minus the mean vote of ``n_samples``
    suggestions of a minimising TPE over the same trials. The second term is there
    because TPE's "good" group is small (10% of the trials): on the few best trials
    an irrelevant setting holds some value by chance, and maximising votes alone
    rate moving it as high as moving a setting that matters. A setting that
    matters points the other way among the worst trials; a chance value rarely does.
    """

    name: str = "optuna"
    options_model = OptunaOptions

    def __init__(self, registry: Registry, *, run_dir: Path | None = None, seed: int = 0,
                 n_startup_trials: int = 4, n_samples: int = 32) -> None:
        if n_startup_trials < 0:
            raise ValueError(f"n_startup_trials must be >= 0, got {n_startup_trials}")
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        self.registry = registry
        self.seed = seed
        self.n_startup_trials = n_startup_trials
        self.n_samples = n_samples
        self._params = {name: _param(s) for name, s in registry.settings.items()}
        self._distributions = {name: p.distribution for name, p in self._params.items()}
        self._trials: list[FrozenTrial] = []  # observed in this process, in order
        self._observed: set[str] = set()
        # (trial count, draws towards the best, draws towards the worst): suggestions()
        self._samples: tuple[int, _Draws, _Draws] | None = None
        self.journal_path = run_dir / JOURNAL_FILE if run_dir is not None else None
        storage: JournalStorage | None = None
        if self.journal_path is not None:
            self.journal_path.parent.mkdir(parents=True, exist_ok=True)
            storage = JournalStorage(JournalFileBackend(str(self.journal_path)))
        with quiet_optuna():
            # load_if_exists: on resume the file already holds the study and its trials.
            self.study = optuna.create_study(
                storage=storage, study_name=STUDY_NAME, direction="maximize",
                sampler=self._sampler(self.seed), load_if_exists=True)
        self._stored = {t.user_attrs.get(_FINGERPRINT)
                        for t in self.study.get_trials(deepcopy=False)}

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        run = ProposerContext.of(ctx)
        options = OptunaOptions.model_validate(args)
        return cls(run.registry, run_dir=run.run_dir, seed=run.seed, **options.model_dump())

    @property
    def distributions(self) -> dict[str, BaseDistribution]:
        """Each setting's Optuna distribution, as suggestions are drawn from it."""
        return dict(self._distributions)

    @property
    def n_trials(self) -> int:
        """Configs observed (distinct, with a finite score) in this process."""
        return len(self._trials)

    def _sampler(self, seed: int, *, constant_liar: bool = True) -> optuna.samplers.TPESampler:
        # multivariate spelled out: the default changed across Optuna versions, and the
        # joint model is what can see that two settings only pay off together.
        return optuna.samplers.TPESampler(seed=seed % 2**32,
                                          n_startup_trials=self.n_startup_trials,
                                          multivariate=True, constant_liar=constant_liar)

    def observe(self, config: Config, dev_mean: float) -> None:
        """Record ``config`` as a trial of value ``dev_mean`` (once per fingerprint)."""
        if config.registry_digest != self.registry.digest:
            raise ValueError("config belongs to another registry than this proposer's")
        fingerprint = config.fingerprint
        if fingerprint in self._observed or not math.isfinite(dev_mean):
            return
        params = {name: self._params[name].encode(config.values[name]) for name in self._params}
        distributions = {name: p.distribution_for(config.values[name])
                         for name, p in self._params.items()}
        trial = optuna.trial.create_trial(params=params, distributions=distributions,
                                          value=float(dev_mean),
                                          user_attrs={_FINGERPRINT: fingerprint})
        self._trials.append(trial)
        self._observed.add(fingerprint)
        if fingerprint not in self._stored:  # a resumed run replays configs already stored
            with quiet_optuna():
                self.study.add_trial(trial)
            self._stored.add(fingerprint)

    def suggestions(self) -> tuple[_Draws, _Draws]:
        """``n_samples`` TPE suggestions towards the best trials, and as many towards the worst.

        Cached per trial count. Drawn from throwaway in-memory studies so the asked
        trials never reach the journal file; ``constant_liar`` is off there, as the
        asks are independent draws from one model, not a batch that should spread out.
        """
        n = len(self._trials)
        if self._samples is not None and self._samples[0] == n:
            return self._samples[1], self._samples[2]
        best = self._draw("maximize", n)
        worst = self._draw("minimize", n)
        self._samples = (n, best, worst)
        return best, worst

    def _draw(self, direction: Literal["maximize", "minimize"], n_trials: int) -> _Draws:
        # A seed per (run seed, trial count, side): reproducible, fresh once the model changes.
        seed = random.Random(f"forge-optuna:{self.seed}:{n_trials}:{direction}").getrandbits(32)
        with quiet_optuna():
            study = optuna.create_study(direction=direction,
                                        sampler=self._sampler(seed, constant_liar=False))
            study.add_trials(self._trials)
            return [study.ask(self._distributions).params for _ in range(self.n_samples)]

    def vote(self, move: Move, draws: _Draws) -> float:
        """Mean vote of ``draws`` for ``move`` (see the class docstring), in [-1, 1]."""
        param = self._params.get(move.target)
        if param is None or not draws:
            return 0.0
        if isinstance(param.setting, (IntSetting, FloatSetting)):
            log = param.setting.scale == "log"

            def t(x: Any) -> float:
                return math.log(float(x)) if log else float(x)

            before, after = t(move.before), t(move.after)
            width = abs(after - before)
            if width == 0:
                return 0.0
            total = sum(abs(t(d[move.target]) - before) - abs(t(d[move.target]) - after)
                        for d in draws)
            return total / width / len(draws)
        before_label, after_label = param.encode(move.before), param.encode(move.after)
        votes = sum(int(same_value(d[move.target], after_label))
                    - int(same_value(d[move.target], before_label)) for d in draws)
        return votes / len(draws)

    def score(self, move: Move) -> float:
        """How strongly TPE points from ``move.before`` to ``move.after``, in [-1, 1]."""
        best, worst = self.suggestions()
        return (self.vote(move, best) - self.vote(move, worst)) / 2

    def rank(self, view: SearchView) -> list[tuple[Move, float]]:
        """Every move of ``view.untried`` with its score, best first, ties by ``view.rng``."""
        scored = [(move, self.score(move), view.rng.random()) for move in view.untried]
        scored.sort(key=lambda item: (-item[1], item[2]))
        return [(move, score) for move, score, _ in scored]

    def propose(self, view: SearchView, n: int) -> list[Proposal]:
        """The ``n`` best-ranked untried moves."""
        if n <= 0 or not view.untried:
            return []
        trials = len(self._trials)
        basis = f"2x{self.n_samples} samples, {trials} trials"
        if trials < self.n_startup_trials:
            basis += f", fewer than {self.n_startup_trials}: TPE samples at random"
        return [Proposal(move=move, proposer=self.name,
                         reason=f"TPE ranks {describe_move(view.registry, move)} "
                                f"(score {score:+.2f} over {basis})")
                for move, score in self.rank(view)[:n]]

