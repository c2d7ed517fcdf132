"""Racing one candidate against the incumbent (``racing.race``) over a real attempt cache.

The bench is deterministic: the incumbent (``level`` 0) answers the odd dev tasks and
misses the even ones; every other level wins some tasks and loses some, the same on
every seed, so each task's paired delta is exactly +1, 0 or -1 and the race's numbers
are known in advance. Tasks are raced in their own order (``dev-00``, ``dev-01``, ...),
five chunks of eight, on attempt block 0 (attempts 0 and 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import read_calls, search_tasks, write_search_bench

import forge.search.racing
from forge.bench.loader import Bench, BudgetSettings, load_bench
from forge.config.registry import Config
from forge.evaluation.session import Session
from forge.executors import ExecutorSettings
from forge.journal.store import AttemptStore
from forge.search.attempt_cache import AttemptCache, Fetch, drive
from forge.search.budget import Budget
from forge.search.racing import (
    EARLY_PASS_FACTOR,
    Beyond,
    RaceOutcome,
    no_worse,
    race,
)
from forge.stats.paired import paired_test
from forge.stats.sequential import hopeless

K = 2
N_DEV = 40
CHUNK = 8
ALPHA = 0.05

REGISTRY = """\
name: race
settings:
  level: {type: int, min: 0, max: 5, default: 0}
"""

#: (wins, losses) against the incumbent per level.
HARNESS = """
EVEN = {i for i in range(40) if i % 2 == 0}
ODD = {i for i in range(40) if i % 2 == 1}
RULES = {
    0: (set(), set()),
    1: (EVEN, set()),              # better on every even task: a strong effect
    2: (set(), ODD),               # worse on every odd task
    3: ({0, 2, 4}, {5, 11}),       # +2 on the first chunk, -1 on the second: weak
    4: ({18, 24, 30}, set()),      # sparse: invisible on the first two chunks
    5: (set(), set()),             # another config, no difference at all
}


def run(config, task, ctx):
    record(config, task, ctx)
    i = int(task.id.split("-")[1])
    wins, losses = RULES[config["level"]]
    right = (i in ODD or i in wins) and i not in losses
    return {"output": task.expected if right else "wrong", "cost": 0.5}
"""
WINS = {1: set(range(0, N_DEV, 2)), 3: {0, 2, 4}, 4: {18, 24, 30}}
LOSSES = {2: set(range(1, N_DEV, 2)), 3: {5, 11}}


def deltas(level: int, tasks: int) -> list[float]:
    """The paired per-task deltas of ``level`` against level 0 on the first ``tasks``."""
    return [float(i in WINS.get(level, set())) - float(i in LOSSES.get(level, set()))
            for i in range(tasks)]


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    path = write_search_bench(tmp_path / "bench", HARNESS, registry=REGISTRY, k=K,
                              tasks=search_tasks(N_DEV, 2, 2))
    return load_bench(path)


@pytest.fixture
def session(bench: Bench) -> Iterator[Session]:
    with Session(bench, ExecutorSettings(), seed=7, concurrency=4, timeout_s=10.0) as session:
        yield session


@pytest.fixture
def cache(bench: Bench, tmp_path: Path) -> AttemptCache:
    return AttemptCache(bench, AttemptStore(tmp_path / "attempts.jsonl"))


@pytest.fixture
def level(bench: Bench) -> Callable[[int], Config]:
    return lambda value: bench.registry.with_values(bench.defaults, {"level": value})


Race = Callable[..., RaceOutcome]


@pytest.fixture
def racer(bench: Bench, cache: AttemptCache, level: Callable[[int], Config],
        session: Session) -> Race:
    """``racer(candidate_level, **race_options)`` against the incumbent, level 0, with no
    rollout budget unless the options give one."""
    def run(candidate: int, *, left: int | None = None, slack: int = 0,
            beyond: Callable[[int], bool] | None = None, patient: bool = True
            ) -> RaceOutcome:
        return drive(session, race(cache, level(0), level(candidate), bench.tasks("dev"),
                                chunk=CHUNK, k=K, alpha=ALPHA, min_effect=0.0,
                                beyond=None if beyond is None else fetched(beyond),
                                patient=patient),
                     budget(cache, left, slack))
    return run


def budget(cache: AttemptCache, left: int | None, slack: int = 0) -> Budget:
    """A budget with ``left`` rollouts left now (None: no rollout budget); built unchecked,
    as a bench could not say "0 rollouts" (a spent budget)."""
    cap = None if left is None else cache.used + left
    return Budget(BudgetSettings.model_construct(rollouts=cap, cost=None, wall_time_s=None),
                  cache, slack=slack)


def fetched(check: Callable[[int], bool]) -> Beyond:
    """``check`` as a race's ``beyond``, which may fetch attempts (this one runs its own)."""
    def beyond(tasks: int) -> Fetch[bool]:
        yield from ()
        return check(tasks)
    return beyond


