"""CI gates on a saved result: aggregate, unscored budget, per-task floor, baseline regression.

``forge gate CURRENT.json`` decides whether a result may pass a CI step. Each gate
gives its own verdict, reason and failing tasks; none is averaged into another:

``aggregate``
    The result's pass rate (the mean of per-task pass rates, see
    :attr:`EvalResult.pass_rate`) is at least ``min_pass_rate``. Unscored attempts
    are never counted as zeros; a result with nothing scored fails ("nothing scored").
``unscored`` (with a baseline, or with ``max_unscored``)
    Unscored attempts (errors, timeouts, cancellations, scorer failures) are left out
    of every pass rate, so a harness that fails exactly where it would be wrong looks
    perfect to the other gates; this one looks at the failures themselves. With a
    baseline, the *unscored share* (unscored attempts / attempts) must not rise by more
    than ``max_unscored_rise`` (default 2 points) over the baseline's *and* beyond
    chance: compared on the (task, seed) keys both ran by the exact one-sided sign test,
    or, with no key in common, on the tasks in both by Fisher's exact one-sided test,
    at level ``alpha`` (:mod:`forge.ci.unscored`). Both conditions, because a rise within
    the allowance is not worth a red build and a rise chance explains is not evidence.
    With ``max_unscored``, at most that many attempts may be unscored in all, whatever
    the baseline did: no statistics, ``0`` for a harness that must never fail. With
    both, either failing fails the gate.
``task_floor`` (only with ``task_floor``)
    Every task's pass rate is at least the floor; a task with nothing scored fails too.
``regression`` (only with a baseline)
    Results must be comparable (same env fingerprint, else :class:`IncomparableError`).
    For each task in both, attempts are paired by seed as :func:`diff_results` pairs
    them, and the drop in pass rate (baseline - current) is at most ``max_drop``.
    A task with no seed scored in both (a baseline saved with another ``--seed``) is
    compared *unpaired*: its attempts are two independent binomial samples, so it
    fails only when the one-sided lower bound of its drop (Newcombe's hybrid score
    interval, :func:`~forge.stats.drop_lower_bound`) exceeds ``max_drop``; and the
    mean drop over those tasks fails when a one-sided t-test over tasks shows it above
    ``max_drop``. The levels are Bonferroni shares of ``alpha`` (half for the mean,
    half split over the tasks), so an unchanged config fails with probability at most
    ``alpha``. With no task compared either way the gate cannot say anything, and a
    green that hides that would mislead: it is refused (:class:`IncomparableError`).
    Tasks in one result only, or with nothing scored on one side, are listed. A
    current result with nothing scored at all fails the gate (it is the result under
    test that broke, not the input): only a baseline with nothing in common is refused.

A :class:`CiReport` gives its JSON form itself; :mod:`forge.report.ci` renders
it as Markdown (for ``$GITHUB_STEP_SUMMARY``) and as JUnit XML. Exit codes are the
CLI's: 0 all passed, 1 a gate failed, and bad input (including incomparable results)
is a :class:`UserError`, exit 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from forge._util.show import percent
from forge.ci.unscored import (
    ShareComparison,
    ShareSide,
    compare_unscored,
    reasons_text,
    share_verdict,
    stop_reasons_text,
)
from forge.errors import IncomparableError, OptionError
from forge.results.compare import ResultDiff, check_comparable, diff_results, why_unpaired
from forge.results.model import EvalResult, TaskResult
from forge.stats.paired import drop_lower_bound, paired_test

__all__ = [
    "DEFAULT_MAX_UNSCORED_RISE",
    "GATE_NAMES",
    "CheckOptions",
    "CheckOutcome",
    "CiReport",
    "TaskFailure",
    "aggregate_check",
    "percent",
    "regression_check",
    "run_checks",
    "task_floor_check",
    "unscored_share_check",
]

GATE_NAMES = ("aggregate", "unscored", "task_floor", "regression")
#: How far the unscored share may rise over the baseline's before the gate looks at
#: whether the rise is beyond chance: 2 points, one attempt in 50. A harness whose
#: transient errors (a dropped connection, a slow call) come and go stays under it;
#: a change that makes the agent fail on its hard tasks does not.
DEFAULT_MAX_UNSCORED_RISE = 0.02
# Pass rates are ratios of small integers computed in floating point: 1.0 - 0.9 is
# 0.09999999999999998. A tolerance far below any real difference of two such ratios
# keeps "a drop of exactly --max-drop" on the passing side.
_EPS = 1e-9


@dataclass(frozen=True)
class CheckOptions:
    """Thresholds of the gates. ``None`` turns an optional gate off.

    Fractions are in [0, 1]; ``max_drop`` applies only when a baseline is given.
    """

    min_pass_rate: float = 0.0
    task_floor: float | None = None
    max_drop: float = 0.0
    max_unscored: int | None = None
    #: Error level of the unpaired regression comparison (tasks without a shared seed)
    #: and of the unscored share's test.
    alpha: float = 0.05
    #: How far the unscored share may rise over the baseline's (a fraction of attempts).
    max_unscored_rise: float = DEFAULT_MAX_UNSCORED_RISE

    def __post_init__(self) -> None:
        # Checked here, not only in the CLI, so a library caller gets the same refusal.
        for name in ("min_pass_rate", "task_floor", "max_drop", "max_unscored_rise"):
            value = getattr(self, name)
            if value is not None or name != "task_floor":
                _refuse_unless_fraction(value, f"--{name.replace('_', '-')}")
        _refuse_unless_count(self.max_unscored)
        if not _is_real(self.alpha) or not 0.0 < self.alpha < 1.0:
            raise OptionError(f"expected a level between 0 and 1 (exclusive), got "
                              f"{self.alpha!r}", option="--alpha")


def _is_real(value: object) -> bool:
    # bool is an int to Python, but True is no threshold a user meant.
    return not isinstance(value, bool) and isinstance(value, int | float)


def _refuse_unless_fraction(value: Any, option: str) -> None:
    # ``not (0 <= x <= 1)`` also refuses NaN, which compares false to everything.
    if not _is_real(value) or not 0.0 <= value <= 1.0:
        raise OptionError(f"expected a fraction between 0 and 1, got {value!r}",
                          option=option)


def _refuse_unless_count(max_unscored: int | None) -> None:
    if max_unscored is not None and (
            isinstance(max_unscored, bool) or not isinstance(max_unscored, int)
            or max_unscored < 0):
        raise OptionError(f"expected a whole number >= 0, got {max_unscored!r}",
                          option="--max-unscored")


@dataclass(frozen=True)
class TaskFailure:
    """One task that made a gate fail. ``value`` is what was compared (a pass rate, a
    drop, a count of unscored attempts), or None when nothing could be measured."""

    task_id: str
    detail: str
    value: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "detail": self.detail, "value": self.value}


@dataclass(frozen=True)
class CheckOutcome:
    """One gate's verdict. ``notes`` hold what was listed without failing the gate
    (tasks in one result only, tasks with no paired seed); ``details`` the numbers
    behind the reason, for ``--json`` (the unscored gate's shares, counts and test)."""

    name: str
    passed: bool
    reason: str
    failing: tuple[TaskFailure, ...] = ()
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "reason": self.reason,
                "failing": [f.as_json() for f in self.failing], "notes": list(self.notes),
                "details": self.details}


