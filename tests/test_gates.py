"""The promotion gates, each on its own: dev, val, auxiliary metrics, task floors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from forge.bench import Bench, MetricSpec
from forge.compare import diff_results
from forge.evaluate import evaluate
from forge.gates import aux_gate, dev_gate, floor_gate, metric_deltas, score_deltas, val_gate
from forge.results import AttemptResult, StopReason, TaskAttempts
from forge.scorers import Score
from forge.stats import paired_test, spent_alpha


def att(task: str, i: int, value: float | None = 1.0, *, stop: StopReason = "completed",
        **metrics: float) -> AttemptResult:  # metrics: name=value
    """Attempt ``i`` of ``task``; ``value`` None means completed but not scored."""
    score = None if value is None or stop != "completed" else Score(value=value,
                                                                    passed=value >= 1.0)
    return AttemptResult(task_id=task, attempt=i, seed=1000 + i, stop_reason=stop,
                         duration_s=0.01, score=score, metrics=dict(metrics))


def by_task(values: Mapping[str, Sequence[float]], **metrics: Sequence[float]
            ) -> TaskAttempts:
    """``{task: [scores...]}`` (and per-task metric lists) as attempts 0..n-1."""
    out: dict[str, list[AttemptResult]] = {}
    for task, scores in values.items():
        out[task] = [att(task, i, s, **{m: float(v[i]) for m, v in metrics.items()})  # type: ignore[arg-type]
                     for i, s in enumerate(scores)]
    return TaskAttempts(out)



# -- score_deltas --------------------------------------------------------------------------

def test_score_deltas_pair_by_attempt_index_not_by_position() -> None:
    inc = TaskAttempts({"t": [att("t", 0, 0.0), att("t", 1, 1.0)]})
    cand = {"t": [att("t", 1, 1.0), att("t", 0, 1.0)]}  # listed in another order
    # attempt 0: 0 -> 1 (+1), attempt 1: 1 -> 1 (0)
    assert score_deltas(inc, cand) == {"t": pytest.approx(0.5)}


def test_score_deltas_skip_unscored_attempts_instead_of_counting_zero() -> None:
    inc = TaskAttempts({"t": [att("t", 0, 1.0), att("t", 1, 1.0), att("t", 2, 1.0)]})
    cand = TaskAttempts({"t": [att("t", 0, 1.0), att("t", 1, stop="timeout"), att("t", 2, None)]})
    assert score_deltas(inc, cand) == {"t": 0.0}  # only attempt 0 is a pair
    inc_err = TaskAttempts({"t": [att("t", 0, stop="error"), att("t", 1, 0.0)]})
    cand_ok = TaskAttempts({"t": [att("t", 0, 1.0), att("t", 1, 1.0)]})
    assert score_deltas(inc_err, cand_ok) == {"t": 1.0}


def test_score_deltas_leave_out_tasks_without_a_pair() -> None:
    inc = TaskAttempts({"a": [att("a", 0, 1.0)], "b": [att("b", 0, stop="error")]})
    cand = TaskAttempts({"a": [att("a", 0, 0.0)], "b": [att("b", 0, 1.0)], "c": [att("c", 0, 1.0)]})
    assert score_deltas(inc, cand) == {"a": -1.0}
    # different attempt indices never pair
    assert score_deltas(TaskAttempts({"a": [att("a", 0, 1.0)]}),
                        TaskAttempts({"a": [att("a", 1, 1.0)]})) == {}


def test_score_deltas_pair_the_attempts_forge_diff_pairs(arith_bench: Bench) -> None:
    # One pairing for the search and for ``forge diff``: within one seed stream the
    # same attempt index is the same seed, so both see the same pairs.
    base = evaluate(arith_bench, arith_bench.defaults, k=3)
    cand = evaluate(arith_bench, arith_bench.registry.with_values(
        arith_bench.defaults, {"temperature": 0.2, "effort": 3}), k=3)
    deltas = score_deltas(base.by_task, cand.by_task)
    diff = diff_results(base, cand)
    assert any(d != 0 for d in deltas.values())
    assert deltas == {t.task_id: pytest.approx(t.delta) for t in diff.paired}


# -- dev -----------------------------------------------------------------------------------

def test_dev_gate_uses_the_spent_level_not_alpha() -> None:
    test = paired_test([0.1, 0.05, 0.2, 0.0, 0.15, -0.05, 0.1, 0.12], alpha=0.05)
    assert 0.0076 < test.p_value < 0.05
    first = dev_gate(test, level=0.05)
    late = dev_gate(test, level=spent_alpha(2, 0.05))
    assert first.name == "dev" and first.passed
    assert not late.passed
    assert f"p={test.p_value:.3g} >= level" in late.reason
    assert "< level" in first.reason and "8 tasks" in first.reason
    assert late.details["level"] == pytest.approx(spent_alpha(2, 0.05))


def test_dev_gate_refuses_no_change_and_losses() -> None:
    assert not dev_gate(paired_test([0.0] * 10, alpha=0.05), level=0.05).passed
    assert not dev_gate(paired_test([-0.1, -0.2, 0.0, -0.1], alpha=0.05), level=0.05).passed


def test_dev_gate_keeps_the_screening_numbers() -> None:
    screen = paired_test([0.2, 0.3, 0.1], alpha=0.05)
    gate = dev_gate(paired_test([0.2, 0.2, 0.3], alpha=0.05), level=0.05, screen=screen)
    assert gate.details["screen_effect"] == pytest.approx(0.2)
    assert gate.details["screen_p_value"] == pytest.approx(screen.p_value)


# -- val -----------------------------------------------------------------------------------

def test_val_gate_passes_a_loss_within_the_margin_shown_with_confidence() -> None:
    deltas = [-0.01, -0.005, -0.01, 0.0, -0.015, -0.005] * 5
    gate = val_gate(paired_test(deltas, alpha=0.05, threshold=-0.02), margin=0.02)
    assert gate.name == "val" and gate.passed
    assert "val" in gate.reason and "margin" in gate.reason


def test_val_gate_refuses_a_clear_loss() -> None:
    deltas = [-0.2, -0.3, -0.1, -0.25, -0.2, -0.15]
    gate = val_gate(paired_test(deltas, alpha=0.05, threshold=-0.02), margin=0.02)
    assert not gate.passed
    assert gate.reason.startswith("val -0.200")
    assert "<= -0.02 (margin)" in gate.reason


def test_val_gate_refuses_when_non_inferiority_is_not_shown() -> None:
    # A mean gain, but so noisy that a loss beyond the margin is not excluded.
    deltas = [0.5, -0.5, 0.4, -0.3, 0.2, -0.2]
    gate = val_gate(paired_test(deltas, alpha=0.05, threshold=-0.02), margin=0.02)
    assert not gate.passed


# -- aux -----------------------------------------------------------------------------------

COST = MetricSpec(direction="lower", max_increase=0.05, relative=True)


def test_aux_gate_relative_refuses_a_cost_increase_beyond_tolerance() -> None:
    tasks = {f"t{i}": [1.0, 1.0] for i in range(6)}
    inc = by_task(tasks, cost=[1.0, 1.0])
    cand = by_task(tasks, cost=[1.31, 1.31])
    gate = aux_gate("cost", COST, inc, cand, alpha=0.05)
    assert gate.name == "aux:cost" and not gate.passed
    assert gate.reason.startswith("cost +31.0%")
    assert "> allowed +5.0%" in gate.reason
    assert gate.details["before"] == pytest.approx(1.0)
    assert gate.details["after"] == pytest.approx(1.31)


def test_aux_gate_relative_passes_within_tolerance_and_improvements() -> None:
    tasks = {f"t{i}": [1.0, 1.0] for i in range(6)}
    inc = by_task(tasks, cost=[2.0, 2.0])
    slightly = aux_gate("cost", COST, inc, by_task(tasks, cost=[2.06, 2.06]), alpha=0.05)
    assert slightly.passed, slightly.reason  # +3% of 2.0 is within +5%
    assert "<= allowed +5.0%" in slightly.reason
    cheaper = aux_gate("cost", COST, inc, by_task(tasks, cost=[1.0, 1.0]), alpha=0.05)
    assert cheaper.passed


def test_aux_gate_needs_confidence_not_just_a_small_mean() -> None:
    # Mean change +2% (within +5%), but per-task changes swing +-40%: not shown safe.
    inc = TaskAttempts({f"t{i}": [att(f"t{i}", 0, 1.0, cost=1.0)] for i in range(6)})
    swings = [1.4, 0.62, 1.4, 0.62, 1.4, 0.68]
    cand = TaskAttempts({f"t{i}": [att(f"t{i}", 0, 1.0, cost=c)] for i, c in enumerate(swings)})
    gate = aux_gate("cost", COST, inc, cand, alpha=0.05)
    assert not gate.passed
    bound = gate.details["bound"]
    assert isinstance(bound, float) and bound > 0.05


def test_aux_gate_absolute_zero_tolerance() -> None:
    spec = MetricSpec(direction="lower", max_increase=0)
    tasks = {f"t{i}": [1.0] for i in range(5)}
    zero = by_task(tasks, harmful=[0.0])
    assert aux_gate("harmful", spec, zero, by_task(tasks, harmful=[0.0]), alpha=0.05).passed
    one = aux_gate("harmful", spec, zero, by_task(tasks, harmful=[1.0]), alpha=0.05)
    assert not one.passed
    assert one.reason.startswith("harmful +1")
    assert "> allowed +0" in one.reason


def test_aux_gate_direction_higher_refuses_a_drop() -> None:
    spec = MetricSpec(direction="higher", max_increase=0.1)
    tasks = {f"t{i}": [1.0] for i in range(5)}
    before = by_task(tasks, quality=[0.9])
    drop = aux_gate("quality", spec, before, by_task(tasks, quality=[0.5]), alpha=0.05)
    assert not drop.passed
    assert "upper bound of loss" in drop.reason
    small = aux_gate("quality", spec, before, by_task(tasks, quality=[0.85]), alpha=0.05)
    assert small.passed, small.reason
    rise = aux_gate("quality", spec, before, by_task(tasks, quality=[1.5]), alpha=0.05)
    assert rise.passed


def test_aux_gate_with_a_metric_one_side_lacks_passes_and_says_so() -> None:
    tasks = {"t": [1.0]}
    gate = aux_gate("cost", COST, by_task(tasks), by_task(tasks, cost=[3.0]), alpha=0.05)
    assert gate.passed
    assert "not reported" in gate.reason


def test_metric_deltas_average_completed_attempts_only() -> None:
    inc = TaskAttempts({"t": [att("t", 0, cost=1.0), att("t", 1, stop="error", cost=50.0)]})
    cand = TaskAttempts({"t": [att("t", 0, cost=2.0), att("t", 1, cost=4.0)]})
    deltas, before, after = metric_deltas(inc, cand, "cost")
    assert deltas == {"t": 2.0}
    assert (before, after) == (1.0, 3.0)


# -- floors --------------------------------------------------------------------------------

TAGS = {"c1": ["critical"], "c2": ["critical", "x"], "n": []}


def rates(**passes: Sequence[float]) -> TaskAttempts:
    return by_task(dict(passes))


def test_floor_gate_refuses_a_regression_below_the_floor() -> None:
    inc = rates(c1=[1, 1, 1, 1], c2=[1, 1, 1, 1], n=[1, 1, 1, 1])
    cand = rates(c1=[1, 1, 0, 0], c2=[1, 1, 1, 1], n=[0, 0, 0, 0])
    gate = floor_gate("critical", 0.8, [("dev", inc, cand)], TAGS)
    assert gate.name == "floor:critical" and not gate.passed
    assert "dev/c1 50% (was 100%)" in gate.reason
    assert "below floor 80%" in gate.reason
    assert "n " not in gate.reason  # untagged tasks are not floored


def test_floor_gate_tolerates_an_old_debt_that_does_not_get_worse() -> None:
    inc = rates(c1=[1, 0, 0, 0], c2=[1, 1, 1, 1])
    same = rates(c1=[0, 0, 1, 0], c2=[1, 1, 1, 1])
    assert floor_gate("critical", 0.8, [("dev", inc, same)], TAGS).passed
    better = rates(c1=[1, 1, 0, 0], c2=[1, 1, 1, 1])
    assert floor_gate("critical", 0.8, [("dev", inc, better)], TAGS).passed
    worse = rates(c1=[0, 0, 0, 0], c2=[1, 1, 1, 1])
    gate = floor_gate("critical", 0.8, [("dev", inc, worse)], TAGS)
    assert not gate.passed
    assert "dev/c1 0% (was 25%)" in gate.reason


def test_floor_gate_checks_every_split_and_counts_checks() -> None:
    ok = rates(c1=[1, 1], c2=[1, 1])
    low = rates(c1=[1, 1], c2=[1, 0])
    gate = floor_gate("critical", 0.8, [("dev", ok, ok), ("val", ok, low)], TAGS)
    assert not gate.passed
    assert "val/c2 50% (was 100%)" in gate.reason
    passed = floor_gate("critical", 0.5, [("dev", ok, ok), ("val", ok, low)], TAGS)
    assert passed.passed
    assert passed.details["checked"] == 4


def test_floor_gate_skips_unscored_tasks() -> None:
    inc = rates(c1=[1, 1])
    cand = TaskAttempts({"c1": [att("c1", 0, stop="timeout"), att("c1", 1, stop="error")]})
    gate = floor_gate("critical", 0.8, [("dev", inc, cand)], TAGS)
    assert gate.passed and gate.details["checked"] == 0
