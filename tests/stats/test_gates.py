"""What the promotion gates share (forge.gates.checks): the paired deltas, the tolerance
arithmetic, the start-to-final tolerance check on test, and the task-floor gate. The
sequential dev, val and aux gates themselves are tested in tests/search/test_gates.py
and test_confirm.py."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pytest

from forge.bench.loader import Bench, MetricSpec
from forge.evaluation.evaluate import evaluate
from forge.gates.checks import aux_text, floor_gate, tolerance_check
from forge.results.compare import diff_results
from forge.results.model import AttemptResult, StopReason, TaskAttempts
from forge.scorers import Score
from forge.stats.pairs import metric_deltas, regression_allowance, regressions, score_deltas


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


def test_score_deltas_count_a_one_sided_failure_as_that_sides_loss() -> None:
    inc = TaskAttempts({"t": [att("t", 0, 1.0), att("t", 1, 1.0), att("t", 2, 1.0)]})
    cand = TaskAttempts({"t": [att("t", 0, 1.0), att("t", 1, stop="timeout"), att("t", 2, None)]})
    # attempt 0: 1 -> 1; the timeout and the unjudged output score 0 against 1.0.
    assert score_deltas(inc, cand) == {"t": pytest.approx(-2 / 3)}
    inc_err = TaskAttempts({"t": [att("t", 0, stop="error"), att("t", 1, 0.0)]})
    cand_ok = TaskAttempts({"t": [att("t", 0, 1.0), att("t", 1, 1.0)]})
    assert score_deltas(inc_err, cand_ok) == {"t": 1.0}


def test_score_deltas_leave_out_tasks_without_a_pair() -> None:
    inc = TaskAttempts({"a": [att("a", 0, 1.0)], "b": [att("b", 0, stop="error")]})
    cand = TaskAttempts({"a": [att("a", 0, 0.0)], "b": [att("b", 0, 1.0)], "c": [att("c", 0, 1.0)]})
    # b: the incumbent failed where the candidate scored 1.0 (a gain); c: no pair.
    assert score_deltas(inc, cand) == {"a": -1.0, "b": 1.0}
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


# -- tolerance arithmetic --------------------------------------------------------------------

COST = MetricSpec(direction="lower", max_increase=0.05, relative=True)
HARMFUL = MetricSpec(direction="lower", max_increase=0)
QUALITY = MetricSpec(direction="higher", max_increase=0.1)


def test_the_allowance_is_a_share_of_the_start_mean_when_relative() -> None:
    assert regression_allowance(COST, 2.0) == pytest.approx(0.1)
    assert regression_allowance(COST, -2.0) == pytest.approx(0.1)  # a share of its size
    assert regression_allowance(HARMFUL, 7.0) == 0
    assert regression_allowance(QUALITY, 0.9) == pytest.approx(0.1)


def test_regressions_count_worse_as_positive_in_either_direction() -> None:
    tasks = {f"t{i}": [1.0] for i in range(3)}
    start = by_task(tasks, cost=[1.0], quality=[0.9])
    cand = TaskAttempts({"t0": [att("t0", 0, cost=1.5, quality=0.5)],
                         "t1": [att("t1", 0, cost=0.5, quality=1.0)],
                         "t2": [att("t2", 0, cost=1.0, quality=0.9)]})
    worse, before, after = regressions(COST, start, cand, "cost")
    assert worse == pytest.approx([0.5, -0.5, 0.0]) and (before, after) == (1.0, 1.0)
    # "higher" metrics: a drop is the regression.
    worse, before, after = regressions(QUALITY, start, cand, "quality")
    assert worse == pytest.approx([0.4, -0.1, 0.0])
    assert before == pytest.approx(0.9) and after == pytest.approx(0.8)


def test_aux_text_speaks_the_metrics_own_terms() -> None:
    assert aux_text("cost", COST, 2.0, 2.3, 0.4, 0.1) == (
        "cost +15.0% (upper bound of regression +20.0%, allowed +5.0%)")
    assert aux_text("harmful", HARMFUL, 0.0, 0.25, 0.5, 0.0) == (
        "harmful +0.25 (upper bound of regression +0.5, allowed +0)")
    assert aux_text("quality", QUALITY, 0.9, 0.8, 0.15, 0.1) == (
        "quality -0.1 (upper bound of loss +0.15, allowed +0.1)")
    # A relative tolerance on a start mean of 0 has no percent to give: absolute terms.
    assert aux_text("cost", COST, 0.0, 0.5, 0.6, 0.0).startswith("cost +0.5 (")


# -- the start -> final check on test ---------------------------------------------------------

def _costs(after: list[float], before: float = 1.0) -> tuple[TaskAttempts, TaskAttempts]:
    start = TaskAttempts({f"t{i}": [att(f"t{i}", 0, cost=before)] for i in range(len(after))})
    final = TaskAttempts({f"t{i}": [att(f"t{i}", 0, cost=c)] for i, c in enumerate(after)})
    return start, final


def test_tolerance_check_within_when_the_bound_is_inside_the_allowance() -> None:
    start, final = _costs([1.02, 1.03, 1.01, 1.02, 1.03, 1.02, 1.01, 1.02])
    check = tolerance_check("cost", COST, start, final, alpha=0.05)
    assert check.name == "aux:cost" and check.passed
    assert check.details["status"] == "within"
    assert check.reason.startswith("cost +2.0%") and check.reason.endswith(
        ": within the allowance")
    bound = check.details["bound"]
    assert isinstance(bound, float) and bound <= 0.05
    assert (check.details["before"], check.details["allowed"]) == (
        pytest.approx(1.0), pytest.approx(0.05))
    assert check.details["n_tasks"] == 8
    cheaper = tolerance_check("cost", COST, *_costs([0.5] * 4), alpha=0.05)
    assert cheaper.details["status"] == "within" and cheaper.passed


def test_tolerance_check_unclear_when_only_the_estimate_is_inside() -> None:
    # Mean +2% (inside +5%), but per-task changes swing +-40%: not shown, not refuted.
    start, final = _costs([1.4, 0.62, 1.4, 0.62, 1.4, 0.68])
    check = tolerance_check("cost", COST, start, final, alpha=0.05)
    assert check.details["status"] == "unclear"
    assert check.passed  # only "beyond" fails: promote refuses that, not this
    assert "within by the estimate, not shown by the bound" in check.reason
    bound = check.details["bound"]
    assert isinstance(bound, float) and bound > 0.05


def test_tolerance_check_beyond_when_the_estimate_is_past_the_allowance() -> None:
    start, final = _costs([1.31] * 6)
    check = tolerance_check("cost", COST, start, final, alpha=0.05)
    assert check.details["status"] == "beyond" and not check.passed
    assert check.reason.startswith("cost +31.0%") and "BEYOND the allowance" in check.reason
    harmful = tolerance_check("harmful", HARMFUL, *(
        by_task({f"t{i}": [1.0] for i in range(5)}, harmful=[h]) for h in (0.0, 1.0)),
        alpha=0.05)
    assert harmful.details["status"] == "beyond" and harmful.reason.startswith("harmful +1")
    drop = tolerance_check("quality", QUALITY, *(
        by_task({f"t{i}": [1.0] for i in range(5)}, quality=[q]) for q in (0.9, 0.5)),
        alpha=0.05)
    assert drop.details["status"] == "beyond" and "upper bound of loss" in drop.reason
    rise = tolerance_check("quality", QUALITY, *(
        by_task({f"t{i}": [1.0] for i in range(5)}, quality=[q]) for q in (0.9, 1.5)),
        alpha=0.05)
    assert rise.details["status"] == "within"


def _harm(start: dict[int, int], final: dict[int, int], *, tasks: int = 100, k: int = 20
          ) -> tuple[TaskAttempts, TaskAttempts]:
    """Each config harms on the first ``n[t]`` of task t's k seeds (none elsewhere)."""
    def config(n: dict[int, int]) -> TaskAttempts:
        return TaskAttempts({f"t{i}": [att(f"t{i}", j, 1.0, harmful=float(j < n.get(i, 0)))
                                       for j in range(k)] for i in range(tasks)})
    return config(start), config(final)


