"""forge's settings as Optuna parameters, and Optuna kept quiet.

Shared by the Optuna proposer (:mod:`forge.proposers.optuna_ranked`, whose TPE model
lives in memory) and the run's study for people (:mod:`forge.report.dashboard`, the file
``optuna-dashboard`` opens): both record a config's values the same way.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from forge.config.registry import (
    BoolSetting,
    EnumSetting,
    FloatSetting,
    IntSetting,
    Scalar,
    Setting,
    same_value,
)

__all__ = ["OptunaParam", "encode_values", "optuna_param", "quiet_optuna"]


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
class OptunaParam:
    """One setting as an Optuna parameter: its distribution and how values are encoded."""

    setting: Setting
    distribution: BaseDistribution
    # Categorical choices as Optuna sees them. Optuna finds a choice with ``==``, so
    # an enum holding both 1 and True would be read wrong; such enums use repr labels.
    labels: tuple[Any, ...] | None = None

    def decode(self, value: Any) -> Scalar:
        """The setting's value for what Optuna holds (a label back to its choice)."""
        if self.labels is None:
            decoded: Scalar = value
            return decoded
        choices = self.setting.choices if isinstance(self.setting, EnumSetting) else []
        for choice, label in zip(choices, self.labels, strict=True):
            if label == value:
                return choice
        raise ValueError(f"{value!r} is not a label of {self.setting}")

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


def optuna_param(setting: Setting) -> OptunaParam:
    """``setting`` as an Optuna parameter: its distribution, and labels where needed."""
    if isinstance(setting, IntSetting):
        log = setting.scale == "log"
        # Optuna wants (high - low) % step == 0; the default must also sit on the grid,
        # or every config near it would fall off. Otherwise step 1 holds every value.
        on_grid = ((setting.max - setting.min) % setting.step == 0
                   and (setting.default - setting.min) % setting.step == 0)
        step = setting.step if not log and on_grid else 1
        return OptunaParam(setting, IntDistribution(setting.min, setting.max, log=log, step=step))
    if isinstance(setting, FloatSetting):
        # No step: configs need not lie on a grid (hand-written ones, clamped moves).
        return OptunaParam(setting, FloatDistribution(setting.min, setting.max,
                                                      log=setting.scale == "log"))
    if isinstance(setting, BoolSetting):
        return OptunaParam(setting, CategoricalDistribution([False, True]))
    choices = list(setting.choices)
    # Labels when two choices are equal to Python (1, True, 1.0): a set hashes them as
    # one, as ``==`` sees them, in one pass at any number of choices.
    ambiguous = len(set(choices)) < len(choices)
    if ambiguous:
        labels = tuple(repr(c) for c in choices)
        return OptunaParam(setting, CategoricalDistribution(list(labels)), labels)
    return OptunaParam(setting, CategoricalDistribution(choices))


def encode_values(params: Mapping[str, OptunaParam], values: Mapping[str, Scalar]
                  ) -> tuple[dict[str, Any], dict[str, BaseDistribution]]:
    """A config's ``values`` as an Optuna trial records them: its params (choices as
    their labels) and the distribution each is recorded under."""
    return ({name: p.encode(values[name]) for name, p in params.items()},
            {name: p.distribution_for(values[name]) for name, p in params.items()})
