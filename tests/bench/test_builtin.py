"""Every bench shipped in the repository loads and evaluates (k=1 on a few dev tasks)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai_math_model import math_model
from openai_server import ScriptedOpenAI

from forge.bench.loader import Bench, load_bench
from forge.errors import BenchError
from forge.evaluation.evaluate import evaluate

ROOT = Path(__file__).resolve().parents[2]
BENCHES = sorted([*ROOT.glob("benches/*/bench.yaml"), *ROOT.glob("tests/benches/*/bench.yaml")])


@pytest.fixture(autouse=True)
def _openai_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """benches/openai-math calls a model: here a scripted one that uses its tools."""
    with ScriptedOpenAI(math_model) as server:
        monkeypatch.setenv("FORGE_OPENAI_BASE_URL", server.url)
        yield


def load_or_skip(bench_file: Path) -> Bench:
    """The bench; one of an optional extra that is not installed (``pip install
    'forge[...]'`` in its one-line error) is skipped, except in CI, which installs them."""
    try:
        return load_bench(bench_file)
    except BenchError as exc:
        if "pip install 'forge[" not in str(exc):
            raise
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI is set but the bench's extra is missing: {exc}")
        pytest.skip(str(exc))


def test_the_repository_ships_benches() -> None:
    assert any("tests/benches" in str(p) for p in BENCHES)


@pytest.mark.parametrize("bench_file", BENCHES, ids=lambda p: p.parent.name)
def test_shipped_bench_evaluates(bench_file: Path) -> None:
    bench = load_or_skip(bench_file)
    dev = bench.tasks("dev")
    result = evaluate(bench, bench.defaults, split="dev", k=1,
                      task_ids=[t.id for t in dev[:10]])
    assert result.n_attempts == min(10, len(dev))
    # A shipped bench's default config must be scoreable: its harness runs cleanly.
    assert result.n_scored == result.n_attempts, result.stop_reasons()


BUILT_IN = sorted(ROOT.glob("benches/*/bench.yaml"))


@pytest.mark.parametrize("bench_file", BUILT_IN, ids=lambda p: p.parent.name)
def test_built_in_bench_runs_a_short_search(bench_file: Path, tmp_path: Path) -> None:
    """A one-step search at k=1: the whole procedure runs on the real harness."""
    from forge.search.launch import launch_search

    outcome = launch_search(load_or_skip(bench_file), journals=tmp_path, run_id="short", k=1,
                            max_steps=1, patience=1, candidates_per_step=2,
                            budget_rollouts=5000)
    assert outcome.steps == 1
    assert outcome.stop_reason in {"max_steps", "patience", "budget_rollouts"}
    kinds = [r["kind"] for r in outcome.records]
    assert kinds[0] == "start" and kinds[-1] == "end" and "candidate" in kinds
    assert outcome.test["start"] is not None and outcome.test["final"] is not None
