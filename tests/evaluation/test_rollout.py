"""The rollout engine: seeds, isolation, concurrency, timeouts, failures as data, cancel."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import MakeBench, default_tasks

from forge.bench.loader import Bench, load_bench
from forge.core.task import Task
from forge.evaluation.evaluate import DEFAULT_SEED, evaluate
from forge.evaluation.rollout import AttemptKey, RolloutEngine, derive_seed
from forge.harness import AttemptContext, Harness
from forge.results.model import AttemptResult, EvalResult, load_result, save_result


def by_task(result: EvalResult) -> dict[str, list[AttemptResult]]:
    return {t.task_id: t.attempts for t in result.tasks}


def stops(result: EvalResult) -> dict[str, list[str]]:
    return {t.task_id: [a.stop_reason for a in t.attempts] for t in result.tasks}


# -- seeds ---------------------------------------------------------------------------


def test_derive_seed_is_stable_across_versions() -> None:
    # Saved baselines pair attempts by seed: the derivation must never change.
    assert derive_seed(20261130, "dev", "dev-00", 0) == 943439600535549454
    assert derive_seed(0, "dev", "a", 0) == 2900441904331890122


def test_derive_seed_is_distinct_per_component() -> None:
    grid = list(itertools.product([0, 1, DEFAULT_SEED], ["dev", "val"], ["a", "b", "a b"],
                                  [0, 1, 2]))
    seeds = [derive_seed(*key) for key in grid]
    assert len(set(seeds)) == len(grid)
    assert all(0 <= s < 2**63 for s in seeds)
    # Components cannot bleed into each other.
    assert derive_seed(1, "ab", "c", 0) != derive_seed(1, "a", "bc", 0)
    assert derive_seed(1, "dev", "t1", 0) != derive_seed(11, "dev", "t", 0)


SEED_HARNESS = """
def run(config, task, ctx):
    return {"output": task.expected,
            "trace": {"seed": ctx.seed, "attempt": ctx.attempt, "split": ctx.split,
                      "timeout_s": ctx.timeout_s, "effort": config["effort"]}}
"""


def test_the_harness_gets_the_derived_seed_and_its_context(make_bench: MakeBench) -> None:
    bench = load_bench(make_bench(SEED_HARNESS, rollouts={"k": 3, "timeout_s": 7}))
    result = evaluate(bench, bench.defaults, split="val", seed=5)
    for task in result.tasks:
        assert [a.attempt for a in task.attempts] == [0, 1, 2]
        for a in task.attempts:
            assert a.output is not None
            assert a.seed == derive_seed(5, "val", task.task_id, a.attempt)
            assert a.output.trace == {"seed": a.seed, "attempt": a.attempt, "split": "val",
                                      "timeout_s": 7.0, "effort": 1}


def test_two_configs_with_one_run_seed_see_the_same_seeds(arith_bench: Bench) -> None:
    base = arith_bench.defaults
    other = arith_bench.registry.with_values(base, {"effort": 5, "mode": "careful"})
    assert other.fingerprint != base.fingerprint

    def seeds(result: EvalResult) -> list[tuple[str, int, int]]:
        return [(a.task_id, a.attempt, a.seed) for a in result.attempts]

    a = evaluate(arith_bench, base, k=2)
    b = evaluate(arith_bench, other, k=2)
    assert seeds(a) == seeds(b)
    assert all(s == derive_seed(DEFAULT_SEED, "dev", t, i) for t, i, s in seeds(a))
    c = evaluate(arith_bench, base, k=2, seed=DEFAULT_SEED + 1)
    assert not {s for *_, s in seeds(a)} & {s for *_, s in seeds(c)}


# -- isolation -----------------------------------------------------------------------

MUTATING_BODY = """
    seen = {"effort": config["effort"], "keys": sorted(config),
            "items": list(task.input["items"]), "metadata": dict(task.metadata)}
    config["effort"] = 99
    config["injected"] = True
    task.input["items"].append("junk")
    task.input["extra"] = 1
    task.metadata["touched"] = True
    return {"output": task.expected, "trace": seen}
