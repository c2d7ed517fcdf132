"""The promotion gates. Each returns its own verdict with a reason; none is averaged.

Data arrive as :class:`~forge.results.TaskAttempts` (one config's attempts grouped by
task) for the incumbent and the candidate, run on the same seeds. Pairs are formed
by :func:`~forge.results.paired_attempts` where both attempts were scored; a task
with no pair is left out, never counted as zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from forge.bench import MetricSpec
from forge.results import TaskAttempts, paired_attempts
from forge.stats import PairedTest, paired_test

__all__ = [
    "GateResult",
    "aux_gate",
    "dev_gate",
    "floor_gate",
    "metric_deltas",
    "score_deltas",
    "val_gate",
]


class GateResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    passed: bool
    reason: str
    details: dict[str, float | int | str | None] = Field(default_factory=dict)


def score_deltas(incumbent: TaskAttempts, candidate: TaskAttempts) -> dict[str, float]:
    """Per task: the mean over paired attempts of candidate score minus incumbent score."""
    return {task_id: math.fsum(c.score.value - i.score.value  # type: ignore[union-attr]
                               for i, c in pairs) / len(pairs)
            for task_id, pairs in paired_attempts(incumbent, candidate).items() if pairs}


def metric_deltas(incumbent: TaskAttempts, candidate: TaskAttempts, metric: str
                  ) -> tuple[dict[str, float], float | None, float | None]:
    """Per-task paired deltas of a metric's mean, and both sides' means over those tasks."""
    inc = incumbent.metric_means(metric)
    cand = candidate.metric_means(metric)
    shared = [t for t in cand if t in inc]
    if not shared:
        return {}, None, None
    deltas = {t: cand[t] - inc[t] for t in shared}
    return (deltas, math.fsum(inc[t] for t in shared) / len(shared),
            math.fsum(cand[t] for t in shared) / len(shared))


def _fmt(x: float) -> str:
    return f"{x:+.3f}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


def dev_gate(test: PairedTest, *, level: float, screen: PairedTest | None = None) -> GateResult:
    """Improvement beyond ``min_effect`` on fresh dev seeds, at the spent level ``level``."""
    passed = test.p_value < level
    verdict = "<" if passed else ">="
    reason = (f"dev {_fmt(test.effect)} (bounds {_fmt(test.ci_low)}..{_fmt(test.ci_high)}, "
              f"{test.n} tasks) on fresh seeds: p={test.p_value:.3g} {verdict} "
              f"level {level:.3g} for effect > {test.threshold:g}")
    details: dict[str, float | int | str | None] = {**test.as_dict(), "level": level}
    if screen is not None:
        details.update({"screen_effect": screen.effect, "screen_p_value": screen.p_value})
    return GateResult(name="dev", passed=passed, reason=reason, details=details)


def val_gate(test: PairedTest, *, margin: float) -> GateResult:
    """Non-inferiority on val: with confidence, the loss is smaller than ``margin``."""
    passed = test.ci_low > -margin
    reason = (f"val {_fmt(test.effect)}, lower bound {_fmt(test.ci_low)} "
              f"{'>' if passed else '<='} -{margin:g} (margin)")
    return GateResult(name="val", passed=passed, reason=reason,
                      details={**test.as_dict(), "margin": margin})


def aux_gate(metric: str, spec: MetricSpec, incumbent: TaskAttempts, candidate: TaskAttempts,
             *, alpha: float) -> GateResult:
    """Non-inferiority of an auxiliary metric on paired per-task means.

    Passes when the one-sided ``1 - alpha`` upper bound of the regression (an
    increase for ``lower`` metrics, a decrease for ``higher`` ones) is within the
    allowance: ``max_increase``, or ``max_increase * |incumbent mean|`` if relative.
    """
    name = f"aux:{metric}"
    deltas, before, after = metric_deltas(incumbent, candidate, metric)
    if before is None or after is None:
        return GateResult(name=name, passed=True,
                          reason=f"{metric} not reported by both configs: nothing to compare")
    sign = 1.0 if spec.direction == "lower" else -1.0
    worse = [sign * d for d in deltas.values()]
    test = paired_test(worse, alpha=alpha)
    bound = test.ci_high
    allowed = spec.max_increase * abs(before) if spec.relative else spec.max_increase
    passed = bound <= allowed + 1e-12
    change = after - before
    if spec.relative and before != 0:
        shown = f"{100 * change / abs(before):+.1f}%"
        limit = f"{100 * spec.max_increase:+.1f}%"
        bound_shown = f"{100 * bound / abs(before):+.1f}%"
    else:
        shown, limit, bound_shown = f"{change:+.4g}", f"{spec.max_increase:+.4g}", f"{bound:+.4g}"
    word = "regression" if spec.direction == "lower" else "loss"
    reason = (f"{metric} {shown} (upper bound of {word} {bound_shown}) "
              f"{'<=' if passed else '>'} allowed {limit}")
    return GateResult(name=name, passed=passed, reason=reason,
                      details={"before": before, "after": after, "bound": bound,
                               "allowed": allowed, "direction": spec.direction})


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
    return GateResult(name=name, passed=True,
                      reason=f"all {checked} {tag} task checks at or above {floor:.0%}",
                      details={"checked": checked})
