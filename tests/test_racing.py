"""Screening by racing, on its own: ``screen()`` against a real attempt cache.

The bench is deterministic: the incumbent (``level`` 0) answers the odd dev tasks
and misses the even ones; every other level wins some even tasks and loses some odd
ones, the same on every seed, so each task's paired delta is exactly +1, 0 or -1 and
the screening test's numbers are known in advance. Tasks are screened in their own
order (``dev-00``, ``dev-01``, ...), four chunks of ten.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import read_calls, search_tasks, write_search_bench

from forge.attempt_cache import Rollouts
from forge.bench import Bench, load_bench
from forge.executors import ExecutorSettings
from forge.racing import ScreenOutcome, screen
from forge.registry import Config
from forge.session import Session
from forge.stats import paired_test
from forge.store import AttemptStore

K = 2
N_DEV = 40
ALPHA = 0.05

REGISTRY = """\
name: race
settings:
  level: {type: int, min: 0, max: 5, default: 0}
"""

#: (wins, losses) against the incumbent per level; level 4 is a close call on its first
#: block of attempts (0, 1) and a clear win on the second (2, 3).
HARNESS = """
EVEN = {i for i in range(40) if i % 2 == 0}
ODD = {i for i in range(40) if i % 2 == 1}
RULES = {
    0: (set(), set()),
    1: (EVEN, set()),                                   # better on every even task
    2: (set(), ODD),                                    # worse on every odd task
    3: ({i for i in EVEN if i % 10 in (0, 6)}, {i for i in ODD if i % 10 == 3}),
    4: ({i for i in EVEN if i % 10 in (0, 4)}, {1, 13, 27}),
    5: (set(), set()),                                  # another config, no difference
}


def run(config, task, ctx):
    record(config, task, ctx)
    i = int(task.id.split("-")[1])
    level = config["level"]
    wins, losses = (EVEN, set()) if level == 4 and ctx.attempt >= 2 else RULES[level]
    right = (i in ODD or i in wins) and i not in losses
    return {"output": task.expected if right else "wrong", "cost": 0.5}