@dataclass(frozen=True)
class CiReport:
    """Every gate run on one result, with what is needed to render it."""

    current: str
    result: EvalResult
    options: CheckOptions
    gates: tuple[CheckOutcome, ...]
    baseline: str | None = None

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    @property
    def exit_code(self) -> int:
        """0 when every gate passed, 1 otherwise (2 is for bad input, raised earlier)."""
        return 0 if self.passed else 1

    @property
    def failed(self) -> list[CheckOutcome]:
        return [g for g in self.gates if not g.passed]

    def as_json(self) -> dict[str, Any]:
        r = self.result
        n_attempts = r.n_attempts
        unscored = ShareSide.of(r.attempts)
        return {
            "passed": self.passed,
            "current": self.current,
            "baseline": self.baseline,
            "options": {"min_pass_rate": self.options.min_pass_rate,
                        "task_floor": self.options.task_floor,
                        "max_drop": self.options.max_drop if self.baseline else None,
                        "max_unscored": self.options.max_unscored,
                        "alpha": self.options.alpha if self.baseline else None,
                        "max_unscored_rise": (self.options.max_unscored_rise if self.baseline
                                              else None)},
            "result": {"bench": r.bench, "split": r.split, "k": r.k, "n_tasks": len(r.tasks),
                       "n_attempts": n_attempts, "n_scored": r.n_scored,
                       "n_unscored": n_attempts - r.n_scored,
                       "unscored_share": unscored.share,
                       "unscored_by_reason": dict(unscored.reasons), "pass_rate": r.pass_rate,
                       "env_fingerprint": r.env_fingerprint,
                       "config_fingerprint": r.config_fingerprint},
            "gates": [g.as_json() for g in self.gates],
        }

