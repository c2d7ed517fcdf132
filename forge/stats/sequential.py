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
from scipy import optimize, signal, special
from scipy import stats as _st

from forge.stats.paired import PairedTest

__all__ = ["DEFAULT_RHO", "RARE_RHO", "efficacy_boundaries", "hopeless", "nominal_level",
           "power_spending", "rare_event_boundary"]

#: The spending exponent forge's gates use (see the module docstring).
DEFAULT_RHO = 2.0

#: The spending exponent of the exact test for rare events (:func:`rare_event_boundary`).
#: Far lower than the t-test's: no count passes before ``(1 - p) ** n`` is small (299
#: attempts at 1% and alpha = 0.05), so the early looks have nothing to spend on, and
#: ``t**0.25`` leaves the first look that can pass most of the level (0.038 at a third
#: of the tasks), the rest for the looks that may pass a few events. Chosen on the
#: contest (quality.py, 10 seeds): 0.5 cost closedform's noise move its unchanged
#: tolerances' early pass (0.436 -> 0.417 at 2k); 0, the whole level at once, cost
#: triage the moves that add one or two events (0.733 -> 0.721 at 5k).
RARE_RHO = 0.25

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


def _check_fractions(ts: Sequence[float]) -> None:
    if any(not 0 < t <= 1 for t in ts) or any(b <= a for a, b in itertools.pairwise(ts)):
        raise ValueError(f"fractions must increase strictly within (0, 1], got {ts}")


def _later_boundary(grid: np.ndarray, weights: np.ndarray, sd: float, target: float
                    ) -> float:
    """The boundary on S(t_k) past which the continuing paths (``weights`` on ``grid``
    at the previous look, an increment of sd ``sd``) cross with probability ``target``."""
    if target <= 0:
        return math.inf

    def crossing(bound: float) -> float:
        return float(np.dot(weights, special.ndtr((grid - bound) / sd)))

    hi = float(grid[-1]) + 12 * sd
    if crossing(hi) > target:  # numerically impossible: spend it all here
        return hi
    return float(optimize.brentq(lambda x: crossing(x) - target, _LOWER, hi, xtol=1e-9))


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
    _check_fractions(ts)
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
            b = _later_boundary(grid, weights, sd, target)
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


def rare_event_boundary(pairs: Sequence[int], fractions: Sequence[float], rate: float,
                        alpha: float, rho: float = RARE_RHO) -> int:
    """The most attempts of ``pairs[-1]`` that may show an event for the last look to pass
    the exact group-sequential test of ``H0: the event's rate >= rate`` (-1: none).

    The test for a rare event, where a t-test reads a few events as certainty. ``pairs``
    are the attempts seen at each look so far, nested and non-decreasing; the look
    passes when the count ``R`` of attempts with the event is at most the boundary
    ``c_k``. Each ``c_k`` is the largest count whose exact chance, under the null at
    ``rate`` (binomial, attempts independent), of passing at any look up to ``k`` stays
    within the spent level ``alpha * t_k**rho`` of the look's information fraction
    ``t_k`` (``fractions``): the error over every look is at most ``alpha`` whatever the
    looks, and smaller for any rate above ``rate`` (``R`` only grows with it). The chance
    is computed on the counts not yet passed, look by look (Jennison & Turnbull 2000,
    ch. 12, for binomial data). Deterministic and cached: a replay sees the same
    boundaries.
    """
    if len(pairs) != len(fractions) or not pairs:
        raise ValueError("one count of attempts and one fraction a look")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if rate >= 1:
        return int(pairs[-1])  # no rate can be at least 1 and still be a null to reject
    key = (tuple(int(n) for n in pairs), tuple(round(float(t), 9) for t in fractions),
           round(float(rate), 12), float(alpha), float(rho))
    return _rare_boundaries(*key)[-1]


@lru_cache(maxsize=4096)
def _rare_boundaries(pairs: tuple[int, ...], fractions: tuple[float, ...], rate: float,
                     alpha: float, rho: float) -> tuple[int, ...]:
    if any(b < a for a, b in itertools.pairwise(pairs)) or pairs[0] < 0:
        raise ValueError(f"attempts must not decrease, got {pairs}")
    if rate <= 0:
        return tuple(-1 for _ in pairs)  # a rate of 0 is never shown below itself

    def spend(t: float) -> float:  # rho = 0: the whole level at every look
        return float(alpha * min(1.0, t) ** rho)

    # Counts only grow, so the chances of the counts below ``cap`` need none above it,
    # and no boundary passes the last look's mean count (a chance of about 1/2 there).
    cap = min(pairs[-1], math.ceil(pairs[-1] * rate) + 2) + 1
    # The chance of each count among the paths that have not passed yet.
    alive = np.ones(1)
    seen = 0
    spent = 0.0
    out: list[int] = []
    for n, t in zip(pairs, fractions, strict=True):
        added = n - seen
        seen = n
        if added:
            step = _st.binom.pmf(np.arange(min(added, cap) + 1), added, rate)
            # Direct below a few thousand counts (exact, and the same on every
            # machine); by FFT above, where direct would take seconds a look.
            alive = (np.convolve(alive, step) if len(alive) * len(step) < 4_000_000
                     else np.clip(signal.fftconvolve(alive, step), 0.0, None))[:cap]
        room = spend(t) - spent
        # Keep every count whose passing keeps the total within the level.
        c = int(np.searchsorted(np.cumsum(alive), room * (1 + 1e-12), side="right")) - 1
        c = min(c, len(alive) - 1)
        if c >= 0:
            spent += float(alive[:c + 1].sum())
            alive[:c + 1] = 0.0
        out.append(c)
    return tuple(out)


def hopeless(t: PairedTest, fraction: float, threshold: float, level: float, *,
             optimism: float = 1.0) -> bool:
    """Futility: even a trend ``optimism`` standard errors better than the estimate would
    not reach ``level`` with every task in. The z the estimate would have then is the
    current one scaled by ``1 / sqrt(fraction)``; giving up on this only ever removes a
    rejection, so a test may use it and keep its error."""
    if t.n < 2:
        return False
    if t.sd == 0:
        return t.effect <= threshold and fraction >= 0.5
    se = t.sd / math.sqrt(t.n)
    z_end = ((t.effect - threshold) / se + optimism) / math.sqrt(fraction)
    return z_end < float(_st.norm.isf(level))


#: Asked after each chunk whether the first ``tasks`` tasks put an auxiliary tolerance
#: out of reach (it may fetch the start config's attempts on them).
