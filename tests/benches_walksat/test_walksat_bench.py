"""The walksat bench: instances, solver, harness, scorer, and the bench as forge sees it."""

from __future__ import annotations

import importlib
import json
import random
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from forge.bench.loader import load_bench
from forge.core.task import Task
from forge.evaluation.evaluate import evaluate
from forge.harness import RunOutput

BENCH = Path(__file__).resolve().parents[2] / "benches" / "walksat"
SPLIT_NAMES = ("dev", "val", "test")
ALGORITHMS = ("walksat_skc", "probsat", "novelty")


def bench_module(name: str) -> ModuleType:
    """A module of the bench's folder, imported as forge imports its harness."""
    folder = str(BENCH)
    while folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    loaded = sys.modules.get(name)
    # Another bench's module of the same name (every bench has a `harness`) may be
    # loaded already: drop it so this bench's own is imported.
    if loaded is not None and not str(getattr(loaded, "__file__", "")).startswith(folder):
        del sys.modules[name]
    return importlib.import_module(name)


def split_tasks(split: str) -> list[dict[str, Any]]:
    lines = (BENCH / "tasks" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def small_formula() -> tuple[list[list[int]], int]:
    """A formula that is easy for every pick rule: the first uniform dev instance."""
    task = split_tasks("dev")[0]
    return task["input"]["clauses"], task["input"]["n_vars"]


def default_config() -> dict[str, Any]:
    return dict(load_bench(BENCH).defaults.values)


def ctx(seed: int) -> SimpleNamespace:
    """What the harness reads of an AttemptContext (only the seed)."""
    return SimpleNamespace(seed=seed, attempt=0, split="dev", timeout_s=30.0, deadline=0.0)


# -- instances ---------------------------------------------------------------------------


def test_generator_is_deterministic_and_matches_the_shipped_files(tmp_path: Path) -> None:
    gen = bench_module("generate_instances")
    counts = gen.write_splits(tmp_path)
    assert counts == {"dev": 48, "val": 30, "test": 30}
    for split in SPLIT_NAMES:
        shipped = (BENCH / "tasks" / f"{split}.jsonl").read_bytes()
        assert (tmp_path / f"{split}.jsonl").read_bytes() == shipped, split


def test_every_instance_is_satisfiable_checked_by_dpll() -> None:
    gen = bench_module("generate_instances")
    solver = bench_module("walksat_solver")
    families: set[str] = set()
    for split in SPLIT_NAMES:
        for task in split_tasks(split):
            clauses, n_vars = task["input"]["clauses"], task["input"]["n_vars"]
            model = gen.dpll(clauses, n_vars)
            assert model is not None, task["id"]
            ok, unsat, reason = solver.check_assignment(clauses, n_vars, model)
            assert ok and unsat == 0, (task["id"], reason)
            families.add(task["metadata"]["family"])
            assert task["expected"] is None  # nothing for a harness to peek at
    assert families == {"uniform", "flat"}


def test_uniform_instances_sit_near_the_phase_transition() -> None:
    for split in SPLIT_NAMES:
        for task in split_tasks(split):
            if task["metadata"]["family"] == "uniform":
                n_vars, clauses = task["input"]["n_vars"], task["input"]["clauses"]
                assert 4.19 <= len(clauses) / n_vars <= 4.27, task["id"]
                assert all(len({abs(x) for x in c}) == 3 for c in clauses)


def test_planted_colouring_satisfies_its_encoding() -> None:
    gen = bench_module("generate_instances")
    solver = bench_module("walksat_solver")
    clauses, n_vars, planted = gen.planted_colouring(12, 26, random.Random(7))
    assert n_vars == 36
    assert solver.check_assignment(clauses, n_vars, planted)[0]


def test_dpll_refutes_an_unsatisfiable_formula() -> None:
    gen = bench_module("generate_instances")
    # All eight sign patterns over three variables: every assignment falsifies one.
    every = [[a * 1, b * 2, c * 3] for a in (1, -1) for b in (1, -1) for c in (1, -1)]
    assert gen.dpll(every, 3) is None
    assert gen.dpll(every[:-1], 3) is not None


# -- solver ------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_each_algorithm_finds_a_verified_satisfying_assignment(algorithm: str) -> None:
    solver = bench_module("walksat_solver")
    clauses, n_vars = small_formula()
    result = solver.solve(clauses, n_vars, algorithm=algorithm, noise=0.5, cb=2.5,
                          max_flips=20_000, restarts=2, tie_breaking="random",
                          rng=random.Random(1))
    assert result.solved
    assert solver.check_assignment(clauses, n_vars, result.assignment)[0]
    assert 0 <= result.flips <= 3 * 20_000


def test_same_seed_same_run_and_seeds_matter() -> None:
    solver = bench_module("walksat_solver")
    clauses, n_vars = small_formula()

    def run(seed: int) -> Any:
        return solver.solve(clauses, n_vars, algorithm="walksat_skc", noise=0.3,
                            max_flips=5000, rng=random.Random(seed))

    assert run(3) == run(3)
    assert len({run(seed).flips for seed in range(8)}) > 1


def test_an_exhausted_budget_returns_no_assignment() -> None:
    solver = bench_module("walksat_solver")
    clauses, n_vars = small_formula()
    result = solver.solve(clauses, n_vars, max_flips=1, restarts=2, rng=random.Random(0))
    assert not result.solved and result.assignment is None
    assert result.flips == 3 and result.tries == 3 and result.min_unsat > 0


def test_repeated_literals_and_tautologies_are_handled() -> None:
    solver = bench_module("walksat_solver")
    clauses = [[1, 1, 2], [-1, 1, 3], [-2, -2], [2, 3, -3], [-3, 1]]
    result = solver.solve(clauses, 3, max_flips=1000, rng=random.Random(0))
    assert result.solved
    assert solver.check_assignment(clauses, 3, result.assignment)[0]


def test_bad_settings_are_refused() -> None:
    solver = bench_module("walksat_solver")
    with pytest.raises(ValueError, match="unknown algorithm"):
        solver.solve([[1]], 1, algorithm="gsat")
    with pytest.raises(ValueError, match="unknown tie_breaking"):
        solver.solve([[1]], 1, tie_breaking="last")


# -- harness and scorer ------------------------------------------------------------------


def test_harness_is_deterministic_and_reports_flips() -> None:
    harness = bench_module("harness")
    task = Task.model_validate(split_tasks("dev")[0])
    config = {**default_config(), "noise": 0.5, "tie_breaking": "random"}
    first = harness.run(dict(config), task, ctx(11))
    assert first == harness.run(dict(config), task, ctx(11))
    out = RunOutput.model_validate(first)
    assert out.output is not None and out.signals == []
    assert out.metrics["flips"] >= 0 and out.metrics["restarts_used"] >= 0
    assert out.cost == pytest.approx(out.metrics["flips"] / 1e6)


def test_harness_signals_an_exhausted_budget() -> None:
    harness = bench_module("harness")
    task = Task.model_validate(split_tasks("dev")[-1])
    config = {**default_config(), "max_flips": 256, "noise": 0.0}
    out = RunOutput.model_validate(harness.run(config, task, ctx(0)))
    assert out.output is None
    assert "flip_budget_exhausted" in out.signals
    assert out.metrics["flips"] == 256.0


def test_scorer_accepts_only_satisfying_assignments() -> None:
    solver = bench_module("walksat_solver")
    scoring = bench_module("walksat_scoring")
    raw = split_tasks("dev")[0]
    task = Task.model_validate(raw)
    clauses, n_vars = raw["input"]["clauses"], raw["input"]["n_vars"]
    good = solver.solve(clauses, n_vars, noise=0.5, max_flips=20_000,
                        rng=random.Random(0)).assignment
    assert good is not None
    verdict = scoring.satisfied(task, RunOutput(output=good))
    assert verdict.passed and verdict.value == 1.0

    # Flip a variable of some clause's only true literal: that clause is now false.
    true_lits = set(good)
    critical = next(c for c in clauses if sum(lit in true_lits for lit in c) == 1)
    lit = next(x for x in critical if x in true_lits)
    wrong = [-x if x == lit else x for x in good]
    verdict = scoring.satisfied(task, RunOutput(output=wrong))
    assert not verdict.passed and verdict.value == 0.0
    assert verdict.details["unsatisfied_clauses"] >= 1

    for garbage in (None, [], good[:-1], [True] * n_vars, "1 -2 3", [0] * n_vars):
        assert not scoring.satisfied(task, RunOutput(output=garbage)).passed, garbage


# -- the bench as forge loads it ---------------------------------------------------------


def test_bench_loads_with_its_registry_and_defaults() -> None:
    bench = load_bench(BENCH)
    assert bench.name == "walksat"
    assert set(bench.registry.settings) == {"algorithm", "noise", "cb", "max_flips",
                                             "restarts", "tie_breaking"}
    assert [len(bench.tasks(s)) for s in SPLIT_NAMES] == [48, 30, 30]
    for signal, moves in bench.registry.hints.items():
        assert set(moves) <= set(bench.registry.settings), signal
    assert "flips" in bench.spec.metrics


def test_default_config_evaluates_with_every_attempt_scored() -> None:
    bench = load_bench(BENCH)
    dev = bench.tasks("dev")
    ids = [t.id for t in dev[:4]] + [t.id for t in dev[-2:]]  # both families
    result = evaluate(bench, bench.defaults, split="dev", k=1, task_ids=ids)
    assert result.n_attempts == 6
    assert result.n_scored == 6, result.stop_reasons()
    assert "flips" in result.metrics


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithm_runs_through_forge(algorithm: str) -> None:
    bench = load_bench(BENCH)
    config = bench.registry.validate_config({**bench.defaults.values, "algorithm": algorithm,
                                      "noise": 0.5, "cb": 2.5, "tie_breaking": "random"})
    ids = [t.id for t in bench.tasks("dev")[:3]]
    result = evaluate(bench, config, split="dev", k=2, task_ids=ids)
    assert result.n_scored == 6, result.stop_reasons()
    assert result.pass_rate is not None and result.pass_rate > 0.5