# -- the gates -----------------------------------------------------------------------


def aggregate_check(result: EvalResult, min_pass_rate: float) -> CheckOutcome:
    """The overall pass rate is at least ``min_pass_rate``; nothing scored fails."""
    rate = result.pass_rate
    unscored = result.n_attempts - result.n_scored
    aside = f" ({unscored} unscored attempts not counted)" if unscored else ""
    if rate is None:
        # A pass rate of nothing is no pass rate: this gate compared nothing, so it fails.
        if not result.n_attempts:
            return CheckOutcome("aggregate", False, "nothing scored: the result holds no attempt")
        why = reasons_text(ShareSide.of(result.attempts).reasons)
        return CheckOutcome("aggregate", False, f"nothing scored: all {result.n_attempts} "
                                               f"attempts unscored ({why})")
    scored_tasks = sum(1 for t in result.tasks if t.pass_rate is not None)
    if rate + _EPS >= min_pass_rate:
        return CheckOutcome("aggregate", True,
                           f"pass rate {percent(rate, min_pass_rate)} ≥ "
                           f"{percent(min_pass_rate, rate)} over {scored_tasks} tasks{aside}")
    return CheckOutcome("aggregate", False,
                       f"pass rate {percent(rate, min_pass_rate)} < "
                       f"{percent(min_pass_rate, rate)} over {scored_tasks} tasks{aside}")


def unscored_share_check(result: EvalResult, max_unscored: int | None = None, *,
                  baseline: EvalResult | None = None,
                  max_rise: float = DEFAULT_MAX_UNSCORED_RISE, alpha: float = 0.05,
                  names: tuple[str, str] = ("baseline", "current")) -> CheckOutcome:
    """The unscored attempts: with ``baseline``, their share does not rise more than
    ``max_rise`` over the baseline's beyond chance at ``alpha`` (see the module); with
    ``max_unscored``, at most that many in all. Either failing fails the gate, and the
    tasks that fail more (or at all, for the count) are named. ``names`` are
    (baseline, current), for the refusal of results from different environments."""
    if baseline is None and max_unscored is None:
        raise ValueError("the unscored gate needs a baseline or max_unscored: "
                         "with neither it would compare nothing")
    parts: list[str] = []
    failing: list[TaskFailure] = []
    details: dict[str, Any] = {}
    passed = True
    if baseline is not None:
        passed, text, failing, details["share"] = _share_part(result, baseline, max_rise,
                                                              alpha, names)
        parts.append(text)
    if max_unscored is not None:
        ok, text, culprits, details["count"] = _count_part(
            result, max_unscored, {f.task_id for f in failing})
        passed = passed and ok
        parts.append(text)
        failing += culprits
    return CheckOutcome("unscored", passed, "; ".join(parts), failing=tuple(failing),
                       details=details)


