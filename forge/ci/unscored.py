"""How often two saved results failed to score an attempt, compared: the CI gate's failure
share (a search's own comparison of failure shares is :mod:`forge.stats.unscored`).

Unscored attempts (errors, timeouts, cancellations, scorer failures) are left out of
every mean, rightly: they are not zeros. But then a config that raises exactly where
it would be wrong looks perfect, and a pass-rate comparison cannot see it. What can is
the *unscored share*, unscored attempts over attempts, compared with the baseline's.

:func:`compare_unscored` compares it on the (task, seed) keys both results ran
(*paired*): an attempt scored in the baseline and unscored now is a new failure, one
unscored in the baseline and scored now a recovered one, and the exact one-sided sign
test (McNemar's exact test) on those discordant keys says whether the new failures are
more than chance. With no key in common (a baseline saved with another ``--seed``) the
attempts of the tasks in both are compared as two independent samples, by Fisher's
exact one-sided test. Both tests are exact, so an unchanged config is called worse with
probability at most ``alpha``, however few attempts fail.

The gate (:func:`forge.ci.baseline.unscored_gate`) fails when the share rose by more than an
allowance *and* the test finds the rise beyond chance: the allowance keeps a trivial
rise on a large bench from failing CI, the test keeps a few transient errors on a small
bench from doing so. Nothing here imports scipy: the tails are summed in log space.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from forge._text import printable
from forge._util.show import percent
from forge.results.failures import FailureTally
from forge.results.model import AttemptResult, EvalResult, TaskResult
from forge.secrets.masking import clip

__all__ = ["ShareComparison", "ShareSide", "compare_unscored", "fisher_greater_p",
           "reasons_text", "share_verdict", "sign_test_p", "stop_reasons_text"]

#: Reasons named in a one-line message, the most frequent first.
_REASONS_SHOWN = 3
#: How much of a reason's normalised message a one-line message shows (of the 160
#: the failure report groups by).
_REASON_CHARS = 100
# Shares are ratios of integers in floating point: a rise of exactly the allowance
# must land on the passing side.
_EPS = 1e-9


@dataclass(frozen=True)
class ShareSide:
    """One result's attempts as compared: how many, how many unscored, and why."""

    attempts: int
    unscored: int
    #: (reason, count), the most frequent first: ``stop: message`` as the failure
    #: report groups them (:class:`forge.results.failures.FailureTally`).
    reasons: tuple[tuple[str, int], ...] = ()

    @property
    def share(self) -> float | None:
        return self.unscored / self.attempts if self.attempts else None

    @classmethod
    def of(cls, attempts: Iterable[AttemptResult]) -> ShareSide:
        tally = FailureTally.of(attempts)
        return cls(tally.attempts, tally.unscored,
                   tuple((r.label, r.count) for r in tally.reasons(None)))

    def as_json(self) -> dict[str, object]:
        return {"attempts": self.attempts, "unscored": self.unscored, "share": self.share,
                "by_reason": dict(self.reasons)}


@dataclass(frozen=True)
class ShareComparison:
    """The unscored shares of a baseline and a current result, on what both ran.

    ``paired``: compared on shared (task, seed) keys, ``new``/``recovered`` the keys
    unscored in current only / in baseline only. Unpaired, on the attempts of the tasks
    in both, they are the plain difference in unscored counts when positive / negative.
    ``p_value`` is the one-sided exact p-value of "current fails more often".
    ``tasks`` are the tasks that fail more now: (task id, new unscored, compared), most
    first.
    """

    baseline: ShareSide
    current: ShareSide
    paired: bool
    new: int
    recovered: int
    p_value: float
    tasks: tuple[tuple[str, int, int], ...] = ()

    @property
    def rise(self) -> float:
        """Current's unscored share minus the baseline's, on the compared attempts."""
        return (self.current.share or 0.0) - (self.baseline.share or 0.0)

    def as_json(self) -> dict[str, object]:
        return {"paired": self.paired, "baseline": self.baseline.as_json(),
                "current": self.current.as_json(), "rise": self.rise, "new": self.new,
                "recovered": self.recovered, "p_value": self.p_value}


def compare_unscored(baseline: EvalResult, current: EvalResult) -> ShareComparison:
    """The unscored shares compared, paired on shared (task, seed) keys where there are
    any, else unpaired on the tasks in both (or on everything, with no task in common)."""
    base_keys = _by_key(baseline.attempts)
    cur_keys = _by_key(current.attempts)
    shared = [k for k in cur_keys if k in base_keys]
    if shared:
        return _paired(base_keys, cur_keys, shared)
    common = {t.task_id for t in baseline.tasks} & {t.task_id for t in current.tasks}
    base = [a for a in baseline.attempts if not common or a.task_id in common]
    cur = [a for a in current.attempts if not common or a.task_id in common]
    return _unpaired(base, cur)


def _by_key(attempts: Sequence[AttemptResult]) -> dict[tuple[str, int], AttemptResult]:
    # A (task, seed) seen twice in one result (not something forge writes) keeps its
    # first attempt: a key is compared once.
    keyed: dict[tuple[str, int], AttemptResult] = {}
    for a in attempts:
        keyed.setdefault((a.task_id, a.seed), a)
    return keyed