"""


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_each_attempt_gets_fresh_copies_of_config_and_task(make_bench: MakeBench,
                                                           kind: str) -> None:
    header = "async def run(config, task, ctx):" if kind == "async" else \
        "def run(config, task, ctx):"
    rows = default_tasks()
    rows["dev"] = [{"id": "dev-0", "input": {"items": ["a"]}, "expected": "ok"}]
    bench = load_bench(make_bench(header + MUTATING_BODY, tasks=rows,
                                  rollouts={"k": 4, "concurrency": 1}))
    before = [t.model_dump() for t in bench.tasks("dev")]
    result = evaluate(bench, bench.defaults)
    traces = [a.output.trace for a in result.attempts if a.output is not None]
    assert len(traces) == 4
    for trace in traces:
        assert trace == {"effort": 1, "keys": ["effort", "mode"], "items": ["a"],
                         "metadata": {}}
    assert [t.model_dump() for t in bench.tasks("dev")] == before
    assert bench.defaults.values == {"effort": 1, "mode": "fast"}
    assert result.config == {"effort": 1, "mode": "fast"}


# -- concurrency ---------------------------------------------------------------------

SYNC_PEAK = """
import threading, time
_lock = threading.Lock()
_now = 0
_peak = 0

def run(config, task, ctx):
    global _now, _peak
    with _lock:
        _now += 1
        _peak = max(_peak, _now)
    time.sleep(0.08)
    with _lock:
        _now -= 1
        peak = _peak
    return {"output": task.expected, "metrics": {"peak": float(peak)}}
"""

ASYNC_PEAK = """
import asyncio
_now = 0
_peak = 0

async def run(config, task, ctx):
    global _now, _peak
    _now += 1
    _peak = max(_peak, _now)
    await asyncio.sleep(0.08)
    _now -= 1
    return {"output": task.expected, "metrics": {"peak": float(_peak)}}
"""


@pytest.mark.parametrize("source", [SYNC_PEAK, ASYNC_PEAK], ids=["sync", "async"])
@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_bound_is_respected_and_used(make_bench: MakeBench, source: str,
                                                 concurrency: int) -> None:
    bench = load_bench(make_bench(source, rollouts={"k": 4, "concurrency": concurrency}))
    result = evaluate(bench, bench.defaults)
    assert result.stop_reasons() == {"completed": 12}
    assert max(a.metrics["peak"] for a in result.attempts) == concurrency


def test_concurrency_option_overrides_the_bench(make_bench: MakeBench) -> None:
    bench = load_bench(make_bench(SYNC_PEAK, rollouts={"k": 2, "concurrency": 8}))
    result = evaluate(bench, bench.defaults, concurrency=2)
    assert max(a.metrics["peak"] for a in result.attempts) == 2


# -- timeouts ------------------------------------------------------------------------

SYNC_SLEEPER = """
import time

def run(config, task, ctx):
    if task.id == "dev-0":
        time.sleep(60)
    return {"output": task.expected}
"""

ASYNC_STUBBORN = """
import asyncio

async def run(config, task, ctx):
    if task.id == "dev-0":
        while True:  # ignores cancellation
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                pass
    return {"output": task.expected}