def _share_part(result: EvalResult, baseline: EvalResult, max_rise: float, alpha: float,
                names: tuple[str, str]) -> tuple[bool, str, list[TaskFailure], dict[str, Any]]:
    """The unscored gate's share comparison: verdict, reason, failing tasks, details."""
    check_comparable(baseline, result, names=names)
    comparison = compare_unscored(baseline, result)
    ok, text = share_verdict(comparison, max_rise, alpha)
    details = {**comparison.as_json(), "max_rise": max_rise, "alpha": alpha, "passed": ok}
    return ok, text, ([] if ok else _share_failures(result, comparison)), details


def _count_part(result: EvalResult, max_unscored: int, named: set[str],
                ) -> tuple[bool, str, list[TaskFailure], dict[str, Any]]:
    """The unscored gate's count: verdict, reason, the tasks not already ``named`` that
    have unscored attempts (most first), details."""
    total = result.n_attempts - result.n_scored
    details = {"unscored": total, "max_unscored": max_unscored,
               "passed": total <= max_unscored}
    if total <= max_unscored:
        return True, f"{total} unscored attempts ≤ {max_unscored} allowed", [], details
    text = (f"{total} unscored attempts > {max_unscored} allowed "
            f"({stop_reasons_text(result.tasks)})")
    culprits = sorted((t for t in result.tasks if t.n_unscored and t.task_id not in named),
                      key=lambda t: -t.n_unscored)  # stable: ties keep their order
    return False, text, [TaskFailure(t.task_id, f"{t.n_unscored} of {len(t.attempts)} "
                                                f"attempts unscored ({stop_reasons_text([t])})",
                                     float(t.n_unscored)) for t in culprits], details


def _share_failures(result: EvalResult, c: ShareComparison) -> list[TaskFailure]:
    tasks = {t.task_id: t for t in result.tasks}
    what = "newly unscored, scored in the baseline" if c.paired else \
        "unscored, a larger share than in the baseline"
    return [TaskFailure(task_id, f"{n} of {compared} attempts {what} "
                                 f"({stop_reasons_text([tasks[task_id]])})", float(n))
            for task_id, n, compared in c.tasks]


def task_floor_check(result: EvalResult, floor: float) -> CheckOutcome:
    """Every task's pass rate is at least ``floor``; a task with nothing scored fails."""
    failing: list[tuple[float, TaskFailure]] = []
    for t in result.tasks:
        rate = t.pass_rate
        if rate is None:
            # Sorted first: a task that could not be measured is the worst news.
            failing.append((-1.0, TaskFailure(t.task_id, f"nothing scored ({t.n_unscored} "
                                                         "unscored attempts)")))
        elif rate + _EPS < floor:
            failing.append((rate, TaskFailure(
                t.task_id, f"pass rate {percent(rate, floor)} < floor {percent(floor, rate)} "
                           f"({t.n_passed}/{t.n_scored})", rate)))
    if not failing:
        return CheckOutcome("task_floor", True,
                           f"all {len(result.tasks)} tasks ≥ {percent(floor)}")
    failing.sort(key=lambda pair: pair[0])
    unmeasured = sum(1 for value, _ in failing if value < 0)
    reason = f"{len(failing)} of {len(result.tasks)} tasks below {percent(floor)}"
    if unmeasured:
        reason += f" ({unmeasured} with nothing scored)"
    return CheckOutcome("task_floor", False, reason, failing=tuple(f for _, f in failing))


