"""Journals of version 1 stay readable, and today's outputs keep their shape.

Three fixtures under ``tests/data``:

- ``journal_v1/verdicts/``: the run folder of a finished search on the ``verdicts`` bench
  (``tests/data/verdicts``), written by forge at commit 11dc8f9 (journal format 1, before
  the sequential search of issue 14), with every record kind (``start``,
  ``proposal_invalid``, ``candidate``, ``stop``, ``test`` with its ``aux`` list, ``end``)
  and every verdict (promoted; rejected by the dev, val and aux gates; skipped). See its
  ``make.py``. Today's forge must read it, show it exactly as it did
  (``journal_v1/verdicts.show.json``), list it, report it and promote it, and refuse to
  resume it: this forge's search would not reach its decisions.
- ``golden/``: what ``forge search --json``, ``forge journal show --json``,
  ``journal.jsonl`` and ``run.json`` hold for a fixed-seed search of a few seconds on the
  same bench, the values of volatile keys masked, recorded with the issue-14 search (see
  its ``make.py``). Running that search again must give the same shapes and values, type
  for type (``1`` is not ``1.0``, ``true`` is not ``1``).
- ``store_v1/golden/``: that golden search killed after its third record with 100 attempts
  in a plain ``attempts.jsonl`` (store format 1), written before the compressed store
  (see its ``make.py``). Today's forge must resume it to the golden decisions, reusing
  those attempts and appending to the plain file.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_user_error, forget_bench_harness, run_forge, run_forge_json

from forge.config.registry import load_config, load_registry
from forge.errors import JournalError
from forge.journal.records import (
    CandidateRecord,
    EndRecord,
    ProposalInvalidRecord,
    StartRecord,
    TestRecord,
)
from forge.journal.review import STEP_KEYS, load_run_records
from forge.search.launch import resume_search

DATA = Path(__file__).resolve().parents[1] / "data"
BENCH = DATA / "verdicts"
COMPAT = DATA / "journal_v1" / "verdicts"
GOLDEN = DATA / "golden"
STORE_V1 = DATA / "store_v1" / "golden"

#: Keys that differ between two runs of the same search: the clock, and where it ran.
VOLATILE = {"at", "elapsed_s"}

_forget = forget_bench_harness(BENCH)


def canonical(value: Any) -> str:
    """Type-exact comparison text: JSON with sorted keys (``1`` and ``1.0`` differ)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=1)


def without(record: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in keys}