"""


@pytest.mark.timeout(30)
@pytest.mark.parametrize("source", [SYNC_SLEEPER, ASYNC_STUBBORN],
                         ids=["sync-sleeps", "async-ignores-cancel"])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_hung_attempt_times_out_and_the_evaluation_goes_on(
        make_bench: MakeBench, source: str, concurrency: int) -> None:
    bench = load_bench(make_bench(source, rollouts={"k": 2, "timeout_s": 0.3,
                                                    "concurrency": concurrency}))
    t0 = time.monotonic()
    result = evaluate(bench, bench.defaults)
    elapsed = time.monotonic() - t0
    assert elapsed < 5, f"the evaluation waited for the hung harness ({elapsed:.1f} s)"
    assert stops(result) == {"dev-0": ["timeout", "timeout"],
                             "dev-1": ["completed", "completed"],
                             "dev-2": ["completed", "completed"]}
    for a in by_task(result)["dev-0"]:
        assert a.error == "no result within 0.3 s"
        assert a.score is None
        assert a.duration_s >= 0.3
    # Timeouts are unscored, not zeros.
    assert result.pass_rate == 1.0
    assert result.summary()["n_unscored"] == 2


def test_a_process_is_not_held_at_exit_by_a_sleeping_harness(make_bench: MakeBench) -> None:
    path = make_bench("import time\n\ndef run(config, task, ctx):\n    time.sleep(600)\n",
                      rollouts={"k": 1, "timeout_s": 0.5})
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "forge", "eval", str(path), "--json"],
                          capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr  # nothing scored: every attempt timed out
    assert "no attempt was scored: all 3 attempts on dev ended unscored (3 × timeout" \
        in proc.stderr
    assert elapsed < 15, f"forge eval took {elapsed:.1f} s"
    summary = json.loads(proc.stdout)
    assert summary["n_attempts"] == 3
    assert summary["n_unscored"] == 3
    assert summary["pass_rate"] is None


# -- failures are data ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_exception_is_an_error_with_its_message(make_bench: MakeBench, kind: str) -> None:
    source = f"""
{"async " if kind == "async" else ""}def run(config, task, ctx):
    if task.id == "dev-1":
        raise ValueError("boom on " + task.id)
    return {{"output": task.expected}}
"""
    bench = load_bench(make_bench(source))
    result = evaluate(bench, bench.defaults)
    assert stops(result)["dev-1"] == ["error", "error"]
    assert {a.error for a in by_task(result)["dev-1"]} == {"ValueError: boom on dev-1"}
    assert stops(result)["dev-0"] == ["completed", "completed"]
    assert result.pass_rate == 1.0


@pytest.mark.parametrize(("body", "message"), [
    ("return [task.expected]", "expected RunOutput or dict, got list"),
    ("return None", "expected RunOutput or dict, got NoneType"),
    ("return task.expected", "expected RunOutput or dict, got str"),
    ("return {'output': task.expected, 'bogus': 1}", "bogus"),
    ("return {'output': object()}", "serialis"),
    ("return {'output': task.expected, 'metrics': {'m': float('nan')}}", "'m'"),
    ("return {'output': task.expected, 'cost': float('inf')}", "cost"),
    ("return {'output': task.expected, 'cost': 1.7e308}", "expected 0 to"),
    ("return {'output': task.expected, 'cost': -1.0}", "expected 0 to"),
    ("return {'output': task.expected, 'usage': {'input_tokens': -1}}", "input_tokens"),
], ids=["list", "none", "str", "unknown-field", "object", "nan-metric", "inf-cost",
        "huge-cost", "negative-cost", "negative-tokens"])
def test_garbage_output_is_an_error_and_the_evaluation_continues(
        make_bench: MakeBench, tmp_path: Path, body: str, message: str) -> None:
    source = f"""
def run(config, task, ctx):
    if task.id == "dev-0":
        {body}
    return {{"output": task.expected, "metrics": {{"m": 1.0}}}}
"""
    bench = load_bench(make_bench(source))
    result = evaluate(bench, bench.defaults)
    assert stops(result) == {"dev-0": ["error", "error"], "dev-1": ["completed", "completed"],
                             "dev-2": ["completed", "completed"]}
    for a in by_task(result)["dev-0"]:
        assert a.error is not None and message in a.error
        assert a.output is None and a.score is None
    assert result.pass_rate == 1.0
    assert result.metrics["m"] == 1.0  # the garbage is not averaged in
    # Whatever the harness returned, the result can be saved and read back.
    save_result(result, tmp_path / "r.json")
    assert load_result(tmp_path / "r.json").summary() == result.summary()


def test_a_run_output_object_is_accepted(make_bench: MakeBench) -> None:
    source = """