"""


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    path = write_search_bench(tmp_path / "bench", HARNESS, registry=REGISTRY, k=K,
                              tasks=search_tasks(N_DEV, 2, 2))
    return load_bench(path)


@pytest.fixture
def cache(bench: Bench, tmp_path: Path) -> Iterator[Rollouts]:
    with Session(bench, ExecutorSettings(), seed=7, concurrency=4, timeout_s=10.0) as session:
        yield Rollouts(bench, session, AttemptStore(tmp_path / "attempts.jsonl"))


@pytest.fixture
def level(bench: Bench) -> Callable[[int], Config]:
    return lambda value: bench.registry.with_values(bench.defaults, {"level": value})


Race = Callable[..., ScreenOutcome]


@pytest.fixture
def race(bench: Bench, cache: Rollouts, level: Callable[[int], Config]) -> Race:
    """``race(candidate_level, **screen_options)`` against the incumbent, level 0."""
    def run(candidate: int, **options: object) -> ScreenOutcome:
        return screen(cache, level(0), level(candidate), bench.tasks("dev"), k=K,
                      alpha=ALPHA, min_effect=0.0, **options)  # type: ignore[arg-type]
    return run


def calls(bench: Bench, level: int) -> list[tuple[str, int]]:
    return [(c["task"], c["attempt"]) for c in read_calls(bench.path)
            if c["config"]["level"] == level]


def test_a_clear_win_passes_on_the_whole_first_block(race: Race) -> None:
    out = race(1)
    assert out.status == "pass"
    assert (out.tasks_seen, out.blocks, out.saved_by_racing) == (N_DEV, 1, 0)
    assert out.test.n == N_DEV and out.test.effect == pytest.approx(0.5)
    assert out.test.p_value < ALPHA
    assert (out.rollouts, out.reused) == (2 * N_DEV * K, 0)


def test_a_clear_loss_stops_after_the_first_chunk_for_futility(race: Race, bench: Bench,
                                                               cache: Rollouts) -> None:
    out = race(2)
    assert out.status == "futile"
    assert out.tasks_seen == 10 and out.test.effect == pytest.approx(-0.5)
    # both configs ran on ten tasks only; the thirty left are what racing saved
    assert out.rollouts == 2 * 10 * K and cache.executed == 2 * 10 * K
    assert out.saved_by_racing == (N_DEV - 10) * K
    assert {task for task, _ in calls(bench, 2)} == {f"dev-{i:02d}" for i in range(10)}


def test_no_difference_on_the_first_tasks_does_not_stop_before_half_are_in(
        race: Race) -> None:
    # Ten zero deltas say nothing about an effect on a tenth of the tasks: the futility
    # stop waits for half of them, and then the candidate is plainly no better.
    out = race(5)
    assert out.status == "futile"
    assert out.tasks_seen == N_DEV // 2 and out.test.sd == 0
    assert out.saved_by_racing == (N_DEV // 2) * K


def test_a_small_gain_that_cannot_be_shown_fails(race: Race) -> None:
    out = race(3)
    assert out.status == "fail"
    assert out.tasks_seen == N_DEV and out.blocks == 1
    assert out.test.effect == pytest.approx(0.1)
    assert out.test.p_value >= 2 * ALPHA  # not close enough for another block


def test_a_close_call_gets_a_second_block_on_the_same_tasks(race: Race, bench: Bench) -> None:
    first_block = race(4, max_blocks=1)
    assert first_block.status == "fail"
    assert ALPHA <= first_block.test.p_value < 2 * ALPHA
    out = race(4)
    assert out.status == "pass" and out.blocks == 2
    assert out.test.p_value < ALPHA and out.test.n == N_DEV
    # the second block is attempts 2 and 3 of every task, for both configs
    assert out.rollouts == 2 * N_DEV * K and out.reused == 2 * N_DEV * K
    assert sorted({a for _, a in calls(bench, 4)}) == [0, 1, 2, 3]
    assert sorted({a for _, a in calls(bench, 0)}) == [0, 1, 2, 3]
    # on all four attempts of each task, each task's delta is the mean of its four
    deltas = [1.0 if i % 10 in (0, 4) else 0.5 if i % 2 == 0 else
              -0.5 if i in (1, 13, 27) else 0.0 for i in range(N_DEV)]
    assert out.test == paired_test(deltas, alpha=ALPHA)


def test_the_budget_ends_screening_between_chunks(race: Race) -> None:
    nothing = race(1, budget_left=0)
    assert nothing.status == "budget" and nothing.rollouts == 0 and nothing.tasks_seen == 0
    # a chunk starts while any budget is left, so it may overshoot by itself
    one_chunk = race(1, budget_left=1)
    assert one_chunk.status == "budget"
    assert (one_chunk.tasks_seen, one_chunk.rollouts) == (10, 2 * 10 * K)


def test_an_extra_block_that_does_not_fit_the_budget_is_not_started(race: Race,
                                                                    bench: Bench) -> None:
    first = 2 * N_DEV * K  # the first block of both configs: exactly the budget
    out = race(4, budget_left=first)
    assert out.status == "budget" and out.blocks == 1
    assert out.rollouts == first
    assert max(a for _, a in calls(bench, 4)) == K - 1  # no attempt of a second block ran


def test_the_incumbent_is_run_once_and_reused_by_later_candidates(
        race: Race, bench: Bench, cache: Rollouts) -> None:
    race(1)
    executed = cache.executed
    out = race(3)
    # the incumbent's attempts come from the cache: only the new candidate's are new
    assert (out.rollouts, out.reused) == (N_DEV * K, N_DEV * K)
    assert cache.executed == executed + N_DEV * K
    assert len(calls(bench, 0)) == N_DEV * K
    again = race(3)
    assert (again.status, again.rollouts, again.reused) == ("fail", 0, 2 * N_DEV * K)
    assert cache.executed == executed + N_DEV * K
    assert cache.used == 3 * N_DEV * K  # each attempt counts once toward the budget
    assert cache.cost == pytest.approx(0.5 * 3 * N_DEV * K)