def calls(bench: Bench, level: int) -> list[tuple[str, int]]:
    return [(c["task"], c["attempt"]) for c in read_calls(bench.path)
            if c["config"]["level"] == level]


def test_a_strong_effect_passes_early_below_a_fifth_of_alpha(racer: Race, bench: Bench) -> None:
    out = racer(1)
    assert out.status == "pass"
    # After one chunk p is 0.017: below alpha but not below alpha / 5, so it goes on;
    # after the second, p < 0.01: out, with three chunks of both configs unspent.
    assert paired_test(deltas(1, CHUNK), alpha=ALPHA).p_value > ALPHA / EARLY_PASS_FACTOR
    assert out.tasks == 2 * CHUNK
    assert out.test == paired_test(deltas(1, 2 * CHUNK), alpha=ALPHA)
    assert out.test.p_value < ALPHA / EARLY_PASS_FACTOR
    assert (out.rollouts, out.reused) == (2 * 2 * CHUNK * K, 0)
    # Block 0 only, on the first tasks of the order.
    assert set(calls(bench, 1)) == {(f"dev-{i:02d}", a) for i in range(2 * CHUNK)
                                    for a in range(K)}


def test_a_sparse_effect_passes_on_the_last_chunk_below_alpha(racer: Race) -> None:
    out = racer(4)
    assert out.status == "pass" and out.tasks == N_DEV
    # Nothing to see on the first 16 tasks (identical deltas are no reason to stop),
    # and at the end p is between alpha / 5 and alpha: the last chunk's threshold.
    assert ALPHA / EARLY_PASS_FACTOR < out.test.p_value < ALPHA
    assert out.test == paired_test(deltas(4, N_DEV), alpha=ALPHA)


def test_a_clear_loss_stops_after_the_first_chunk_as_futile(racer: Race, bench: Bench,
                                                            cache: AttemptCache) -> None:
    out = racer(2)
    assert out.status == "futile"
    assert out.tasks == CHUNK and out.test.effect == pytest.approx(-0.5)
    assert out.rollouts == 2 * CHUNK * K and cache.executed == 2 * CHUNK * K
    assert {task for task, _ in calls(bench, 2)} == {f"dev-{i:02d}" for i in range(CHUNK)}


def test_no_difference_is_futile_only_once_half_the_tasks_are_in(racer: Race) -> None:
    # Identical deltas on the first chunks say nothing about an effect on a few tasks:
    # the futility stop waits for half of them (24 >= 20 after the third chunk).
    out = racer(5)
    assert out.status == "futile"
    assert out.tasks == 3 * CHUNK and out.test.sd == 0


def test_no_difference_on_enough_paired_attempts_is_futile_before_half_the_tasks(
        racer: Race, monkeypatch: pytest.MonkeyPatch) -> None:
    # The count that stands in for half the tasks, brought down to one chunk's 16 paired
    # attempts (3,000 in forge: a chunk of a bench of thousands of tasks holds that).
    monkeypatch.setattr(forge.search.racing, "IDENTICAL_PAIRS", CHUNK * K)
    out = racer(5)
    assert out.status == "futile"
    assert out.tasks == CHUNK and out.test.sd == 0
    # A sparse effect is still not dropped on fewer: below the count it races on.
    monkeypatch.setattr(forge.search.racing, "IDENTICAL_PAIRS", 2 * CHUNK * K + 1)
    assert racer(4).status == "pass"


def test_a_weak_gain_stops_once_it_cannot_reach_alpha(racer: Race) -> None:
    out = racer(3)
    assert out.status == "weak"
    # +1 over the first two chunks and nothing after: after four chunks even one
    # standard error more than the estimate would not pass with every task in.
    assert out.tasks == 4 * CHUNK < N_DEV
    assert out.test.effect == pytest.approx(1 / 32)
    assert hopeless(out.test, out.tasks / N_DEV, 0.0, ALPHA)
    assert not hopeless(paired_test(deltas(3, 3 * CHUNK), alpha=ALPHA), 0.6, 0.0, ALPHA)


