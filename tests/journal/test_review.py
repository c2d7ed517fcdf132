"""Reading runs back (forge.journal.review): real finished runs, an interrupted one, damaged ones.

The runs are made once per module by real searches: ``boost`` on a purpose-built
bench (a real gain, promoted, with an auxiliary cost metric) and ``arith`` on the
example bench (screening refusals, an aux pre-screen refusal, a confirmation that
fails its dev gate). ``cut`` is ``boost`` killed after a few records, mid-write.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import ARITH, write_search_bench

from forge.bench.loader import BudgetSettings
from forge.errors import JournalError
from forge.journal import RunInfo, RunOptions, review, write_run
from forge.journal.records import PromotedMove
from forge.journal.review import (
    STEP_KEYS,
    aux_changes,
    dev_delta,
    failing_gates,
    json_safe,
    list_runs,
    load_run_records,
    resolve_run,
    step_records,
    val_delta,
)
from forge.search.launch import launch_search

#: boost lifts success from 0.5 to 0.8 and costs 5% more, within a 10% tolerance.
BOOST = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong",
            "cost": 1.05 if config["boost"] else 1.0}
"""
COST = {"cost": {"direction": "lower", "max_increase": 0.10, "relative": True}}
GATE_NAME = re.compile(r"^(dev|val|legal|unscored|aux:.+|floor:.+)$")
CUT_AFTER = 3  # records kept in the interrupted copy (start + two candidates)