def regression_check(current: EvalResult, baseline: EvalResult, max_drop: float, *,
                    names: tuple[str, str] = ("baseline", "current"),
                    alpha: float = 0.05) -> CheckOutcome:
    """No shared task's pass rate drops by more than ``max_drop`` from the baseline.

    ``names`` are (baseline, current), used in messages. Pairs come from
    :func:`diff_results` (same seed, scored in both), so a paired task is judged only
    on attempts both runs really scored; a task without a shared seed is judged
    unpaired at level ``alpha`` (see the module docstring). Nothing compared at all is
    an :class:`IncomparableError`.
    """
    # diff_results refuses results from other environments (IncomparableError, exit 2)
    # before pairing anything: a drop measured across environments means nothing.
    diff = diff_results(baseline, current, names=names)
    failing, unpaired, unmeasured = _judge_paired(diff, baseline, current, max_drop)
    paired = len(diff.tasks) - len(unpaired) - len(unmeasured)
    if not paired and not unpaired:
        return _nothing_compared(current, baseline, names,
                                 tuple(_regression_notes(diff, unmeasured)))
    notes = _regression_notes(diff, unmeasured)
    mean_failure = None
    if unpaired:
        notes.append(f"compared unpaired, no seed scored in both "
                     f"({why_unpaired(baseline, current, names)}): "
                     f"{', '.join(a.task_id for a, _ in unpaired)}")
        task_failures, mean_failure = _unpaired_drops(unpaired, max_drop, alpha)
        failing += task_failures
    failing.sort(key=lambda pair: -pair[0])
    how = f"{paired} tasks compared" if not unpaired else (
        f"{paired} tasks compared by seed, {len(unpaired)} unpaired at α={alpha:g}")
    if not failing and mean_failure is None:
        shown = "dropped" if not unpaired else "shown to drop"
        reason = f"no task {shown} more than {percent(max_drop)} ({how})"
        return CheckOutcome("regression", True, reason, notes=tuple(notes))
    reason = _drop_reason(failing, mean_failure, paired + len(unpaired), max_drop)
    return CheckOutcome("regression", False, f"{reason} ({how})",
                       failing=tuple(f for _, f in failing), notes=tuple(notes))


def _nothing_compared(current: EvalResult, baseline: EvalResult, names: tuple[str, str],
                      notes: tuple[str, ...]) -> CheckOutcome:
    """The regression gate when no task could be compared either way."""
    if not current.n_scored and baseline.n_scored:
        # The result under test broke: a failed gate (exit 1), not bad input.
        return CheckOutcome("regression", False,
                           f"nothing scored in {names[1]}: no task could be compared",
                           notes=notes)
    raise IncomparableError(
        f"{names[0]} and {names[1]} have no task scored in both, so the regression "
        "gate would compare nothing")


def _drop_reason(failing: list[tuple[float, TaskFailure]], mean_failure: str | None,
                 compared: int, max_drop: float) -> str:
    """Why the regression gate failed: the tasks that dropped (worst first), the mean."""
    parts = []
    if failing:
        worst = failing[0][1]
        parts.append(f"{len(failing)} of {compared} tasks dropped more than "
                     f"{percent(max_drop)} (worst {worst.task_id}: drop "
                     f"{percent(failing[0][0])})")
    if mean_failure is not None:
        parts.append(mean_failure)
    return "; ".join(parts)


def _judge_paired(diff: ResultDiff, baseline: EvalResult, current: EvalResult,
                  max_drop: float) -> tuple[list[tuple[float, TaskFailure]],
                                            list[tuple[TaskResult, TaskResult]], list[str]]:
    """The paired tasks that dropped more than ``max_drop`` (with their drop), the
    (baseline, current) tasks with no shared seed but scores on both sides, and the
    ids of tasks with nothing scored on one side."""
    base_tasks = {t.task_id: t for t in baseline.tasks}
    cur_tasks = {t.task_id: t for t in current.tasks}
    failing: list[tuple[float, TaskFailure]] = []
    unpaired: list[tuple[TaskResult, TaskResult]] = []
    unmeasured: list[str] = []
    for t in diff.tasks:
        if t.pass_a is None or t.pass_b is None:
            a, b = base_tasks[t.task_id], cur_tasks[t.task_id]
            if a.n_scored and b.n_scored:
                unpaired.append((a, b))
            else:
                unmeasured.append(t.task_id)
            continue
        drop = t.pass_a - t.pass_b
        if drop > max_drop + _EPS:
            failing.append((drop, TaskFailure(
                t.task_id, f"pass rate {percent(t.pass_a)} → {percent(t.pass_b)} "
                           f"(drop {percent(drop, max_drop)} > {percent(max_drop, drop)}, "
                           f"{t.n_pairs} paired seeds)", drop)))
    return failing, unpaired, unmeasured


