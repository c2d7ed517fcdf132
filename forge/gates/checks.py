"""What every gate returns (:class:`GateResult`: its own verdict with a reason; none is
averaged), and the one-shot gates: the task floor and the start-to-final checks on the
test split. The sequential dev, val and auxiliary gates of a confirmation are the other
modules of this package; the numbers they test are in :mod:`forge.stats.pairs`.

Data arrive as :class:`~forge.results.model.TaskAttempts` (one config's attempts grouped
by task) for the incumbent and the candidate, run on the same seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from forge.bench.loader import MetricSpec
from forge.results.model import TaskAttempts
from forge.stats.paired import fixed_tasks_bound, paired_test
from forge.stats.pairs import paired_regressions, regression_allowance, regressions
from forge.stats.unscored import failure_increase, failure_pairs

__all__ = [
    "GateResult",
    "aux_text",
    "floor_gate",
    "tolerance_check",
    "unscored_check",
]


class GateResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    passed: bool
    reason: str
    details: dict[str, float | int | str | None] = Field(default_factory=dict)


def aux_text(metric: str, spec: MetricSpec, before: float, after: float, bound: float,
             allowed: float, *, scope: str = "") -> str:
    """``cost +8.1% (upper bound of regression +9.6%, allowed +10.0%)``, in the metric's
    own terms (percent of the start for a relative tolerance); ``scope`` follows the
    bound (``on these 110 tasks, …``)."""
    word = "regression" if spec.direction == "lower" else "loss"
    return (f"{metric} {_amount(spec, before, after - before, '.1f', '.4g')} (upper bound "
            f"of {word} {_amount(spec, before, bound, '.1f', '.4g')}{scope}, allowed "
            f"{_amount(spec, before, allowed, '.1f', '.4g', allowance=True)})")


def _amount(spec: MetricSpec, before: float, x: float, pct: str, plain: str, *,
            allowance: bool = False) -> str:
    if spec.relative and before != 0:
        share = spec.max_increase if allowance else x / abs(before)
        return f"{100 * share:+{pct}}%"
    return f"{x:+{plain}}"


def tolerance_check(metric: str, spec: MetricSpec, start: TaskAttempts, final: TaskAttempts,
                    *, alpha: float) -> GateResult:
    """One auxiliary tolerance from the start config to the final one on the test split,
    the check of what the gates promised. ``details.status``: ``within`` (the one-sided
    ``1 - alpha`` upper bound of the regression within the allowance: shown),
    ``unclear`` (the estimate within, the bound not) or ``beyond`` (the estimate past
    the allowance). Only ``beyond`` fails: ``forge promote`` refuses it unless told to
    accept it.

    The bound is over *these* test tasks, from their paired attempts
    (:func:`~forge.stats.fixed_tasks_bound`): the gates already generalised over tasks,
    on dev and val, and the test split is what the check is asked about — the truth a
    benchmark scores it by is the test tasks' own expectation. The bound over tasks
    like these (:func:`~forge.stats.paired_test`, whose spread is the few tasks where a
    rare event happens at all) is journaled and shown beside it as ``bound_new_tasks``;
    with fewer than two attempts a task it is the only one, and decides.
    """
    name = f"aux:{metric}"
    worse, before, after = regressions(spec, start, final, metric)
    if before is None or after is None:
        return GateResult(name=name, passed=True, details={"status": "absent"},
                          reason=f"{metric} not reported by both configs: nothing to compare")
    t = paired_test(worse, alpha=alpha)
    fixed = fixed_tasks_bound(paired_regressions(spec, start, final, metric), alpha=alpha)
    allowed = regression_allowance(spec, before)
    bound = t.ci_high if fixed is None else fixed.bound
    status = ("within" if bound <= allowed + 1e-12
              else "beyond" if t.effect > allowed + 1e-12 else "unclear")
    words = {"within": "within the allowance", "unclear": "within by the estimate, not "
             "shown by the bound", "beyond": "BEYOND the allowance"}[status]
    scope = ("" if fixed is None else
             f" on these {fixed.n_tasks} tasks, "
             + (f"{_amount(spec, before, t.ci_high, '.1f', '.4g')} on tasks like them"
                if math.isfinite(t.ci_high) else "none on tasks like them from one task"))
    # From one task there is no bound over tasks like it (t's is infinite): none, not inf,
    # which no journal line can hold (a search on one-task splits died writing it).
    details: dict[str, float | int | str | None] = {
        "before": before, "after": after, "bound": _finite(bound), "allowed": allowed,
        "direction": spec.direction, "status": status, "n_tasks": t.n}
    if fixed is not None:
        details |= {"bound_new_tasks": _finite(t.ci_high), "pairs": fixed.n_pairs,
                    "df": _finite(fixed.df)}
    return GateResult(name=name, passed=status != "beyond",
                      reason=f"{aux_text(metric, spec, before, after, bound, allowed, scope=scope)}"
                             f": {words}", details=details)


def unscored_check(start: TaskAttempts, final: TaskAttempts, *, allowed: float, alpha: float
                   ) -> GateResult:
    """The failure share from the start config to the final one on the test split, on
    their shared (task, seed) pairs (:mod:`forge.stats.unscored`). ``details.status``:
    ``within`` (the increase within ``allowed``), ``unclear`` (past it by the estimate,
    not shown at ``alpha``) or ``beyond`` (shown past it at ``alpha``, one-sided). Only
    ``beyond`` fails, and ``forge promote`` refuses it unless told to accept it. A check
    of no pair (nothing compared) is ``absent`` and fails: it shows nothing."""
    pairs = failure_pairs(start, final)
    found = failure_increase(pairs, allowed=allowed, level=alpha)
    details: dict[str, float | int | str | None] = {
        "pairs": pairs.pairs, "before": pairs.before, "after": pairs.after,
        "worse": pairs.worse, "better": pairs.better, "allowed": allowed, "p": found.p,
        "test": found.test, "n_tasks": len(pairs.per_task)}
    if not pairs.pairs:
        return GateResult(name="unscored", passed=False, details={**details,
                          "status": "absent"},
                          reason="unscored: no (task, seed) pair ran on both configs: "
                                 "nothing compared")
    increase = (pairs.after - pairs.before) / pairs.pairs
    status = ("beyond" if found.shown(alpha) else
              "unclear" if increase > allowed + 1e-12 else "within")
    words = {"within": "within the allowance",
             "unclear": "above the allowance by the estimate, not shown",
             "beyond": f"BEYOND the allowance (p={found.p:.3g} < {alpha:g})"}[status]
    return GateResult(name="unscored", passed=status != "beyond",
                      details={**details, "status": status},
                      reason=f"{pairs.text()}, allowed +{100 * allowed:g} pts: {words}")


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def floor_gate(tag: str, floor: float, checks: Sequence[tuple[str, TaskAttempts, TaskAttempts]],
               tags: Mapping[str, Sequence[str]]) -> GateResult:
    """Every task tagged ``tag`` stays at or above ``floor`` (pass rate), in each split.

    A task the incumbent already had below the floor fails the gate only if the
    candidate does worse on it: the gate refuses regressions, not old debts.
    """
    failures: list[str] = []
    checked = 0
    for split, incumbent, candidate in checks:
        cand_rates, inc_rates = candidate.pass_rates(), incumbent.pass_rates()
        for task_id in candidate:
            if tag not in tags.get(task_id, ()):
                continue
            cand_rate = cand_rates.get(task_id)
            if cand_rate is None:
                continue
            checked += 1
            inc_rate = inc_rates.get(task_id)
            if cand_rate < floor and (inc_rate is None or inc_rate >= floor
                                      or cand_rate < inc_rate):
                was = "—" if inc_rate is None else f"{inc_rate:.0%}"
                failures.append(f"{split}/{task_id} {cand_rate:.0%} (was {was})")
    name = f"floor:{tag}"
    if failures:
        shown = ", ".join(failures[:5]) + (f" and {len(failures) - 5} more"
                                           if len(failures) > 5 else "")
        return GateResult(name=name, passed=False,
                          reason=f"{len(failures)} {tag} task(s) below floor {floor:.0%}: {shown}",
                          details={"failures": len(failures), "checked": checked})
    if not checked:
        # A floor that compared nothing shows nothing: every tagged task unscored for the
        # candidate (or none tagged at all) is no evidence that they hold.
        return GateResult(name=name, passed=False,
                          reason=f"no {tag} task scored for the candidate: its floor "
                                 f"{floor:.0%} is not shown", details={"checked": 0})
    return GateResult(name=name, passed=True,
                      reason=f"all {checked} {tag} task checks at or above {floor:.0%}",
                      details={"checked": checked})