def make_runs(root: Path) -> Path:
    """Two finished runs and an interrupted copy under ``root/journals``; returns it."""
    journals = root / "journals"
    bench = write_search_bench(root / "bench", BOOST, metrics=COST)
    launch_search(bench, journals=journals, run_id="boost", seed=7, proposer="sweep")
    launch_search(ARITH, journals=journals, run_id="arith", max_steps=2)
    cut = journals / "cut"
    shutil.copytree(journals / "boost", cut)
    lines = (cut / "journal.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    # A kill mid-write leaves a torn last line; readers skip it.
    (cut / "journal.jsonl").write_text("".join(lines[:CUT_AFTER]) + '{"kind": "candi',
                                       encoding="utf-8")
    return journals


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_runs(tmp_path_factory.mktemp("review"))


#: What a record of each kind must hold besides what a fake run's test is about.
FAKE_FIELDS: dict[str, dict[str, Any]] = {
    "start": {"config": {"x": 1}, "fingerprint": "f" * 64, "dev_mean": None,
              "val_mean": None, "rollouts_total": 0},
    "candidate": {"incumbent": "f" * 64, "proposer": "p", "reason": "r"},
    "stop": {"reason": "max_steps", "text": "reached max_steps", "step": 0,
             "rollouts_total": 0, "cost_total": 0.0},
}

FAKE_OPTIONS = RunOptions(max_steps=3, patience=2, budget=BudgetSettings(), k=2,
                          candidates_per_step=4)


def write_fake_run(folder: Path, records: list[dict[str, Any]], *,
                   created_at: datetime | None = None) -> Path:
    """A run folder written by hand, for records a real search rarely makes; each record
    names what its test is about, and gets the rest of what its kind must hold."""
    write_run(folder, RunInfo(run_id=folder.name, bench="fake", bench_path="fake/bench.yaml",
                              bench_digest="d", registry_digest="r", seed=1,
                              start_config={"x": 1}, start_fingerprint="f" * 64,
                              options=FAKE_OPTIONS,
                              created_at=created_at or datetime(2020, 1, 1, tzinfo=UTC)))
    if records:
        (folder / "journal.jsonl").write_text(
            "".join(json.dumps({**FAKE_FIELDS.get(r["kind"], {}), **r}) + "\n"
                    for r in records), encoding="utf-8")
    return folder


# -- one run ------------------------------------------------------------------------------


def test_a_finished_run_is_read_into_its_record_kinds(journals: Path) -> None:
    run = load_run_records(journals / "boost")
    assert run.run_id == "boost" and run.info.bench == "s"
    assert run.finished
    assert run.start is not None and run.stop is not None and run.test is not None
    assert run.end is not None
    assert run.candidates and all(r.kind == "candidate" for r in run.candidates)
    assert run.steps == run.end.steps == run.stop.step
    assert run.stop_reason == run.end.stop_reason
    assert run.promotions == run.end.promotions == [
        PromotedMove(step=1, target="boost", before=False, after=True)]
    assert run.rollouts_used == run.end.rollouts_used
    assert run.saved_by_racing == sum(r.saved_by_racing or 0 for r in run.candidates)


def test_an_interrupted_run_shows_the_steps_so_far(journals: Path) -> None:
    run = load_run_records(journals / "cut")
    full = load_run_records(journals / "boost")
    assert not run.finished
    assert (run.stop, run.test, run.end, run.stop_reason) == (None, None, None, None)
    assert run.candidates == full.candidates[:CUT_AFTER - 1]  # the torn line is skipped
    assert run.steps == max(r.step for r in run.candidates)
    assert run.rollouts_used == run.candidates[-1].rollouts_total


def test_a_run_without_a_journal_yet_has_no_records(tmp_path: Path) -> None:
    # forge search writes run.json first, and its first record after the start eval.
    run = load_run_records(write_fake_run(tmp_path / "new", []))
    assert not run.finished and run.candidates == [] and run.start is None
    assert (run.steps, run.rollouts_used, run.promotions) == (0, None, [])


def test_a_damaged_run_json_or_journal_raises_journal_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "run.json").write_text('{"format_version": 1, "run_id": ', encoding="utf-8")
    with pytest.raises(JournalError, match=r"run\.json"):
        load_run_records(bad)
    folder = write_fake_run(tmp_path / "torn", [{"kind": "start"}, {"kind": "stop"}])
    with (folder / "journal.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("garbage\n" + json.dumps({"kind": "end"}) + "\n")  # damage mid-file
    with pytest.raises(JournalError, match="damaged record"):
        load_run_records(folder)
    odd = write_fake_run(tmp_path / "odd", [])
    (odd / "journal.jsonl").mkdir()  # an OSError, not a traceback
    with pytest.raises(JournalError, match="cannot read the journal"):
        load_run_records(odd)


def test_resolve_run_takes_an_id_or_a_folder_path(journals: Path, tmp_path: Path) -> None:
    assert resolve_run("boost", journals) == journals / "boost"
    assert resolve_run(str(journals / "arith"), tmp_path) == journals / "arith"
    with pytest.raises(JournalError, match="no such run") as info:
        resolve_run("nope", journals)
    assert info.value.file == str(journals / "nope" / "run.json")  # the id's place
    with pytest.raises(JournalError) as info:
        resolve_run("some/where", journals)
    assert info.value.file == str(Path("some/where/run.json"))  # a path: that place
    (journals.parent / "not-a-run").mkdir(exist_ok=True)
    with pytest.raises(JournalError):
        resolve_run(str(journals.parent / "not-a-run"), journals)


# -- the --json contract ------------------------------------------------------------------


def test_step_records_have_the_design_keys_first(journals: Path) -> None:
    for name in ("boost", "arith", "cut"):
        run = load_run_records(journals / name)
        steps = step_records(run)
        assert len(steps) == len(run.candidates)
        for step, record in zip(steps, run.candidates, strict=True):
            assert tuple(step)[:len(STEP_KEYS)] == STEP_KEYS
            assert "kind" not in step
            assert set(step["move"]) == set(step["inverse"]) == {"target", "before", "after"}
            assert step["move"] == record.move.model_dump()
            assert step["inverse"] == record.inverse.model_dump()
            assert step["verdict"] in {"promoted", "rejected", "skipped"}
            assert isinstance(step["rollouts"], int) and step["rollouts"] >= 0
            assert isinstance(step["step"], int)
            assert isinstance(step["proposer"], str) and isinstance(step["reason"], str)
            for gate in step["gates"]:
                assert set(gate) == {"name", "passed", "reason"}
                assert GATE_NAME.match(gate["name"]), gate
            # Extra keys carry the rest of the record (deltas, totals) unchanged.
            assert step.get("dev") == record.journal_json().get("dev")
            assert "format_version" not in step
        json.dumps(steps, allow_nan=False)  # strict JSON


def test_the_promoted_step_names_every_gate_it_passed(journals: Path) -> None:
    steps = step_records(load_run_records(journals / "boost"))
    [promoted] = [s for s in steps if s["verdict"] == "promoted"]
    assert promoted["move"] == {"target": "boost", "before": False, "after": True}
    assert promoted["inverse"] == {"target": "boost", "before": True, "after": False}
    # In the order they were decided: dev, val, then the tolerance on the val tasks.
    assert [g["name"] for g in promoted["gates"]] == ["dev", "val", "aux:cost", "unscored"]
    assert all(g["passed"] for g in promoted["gates"])
    assert promoted["rollouts"] > 0


def test_steps_that_spent_nothing_have_zero_rollouts_and_may_have_no_gates(
        tmp_path: Path) -> None:
    base = {"kind": "candidate", "step": 1, "proposer": "sweep", "reason": "r",
            "move": {"target": "x", "before": 1, "after": 2},
            "inverse": {"target": "x", "before": 2, "after": 1}}
    folder = write_fake_run(tmp_path / "fake", [
        {"kind": "start", "rollouts_total": 10},
        {**base, "verdict": "skipped", "gates": [], "why": "already tried"},
        {**base, "verdict": "rejected", "gates": [
            {"name": "legal", "passed": False, "reason": "not a neighbour"}]},
        {**base, "verdict": "skipped"},  # no gates key at all: read as []
    ])
    steps = step_records(load_run_records(folder))
    assert [s["rollouts"] for s in steps] == [0, 0, 0]
    assert [s["gates"] for s in steps] == [
        [], [{"name": "legal", "passed": False, "reason": "not a neighbour"}], []]
    assert steps[0]["why"] == "already tried"


def test_json_safe_turns_non_finite_numbers_into_null() -> None:
    value = {"a": [math.nan, 1.0, {"b": math.inf}], "c": (-math.inf, "x")}
    assert json_safe(value) == {"a": [None, 1.0, {"b": None}], "c": [None, "x"]}


# -- what a person reads in a step --------------------------------------------------------


def test_dev_delta_is_the_confirmation_when_there_is_one_else_the_screen(
        journals: Path) -> None:
    run = load_run_records(journals / "boost")
    [promoted] = [r for r in run.candidates if r.verdict == "promoted"]
    assert promoted.dev is not None and promoted.dev.confirm is not None
    assert promoted.val is not None
    d = dev_delta(promoted)
    assert d is not None and d.stage == "confirm"
    assert d.effect == promoted.dev.confirm.effect > 0.15
    assert d.ci_low == promoted.dev.confirm.ci_low
    v = val_delta(promoted)
    assert v is not None and v.stage == "val" and v.effect == promoted.val.effect
    screened = [r for r in run.candidates if r.dev is not None and r.dev.confirm is None]
    assert screened
    for record in screened:
        assert record.dev is not None
        d = dev_delta(record)
        assert d is not None and d.stage == "screen"
        assert d.effect == record.dev.screen.effect
        assert val_delta(record) is None
    unevaluated = promoted.model_copy(update={"dev": None, "val": None})
    assert dev_delta(unevaluated) is None and val_delta(unevaluated) is None


def test_aux_changes_and_failing_gates(journals: Path) -> None:
    boost = load_run_records(journals / "boost")
    [promoted] = [r for r in boost.candidates if r.verdict == "promoted"]
    [cost] = aux_changes(promoted)
    assert cost.metric == "cost" and cost.direction == "lower"
    assert cost.relative == pytest.approx(0.05)
    assert failing_gates(promoted) == []
    arith = load_run_records(journals / "arith")
    refused = [r for r in arith.candidates if r.verdict == "rejected"]
    assert refused and all(failing_gates(r) for r in refused)
    # Refused on screening data before any confirmation: no aux block to show.
    prescreened = [r for r in refused if r.dev is not None and r.dev.screen is not None
                   and r.dev.screen.status == "aux"]
    assert prescreened
    assert all(aux_changes(r) == [] for r in prescreened)
    assert all(failing_gates(r)[0].name.startswith("aux:") for r in prescreened)


# -- every run ----------------------------------------------------------------------------


def test_list_runs_summarizes_every_run_folder_oldest_first(journals: Path) -> None:
    runs = {r.run_id: r for r in list_runs(journals)}
    assert set(runs) == {"boost", "arith", "cut"}
    # cut is a copy of boost: the same start time, so the id breaks the tie.
    assert [r.run_id for r in list_runs(journals)] == ["boost", "cut", "arith"]
    boost = runs["boost"]
    assert boost.status == "finished" and boost.bench == "s" and boost.problem is None
    assert (boost.promotions, boost.stop_reason) == (1, load_run_records(
        journals / "boost").stop_reason)
    assert boost.test is not None and boost.test.delta is not None and boost.test.delta > 0.15
    assert set(boost.as_json()["test"]) == {"start", "final", "delta", "ci_low", "ci_high"}
    cut = runs["cut"]
    assert cut.status == "running/interrupted"
    assert cut.stop_reason is None and cut.test is None
    assert cut.candidates == CUT_AFTER - 1 and cut.steps == 1
    json.dumps([r.as_json() for r in runs.values()], allow_nan=False)


def test_list_runs_shows_damaged_runs_instead_of_failing(tmp_path: Path) -> None:
    root = tmp_path / "journals"
    write_fake_run(root / "good", [{"kind": "start"}],
                   created_at=datetime(2021, 1, 1, tzinfo=UTC))
    bad_json = root / "bad-json"
    bad_json.mkdir()
    (bad_json / "run.json").write_text("{not json", encoding="utf-8")
    os.utime(bad_json / "run.json", (0, 0))  # placed by mtime: 1970, so first
    torn = write_fake_run(root / "bad-journal", [{"kind": "start"}],
                          created_at=datetime(2022, 1, 1, tzinfo=UTC))
    with (torn / "journal.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("garbage\n{}\n")
    (root / "stray").mkdir()  # not a run folder: no run.json, not listed
    (root / "notes.txt").write_text("x", encoding="utf-8")
    runs = list_runs(root)
    assert [r.run_id for r in runs] == ["bad-json", "good", "bad-journal"]
    assert [r.status for r in runs] == ["damaged", "running/interrupted", "damaged"]
    assert runs[0].problem is not None and "malformed JSON" in runs[0].problem
    assert runs[0].bench is None and runs[0].created_at is None
    # A damaged journal still shows what run.json says.
    assert runs[2].bench == "fake" and runs[2].problem is not None
    assert "damaged record" in runs[2].problem
    assert list_runs(tmp_path / "absent") == []


def test_no_damaged_run_folder_hides_the_others(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "journals"
    write_fake_run(root / "good", [{"kind": "start"}],
                   created_at=datetime(2021, 1, 1, tzinfo=UTC))
    (root / "latin1").mkdir(parents=True)
    (root / "latin1" / "run.json").write_bytes(b'{"name": "caf\xe9"}')
    (root / "folder-json" / "run.json").mkdir(parents=True)
    lost = write_fake_run(root / "lost", [{"kind": "start"}])
    (lost / "run.json").unlink()
    bad_bytes = write_fake_run(root / "bad-bytes", [{"kind": "start"}],
                               created_at=datetime(2022, 1, 1, tzinfo=UTC))
    with (bad_bytes / "journal.jsonl").open("ab") as fh:
        fh.write(b'{"kind": "\xff"}\n{}\n')
    write_fake_run(root / "unreadable", [{"kind": "start"}],
                   created_at=datetime(2023, 1, 1, tzinfo=UTC))
    real = review.load_run_records

    def refused(folder: Path) -> Any:  # as a folder of another user (tests run as root)
        if folder.name == "unreadable":
            raise PermissionError(13, "Permission denied", str(folder / "journal.jsonl"))
        return real(folder)

    monkeypatch.setattr(review, "load_run_records", refused)
    runs = {r.run_id: r for r in list_runs(root)}
    assert set(runs) == {"good", "latin1", "folder-json", "lost", "bad-bytes", "unreadable"}
    assert runs["good"].status == "running/interrupted" and runs["good"].problem is None
    problems = {name: run.problem for name, run in runs.items() if name != "good"}
    assert all(run.status == "damaged" for name, run in runs.items() if name != "good")
    for name, fragment in [("latin1", "not UTF-8"), ("folder-json", "run.json"),
                           ("lost", "run.json not found"), ("bad-bytes", "not UTF-8"),
                           ("unreadable", "cannot read: Permission denied")]:
        problem = problems[name]
        assert problem is not None and fragment in problem and "\n" not in problem, problem