def test_a_hasty_race_pauses_from_half_the_tasks_where_only_optimism_would_go_on(
        racer: Race) -> None:
    # The sparse effect at 24 of 40 tasks: one win in 24. A trend one standard error
    # better could still pass with every task in; the estimate as it stands could not.
    out = racer(4, patient=False)
    assert out.status == "paused" and out.tasks == 3 * CHUNK
    assert out.test == paired_test(deltas(4, 3 * CHUNK), alpha=ALPHA)
    assert hopeless(out.test, 0.6, 0.0, ALPHA, optimism=0.0)
    assert not hopeless(out.test, 0.6, 0.0, ALPHA)
    assert out.rollouts == 2 * 3 * CHUNK * K


def test_a_paused_race_run_patiently_goes_on_from_where_it_stopped(
        racer: Race, cache: AttemptCache) -> None:
    racer(4, patient=False)
    before = cache.executed
    out = racer(4)
    # The patient race decides as a race always has (it passes on the last chunk), and
    # pays only for the tasks the hasty one did not reach.
    assert out.status == "pass" and out.tasks == N_DEV
    assert (out.rollouts, out.reused) == (2 * (N_DEV - 3 * CHUNK) * K, 2 * 3 * CHUNK * K)
    assert cache.executed == before + out.rollouts


def test_a_hasty_race_decides_before_half_the_tasks_as_a_patient_one(racer: Race) -> None:
    # Before half the tasks the rule is the same: a strong effect passes at 16 tasks,
    # a clear loss is futile at 8; the weak gain, weak at 32 in a patient race, pauses
    # at the first look from half on.
    hasty, patient = racer(1, patient=False), racer(1)
    assert (hasty.status, hasty.tasks) == ("pass", 2 * CHUNK)
    assert (hasty.status, hasty.tasks, hasty.test) == (patient.status, patient.tasks,
                                                       patient.test)
    assert racer(2, patient=False).status == "futile"
    weak = racer(3, patient=False)
    assert weak.status == "paused" and weak.tasks == 3 * CHUNK


def test_a_tolerance_out_of_reach_stops_the_race(racer: Race) -> None:
    asked: list[int] = []

    def beyond(tasks: int) -> bool:
        asked.append(tasks)
        return True

    out = racer(1, beyond=beyond)
    assert out.status == "aux" and out.tasks == CHUNK and asked == [CHUNK]
    # A candidate that passes is asked once more, on everything it raced.
    late = racer(1, beyond=lambda tasks: tasks >= 2 * CHUNK)
    assert late.status == "aux" and late.tasks == 2 * CHUNK
    fine = racer(1, beyond=lambda tasks: False)
    assert fine.status == "pass"


def test_what_the_last_tolerance_check_runs_is_counted_in_the_race(
        racer: Race, cache: AttemptCache, bench: Bench, level: Callable[[int], Config],
        session: Session) -> None:
    # A passing candidate's tolerance is checked once more on every task it raced; the
    # check runs the start config (here level 5) where it has not run yet.
    def beyond(tasks: int) -> bool:
        drive(session, cache.fetch(level(5), "dev", "dev", list(bench.tasks("dev"))[:tasks],
                                range(K)))
        return False

    before = cache.used
    out = racer(1, beyond=beyond)
    assert out.status == "pass" and out.tasks == 2 * CHUNK
    # Both configs and the start, on the two chunks raced: every rollout is the race's.
    assert out.rollouts == cache.used - before == 3 * 2 * CHUNK * K


def test_a_race_stops_before_a_chunk_the_budget_does_not_allow(racer: Race,
                                                               cache: AttemptCache) -> None:
    nothing = racer(5, left=0)
    assert (nothing.status, nothing.tasks, nothing.rollouts) == ("budget", 0, 0)
    too_big = racer(5, left=2 * CHUNK * K - 1, slack=0)
    assert (too_big.status, too_big.tasks, too_big.rollouts) == ("budget", 0, 0)
    assert cache.used == 0
    # A chunk starts while budget is left and may overshoot it by at most the slack.
    budget = 40
    out = racer(5, left=budget - cache.used, slack=2 * CHUNK * K)
    assert out.status == "budget" and out.tasks == 2 * CHUNK
    assert budget <= cache.used == out.rollouts <= budget + 2 * CHUNK * K


