"""Group-sequential tests: decide at each look, with the error spent over the looks.

A promotion's tests (the dev improvement, val non-inferiority, each auxiliary
tolerance) look at their data several times as chunks of tasks come in, and stop as
soon as the evidence decides. Looking repeatedly at a fixed level would inflate the
error, so each test *spends* its level over its looks (Lan & DeMets 1983): with
information fractions ``t_1 < t_2 < ... <= 1`` (tasks paired so far over the most the
test can have), the boundary of look ``k`` is chosen so that, under the null,

    P(no crossing at looks 1..k-1, crossing at look k) = f(t_k) - f(t_{k-1})

for a spending function ``f`` with ``f(0) = 0`` and ``f(1) = alpha``. Summed over
the looks the chance of ever crossing under the null is at most ``alpha``, however
many looks are taken and wherever they fall, as long as the fractions are not chosen
by peeking at the statistic itself. The boundaries account for the correlation of
the looks (``corr(Z_i, Z_j) = sqrt(t_i / t_j)``): they come from the exact recursion
of Armitage, McPherson & Rowe (Jennison & Turnbull 2000, ch. 19) on a fixed grid,
so they are deterministic, which a resumed search needs to reach the same decisions.

A look's boundary on the standard-normal scale is turned into a *nominal level*
``1 - Phi(c_k)``, and the look passes when the paired t-test's one-sided p-value is
at or below it: the usual way to use normal-theory boundaries with an estimated
variance. Stopping for futility (giving up without rejecting) is always allowed and
costs nothing: it can only remove rejections.

The spending function is ``f(t) = alpha * t**rho``. ``rho = 3`` spends little early
(close to O'Brien-Fleming: full power at the last look, early stops only for large
effects); ``rho = 1`` spends evenly (close to Pocock). forge uses ``rho = 2``, chosen
in benchmarks/gates.py as the balance of power and rollouts per decision.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from scipy import optimize, special
from scipy import stats as _st

__all__ = ["DEFAULT_RHO", "efficacy_boundaries", "nominal_level", "power_spending"]

#: The spending exponent forge's gates use (see the module docstring).
DEFAULT_RHO = 2.0

_GRID_STEP = 0.02  # on the Brownian scale S(t) = Z * sqrt(t); Simpson: z within 1e-4
_LOWER = -9.0  # S(t) has sd sqrt(t) <= 1: nothing of note lies below this
_SQRT_2PI = math.sqrt(2 * math.pi)


def _pdf(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.exp(-0.5 * x * x) / _SQRT_2PI
    return out


def power_spending(alpha: float, rho: float) -> Callable[[float], float]:
    """``f(t) = alpha * t**rho`` on [0, 1]."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if rho <= 0:
        raise ValueError(f"rho must be positive, got {rho}")

    def spend(t: float) -> float:
        return float(alpha * min(1.0, max(0.0, t)) ** rho)

    return spend


def efficacy_boundaries(fractions: Sequence[float], spend: Callable[[float], float]
                        ) -> list[float]:
    """Critical values ``c_1..c_L`` of the standardized statistic at each look.

    ``fractions`` are the information fractions of the looks, strictly increasing in
    (0, 1]. A look that is given no error to spend (``f(t_k) == f(t_{k-1})``) has an
    infinite boundary. Deterministic: the same fractions give the same boundaries.
    """
    ts = [float(t) for t in fractions]
    if not ts:
        return []
    if any(not 0 < t <= 1 for t in ts) or any(b <= a for a, b in itertools.pairwise(ts)):
        raise ValueError(f"fractions must increase strictly within (0, 1], got {ts}")
    out: list[float] = []
    # The density of S(t_k) on the continuation region, on a grid.
    grid: np.ndarray | None = None
    density: np.ndarray | None = None
    previous_t = 0.0
    previous_spent = 0.0
    for t in ts:
        target = spend(t) - previous_spent
        dt = t - previous_t
        sd = math.sqrt(dt)
        if grid is None or density is None:
            # First look: S(t_1) ~ N(0, t_1), boundary straight from the normal tail.
            c = math.inf if target <= 0 else float(_st.norm.isf(target))
            b = c * math.sqrt(t)
            grid = _grid(b if math.isfinite(b) else -_LOWER)
            density = _pdf(grid / sd) / sd
        else:
            weights = _simpson(grid, density)

            def crossing(bound: float, g: np.ndarray = grid, w: np.ndarray = weights,
                         s: float = sd) -> float:
                return float(np.dot(w, special.ndtr((g - bound) / s)))

            if target <= 0:
                b = math.inf
            else:
                hi = float(grid[-1]) + 12 * sd
                if crossing(hi) > target:  # numerically impossible: spend it all here
                    b = hi
                else:
                    b = float(optimize.brentq(lambda x, goal=target: crossing(x) - goal,
                                              _LOWER, hi, xtol=1e-9))
            new_grid = _grid(b if math.isfinite(b) else -_LOWER + float(grid[-1]))
            density = (_pdf((new_grid[:, None] - grid[None, :]) / sd) / sd) @ weights
            grid = new_grid
            c = b / math.sqrt(t)
        out.append(c)
        previous_t, previous_spent = t, spend(t)
    return out


def _grid(top: float) -> np.ndarray:
    """An odd number of points from _LOWER to exactly ``top`` (Simpson's rule needs both)."""
    n = max(3, math.ceil((top - _LOWER) / _GRID_STEP) + 1)
    n += 1 - n % 2
    out: np.ndarray = np.linspace(_LOWER, top, n)
    return out


def _simpson(grid: np.ndarray, density: np.ndarray) -> np.ndarray:
    """Simpson weights times the density: ``sum(weights * h(grid))`` ~ the integral."""
    h = (grid[-1] - grid[0]) / (len(grid) - 1)
    w = np.full(grid.shape, 2.0)
    w[1::2] = 4.0
    w[0] = w[-1] = 1.0
    out: np.ndarray = w * (h / 3) * density
    return out


@lru_cache(maxsize=4096)
def _nominal(fractions: tuple[float, ...], alpha: float, rho: float) -> float:
    c = efficacy_boundaries(fractions, power_spending(alpha, rho))[-1]
    return 0.0 if not math.isfinite(c) else float(_st.norm.sf(c))


def nominal_level(fractions: Sequence[float], alpha: float, rho: float = DEFAULT_RHO
                  ) -> float:
    """The one-sided level of the last look of ``fractions`` (earlier looks as given).

    Fractions are rounded to 1e-9 so that the cache and a replay see the same keys.
    """
    key = tuple(round(float(t), 9) for t in fractions)
    return _nominal(key, float(alpha), float(rho))