def _regression_notes(diff: ResultDiff, unmeasured: list[str]) -> list[str]:
    """The notes on tasks the regression gate did not compare."""
    notes = []
    if diff.only_in_a:
        notes.append(f"only in baseline (not compared): {', '.join(diff.only_in_a)}")
    if diff.only_in_b:
        notes.append(f"only in current (not compared): {', '.join(diff.only_in_b)}")
    if unmeasured:
        notes.append(f"nothing scored on one side (not compared): {', '.join(unmeasured)}")
    return notes


def _unpaired_drops(tasks: Sequence[tuple[TaskResult, TaskResult]], max_drop: float,
                    alpha: float) -> tuple[list[tuple[float, TaskFailure]], str | None]:
    """The unpaired comparison of (baseline, current) tasks: the tasks whose drop is
    shown to exceed ``max_drop``, and the reason when the mean drop is.

    Half of ``alpha`` goes to the mean (a t-test over tasks, which has power where K
    attempts per task have little), half is split evenly over the tasks (Bonferroni):
    either claim is wrong with probability at most ``alpha`` when no task got worse.
    """
    level = alpha / 2 / len(tasks)
    failing: list[tuple[float, TaskFailure]] = []
    drops = []
    for a, b in tasks:
        drop = a.n_passed / a.n_scored - b.n_passed / b.n_scored
        drops.append(drop)
        low = drop_lower_bound(a.n_passed, a.n_scored, b.n_passed, b.n_scored, alpha=level)
        if low > max_drop + _EPS:
            failing.append((drop, TaskFailure(
                a.task_id, f"pass rate {percent(a.pass_rate)} → {percent(b.pass_rate)} "
                           f"({a.n_passed}/{a.n_scored} → {b.n_passed}/{b.n_scored}, "
                           f"unpaired: drop at least {percent(low, max_drop)} at "
                           f"{percent(1 - level)} confidence > {percent(max_drop, low)})",
                drop)))
    test = paired_test(drops, alpha=alpha / 2, threshold=max_drop)
    mean_failure = None
    if test.passed:
        mean_failure = (f"mean drop over {len(tasks)} unpaired tasks {percent(test.effect)} "
                        f"(lower bound {percent(test.ci_low, max_drop)} > "
                        f"{percent(max_drop, test.ci_low)})")
    return failing, mean_failure


def run_checks(current: EvalResult, *, options: CheckOptions | None = None,
              baseline: EvalResult | None = None, current_name: str = "current",
              baseline_name: str = "baseline") -> CiReport:
    """Run every gate the options turn on, in a fixed order (see :data:`GATE_NAMES`)."""
    opts = options or CheckOptions()
    # Labelled, so an incomparability message says which file is which.
    names = (baseline_name if baseline_name == "baseline" else f"baseline {baseline_name}",
             current_name if current_name == "current" else f"current {current_name}")
    gates = [aggregate_check(current, opts.min_pass_rate)]
    if opts.max_unscored is not None or baseline is not None:
        gates.append(unscored_share_check(current, opts.max_unscored, baseline=baseline,
                                   max_rise=opts.max_unscored_rise, alpha=opts.alpha,
                                   names=names))
    if opts.task_floor is not None:
        gates.append(task_floor_check(current, opts.task_floor))
    if baseline is not None:
        gates.append(regression_check(current, baseline, opts.max_drop, names=names,
                                     alpha=opts.alpha))
    return CiReport(current=current_name, result=current, options=opts, gates=tuple(gates),
                      baseline=baseline_name if baseline is not None else None)
