"""Statistics with their uncertainty: confidence intervals over tasks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats as _st

__all__ = ["Interval", "mean_interval"]


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided confidence interval over ``n`` independent units."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """Student-t interval of the mean of per-task values (tasks are the independent units;
    the K attempts of one task are not independent draws of the bench)."""
    n = len(values)
    if n == 0:
        return None
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, -math.inf, math.inf, n, confidence)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    if var == 0:
        return Interval(mean, mean, mean, n, confidence)
    half = float(_st.t.ppf(0.5 + confidence / 2, n - 1)) * math.sqrt(var / n)
    return Interval(mean, mean - half, mean + half, n, confidence)
