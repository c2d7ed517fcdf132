"""A session: one executor, one harness and one engine for a whole evaluation or search,
opened before the first attempt and closed after the last, whatever happens."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import ARITH, MakeBench

from forge.bench.loader import load_bench
from forge.errors import OptionError
from forge.evaluation import session as session_module
from forge.evaluation.evaluate import evaluate
from forge.evaluation.rollout import AttemptKey, RolloutEngine
from forge.evaluation.session import Session
from forge.executors import ExecutorSettings, LocalExecutor, ProcessExecutor
from forge.search.launch import launch_search


class CountingEngine(RolloutEngine):
    """Counts the engines made and the batches they run."""

    built: ClassVar[list[CountingEngine]] = []
    batches: ClassVar[int] = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        CountingEngine.built.append(self)

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        CountingEngine.batches += 1
        return await super().run(*args, **kwargs)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> type[CountingEngine]:
    CountingEngine.built, CountingEngine.batches = [], 0
    monkeypatch.setattr(session_module, "RolloutEngine", CountingEngine)
    return CountingEngine


def test_one_engine_serves_every_batch_of_a_search(tmp_path: Path,
                                                   counting: type[CountingEngine]) -> None:
    outcome = launch_search(ARITH, max_steps=2, budget_rollouts=3000, k=2, run_id="one",
                            journals=tmp_path, executor=ExecutorSettings("local"))
    assert outcome.rollouts_used > 0
    assert len(counting.built) == 1
    assert counting.batches > 5  # screening chunks, confirmations, val and test each a batch


def test_an_evaluation_opens_one_session_and_closes_it(monkeypatch: pytest.MonkeyPatch,
                                                       counting: type[CountingEngine]) -> None:
    closed: list[str] = []
    real_close = LocalExecutor.close

    def close(self: LocalExecutor) -> None:
        closed.append("executor")
        real_close(self)

    monkeypatch.setattr(LocalExecutor, "close", close)
    bench = load_bench(ARITH)
    result = evaluate(bench, bench.defaults, k=1)
    assert result.summary()["n_attempts"] == 12
    assert len(counting.built) == 1 and counting.batches == 1
    assert closed == ["executor"]


def test_a_session_releases_harness_and_executor_even_when_a_run_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench(ARITH)
    released: list[str] = []

    async def aclose() -> None:
        released.append("harness")

    with pytest.raises(RuntimeError, match="the caller broke"):  # noqa: SIM117
        with Session(bench, ExecutorSettings("process", workers=1), seed=1, concurrency=1,
                     timeout_s=5) as session:
            assert isinstance(session.executor, ProcessExecutor)
            monkeypatch.setattr(session.harness, "aclose", aclose)
            keys = [AttemptKey(t, 0) for t in bench.tasks("dev")[:2]]
            results = session.attempts(bench.defaults, keys, split="dev")
            assert [r.stop_reason for r in results] == ["completed", "completed"]
            assert any(w is not None for w in session.executor._pool)  # workers started
            raise RuntimeError("the caller broke")
    assert released == ["harness"]
    assert all(w is None for w in session.executor._pool)  # every worker stopped


def test_an_executor_that_cannot_serve_the_harness_opens_nothing(
        make_bench: MakeBench, tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text("print('{}')\n", encoding="utf-8")
    path = make_bench()
    text = path.read_text(encoding="utf-8").replace(
        'harness: {python: "harness:run"}', f'harness: {{command: [python3, "{agent}"]}}')
    path.write_text(text, encoding="utf-8")
    bench = load_bench(path)
    with pytest.raises(OptionError) as err:
        Session(bench, ExecutorSettings("process"), seed=1, concurrency=1, timeout_s=5)
    assert str(err.value) == ("--executor: only the 'python' harness can run in process "
                              "workers; this bench uses 'command'")
