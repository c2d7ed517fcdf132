"""Evaluating one config (forge.evaluation.evaluate): what makes two results comparable, which tasks
run, the result's shape, the same outcomes for the same seed, Ctrl-C, and where the
attempts run."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest
from conftest import ARITH, MakeBench, search_tasks

from forge._util.digest import digest_of
from forge.bench.loader import Bench, load_bench
from forge.errors import BenchError, EvaluationInterrupted
from forge.evaluation.evaluate import DEFAULT_SEED, env_components, evaluate, evaluate_async
from forge.evaluation.rollout import RolloutEngine, derive_seed
from forge.executors import ExecutorSettings
from forge.results.model import AttemptResult, EvalResult


def stops(result: EvalResult) -> dict[str, list[str]]:
    return {t.task_id: [a.stop_reason for a in t.attempts] for t in result.tasks}


def outcomes(result: EvalResult) -> list[tuple[str, int, int, bool | None, Any]]:
    return [(a.task_id, a.attempt, a.seed, a.passed, a.output and a.output.output)
            for a in result.attempts]


# -- the environment: what must match for two results to be compared -------------------


def test_env_components_name_everything_but_the_config(arith_bench: Bench) -> None:
    env = env_components(arith_bench, "dev", k=3, timeout_s=5.0)
    assert env == {"bench": "arith", "split": "dev", "tasks": arith_bench.split_digest("dev"),
                   "scorer": arith_bench.scorer.digest,
                   "harness": arith_bench.harness_identity, "timeout_s": 5.0, "k": 3}
    result = evaluate(arith_bench, arith_bench.defaults, k=3, timeout_s=5.0)
    assert result.env == env and result.env_fingerprint == digest_of(env)


def test_another_config_is_comparable_and_another_k_split_or_timeout_is_not(
        arith_bench: Bench) -> None:
    base = evaluate(arith_bench, arith_bench.defaults, k=1)
    other = arith_bench.registry.with_values(arith_bench.defaults, {"effort": 4})
    assert evaluate(arith_bench, other, k=1).env_fingerprint == base.env_fingerprint
    assert evaluate(arith_bench, arith_bench.defaults, k=1,
                    seed=DEFAULT_SEED + 1).env_fingerprint == base.env_fingerprint
    for options in ({"k": 2}, {"k": 1, "split": "val"}, {"k": 1, "timeout_s": 1.5}):
        changed = evaluate(arith_bench, arith_bench.defaults, **options)
        assert changed.env_fingerprint != base.env_fingerprint, options


# -- which tasks ------------------------------------------------------------------------


def test_task_ids_select_in_the_order_given_once_each(make_bench: MakeBench) -> None:
    bench = load_bench(make_bench())
    result = evaluate(bench, bench.defaults, task_ids=["dev-2", "dev-0", "dev-2"])
    assert [t.task_id for t in result.tasks] == ["dev-2", "dev-0"]
    assert [t.task_id for t in evaluate(bench, bench.defaults, task_ids=[]).tasks] == [
        "dev-0", "dev-1", "dev-2"]


CALLS = """

def run(config, task, ctx):
    with Path(__file__).with_name("calls.log").open("a") as fh:
        fh.write(task.id + "\\n")
    return {"output": task.expected}
"""


@pytest.mark.parametrize(("options", "field", "fragment"), [
    ({"task_ids": ["dev-1", "dev-99"]}, "splits.dev", "no task 'dev-99' in split 'dev'"),
    ({"split": "val", "task_ids": ["dev-0"]}, "splits.val", "no task 'dev-0' in split 'val'"),
    ({"split": "holdout"}, "splits", "no split 'holdout'; the bench has dev, val, test"),
], ids=["unknown-task", "task-of-another-split", "unknown-split"])
def test_a_missing_task_or_split_is_refused_before_any_attempt(
        make_bench: MakeBench, options: dict[str, Any], field: str, fragment: str) -> None:
    path = make_bench(CALLS)
    bench = load_bench(path)
    with pytest.raises(BenchError) as info:
        evaluate(bench, bench.defaults, **options)
    err = info.value
    assert (err.file, err.field) == (str(path.resolve()), field)
    assert fragment in err.message and "\n" not in str(err)
    assert not (path.parent / "calls.log").exists()  # not one attempt ran


# -- the result ---------------------------------------------------------------------------


def test_the_result_holds_k_ordered_attempts_per_task_in_the_splits_order(
        arith_bench: Bench) -> None:
    seen: list[AttemptResult] = []
    result = evaluate(arith_bench, arith_bench.defaults, k=3, on_attempt=seen.append)
    assert (result.bench, result.split, result.k, result.seed) == ("arith", "dev", 3,
                                                                   DEFAULT_SEED)
    assert result.config == arith_bench.defaults.as_dict()
    assert result.config_fingerprint == arith_bench.defaults.fingerprint
    assert [t.task_id for t in result.tasks] == [t.id for t in arith_bench.tasks("dev")]
    for task in result.tasks:
        assert [a.attempt for a in task.attempts] == [0, 1, 2]
        assert all(a.seed == derive_seed(DEFAULT_SEED, "dev", task.task_id, a.attempt)
                   for a in task.attempts)
    # on_attempt sees every attempt once, as it ends
    assert sorted((a.task_id, a.attempt) for a in seen) == sorted(
        (a.task_id, a.attempt) for a in result.attempts)


def test_the_tags_of_each_task_are_kept(make_bench: MakeBench) -> None:
    bench = load_bench(make_bench(tasks=search_tasks(3, 1, 1, critical=1)))
    result = evaluate(bench, bench.defaults, k=1)
    assert [t.tags for t in result.tasks] == [["critical"], [], []]


def test_same_command_twice_gives_the_same_outcomes(arith_bench: Bench) -> None:
    a = evaluate(arith_bench, arith_bench.defaults, k=3)
    b = evaluate(arith_bench, arith_bench.defaults, k=3)
    assert [x.passed for x in a.attempts] == [x.passed for x in b.attempts]
    assert a.summary()["pass_rate"] == b.summary()["pass_rate"]
    # A fixed seed fixes every seed, verdict and output, on a bench loaded afresh too;
    # another seed gives other seeds and other verdicts.
    fixed = evaluate(arith_bench, arith_bench.defaults, k=2, seed=5)
    again = load_bench(ARITH)
    assert outcomes(evaluate(again, again.defaults, k=2, seed=5)) == outcomes(fixed)
    other = outcomes(evaluate(arith_bench, arith_bench.defaults, k=2, seed=6))
    assert [o[2] for o in other] != [o[2] for o in outcomes(fixed)]
    assert [o[3] for o in other] != [o[3] for o in outcomes(fixed)]


def test_evaluate_async_works_inside_a_running_loop(make_bench: MakeBench) -> None:
    bench = load_bench(make_bench())
    result = asyncio.run(evaluate_async(bench, bench.defaults, split="test"))
    assert result.split == "test"
    assert result.pass_rate == 1.0


# -- interrupted ----------------------------------------------------------------------------

#: dev-00 answers at once (after pressing Ctrl-C when the config's mode is "careful");
#: every other task sleeps far longer than any test waits.
SLEEPERS = """
import os
import signal
import time