def masked(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the value of each volatile key replaced (the key itself stays)."""
    return {k: "<volatile>" if k in VOLATILE else v for k, v in record.items()}


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def load_golden(name: str) -> Any:
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


@pytest.fixture
def journals(tmp_path: Path) -> Path:
    """A copy of the compatibility run, its bench path pointing at this checkout's bench
    (run.json names the folder the run was made in)."""
    root = tmp_path / "journals"
    folder = Path(shutil.copytree(COMPAT, root / "verdicts"))
    info = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    info["bench_path"] = str(BENCH / "bench.yaml")
    (folder / "run.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return root


# -- (a) a journal written before issue 13 ---------------------------------------------------

def test_the_old_journal_holds_every_kind_and_verdict() -> None:
    # The fixture itself: what the tests below rely on it to hold.
    records = read_lines(COMPAT / "journal.jsonl")
    assert not any("format_version" in r for r in records)
    assert [r["kind"] for r in records if r["kind"] != "candidate"] == [
        "start", "proposal_invalid", "stop", "test", "end"]
    candidates = [r for r in records if r["kind"] == "candidate"]
    assert {r["verdict"] for r in candidates} == {"promoted", "rejected", "skipped"}
    failed = {g["name"] for r in candidates for g in r["gates"] if not g["passed"]}
    assert failed == {"dev", "val", "aux:cost"}
    assert any(r.get("val") for r in candidates) and any(r.get("aux") for r in candidates)
    assert next(r for r in records if r["kind"] == "test")["aux"]


def test_the_reader_loads_an_old_journal_into_typed_records(journals: Path) -> None:
    run = load_run_records(journals / "verdicts")
    assert run.finished and isinstance(run.end, EndRecord) and isinstance(run.test, TestRecord)
    assert len(run.candidates) == 7 and all(isinstance(r, CandidateRecord)
                                            for r in run.candidates)
    assert [type(r) for r in run.invalid] == [ProposalInvalidRecord]
    assert run.info.options.proposer == "llm" and len(run.info.options.first_moves) == 3
    assert run.info.options.proposer_info is not None
    assert [(p.step, p.target) for p in run.promotions] == [(1, "boost")]


def test_journal_show_json_of_an_old_journal_is_what_it_was(
        journals: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown = run_forge_json(capsys, "journal", "show", "verdicts", "--journals", journals,
                           "--json")
    expected = json.loads((COMPAT.parent / "verdicts.show.json").read_text(encoding="utf-8"))
    # What it showed, and (added since, read from its attempt store) each step's unscored
    # attempts: none in this run, candidate's and incumbent's on the same seeds; None
    # where the store (a sample of the run's) holds none of the candidate's.
    assert canonical([without(s, {"unscored_attempts"}) for s in shown]) == canonical(expected)
    counted = [s["unscored_attempts"] for s in shown if s["unscored_attempts"] is not None]
    assert counted
    for found in counted:
        assert found["candidate"]["n_unscored"] == found["incumbent"]["n_unscored"] == 0
        assert found["candidate"]["n_attempts"] == found["incumbent"]["n_attempts"] > 0
    for step in shown:
        assert tuple(step)[:len(STEP_KEYS)] == STEP_KEYS


def test_journal_list_and_show_read_an_old_journal(
        journals: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [row] = run_forge_json(capsys, "journal", "list", "--journals", journals, "--json")
    end = read_lines(COMPAT / "journal.jsonl")[-1]
    assert (row["run_id"], row["status"], row["problem"]) == ("verdicts", "finished", None)
    assert (row["steps"], row["promotions"], row["stop_reason"]) == (
        end["steps"], len(end["promotions"]), end["stop_reason"])
    assert row["candidates"] == 7 and row["rollouts_used"] == end["rollouts_used"]
    assert row["test"] == end["test"]
    code, out, err = run_forge(capsys, "journal", "show", "verdicts", "--journals", journals)
    assert code == 0, err
    assert "PROMOTED" not in out and "promoted" in out and "invalid" in out


def test_report_of_an_old_journal(journals: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "report.html"
    code, _, err = run_forge(capsys, "report", "verdicts", "--journals", journals,
                             "--html", page)
    assert code == 0, err
    text = page.read_text(encoding="utf-8")
    assert 'id="test-result"' in text and "headline good" in text
    assert text.count('<g class="decision ') == 7
    assert "invalid proposals (no move)" in text


def test_promote_and_rollback_of_an_old_journal(journals: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "defaults.yaml"
    shutil.copy(BENCH / "defaults.yaml", target)
    result = run_forge_json(capsys, "promote", "verdicts", "--journals", journals,
                            "--to", target, "--json")
    assert result["moves"] == [{"step": 1, "target": "boost", "before": False, "after": True}]
    registry = load_registry(BENCH / "registry.yaml")
    assert load_config(target, registry).values["boost"] is True
    code, _, err = run_forge(capsys, "rollback", target)
    assert code == 0, err
    assert target.read_bytes() == (BENCH / "defaults.yaml").read_bytes()


def test_an_old_journal_is_not_resumed(journals: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    # Its decisions came from the search before issue 14: a resume would replay them with
    # another search. Refused before anything runs or is written.
    folder = journals / "verdicts"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(JournalError) as err:
        resume_search("verdicts", journals=journals)
    assert Path(str(err.value.file)) == folder / "run.json"
    assert err.value.field == "format_version"
    assert "format_version 1" in str(err.value) and "review, report or promote" in str(
        err.value)
    code, out, stderr = run_forge(capsys, "search", "--resume", "verdicts", "--journals",
                                  journals)
    assert_user_error(code, out, stderr, "run.json", "format_version", "cannot resume")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


# -- (b) a search of today against the golden outputs ---------------------------------------

def _search(journals: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    result: dict[str, Any] = run_forge_json(
        capsys, "search", BENCH, "--proposer", "sweep", "--seed", 1, "--candidates", 5,
        "--run-id", "golden", "--journals", journals, "--json")
    return result


def test_search_json_and_journal_are_the_golden_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journals = tmp_path / "journals"
    result = _search(journals, capsys)
    assert canonical(result) == canonical(load_golden("search.json"))

    shown = run_forge_json(capsys, "journal", "show", "golden", "--journals", journals,
                           "--json")
    assert canonical([masked(s) for s in shown]) == canonical(load_golden("show.json"))
    for step in shown:
        assert tuple(step)[:len(STEP_KEYS)] == STEP_KEYS

    records = read_lines(journals / "golden" / "journal.jsonl")
    golden = load_golden("journal.json")
    assert [r["kind"] for r in records] == [r["kind"] for r in golden]
    for record, expected in zip(records, golden, strict=True):
        assert canonical(masked(record)) == canonical(expected)
    assert {r["format_version"] for r in records} == {2}

    info = json.loads((journals / "golden" / "run.json").read_text(encoding="utf-8"))
    assert canonical(without(info, {"bench_path", "created_at"})) == canonical(
        load_golden("run.json"))


RUN_JSON = DATA / "run_json"


@pytest.mark.parametrize("path", [COMPAT / "run.json", RUN_JSON / "v2_todays_flags.json",
                                  RUN_JSON / "v2_before_start_check.json"])
def test_a_run_json_of_an_older_shape_loads_for_review(tmp_path: Path, path: Path) -> None:
    from forge.journal import load_run

    shutil.copy(path, tmp_path / "run.json")
    info = load_run(tmp_path)
    # Its flags read out of its options: the options hold what a user sets.
    journaled = json.loads(path.read_text(encoding="utf-8"))["options"]
    assert info.flags is not None and info.flags.chunks == journaled["chunks"]
    assert info.options.k == journaled["k"]
    assert "chunks" not in info.options.model_dump(mode="json")


def test_a_run_json_of_today_journals_no_flags(tmp_path: Path) -> None:
    from forge.journal import load_run, write_run
    from forge.journal.run import RUN_FORMAT_VERSION

    shutil.copy(RUN_JSON / "v2_todays_flags.json", tmp_path / "run.json")
    info = load_run(tmp_path).model_copy(update={"format_version": RUN_FORMAT_VERSION,
                                                  "flags": None})
    write_run(tmp_path / "new", info)
    written = json.loads((tmp_path / "new" / "run.json").read_text(encoding="utf-8"))
    assert written["format_version"] == 3 and "flags" not in written
    assert "start_check" not in written["options"]
    assert load_run(tmp_path / "new") == info


def _old_run(journals: Path, changes: dict[str, Any], drop: str | None = None) -> Path:
    """The killed golden run (tests/data/store_v1) with its version-2 run.json, today's
    flags but for ``changes`` (and ``drop``, absent)."""
    folder = Path(shutil.copytree(STORE_V1, journals / "golden"))
    info = json.loads((RUN_JSON / "v2_todays_flags.json").read_text(encoding="utf-8"))
    info["bench_path"] = str(BENCH / "bench.yaml")
    info["options"].update(changes)
    if drop is not None:
        del info["options"][drop]
    (folder / "run.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(("changes", "drop", "field"), [
    ({}, "start_check", "options.start_check"),  # searched on past a failed start
    ({}, "precision_rounds", "options.precision_rounds"),  # no rounds: before them
    ({"selection": "first"}, None, "options.selection"),
    ({"chunks": 5}, None, "options.chunks"),
    ({"test_k": 8}, None, "options.test_k"),
])
def test_an_older_run_that_searched_otherwise_is_not_resumed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any],
        drop: str | None, field: str) -> None:
    # This forge searches only as each flag's last default did: the replay of a run that
    # journaled another behaviour would diverge. Refused before anything runs or is written.
    journals = tmp_path / "journals"
    folder = _old_run(journals, changes, drop)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(JournalError) as err:
        resume_search("golden", journals=journals)
    assert Path(str(err.value.file)) == folder / "run.json"
    assert err.value.field == field
    assert "cannot resume golden" in str(err.value)
    code, out, stderr = run_forge(capsys, "search", "--resume", "golden", "--journals",
                                  journals)
    assert_user_error(code, out, stderr, "run.json", field, "cannot resume")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


# -- (c) a run whose attempt store is plain JSONL (store format 1) ----------------------------


def test_a_run_with_a_plain_attempt_store_resumes_to_the_golden_decisions_in_its_format(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The golden search killed after its third record, 100 attempts on file, by the forge
    # of before the compressed store (tests/data/store_v1/make.py).
    # Its run.json is version 2, flags as today's search (start_check, added after it,
    # set: its start did not fail); one that differs is refused (test above).
    journals = tmp_path / "journals"
    folder = _old_run(journals, {})
    sample = (folder / "attempts.jsonl").read_bytes()

    result = run_forge_json(capsys, "search", "--resume", "golden", "--journals", journals,
                            "--json")
    # Its start record, written before forge told a bench's power, is kept as it was
    # (a replay does not compare what the record derives): no power in its outputs.
    assert canonical(result) == canonical({**load_golden("search.json"), "power": None})
    records = read_lines(folder / "journal.jsonl")
    golden = load_golden("journal.json")
    golden[0] = without(golden[0], set(StartRecord.DESCRIPTIVE))
    assert [canonical(masked(r)) for r in records] == [canonical(r) for r in golden]
    # Appended to in its own format, after what was there, each attempt once: the 100 on
    # file were served from it, not run again.
    assert not (folder / "attempts.jsonl.gz").exists()
    stored = (folder / "attempts.jsonl").read_bytes()
    assert stored.startswith(sample) and len(stored) > len(sample)
    keys = Counter((r["config"], r["stream"], r["result"]["task_id"], r["result"]["attempt"])
                   for r in read_lines(folder / "attempts.jsonl"))
    assert max(keys.values()) == 1 and len(keys) > 100