def test_the_end_check_bounds_a_rare_event_over_the_test_tasks_it_ran() -> None:
    # The start harms on 6 of 20 seeds in three tasks, the final config in four others:
    # +0.003 against +0.01. Over tasks like these the t-bound cannot show it (seven
    # tasks of 100 carry it all, three one way, four the other); over these tasks, from
    # their 2,000 paired attempts, it can.
    spec = MetricSpec(direction="lower", max_increase=0.01)
    start, final = _harm(dict.fromkeys(range(3), 6), dict.fromkeys(range(3, 7), 6))
    check = tolerance_check("harmful", spec, start, final, alpha=0.05)
    d = check.details
    assert d["status"] == "within" and check.passed
    assert isinstance(d["bound"], float) and isinstance(d["bound_new_tasks"], float)
    assert d["bound"] <= 0.01 < d["bound_new_tasks"]
    assert (d["pairs"], d["n_tasks"]) == (2000, 100)
    assert check.reason.startswith("harmful +0.003 (upper bound of regression +0.008")
    assert " on these 100 tasks, +0.016" in check.reason and "on tasks like them" in check.reason
    # One task carrying all of it is not shown within: its variance has one degree of
    # freedom (the t quantile at 95% is 6.3).
    one = tolerance_check("harmful", spec, *_harm({}, {0: 12}), alpha=0.05)
    assert one.details["status"] == "unclear"