def _paired(base: dict[tuple[str, int], AttemptResult],
            cur: dict[tuple[str, int], AttemptResult],
            keys: list[tuple[str, int]]) -> ShareComparison:
    new: Counter[str] = Counter()
    compared: Counter[str] = Counter()
    recovered = 0
    for key in keys:
        b, c = base[key], cur[key]
        compared[key[0]] += 1
        if b.scored and not c.scored:
            new[key[0]] += 1
        elif c.scored and not b.scored:
            recovered += 1
    n_new = sum(new.values())
    return ShareComparison(
        baseline=ShareSide.of(base[k] for k in keys), current=ShareSide.of(cur[k] for k in keys),
        paired=True, new=n_new, recovered=recovered, p_value=sign_test_p(n_new, recovered),
        tasks=tuple((t, n, compared[t]) for t, n in new.most_common()))


def _unpaired(base: list[AttemptResult], cur: list[AttemptResult]) -> ShareComparison:
    b, c = ShareSide.of(base), ShareSide.of(cur)
    base_tasks = Counter(a.task_id for a in base if not a.scored)
    base_n = Counter(a.task_id for a in base)
    cur_tasks = Counter(a.task_id for a in cur if not a.scored)
    cur_n = Counter(a.task_id for a in cur)
    worse = [(t, n, cur_n[t]) for t, n in cur_tasks.most_common()
             if n / cur_n[t] > (base_tasks[t] / base_n[t] if base_n[t] else 0.0)]
    diff = c.unscored - b.unscored
    return ShareComparison(
        baseline=b, current=c, paired=False, new=max(diff, 0), recovered=max(-diff, 0),
        p_value=fisher_greater_p(c.unscored, c.attempts, b.unscored, b.attempts),
        tasks=tuple(worse))


def share_verdict(c: ShareComparison, max_rise: float, alpha: float) -> tuple[bool, str]:
    """Whether the unscored share passes (it did not rise more than ``max_rise`` beyond
    chance at ``alpha``), and one line saying why: both shares with their counts, the
    current's most frequent reasons, the rise and the test."""
    cur, base = c.current, c.baseline
    why = reasons_text(cur.reasons)
    how = (f"on {cur.attempts} attempts paired by seed" if c.paired else
           "unpaired (no seed in common)")
    text = (f"unscored {percent(cur.share)} ({cur.unscored} of {cur.attempts}"
            f"{': ' + why if why else ''}) vs {percent(base.share)} ({base.unscored} of "
            f"{base.attempts}) in the baseline, {how}: ")
    rise = c.rise
    if rise <= _EPS:
        return True, text + ("no rise" if rise >= -_EPS else f"down {_points(-rise)} points")
    up = f"up {_points(rise, max_rise)} points"
    allowed = f"{_points(max_rise, rise)} allowed"
    test = f"p={c.p_value:.2g} {'≤' if c.p_value <= alpha else '>'} α={alpha:g}"
    if rise <= max_rise + _EPS:
        return True, text + f"{up} ≤ {allowed}"
    if c.p_value > alpha:
        return True, text + f"{up} > {allowed}, but within chance ({test})"
    return False, text + f"{up} > {allowed} and beyond chance ({test})"


def _points(x: float, other: float | None = None) -> str:
    """A difference of shares in percentage points, as :func:`percent` writes it."""
    return percent(x, other).removesuffix("%")


# -- exact one-sided tails -------------------------------------------------------------


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _tail(log_terms: list[float]) -> float:
    """``sum(exp(t))`` without underflow, capped at 1 (rounding can pass it)."""
    if not log_terms:
        return 0.0
    top = max(log_terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in log_terms))


def sign_test_p(new: int, recovered: int) -> float:
    """P(X >= new) for X ~ Binomial(new + recovered, 1/2): the exact one-sided p-value
    of "keys fail now that did not before more often than the reverse" (McNemar's exact
    test). 1.0 with no discordant key."""
    n = new + recovered
    if new <= 0:
        return 1.0
    return _tail([_log_comb(n, k) - n * math.log(2) for k in range(new, n + 1)])


def fisher_greater_p(unscored_a: int, n_a: int, unscored_b: int, n_b: int) -> float:
    """Fisher's exact one-sided p-value that sample a's unscored share exceeds sample
    b's: P(X >= unscored_a) with X hypergeometric (all unscored attempts spread at
    random over the two samples, ``n_a`` drawn). 1.0 when a shows no more than b."""
    if n_a <= 0 or n_b <= 0 or unscored_a * n_b <= unscored_b * n_a:
        return 1.0
    total, failed = n_a + n_b, unscored_a + unscored_b
    denominator = _log_comb(total, n_a)
    top = min(failed, n_a)
    return _tail([_log_comb(failed, x) + _log_comb(total - failed, n_a - x) - denominator
                  for x in range(unscored_a, top + 1)])


def reasons_text(reasons: Sequence[tuple[str, int]], *, top: int = _REASONS_SHOWN) -> str:
    """The most frequent reasons with their counts, for a one-line message: redacted,
    printable, each cut to 100 characters; ``""`` with none."""
    shown = [f"{n} × {printable(clip(label, _REASON_CHARS), breaks='space')}"
             for label, n in reasons[:top]]
    more = len(reasons) - top
    if more > 0:
        shown.append(f"{more} more reason{'s' if more > 1 else ''}")
    return ", ".join(shown)


def stop_reasons_text(tasks: Sequence[TaskResult]) -> str:
    """How the unscored attempts of ``tasks`` stopped, counted by reason in name order."""
    counts: Counter[str] = Counter()
    for t in tasks:
        for a in t.attempts:
            if not a.scored:
                # A completed attempt without a score is a scorer failure, not a success.
                counts["scorer failed" if a.stop_reason == "completed" else a.stop_reason] += 1
    return ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()))