def test_the_incumbent_runs_once_and_attempts_asked_for_again_cost_nothing(
        racer: Race, bench: Bench, cache: AttemptCache) -> None:
    racer(4)
    executed = cache.executed
    out = racer(3)
    # The incumbent's attempts come from the cache: only the new candidate's are new.
    assert (out.rollouts, out.reused) == (out.tasks * K, out.tasks * K)
    assert cache.executed == executed + out.tasks * K
    assert len(calls(bench, 0)) == N_DEV * K
    # A race over attempts already asked for needs no budget and counts nothing again.
    again = racer(3, left=0)
    assert (again.status, again.rollouts, again.reused) == ("weak", 0, 2 * out.tasks * K)
    assert cache.used == (N_DEV + N_DEV + out.tasks) * K
    assert cache.cost == pytest.approx(0.5 * cache.used)


# ------------------------------------------------------------------ no_worse (expansions)


def test_a_farther_value_no_worse_on_any_attempt_passes_with_its_own_test(
        racer: Race, bench: Bench, cache: AttemptCache, level: Callable[[int], Config],
        session: Session) -> None:
    # Level 1 wins every even task; level 5 changes nothing, so against level 5 read as
    # the nearer value, level 1 is no worse anywhere (and better on the even tasks).
    nearer = racer(5)
    assert nearer.status == "futile" and nearer.tasks == 3 * CHUNK  # half of dev is in
    out = drive(session, no_worse(cache, level(0), level(5), level(1), bench.tasks("dev"), nearer,
                   chunk=CHUNK, k=K, alpha=ALPHA, min_effect=0.0))
    assert out.status == "pass" and out.tasks == nearer.tasks
    assert out.test.effect == pytest.approx(
        paired_test(deltas(1, nearer.tasks), alpha=ALPHA).effect)
    assert out.rollouts == nearer.tasks * K  # the incumbent's attempts were there


def test_a_farther_value_below_on_one_attempt_stops_at_the_first_task_that_shows_it(
        racer: Race, bench: Bench, cache: AttemptCache, level: Callable[[int], Config],
        session: Session) -> None:
    nearer = racer(1)  # passes early: better on every even task
    assert nearer.status == "pass"
    # Level 3 scores as level 1 on task 0, its first, and below it on tasks 5 and 6 (it
    # loses 5, and level 1 wins 6): the rest of the first chunk shows it.
    out = drive(session, no_worse(cache, level(0), level(1), level(3), bench.tasks("dev"), nearer,
                   chunk=CHUNK, k=K, alpha=ALPHA, min_effect=0.0))
    assert out.status == "worse" and out.tasks == CHUNK
    assert out.rollouts == CHUNK * K
    # Level 2 is below level 1 at once, on its first task (0: level 1 wins it).
    first = drive(session, no_worse(cache, level(0), level(1), level(2), bench.tasks("dev"), nearer,
                     chunk=CHUNK, k=K, alpha=ALPHA, min_effect=0.0))
    assert first.status == "worse" and first.tasks == 1 and first.rollouts == K


def test_a_farther_value_stops_before_a_chunk_the_budget_does_not_allow(
        racer: Race, bench: Bench, cache: AttemptCache, level: Callable[[int], Config],
        session: Session) -> None:
    nearer = racer(5)
    out = drive(session, no_worse(cache, level(0), level(5), level(4), bench.tasks("dev"), nearer,
                   chunk=CHUNK, k=K, alpha=ALPHA, min_effect=0.0), budget(cache, 0))
    assert out.status == "budget" and out.tasks == 0 and out.rollouts == 0


def test_a_farther_value_stops_once_its_screening_data_break_a_tolerance(
        racer: Race, bench: Bench, cache: AttemptCache, level: Callable[[int], Config],
        session: Session) -> None:
    nearer = racer(5)
    asked: list[int] = []

    def beyond(tasks: int) -> bool:
        asked.append(tasks)
        return tasks >= CHUNK

    out = drive(session, no_worse(cache, level(0), level(5), level(1), bench.tasks("dev"), nearer,
                   chunk=CHUNK, k=K, alpha=ALPHA, min_effect=0.0,
                   beyond=fetched(beyond)))
    # Asked after its first task and after the rest of the first chunk, where it stops.
    assert asked == [1, CHUNK]
    assert out.status == "aux" and out.tasks == CHUNK
