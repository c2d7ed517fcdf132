"""The failure-share gate in a confirmation (forge.gates.UnscoredGate): a
candidate that gains on its answers but fails where it would be wrong is refused for
its failures; one that never fails passes without running the start; the start is run
on every chunk read once the candidate fails.

Deterministic bench: ``level`` 0 (the start) answers the odd tasks; 1 answers every
task; 2 answers the odd tasks and the even ones except those divisible by 4, where it
raises (it would be wrong there): +0.25 a task over the start on its answers, and a
quarter of its attempts failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import answered, open_session, search_tasks, write_search_bench

from forge.bench.loader import Bench, load_bench
from forge.config.registry import Config
from forge.evaluation.session import Session
from forge.gates import UnscoredGate
from forge.journal.store import AttemptStore
from forge.search.attempt_cache import AttemptCache, RolloutRequest
from forge.search.confirm import Confirmation, ConfirmOutcome
from forge.stats.unscored import FailurePairs

K = 2

REGISTRY = """\
name: failing
settings:
  level: {type: int, min: 0, max: 3, default: 0}
"""

HARNESS = """
def run(config, task, ctx):
    record(config, task, ctx)
    i = int(task.id.split("-")[1])
    if config["level"] >= 2 and i % 4 == 0:
        raise RuntimeError("no answer within the token limit")
    right = config["level"] >= 1 and (config["level"] == 1 or i % 4 == 2) or i % 2 == 1
    return {"output": task.expected if right else "wrong"}
"""


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return load_bench(write_search_bench(tmp_path / "bench", HARNESS, registry=REGISTRY, k=K,
                                         tasks=search_tasks(40, 16, 2)))


@pytest.fixture
def session(bench: Bench) -> Iterator[Session]:
    with open_session(bench) as s:
        yield s


def level(bench: Bench, value: int) -> Config:
    return bench.registry.with_values(bench.defaults, {"level": value})


def confirm(bench: Bench, session: Session, *, incumbent: int, start: int, candidate: int
            ) -> tuple[ConfirmOutcome, list[RolloutRequest]]:
    rollouts = AttemptCache(bench, AttemptStore())
    conf = Confirmation(rollouts, bench, incumbent=level(bench, incumbent),
                        start=level(bench, start), candidate=level(bench, candidate),
                        level=0.05, dev_order=bench.tasks("dev"), screen_tasks=8,
                        look_tasks=8, val_order=bench.tasks("val"), val_look_tasks=4, k=K)
    return answered(conf.run(), session)  # type: ignore[no-any-return]


def test_a_candidate_that_fails_where_it_would_be_wrong_is_refused_for_it(
        bench: Bench, session: Session) -> None:
    outcome, _ = confirm(bench, session, incumbent=0, start=0, candidate=2)
    assert outcome.status == "rejected"
    gates = {g.name: g for g in outcome.gates}
    # Its answers are better (dev is not what refuses it), and its failures show at the
    # first looks, before dev has the tasks to decide.
    assert "dev" not in gates or gates["dev"].passed
    assert [g.name for g in outcome.gates if not g.passed] == ["unscored"]
    assert "fails more often" in gates["unscored"].reason
    assert gates["unscored"].details["worse"] > 0


def test_a_candidate_failing_more_than_the_incumbent_is_refused_where_the_start_failed_too(
        bench: Bench, session: Session) -> None:
    # The start (level 2) fails a quarter of its attempts; the incumbent (level 0) never
    # does; the candidate (level 3, as level 2) fails as often as the start, and beats
    # the incumbent on its answers. Against the start alone it would pass.
    outcome, _ = confirm(bench, session, incumbent=0, start=2, candidate=3)
    assert outcome.status == "rejected"
    [failed] = [g for g in outcome.gates if not g.passed]
    assert failed.name == "unscored" and "vs the incumbent" in failed.reason
    assert failed.details["vs"] == "incumbent"


def test_the_start_runs_every_chunk_read_once_the_candidate_fails(
        bench: Bench, session: Session) -> None:
    # The incumbent (level 1) is not the start (level 0): the failure share is compared
    # with the start, which must run the chunks the candidate failed on.
    outcome, requests = confirm(bench, session, incumbent=1, start=0, candidate=2)
    start = level(bench, 0).fingerprint
    cand_keys = {(r.split, key.task.id, key.attempt) for r in requests
                 if r.config.fingerprint == level(bench, 2).fingerprint for key in r.keys}
    start_keys = {(r.split, key.task.id, key.attempt) for r in requests
                  if r.config.fingerprint == start
                  for key in r.keys}
    assert cand_keys and cand_keys <= start_keys
    assert outcome.status == "rejected"


def test_a_candidate_that_never_fails_passes_without_the_starts_attempts(
        bench: Bench, session: Session) -> None:
    # The start (level 2) fails; the candidate (level 1) never does: it cannot fail more
    # often, so the start is never run (the bench has no tolerance that would need it).
    outcome, requests = confirm(bench, session, incumbent=0, start=2, candidate=1)
    assert outcome.status == "promoted"
    unscored = next(g for g in outcome.gates if g.name == "unscored")
    assert unscored.passed and "failed none" in unscored.reason
    assert not [r for r in requests if r.config.fingerprint == level(bench, 2).fingerprint]


def test_the_gate_stays_open_until_the_others_pass_and_refuses_nothing_compared() -> None:
    gate = UnscoredGate(0.05, 40, allowed=0.0)
    none = FailurePairs({}, 0, 0, 0, 0, 0)
    assert gate.test(none, attempts=20, failed=0, last=False) is None and gate.open
    gate = UnscoredGate(0.05, 40, allowed=0.0)
    verdict = gate.test(none, attempts=20, failed=3, last=True)
    assert verdict is not None and not verdict.passed and "nothing compared" in verdict.reason
