"""The confirmation's gates one by one (forge.gates), on small hand-made evidence:
each look passes, fails or leaves its gate open, and a tolerance picks its test (the
t-test, the exact test of a rare change, the netted test of a 0/1 change) as the
confirmation always has. Whole searches through them are in test_confirm.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from forge.bench.loader import MetricSpec
from forge.gates import (
    EXTENSION_SHARE,
    ExactTest,
    FloorGate,
    ImprovementGate,
    NettedTest,
    NonInferiorityGate,
    PairedScores,
    Regressions,
    SplitPair,
    ToleranceGate,
    ToleranceReading,
    TTest,
    tolerance_test,
)
from forge.gates.base import signed
from forge.results.model import AttemptResult, TaskAttempts
from forge.scorers import Score
from forge.search.confirm_outcome import (
    ConfirmOutcome,
    ImprovementReading,
    NonInferiorityReading,
)
from forge.stats.paired import paired_test


def attempts(scores: Mapping[str, Sequence[float]] | None = None, *, metric: str = "harm",
             values: Mapping[str, Sequence[float]] | None = None) -> TaskAttempts:
    """Attempts 0..n-1 of each task (seed 1000 + i): its ``scores`` (1.0 passes) and its
    ``values`` of ``metric``."""
    tasks = dict(scores or {})
    for task, vs in (values or {}).items():
        tasks.setdefault(task, [1.0] * len(vs))
    out: dict[str, list[AttemptResult]] = {}
    for task, ss in tasks.items():
        vs = (values or {}).get(task)
        out[task] = [AttemptResult(task_id=task, attempt=i, seed=1000 + i,
                                   stop_reason="completed", duration_s=0.01,
                                   score=Score(value=s, passed=s >= 1.0),
                                   metrics={} if vs is None else {metric: vs[i]})
                     for i, s in enumerate(ss)]
    return TaskAttempts(out)


def paired(deltas: Sequence[float]) -> PairedScores:
    """One attempt a task: the baseline scores 0.5, the candidate 0.5 + delta."""
    tasks = [f"t{i:02d}" for i in range(len(deltas))]
    return PairedScores(attempts({t: [0.5] for t in tasks}),
                        attempts({t: [0.5 + d] for t, d in zip(tasks, deltas, strict=True)}))


# -- improvement ------------------------------------------------------------------------------

def test_the_improvement_gate_passes_a_clear_gain_at_its_first_look() -> None:
    gate = ImprovementGate(0.05, 20, min_effect=0.0, pooled=True)
    verdict = gate.test(paired([0.3, 0.4, 0.5, 0.3, 0.4, 0.5, 0.35, 0.45, 0.4, 0.3]))
    assert verdict is not None and verdict.passed
    assert verdict.reason.startswith("dev+val +0.390") and "look 1" in verdict.reason
    assert gate.passed and gate.nominal is not None and gate.nominal < 0.05
    assert verdict.details["looks"] == 1 and verdict.details["level"] == 0.05
    assert gate.result().name == "dev"


def test_the_improvement_gate_gives_up_on_a_loss_and_waits_on_a_small_gain() -> None:
    losing = ImprovementGate(0.05, 10, min_effect=0.0, pooled=False)
    verdict = losing.test(paired([-0.3, -0.2, -0.4, -0.1, -0.3, 0.0, -0.2, -0.3, -0.1, -0.2]))
    assert verdict is not None and not verdict.passed
    assert "cannot plausibly improve (futility)" in verdict.reason
    assert verdict.reason.startswith("dev -")
    unclear = ImprovementGate(0.05, 40, min_effect=0.0, pooled=True)
    assert unclear.test(paired([0.2, -0.1, 0.1, 0.0, 0.3, -0.2, 0.1, 0.0])) is None
    assert unclear.open and unclear.last is not None and len(unclear.fractions) == 1
    # A look that adds no task tests nothing.
    assert unclear.test(paired([0.2, -0.1, 0.1, 0.0, 0.3, -0.2, 0.1, 0.0])) is None
    assert len(unclear.fractions) == 1
    assert not unclear.exhaust().passed
    assert "no significant improvement" in unclear.result().reason


def test_identical_deltas_on_few_tasks_and_pairs_decide_nothing() -> None:
    gate = ImprovementGate(0.05, 100, min_effect=0.0, pooled=False)
    assert gate.test(paired([0.5] * 10)) is None
    assert gate.open


# -- non-inferiority -----------------------------------------------------------------------------

def test_the_non_inferiority_gate_passes_within_its_margin_and_fails_far_below() -> None:
    gate = NonInferiorityGate(0.05, 10, margin=0.02)
    verdict = gate.test(paired([0.1, 0.2, 0.0, 0.1, 0.15, 0.05, 0.1, 0.2, 0.1, 0.0]))
    assert verdict is not None and verdict.passed and "> -0.02 (margin" in verdict.reason
    assert verdict.details["margin"] == 0.02
    worse = NonInferiorityGate(0.05, 10, margin=0.02)
    failed = worse.test(paired([-0.5, -0.4, -0.5, -0.5, -0.3, -0.5, -0.4, -0.5, -0.5, -0.4]))
    assert failed is not None and not failed.passed
    assert "cannot plausibly be shown above -0.02" in failed.reason


# -- tolerances: the strategy -------------------------------------------------------------------

LOWER = MetricSpec(direction="lower", max_increase=0.01)


def regressions(start: Mapping[str, Sequence[float]], cand: Mapping[str, Sequence[float]],
                spec: MetricSpec = LOWER) -> Regressions:
    return Regressions("harm", spec, attempts(values=start), attempts(values=cand))


def zeros(tasks: int, k: int) -> dict[str, list[float]]:
    return {f"t{i:02d}": [0.0] * k for i in range(tasks)}


def test_a_tolerance_changed_on_many_tasks_is_read_by_the_t_test() -> None:
    start = {f"t{i:02d}": [1.0, 1.0] for i in range(12)}
    cand = {f"t{i:02d}": [1.0 + 0.001 * (i % 3), 1.0] for i in range(12)}
    assert isinstance(tolerance_test(regressions(start, cand), sparse=False), TTest)


def test_a_sparse_change_is_read_by_the_exact_test_or_when_netted_by_the_netted_one() -> None:
    start, cand = zeros(12, 4), zeros(12, 4)
    cand["t00"] = [1.0, 0.0, 0.0, 0.0]
    assert tolerance_test(regressions(start, cand), sparse=True) == ExactTest(1, 1.0)
    start["t01"] = [1.0, 0.0, 0.0, 0.0]  # an attempt made better too: netted
    assert tolerance_test(regressions(start, cand), sparse=True) == NettedTest(1, 1, 48, 1.0)
    # Nothing but zeros: no size to scale a rare change by; the t-test.
    assert isinstance(tolerance_test(regressions(zeros(12, 4), zeros(12, 4)), sparse=True),
                      TTest)
    # Not sparse: the t-test whatever the counts.
    assert isinstance(tolerance_test(regressions(start, cand), sparse=False), TTest)


def test_a_metric_changed_on_no_attempt_passes_the_exact_count_of_none() -> None:
    start, cand = zeros(20, 30), zeros(20, 30)
    start["t00"] = cand["t00"] = [1.0] + [0.0] * 29  # a value to scale by, no change
    gate = ToleranceGate("harm", LOWER, 0.05, 20)
    verdict = gate.test(regressions(start, cand))
    assert verdict is not None and verdict.passed
    assert "few enough for the exact test of a rare change" in verdict.reason
    assert gate.sparse and gate.attempts == [600]
    reading = gate.reading
    assert reading is not None and (reading.regressed, reading.size) == (0, 1.0)
    assert reading.most is not None and reading.net_p is None


def test_a_netted_change_stays_open_at_a_look_and_fails_at_the_last() -> None:
    start, cand = zeros(20, 10), zeros(20, 10)
    cand["t00"] = [1.0] * 5 + [0.0] * 5  # worse on five
    start["t01"] = [1.0] + [0.0] * 9  # better on one
    gate = ToleranceGate("harm", LOWER, 0.05, 40, share=1 - EXTENSION_SHARE)
    evidence = regressions(start, cand)
    assert gate.test(evidence) is None and gate.open  # no futility rule
    reading = gate.reading
    assert reading is not None and (reading.regressed, reading.improved) == (5, 1)
    assert reading.net_p is not None and reading.net_p > 0.05
    assert gate.may_extend(400)  # the netted test may pass on a block: always run
    verdict = gate.extend(evidence, 10)
    assert verdict is not None and not verdict.passed
    assert "at its share of the level, on the extension too: 10 " \
        "fresh attempts a task" in verdict.reason


def test_the_extension_skips_an_exact_test_its_block_could_not_plausibly_pass() -> None:
    start, cand = zeros(20, 10), zeros(20, 10)
    for t in ("t00", "t01", "t02"):
        cand[t] = [1.0] * 5 + [0.0] * 5  # 15 of 200 made worse: far past +0.01
    # A fifth of the tasks: too early for futility, which waits for half.
    gate = ToleranceGate("harm", LOWER, 0.05, 100, share=1 - EXTENSION_SHARE)
    assert gate.test(regressions(start, cand)) is None
    assert not gate.may_extend(200)
    assert gate.reading is not None and gate.reading.extension_most is not None
    verdict = gate.exhaust()
    assert not verdict.passed
    assert verdict.reason.endswith("a block of fresh attempts could not plausibly show it)")


def test_a_tolerance_well_within_its_allowance_passes_on_the_t_test() -> None:
    spec = MetricSpec(direction="lower", max_increase=0.10, relative=True)
    start = {f"t{i:02d}": [1.0, 1.0] for i in range(20)}
    cand = {f"t{i:02d}": [1.0 + 0.01 * (i % 2), 1.0 + 0.01 * (i % 2)] for i in range(20)}
    gate = ToleranceGate("cost", spec, 0.05, 20)
    verdict = gate.test(Regressions("cost", spec, attempts(values=start, metric="cost"),
                                    attempts(values=cand, metric="cost")))
    assert verdict is not None and verdict.passed
    assert verdict.reason.endswith("<= allowed (vs the start config, 20 tasks)")
    assert gate.result().name == "aux:cost"


def test_a_tolerance_no_task_reported_stays_open_and_fails_as_not_shown() -> None:
    gate = ToleranceGate("harm", LOWER, 0.05, 10)
    evidence = Regressions("harm", LOWER, attempts({"t0": [1.0]}), attempts({"t0": [1.0]}))
    assert gate.test(evidence) is None and gate.reading is None
    assert gate.exhaust().reason == ("harm: on no task did both report it: not shown "
                                     "within the allowance (vs the start config)")


def test_a_reading_records_only_the_counts_a_test_set() -> None:
    reading = ToleranceReading(before=0.1, after=0.2, bound=0.3, allowed=0.01,
                               direction="lower", n_tasks=4)
    assert reading.record() == {"before": 0.1, "after": 0.2, "bound": 0.3, "allowed": 0.01,
                                "direction": "lower", "vs": "start", "n_tasks": 4}
    counted = ToleranceReading(before=0.1, after=0.2, bound=0.3, allowed=0.01,
                               direction="lower", n_tasks=4, attempts=8, regressed=0,
                               most=1, size=1.0)
    assert counted.record()["regressed"] == 0 and "net_p" not in counted.record()


# -- floors ---------------------------------------------------------------------------------

def test_a_floor_fails_a_tagged_task_the_candidate_dropped_below_it() -> None:
    inc = attempts({"a": [1.0, 1.0], "b": [1.0, 1.0], "c": [0.0, 0.0]})
    tags = {"a": ["critical"], "b": ["critical"], "c": []}
    floor = FloorGate("critical", 0.5)
    assert floor.check([SplitPair("dev", inc, inc)], tags).passed
    dropped = attempts({"a": [1.0, 1.0], "b": [0.0, 0.0], "c": [0.0, 0.0]})
    result = floor.check([SplitPair("dev", inc, dropped)], tags)
    assert not result.passed and result.name == "floor:critical"
    assert "dev/b 0%" in result.reason


# -- the outcome ----------------------------------------------------------------------------

def test_the_outcome_gives_the_record_its_blocks() -> None:
    t = paired_test([0.1, 0.2, 0.3], alpha=0.01)
    reading = ToleranceReading(before=0.0, after=0.0, bound=0.0, allowed=0.01,
                               direction="lower", n_tasks=3)
    outcome = ConfirmOutcome("promoted", (), ImprovementReading(t, 0.03, 2, 0.01),
                             NonInferiorityReading(t, 1, None, 0.5, 0.6), {"harm": reading},
                             rollouts=12, looks=2, not_run=())
    confirm = outcome.confirm_block(index=3)
    assert confirm is not None
    assert confirm.model_dump(exclude_none=True) == {
        **{k: v for k, v in t.as_dict().items() if v is not None}, "level": 0.03, "index": 3,
        "stream": "dev", "looks": 2, "nominal": 0.01}
    val = outcome.val_block()
    assert val is not None and (val.looks, val.nominal, val.before, val.after) == (
        1, None, 0.5, 0.6)
    assert val.effect == t.effect and val.p_value == t.p_value
    aux = outcome.aux_blocks()["harm"]
    assert aux.model_dump(exclude_unset=True) == reading.record()
    pooled = ConfirmOutcome("promoted", (), ImprovementReading(t, 0.03, 2, 0.01), None, {},
                            rollouts=12, looks=2, not_run=(), pooled=True)
    block = pooled.confirm_block(index=1)
    assert block is not None and block.splits == ["dev", "val"]
    empty = ConfirmOutcome("budget", (), None, None, {}, rollouts=0, looks=0, not_run=("val",))
    assert empty.confirm_block(1) is None and empty.val_block() is None
    assert empty.aux_blocks() == {}


@pytest.mark.parametrize("x", [float("inf"), float("-inf")])
def test_an_unbounded_bound_reads_as_infinite(x: float) -> None:
    assert signed(x) == ("+inf" if x > 0 else "-inf")