def test_the_end_check_with_one_attempt_a_task_falls_back_on_the_bound_over_tasks() -> None:
    start, final = _costs([1.4, 0.62, 1.4, 0.62, 1.4, 0.68])
    check = tolerance_check("cost", COST, start, final, alpha=0.05)
    assert "bound_new_tasks" not in check.details and "on these" not in check.reason


def test_the_end_check_on_one_test_task_has_no_bound_over_tasks_like_it() -> None:
    # A bench of one test task: the t-bound over tasks is infinite. A search on such a
    # bench died writing it (no journal line holds inf); it is none, and said so.
    spec = MetricSpec(direction="lower", max_increase=0.01)
    with_k = tolerance_check("harmful", spec, *_harm({}, {}, tasks=1), alpha=0.05)
    assert with_k.details["bound_new_tasks"] is None and with_k.details["status"] == "within"
    assert "none on tasks like them from one task" in with_k.reason
    one_attempt = tolerance_check("cost", COST, *_costs([1.02]), alpha=0.05)
    assert one_attempt.details["bound"] is None and one_attempt.details["status"] == "unclear"
    for check in (with_k, one_attempt):
        json.dumps(check.details, allow_nan=False)


def test_tolerance_check_of_a_metric_one_side_lacks_is_absent_and_passes() -> None:
    tasks = {"t": [1.0]}
    check = tolerance_check("cost", COST, by_task(tasks), by_task(tasks, cost=[3.0]),
                            alpha=0.05)
    assert check.passed and check.details["status"] == "absent"
    assert "not reported" in check.reason


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


def test_floor_gate_skips_unscored_tasks_but_refuses_to_pass_on_none() -> None:
    inc = rates(c1=[1, 1], c2=[1, 1])
    unscored = [att("c1", 0, stop="timeout"), att("c1", 1, stop="error")]
    cand = TaskAttempts({"c1": unscored, "c2": [att("c2", 0), att("c2", 1)]})
    gate = floor_gate("critical", 0.8, [("dev", inc, cand)], TAGS)
    # c1's failures are not counted as zeros: c2 alone is checked.
    assert gate.passed and gate.details["checked"] == 1
    # With no tagged task scored, the floor compared nothing: not shown, not passed.
    nothing = floor_gate("critical", 0.8, [("dev", inc, TaskAttempts({"c1": unscored}))],
                         TAGS)
    assert not nothing.passed and nothing.details["checked"] == 0
    assert nothing.reason == "no critical task scored for the candidate: its floor 80% is not shown"