def run(config, task, ctx):
    if task.id == "dev-00":
        if config["mode"] == "careful" and ctx.attempt == 0:
            os.kill(os.getpid(), signal.SIGINT)
        return {"output": task.expected}
    time.sleep(10)
    return {"output": task.expected}
"""


@pytest.fixture
def sleepers(make_bench: MakeBench) -> Bench:
    return load_bench(make_bench(SLEEPERS, tasks=search_tasks(4, 1, 1),
                                 rollouts={"k": 1, "concurrency": 2}))


@pytest.mark.timeout(30)
def test_a_cancelled_evaluation_raises_interrupted_with_the_partial_result(
        sleepers: Bench) -> None:
    engines: list[RolloutEngine] = []

    def keep(engine: RolloutEngine) -> None:
        engines.append(engine)
        asyncio.get_running_loop().call_later(0.5, engine.cancel)

    with pytest.raises(EvaluationInterrupted) as info:
        asyncio.run(evaluate_async(sleepers, sleepers.defaults, on_engine=keep))
    assert engines and engines[0].cancelled
    partial = info.value.partial
    assert isinstance(partial, EvalResult)
    assert stops(partial) == {"dev-00": ["completed"], "dev-01": ["cancelled"],
                              "dev-02": ["cancelled"], "dev-03": []}


@pytest.mark.timeout(30)
def test_ctrl_c_cancels_the_attempts_in_flight_and_raises_interrupted(sleepers: Bench) -> None:
    careful = sleepers.registry.with_values(sleepers.defaults, {"mode": "careful"})
    handler = signal.getsignal(signal.SIGINT)
    t0 = time.monotonic()
    with pytest.raises(EvaluationInterrupted) as info:
        evaluate(sleepers, careful)  # the harness presses Ctrl-C in its first attempt
    assert time.monotonic() - t0 < 5  # no waiting for the sleeping attempts
    partial = info.value.partial
    assert isinstance(partial, EvalResult)
    assert [t.task_id for t in partial.tasks] == ["dev-00", "dev-01", "dev-02", "dev-03"]
    reasons = [a.stop_reason for a in partial.attempts]
    assert "cancelled" in reasons and set(reasons) <= {"completed", "cancelled"}
    assert all(a.stop_reason == "cancelled" for a in partial.attempts if a.task_id != "dev-00")
    assert all(a.score is None for a in partial.attempts if a.stop_reason == "cancelled")
    # Ctrl-C is the default again: a second one, after the evaluation, is not swallowed.
    assert signal.getsignal(signal.SIGINT) is handler


# -- the executor ------------------------------------------------------------------------

PID = """
import os

def run(config, task, ctx):
    return {"output": task.expected, "trace": os.getpid()}
"""


def pids(result: EvalResult) -> set[Any]:
    return {a.output.trace for a in result.attempts if a.output is not None}


def test_the_bench_names_the_executor_and_the_option_overrides_it(make_bench: MakeBench) -> None:
    path = make_bench(PID)
    path.write_text(path.read_text(encoding="utf-8") + "executor: {name: process, workers: 1}\n",
                    encoding="utf-8")
    bench = load_bench(path)
    in_workers = evaluate(bench, bench.defaults)
    assert in_workers.n_scored == in_workers.n_attempts
    assert os.getpid() not in pids(in_workers) and len(pids(in_workers)) == 1
    here = evaluate(bench, bench.defaults, executor=ExecutorSettings("local"))
    assert pids(here) == {os.getpid()}
    # Where attempts ran changes nothing else of the result.
    assert [(a.task_id, a.attempt, a.seed, a.passed) for a in here.attempts] == [
        (a.task_id, a.attempt, a.seed, a.passed) for a in in_workers.attempts]
    assert here.env_fingerprint == in_workers.env_fingerprint

