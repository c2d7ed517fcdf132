"""How often two configs fail on the same (task, seed) pairs, and whether one fails more.

An attempt *fails* when it ends unscored through its config's doing (an error, a
timeout, an output the scorer could not judge: :attr:`~forge.results.model.AttemptResult.failed`);
a cancelled attempt is the search's doing and pairs with nothing. The means of a
search leave failures out (they are not zeros), so a config that fails exactly where it
would be wrong looks perfect on them: the failure share is compared on its own.

:func:`failure_increase` tests ``H0: p_fail(candidate) - p_fail(reference) <= allowed``
against more failures, one-sided: a candidate is refused when its increase is shown
beyond the allowance at the level. Which test reads the pairs follows the tolerances'
rule (:mod:`forge.gates.tolerance`): where the failures changed on at
least :data:`SPARSE_TASKS` tasks, the paired t-test over tasks (the unit every gate
generalises over); on fewer, an exact test on the attempts whose outcome changed (the
sign test where nothing is allowed, Tango's score test where a share is), since a
t-test over a handful of changed tasks reads too much into their spread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import stats as _st

from forge.results.model import AttemptResult, paired_outcomes
from forge.stats.paired import net_regression_p, paired_test

__all__ = ["SPARSE_TASKS", "FailureIncrease", "FailurePairs", "failure_increase",
           "failure_pairs"]

#: Failures changed on fewer tasks than this are read by an exact test of the attempts.
SPARSE_TASKS = 10


@dataclass(frozen=True)
class FailurePairs:
    """Two configs' failures on the (task, seed) pairs both ran (neither cancelled)."""

    #: Per task with a pair: the mean over its pairs of candidate failed minus
    #: reference failed (each 0 or 1).
    per_task: dict[str, float]
    pairs: int
    #: Failures among the pairs: the reference's and the candidate's.
    before: int
    after: int
    #: Pairs where only the candidate failed, and where only the reference did.
    worse: int
    better: int

    @property
    def changed_tasks(self) -> int:
        return sum(1 for d in self.per_task.values() if d != 0)

    @property
    def share_before(self) -> float | None:
        return self.before / self.pairs if self.pairs else None

    @property
    def share_after(self) -> float | None:
        return self.after / self.pairs if self.pairs else None

    def text(self) -> str:
        """``unscored 3/240 -> 41/240 paired attempts (+15.8 pts)``."""
        if not self.pairs:
            return "unscored: no paired attempt"
        change = 100 * (self.after - self.before) / self.pairs
        return (f"unscored {self.before}/{self.pairs} -> {self.after}/{self.pairs} paired "
                f"attempts ({change:+.1f} pts)")


def failure_pairs(reference: Mapping[str, Sequence[AttemptResult]],
                  candidate: Mapping[str, Sequence[AttemptResult]]) -> FailurePairs:
    """The failures of ``candidate`` against ``reference`` on their shared pairs."""
    per_task: dict[str, float] = {}
    pairs = before = after = worse = better = 0
    for task_id, items in paired_outcomes(reference, candidate).items():
        if not items:
            continue
        delta = 0
        for ref, cand in items:
            before += ref.failed
            after += cand.failed
            worse += cand.failed and not ref.failed
            better += ref.failed and not cand.failed
            delta += int(cand.failed) - int(ref.failed)
        pairs += len(items)
        per_task[task_id] = delta / len(items)
    return FailurePairs(per_task, pairs, before, after, worse, better)


@dataclass(frozen=True)
class FailureIncrease:
    """The one-sided test of more failures: ``p`` small when the candidate's failure
    share is shown above the reference's by more than ``allowed``."""

    p: float
    effect: float  # the increase in failure share, per task mean (the t-test's) or pooled
    test: str  # "none", "t", "sign" or "score"

    def shown(self, level: float) -> bool:
        return self.p < level


def failure_increase(pairs: FailurePairs, *, allowed: float, level: float) -> FailureIncrease:
    """Whether ``pairs`` show the candidate failing more than ``allowed`` (a share of
    attempts) above the reference, at ``level``."""
    if pairs.after == 0 or pairs.worse == 0 or not pairs.pairs:
        # No attempt failed for the candidate alone: no increase to show.
        effect = (pairs.after - pairs.before) / pairs.pairs if pairs.pairs else 0.0
        return FailureIncrease(1.0, effect, "none")
    if pairs.changed_tasks >= SPARSE_TASKS:
        t = paired_test(list(pairs.per_task.values()), alpha=level, threshold=allowed)
        return FailureIncrease(t.p_value, t.effect, "t")
    effect = (pairs.worse - pairs.better) / pairs.pairs
    if allowed <= 0:
        # Under equal shares each changed pair is as likely to go either way.
        changed = pairs.worse + pairs.better
        return FailureIncrease(float(_st.binom.sf(pairs.worse - 1, changed, 0.5)), effect,
                               "sign")
    # Tango's score test of the paired difference, read in the other direction: its p
    # of "at least the allowance" is small where this one's is large.
    p = 1.0 - net_regression_p(pairs.worse, pairs.better, pairs.pairs, min(allowed, 1.0))
    return FailureIncrease(max(0.0, min(1.0, p)), effect, "score")
