"""The checks :func:`forge.promotion.promote.promote` makes of a finished run before it looks at
the target: the test comparison shows no loss, no auxiliary metric is beyond its
tolerance (unless accepted), the bench and registry are those the run used, and the
journal's promoted moves replay from the start config to the final one.

Every refusal is a :class:`~forge.errors.PromoteError` naming the run's journal or
``run.json``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from forge.bench.loader import Bench
from forge.config.moves import Move, apply_move
from forge.config.registry import Config, Registry
from forge.config.yaml_file import first_difference
from forge.errors import MoveError, PromoteError
from forge.journal import RunInfo
from forge.journal.records import (
    AuxCheck,
    CandidateRecord,
    EndRecord,
    SplitDelta,
    TestRecord,
)
from forge.journal.review import RunRecords


def beyond_tolerance(test: TestRecord | None) -> list[AuxCheck]:
    """The test record's start-to-final checks whose estimate is past the allowance."""
    if test is None:
        return []
    return [c for c in test.aux if c.details.get("status") == "beyond" or (
        "status" not in c.details and not c.passed)]


def unscored_check(test: TestRecord | None) -> AuxCheck | None:
    """The test record's failure-share check (None: journaled before there was one)."""
    return None if test is None else next((c for c in test.aux if c.name == "unscored"), None)


def checked_test_delta(what: str, end: EndRecord, journal: Path) -> SplitDelta:
    """The run's start-vs-final comparison on the test split; refuses none, or a loss."""
    test = end.test
    delta = test.delta
    if delta is None or math.isnan(delta):
        raise PromoteError(f"{what}: refused: the run has no test comparison (the test split "
                           "was not evaluated), so the gain was never checked out of sample",
                           file=journal)
    if delta < 0:
        raise PromoteError(f"{what}: refused: the test comparison shows a loss: "
                           f"{delta_text(test)}", file=journal)
    return test


def check_unchanged(what: str, info: RunInfo, bench: Bench, run_json: Path) -> None:
    """The evidence is about the bench and registry the run used; refuse if they changed."""
    # The bench digest covers the registry too: check the registry first, to name it.
    if bench.registry.digest != info.registry_digest:
        raise PromoteError(f"{what}: refused: the registry of {bench.path} changed since the "
                           f"run (digest {bench.registry.digest[:12]}, the run used "
                           f"{info.registry_digest[:12]})", file=run_json,
                           field="registry_digest")
    if bench.digest != info.bench_digest:
        raise PromoteError(f"{what}: refused: the bench {bench.path} (its file, tasks, harness "
                           f"or scorer code) changed since the run (digest {bench.digest[:12]}, "
                           f"the run used {info.bench_digest[:12]})", file=run_json,
                           field="bench_digest")


def replayed_chain(what: str, run: RunRecords, end: EndRecord, registry: Registry,
                   journal: Path) -> tuple[list[Move], Config, Config]:
    """The promoted moves' inverses, and the start and final configs, cross-checked.

    The end record's list, the promoted step records and their recorded inverses must
    agree, and replaying the moves on the start config must give the final config:
    a journal that does not add up is not promoted.
    """
    def broken(why: str) -> PromoteError:
        return PromoteError(f"{what}: refused: the run's journal does not add up: {why}",
                            file=journal)

    info = run.info
    steps = _promoted_steps(run, end, broken)
    start = registry.validate_config(info.start_config, file=Path(info.bench_path))
    if start.fingerprint != info.start_fingerprint:
        raise broken("the start config's fingerprint differs from run.json")
    config = start
    for r in steps:
        try:
            config = apply_move(registry, config, r.move)
        except MoveError as exc:
            raise broken(str(exc)) from None
    if (first_difference(config.values, end.final_config) is not None
            or config.fingerprint != end.final_fingerprint):
        raise broken("replaying its moves on the start config does not give its final config")
    return [r.inverse for r in steps], start, config


def _promoted_steps(run: RunRecords, end: EndRecord,
                    broken: Callable[[str], PromoteError]) -> list[CandidateRecord]:
    """The journal's promoted step records, refused unless they agree with the end
    record and each records its move's inverse."""
    if end.run_id != run.info.run_id:
        raise broken(f"its end record is for run {end.run_id!r}")
    steps = [r for r in run.candidates if r.verdict == "promoted"]
    if ([r.move for r in steps] != [m.as_move() for m in end.promotions]
            or [r.step for r in steps] != [m.step for m in end.promotions]):
        raise broken("the promoted steps differ from the end record's promotions")
    for r in steps:
        if r.inverse != r.move.inverse():
            raise broken(f"the recorded inverse of {r.move} is {r.inverse}")
    return steps


def delta_text(test: SplitDelta) -> str:
    def num(x: float | None, sign: bool = False) -> str:
        return "—" if x is None else (f"{x:+.3f}" if sign else f"{x:.3f}")

    ci = ("" if test.ci_low is None or test.ci_high is None
          else f" (95% CI {num(test.ci_low, True)} .. {num(test.ci_high, True)})")
    return f"{num(test.start)} -> {num(test.final)}, delta {num(test.delta, True)}{ci}"