from forge import RunOutput, ToolCall

def run(config, task, ctx):
    return RunOutput(output=task.expected, cost=0.5, tool_calls=[ToolCall(name="t")],
                     usage={"input_tokens": 3, "output_tokens": 4}, signals=["s"])
"""
    bench = load_bench(make_bench(source))
    result = evaluate(bench, bench.defaults)
    assert result.stop_reasons() == {"completed": 6}
    assert result.pass_rate == 1.0
    assert result.metrics["cost"] == 0.5
    assert result.metrics["tool_calls"] == 1.0
    assert result.metrics["input_tokens"] == 3.0


def test_a_scorer_that_raises_leaves_the_attempt_completed_but_unscored(
        make_bench: MakeBench) -> None:
    rows = default_tasks()
    rows["dev"] = [{"id": "dev-0", "input": "a", "expected": "not a number"},
                   {"id": "dev-1", "input": "b", "expected": 42},
                   {"id": "dev-2", "input": "c", "expected": 7}]
    source = """
def run(config, task, ctx):
    return {"output": "42" if task.id == "dev-1" else "0"}
"""
    bench = load_bench(make_bench(source, tasks=rows, scorer="numeric"))
    result = evaluate(bench, bench.defaults)
    assert stops(result)["dev-0"] == ["completed", "completed"]
    for a in by_task(result)["dev-0"]:
        assert a.score is None
        assert a.output is not None and a.output.output == "0"
        assert a.error is not None and a.error.startswith("scorer failed: ValueError")
    tasks = {t["id"]: t for t in result.summary()["tasks"]}
    assert tasks["dev-0"]["pass_rate"] is None
    assert tasks["dev-0"]["n_unscored"] == 2
    assert tasks["dev-1"]["pass_rate"] == 1.0
    assert tasks["dev-2"]["pass_rate"] == 0.0
    # Mean over the tasks that were scored: (1 + 0) / 2, not (1 + 0 + 0) / 3.
    assert result.pass_rate == 0.5
    assert result.summary()["n_scored"] == 4
    assert result.summary()["n_unscored"] == 2


# -- cancellation --------------------------------------------------------------------

CANCEL_SYNC = """
import time

def run(config, task, ctx):
    if task.id != "dev-0":
        time.sleep(10)
    return {"output": task.expected}
"""

CANCEL_ASYNC = """
import asyncio

async def run(config, task, ctx):
    if task.id != "dev-0":
        await asyncio.sleep(10)
    return {"output": task.expected}
"""

CANCEL_ASYNC_STUBBORN = """
import asyncio, time

async def run(config, task, ctx):
    if task.id != "dev-0":
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:  # ignored, for one more second
                end = min(end, time.monotonic() + 1.0)
    return {"output": task.expected}
