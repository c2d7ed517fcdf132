"""Comparing two results: paired by seed, only within one environment."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from forge.bench.loader import Bench
from forge.errors import IncomparableError, UserError
from forge.evaluation.evaluate import evaluate
from forge.results.compare import diff_results, require_paired
from forge.results.model import AttemptResult, EvalResult, TaskResult
from forge.scorers import Score


def scored(seed: int, value: float, attempt: int = 0) -> AttemptResult:
    return AttemptResult(task_id="t", attempt=attempt, seed=seed, stop_reason="completed",
                         duration_s=0.1, score=Score(value=value, passed=value >= 0.5))


def failed(seed: int, attempt: int = 0) -> AttemptResult:
    return AttemptResult(task_id="t", attempt=attempt, seed=seed, stop_reason="error",
                         error="boom", duration_s=0.1)


def result(tasks: dict[str, list[AttemptResult]], *, env: str | None = "e" * 64
           ) -> EvalResult:
    return EvalResult(
        bench="b", split="dev", k=2, seed=1, config={"x": 1}, config_fingerprint="c" * 64,
        env_fingerprint=env, env={"k": 2}, started_at=datetime(2026, 1, 1, tzinfo=UTC),
        duration_s=1.0,
        tasks=[TaskResult(task_id=tid, attempts=[a.model_copy(update={"task_id": tid})
                                                 for a in attempts])
               for tid, attempts in tasks.items()])


def test_attempts_are_paired_by_seed_not_by_position() -> None:
    a = result({"t": [scored(11, 1.0, 0), scored(22, 0.0, 1)]})
    b = result({"t": [scored(33, 0.0, 0), scored(11, 0.25, 1)]})  # only seed 11 is shared
    diff = diff_results(a, b)
    (t,) = diff.tasks
    assert t.n_pairs == 1
    assert t.score_a == 1.0
    assert t.score_b == 0.25
    assert t.delta == pytest.approx(-0.75)
    assert t.pass_a == 1.0 and t.pass_b == 0.0
    assert t.pass_delta == -1.0
    assert diff.regressed == [t]
    assert diff.improved == []


def test_a_pair_needs_both_sides_scored() -> None:
    a = result({"t": [scored(1, 1.0), scored(2, 1.0, 1)]})
    b = result({"t": [failed(1), scored(2, 0.0, 1)]})
    (t,) = diff_results(a, b).tasks
    assert t.n_pairs == 1
    assert t.delta == -1.0


def test_a_task_without_pairs_has_no_delta() -> None:
    a = result({"t": [scored(1, 1.0)], "u": [scored(5, 0.0)]})
    b = result({"t": [failed(1)], "u": [scored(5, 1.0)]})
    diff = diff_results(a, b)
    t, u = diff.tasks
    assert t.n_pairs == 0 and t.delta is None and t.pass_delta is None
    assert diff.paired == [u]
    assert diff.mean_delta == 1.0
    assert diff.improved == [u]


def test_same_config_same_seed_is_no_change(arith_bench: Bench) -> None:
    a = evaluate(arith_bench, arith_bench.defaults, k=2)
    b = evaluate(arith_bench, arith_bench.defaults, k=2)
    diff = diff_results(a, b)
    assert [t.n_pairs for t in diff.tasks] == [2] * 12
    assert diff.mean_delta == 0.0
    assert diff.improved == diff.regressed == []


def test_two_configs_are_paired_attempt_by_attempt(arith_bench: Bench) -> None:
    base = evaluate(arith_bench, arith_bench.defaults, k=3)
    better = arith_bench.registry.with_values(arith_bench.defaults,
                                              {"temperature": 0.0, "mode": "careful"})
    cand = evaluate(arith_bench, better, k=3)
    diff = diff_results(base, cand)
    assert all(t.n_pairs == 3 for t in diff.tasks)
    assert diff.mean_delta is not None and diff.mean_delta > 0  # no slips at temperature 0
    assert diff.regressed == []
    assert base.mean_score is not None and cand.mean_score is not None
    assert diff.mean_delta == pytest.approx(cand.mean_score - base.mean_score)


def test_a_different_run_seed_pairs_nothing(arith_bench: Bench) -> None:
    a = evaluate(arith_bench, arith_bench.defaults, k=2)
    b = evaluate(arith_bench, arith_bench.defaults, k=2, seed=1)
    diff = diff_results(a, b)
    assert diff.paired == []
    assert diff.mean_delta is None
    # Said, not shown as a table of dashes and "0 paired tasks": a refusal naming why.
    with pytest.raises(IncomparableError) as info:
        require_paired(diff, a, b, names=("a.json", "b.json"))
    assert "nothing was compared" in str(info.value)
    assert f"a.json was run with seed {a.seed}, b.json with seed 1" in str(info.value)
    require_paired(diff_results(a, a), a, a)


def test_different_environments_are_refused_naming_what_differs(arith_bench: Bench) -> None:
    a = evaluate(arith_bench, arith_bench.defaults, k=2)
    b = evaluate(arith_bench, arith_bench.defaults, k=3)
    with pytest.raises(IncomparableError) as info:
        diff_results(a, b, names=("base.json", "cand.json"))
    message = str(info.value)
    assert "k (2 vs 3)" in message
    assert "base.json" in message and "cand.json" in message
    assert "\n" not in message
    assert isinstance(info.value, UserError)  # the CLI: one line, exit 2


def test_a_different_split_or_timeout_is_another_environment(arith_bench: Bench) -> None:
    dev = evaluate(arith_bench, arith_bench.defaults, k=1)
    val = evaluate(arith_bench, arith_bench.defaults, k=1, split="val")
    with pytest.raises(IncomparableError, match="split"):
        diff_results(dev, val)
    slow = evaluate(arith_bench, arith_bench.defaults, k=1, timeout_s=9)
    with pytest.raises(IncomparableError, match="timeout_s"):
        diff_results(dev, slow)


def test_config_is_not_part_of_the_environment(arith_bench: Bench) -> None:
    a = evaluate(arith_bench, arith_bench.defaults, k=1)
    other = arith_bench.registry.with_values(arith_bench.defaults, {"effort": 3})
    b = evaluate(arith_bench, other, k=1)
    assert a.config_fingerprint != b.config_fingerprint
    assert a.env_fingerprint == b.env_fingerprint
    diff_results(a, b)


@pytest.mark.parametrize(("env_a", "env_b"), [(None, None), (None, "e" * 64),
                                              ("e" * 64, None)])
def test_a_missing_fingerprint_never_matches(env_a: str | None, env_b: str | None) -> None:
    a = result({"t": [scored(1, 1.0)]}, env=env_a)
    b = result({"t": [scored(1, 1.0)]}, env=env_b)
    with pytest.raises(IncomparableError, match="no env fingerprint"):
        diff_results(a, b)


def test_tasks_in_one_result_only_are_listed(arith_bench: Bench) -> None:
    a = evaluate(arith_bench, arith_bench.defaults, k=2, task_ids=["dev-00", "dev-01"])
    b = evaluate(arith_bench, arith_bench.defaults, k=2,
                 task_ids=["dev-01", "dev-02", "dev-03"])
    diff = diff_results(a, b)
    assert [t.task_id for t in diff.tasks] == ["dev-01"]
    assert diff.only_in_a == ["dev-00"]
    assert diff.only_in_b == ["dev-02", "dev-03"]
    assert diff.tasks[0].n_pairs == 2
