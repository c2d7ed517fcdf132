"""The confirmation as a look scheduler (forge.search.confirm.Confirmation.run): the
order it asks for chunks in, the attempts it never reads, and where the budget cuts it.

The bench is deterministic: the incumbent (``level`` 0) answers the odd tasks; level 1
answers every task, so its gain is +0.5 a task on average whatever the seed. The
confirmation is driven by hand here, each :class:`RolloutRequest` recorded and answered
on the session, as the search's driver does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import answered, open_session, search_tasks, write_search_bench

from forge.bench.loader import Bench, BudgetSettings, load_bench
from forge.config.registry import Config
from forge.evaluation.session import Session
from forge.journal.store import AttemptStore
from forge.search.attempt_cache import AttemptCache, RolloutRequest
from forge.search.budget import Budget
from forge.search.confirm import Confirmation, ConfirmOutcome

K = 2
CHUNK = 8
SCREENED = 8

REGISTRY = """\
name: sched
settings:
  level: {type: int, min: 0, max: 1, default: 0}
"""

HARNESS = """
def run(config, task, ctx):
    record(config, task, ctx)
    i = int(task.id.split("-")[1])
    right = config["level"] == 1 or i % 2 == 1
    return {"output": task.expected if right else "wrong"}
"""


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return load_bench(write_search_bench(tmp_path / "bench", HARNESS, registry=REGISTRY, k=K,
                                         tasks=search_tasks(40, 10, 2)))


@pytest.fixture
def session(bench: Bench) -> Iterator[Session]:
    with open_session(bench) as s:
        yield s


def level(bench: Bench, value: int) -> Config:
    return bench.registry.with_values(bench.defaults, {"level": value})


def confirmation(bench: Bench, rollouts: AttemptCache, fresh: range | None = None
                 ) -> Confirmation:
    incumbent = level(bench, 0)
    return Confirmation(rollouts, bench, incumbent=incumbent, start=incumbent,
                        candidate=level(bench, 1), level=0.03, dev_order=bench.tasks("dev"),
                        screen_tasks=SCREENED, look_tasks=CHUNK, val_order=bench.tasks("val"),
                        val_look_tasks=2, k=K, fresh=fresh)


def drive(conf: Confirmation, session: Session, budget: Budget | None = None
          ) -> tuple[ConfirmOutcome, list[RolloutRequest]]:
    """Run the confirmation to its end, answering each request on ``session`` and each
    permit by ``budget`` (without one, every batch may run)."""
    return answered(conf.run(), session, budget)


def cand_requests(bench: Bench, requests: list[RolloutRequest]) -> list[RolloutRequest]:
    fp = level(bench, 1).fingerprint
    return [r for r in requests if r.config.fingerprint == fp]


def test_val_chunks_keep_pace_with_dev_and_screening_attempts_are_never_read(
        bench: Bench, session: Session) -> None:
    rollouts = AttemptCache(bench, AttemptStore())
    outcome, requests = drive(confirmation(bench, rollouts), session)
    assert outcome.status == "promoted" and outcome.pooled
    assert [g.name for g in outcome.gates] == ["dev", "val", "unscored"]
    mine = cand_requests(bench, requests)
    # Five dev chunks (four of the unscreened tasks, the screened ones last) and five
    # val chunks: val's come in step with dev's while the improvement gate is open.
    assert [r.split for r in mine[:4]] == ["dev", "val", "dev", "val"]
    screened = {t.id for t in bench.tasks("dev")[:SCREENED]}
    for r in requests:
        for key in r.keys:
            # The screened tasks' block 0 chose the candidate: never read again.
            assert key.attempt >= K if key.task.id in screened else key.attempt < K
    # The incumbent runs each chunk beside the candidate, on the same keys.
    assert len(requests) == 2 * len(mine)
    assert outcome.looks == len(mine) and outcome.rollouts == rollouts.used
    assert outcome.improvement is not None and outcome.improvement.looks <= outcome.looks


def test_a_precision_round_reads_every_dev_task_on_fresh_attempts(
        bench: Bench, session: Session) -> None:
    rollouts = AttemptCache(bench, AttemptStore())
    conf = confirmation(bench, rollouts, fresh=range(2 * K, 4 * K))
    outcome, requests = drive(conf, session)
    assert outcome.status == "promoted"
    assert {key.attempt for r in requests for key in r.keys} <= set(range(2 * K, 4 * K))
    first = cand_requests(bench, requests)[0]
    assert list(dict.fromkeys(k.task.id for k in first.keys)) == [
        t.id for t in bench.tasks("dev")[:CHUNK]]


def test_a_look_the_budget_does_not_allow_cuts_the_confirmation_short(
        bench: Bench, session: Session) -> None:
    rollouts = AttemptCache(bench, AttemptStore())
    # Room for the first chunk of both configs, and no slack past it.
    budget = Budget(BudgetSettings(rollouts=2 * CHUNK * K), rollouts, slack=0)
    outcome, requests = drive(confirmation(bench, rollouts), session, budget)
    assert outcome.status == "budget"
    assert budget.spent and budget.stop_reason() == "budget_rollouts"
    assert [r.split for r in requests] == ["dev", "dev"]
    assert rollouts.used == outcome.rollouts == 2 * CHUNK * K
    # Cut at a look, not inside one: the one it ran is journaled as read.
    assert outcome.looks == 1
    assert outcome.improvement is not None and outcome.improvement.test.n == CHUNK


def test_a_slack_of_a_chunk_lets_the_next_look_run_past_what_is_left(
        bench: Bench, session: Session) -> None:
    rollouts = AttemptCache(bench, AttemptStore())
    budget = Budget(BudgetSettings(rollouts=2 * CHUNK * K + 1), rollouts, slack=2 * CHUNK * K)
    outcome, requests = drive(confirmation(bench, rollouts), session, budget)
    # One rollout left after the first chunk: the val chunk (8 rollouts) fits its slack.
    assert [r.split for r in requests[:4]] == ["dev", "dev", "val", "val"]
    assert outcome.looks >= 2