"""

FOUR_TASKS: dict[str, list[dict[str, Any]]] = {
    "dev": [{"id": f"dev-{i}", "input": i, "expected": str(i)} for i in range(4)],
    "val": [{"id": "val-0", "input": "v", "expected": "v"}],
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("source", [CANCEL_SYNC, CANCEL_ASYNC, CANCEL_ASYNC_STUBBORN],
                         ids=["sync", "async", "async-ignores-cancel"])
def test_cancel_mid_run_ends_in_flight_attempts_as_cancelled(make_bench: MakeBench,
                                                             source: str) -> None:
    """dev-0 returns at once; its lane takes dev-2; dev-1 and dev-2 are in flight when
    cancel() comes; dev-3 never starts."""
    bench = load_bench(make_bench(source, tasks=FOUR_TASKS))

    async def main() -> tuple[list[AttemptResult], float]:
        harness = bench.build_harness()
        engine = RolloutEngine(harness, bench.scorer, run_seed=1,
                               concurrency=2, timeout_s=20)
        asyncio.get_running_loop().call_later(0.5, engine.cancel)
        t0 = time.monotonic()
        try:
            results = await engine.run(bench.defaults,
                                       [AttemptKey(t, 0) for t in bench.tasks("dev")],
                                       split="dev")
            return results, time.monotonic() - t0
        finally:
            await harness.aclose()

    results, elapsed = asyncio.run(main())
    assert elapsed < 2, f"cancel() took {elapsed:.1f} s"
    assert [(a.task_id, a.stop_reason) for a in results] == [
        ("dev-0", "completed"), ("dev-1", "cancelled"), ("dev-2", "cancelled")]
    assert results[1].score is None and results[1].error is not None


def test_running_no_keys_returns_nothing(arith_bench: Bench) -> None:
    async def main() -> list[AttemptResult]:
        engine = RolloutEngine(arith_bench.build_harness(), arith_bench.scorer,
                               run_seed=1, concurrency=2, timeout_s=1)
        return await engine.run(arith_bench.defaults, [], split="dev")

    assert asyncio.run(main()) == []


def test_the_engine_refuses_zero_concurrency(arith_bench: Bench) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        RolloutEngine(arith_bench.build_harness(), arith_bench.scorer,
                      run_seed=1, concurrency=0, timeout_s=1)


# -- a harness that starts something first (astart) ---------------------------------


class _SlowStart(Harness):
    """Wraps a bench's harness; its start takes ``start_s`` (a server coming up)."""

    def __init__(self, inner: Harness, start_s: float) -> None:
        self.inner = inner
        self.start_s = start_s
        self.starts = 0
        self.start_cancelled = False

    @property
    def identity(self) -> str:
        return "slow-start:" + self.inner.identity

    async def astart(self) -> None:
        self.starts += 1
        try:
            await asyncio.sleep(self.start_s)
        except asyncio.CancelledError:
            self.start_cancelled = True
            raise

    async def run(self, config: dict[str, Any], task: Task, ctx: AttemptContext) -> Any:
        return await self.inner.run(config, task, ctx)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_the_harness_start_is_no_attempts_time(arith_bench: Bench) -> None:
    """A start longer than the attempt timeout costs no attempt; it comes before
    every batch (a harness returns at once when all is ready)."""
    harness = _SlowStart(arith_bench.build_harness(), start_s=0.6)
    keys = [AttemptKey(t, 0) for t in arith_bench.tasks("dev")[:4]]

    async def main() -> list[AttemptResult]:
        engine = RolloutEngine(harness, arith_bench.scorer, run_seed=1, concurrency=2,
                               timeout_s=0.3)
        first = await engine.run(arith_bench.defaults, keys, split="dev")
        return first + await engine.run(arith_bench.defaults, keys[:1], split="dev")

    results = asyncio.run(main())
    assert [a.stop_reason for a in results] == ["completed"] * 5
    assert all(a.duration_s < 0.3 for a in results)
    assert harness.starts == 2


def test_cancel_during_the_harness_start_starts_no_attempt(arith_bench: Bench) -> None:
    harness = _SlowStart(arith_bench.build_harness(), start_s=30)

    async def main() -> tuple[list[AttemptResult], float]:
        engine = RolloutEngine(harness, arith_bench.scorer, run_seed=1, concurrency=2,
                               timeout_s=1)
        asyncio.get_running_loop().call_later(0.2, engine.cancel)
        t0 = time.monotonic()
        results = await engine.run(arith_bench.defaults,
                                   [AttemptKey(t, 0) for t in arith_bench.tasks("dev")],
                                   split="dev")
        return results, time.monotonic() - t0

    results, elapsed = asyncio.run(main())
    assert results == [] and elapsed < 2
    assert harness.start_cancelled
