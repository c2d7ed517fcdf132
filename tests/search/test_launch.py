"""Starting and resuming searches (forge.search.launch): what is refused before a run folder
exists, an existing run left alone, and a resume that runs with the options it was
started with on the bench it was started on, or not at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_user_error, read_calls, run_forge, search_tasks, write_search_bench

from forge.errors import BenchError, JournalError, OptionError, UserError
from forge.executors import ExecutorSettings
from forge.journal.records import AnyRecord
from forge.search.launch import launch_search, resume_search

#: boost raises the success probability from 0.5 to 0.8; knob does nothing.
BOOST = """
def run(config, task, ctx):
    record(config, task, ctx)
    ok = random.Random(ctx.seed).random() < (0.8 if config["boost"] else 0.5)
    return {"output": task.expected if ok else "wrong"}
"""

_VOLATILE = {"at", "elapsed_s", "run_id"}


def stable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in _VOLATILE} for r in records]


def journal(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    """A small search bench: k 4, up to 10 steps, patience 3 (its own defaults)."""
    return write_search_bench(tmp_path / "bench", BOOST, tasks=search_tasks(12, 12, 12))


# -- refused before the run folder exists -------------------------------------------------


@pytest.mark.parametrize("run_id", ["../escape", "a/b", "-dash", ".hidden", "with space",
                                    "x" * 129])
def test_a_bad_run_id_is_refused(bench: Path, tmp_path: Path, run_id: str) -> None:
    journals = tmp_path / "journals"
    with pytest.raises(OptionError) as info:
        launch_search(bench, run_id=run_id, journals=journals)
    assert info.value.option == "--run-id"
    assert str(info.value).startswith(f"--run-id: {run_id!r}: use letters, digits")
    assert not journals.exists()


@pytest.mark.parametrize(("options", "error", "fragment"), [
    ({"proposer": "greedy"}, BenchError, "unknown proposer 'greedy'"),
    ({"executor": ExecutorSettings("threads")}, OptionError,
     "--executor: expected one of local, process, ray"),
], ids=["unknown-proposer", "unknown-executor"])
def test_an_unknown_proposer_or_executor_writes_nothing(
        bench: Path, tmp_path: Path, options: dict[str, Any], error: type[UserError],
        fragment: str) -> None:
    journals = tmp_path / "journals"
    with pytest.raises(error, match=fragment):
        launch_search(bench, run_id="r", journals=journals, **options)
    assert not journals.exists()
    assert read_calls(bench) == []


def test_a_missing_split_is_refused_before_the_run_folder_exists(tmp_path: Path) -> None:
    tasks = search_tasks(12, 12, 12)
    del tasks["test"]
    bench = write_search_bench(tmp_path / "bench", BOOST, tasks=tasks)
    journals = tmp_path / "journals"
    with pytest.raises(BenchError, match="no split 'test'; the bench has dev, val") as info:
        launch_search(bench, run_id="r", journals=journals)
    assert info.value.file == str(bench.resolve())
    assert not journals.exists()
    assert read_calls(bench) == []


def test_an_existing_run_is_refused_with_the_resume_hint(
        bench: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journals = tmp_path / "journals"
    launch_search(bench, run_id="r", journals=journals, max_steps=0, k=1)
    folder = journals / "r"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    calls = len(read_calls(bench))
    with pytest.raises(JournalError) as info:
        launch_search(bench, run_id="r", journals=journals, max_steps=0, k=1)
    assert info.value.message == "run 'r' exists; resume it with --resume r"
    assert info.value.file == str(folder)
    code, out, err = run_forge(capsys, "search", bench, "--run-id", "r", "--journals",
                               journals)
    assert code == 2 and out == ""
    assert err.strip() == f"forge: error: {folder}: run 'r' exists; resume it with --resume r"
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert len(read_calls(bench)) == calls  # not one attempt more


# -- resume ---------------------------------------------------------------------------------


class _Killed(Exception):
    pass


def _kill_at_start(record: AnyRecord) -> None:
    if record.kind == "start":
        raise _Killed


def test_resume_runs_with_the_options_the_run_was_started_with(bench: Path,
                                                               tmp_path: Path) -> None:
    # Every option differs from the bench's own (k 4, 10 steps, patience 3, auto).
    options: dict[str, Any] = {"k": 2, "max_steps": 1, "patience": 1, "seed": 3,
                               "proposer": "sweep", "candidates_per_step": 2}
    journals = tmp_path / "journals"
    whole = launch_search(bench, run_id="whole", journals=journals, **options)
    with pytest.raises(_Killed):
        launch_search(bench, run_id="cut", journals=journals, on_record=_kill_at_start,
                      **options)
    log = bench.parent / "calls.log"
    log.unlink()
    resumed = resume_search("cut", journals=journals)
    assert stable(resumed.records) == stable(whole.records)
    assert stable(journal(journals / "cut")) == stable(journal(journals / "whole"))
    assert resumed.steps == 1 and resumed.stop_reason == whole.stop_reason
    assert {r["proposer"] for r in resumed.records if r["kind"] == "candidate"} == {"sweep"}
    # k 2, not the bench's 4: attempt block 0 is attempts 0 and 1, a confirmation's
    # fresh block 2 and 3 (with k 4 they would be 0-3 and 4-7). The test split, after
    # the search, runs its own 20 a task (test_k).
    attempts = {c["attempt"] for c in read_calls(bench) if c["split"] != "test"}
    assert {0, 1} <= attempts <= {0, 1, 2, 3}
    assert {c["attempt"] for c in read_calls(bench) if c["split"] == "test"} == set(range(20))


@pytest.mark.parametrize(("edit", "field", "words"), [
    ("tasks", "bench_digest", "the bench"),
    ("harness", "bench_digest", "the bench"),
    ("registry", "registry_digest", "the registry"),
])
def test_resume_refuses_a_changed_bench_or_registry(
        bench: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str,
        field: str, words: str) -> None:
    journals = tmp_path / "journals"
    launch_search(bench, run_id="r", journals=journals, max_steps=0, k=1)
    folder = journals / "r"
    # Unchanged, the run resumes (a finished run runs nothing): the refusal below is
    # the edit's doing.
    resume_search("r", journals=journals)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    if edit == "tasks":
        dev = bench.parent / "tasks" / "dev.jsonl"
        dev.write_text(dev.read_text().replace("question 0", "question zero"))
    elif edit == "harness":
        harness = bench.parent / "harness.py"
        harness.write_text(harness.read_text().replace("0.8", "0.85"))
    else:
        registry = bench.parent / "registry.yaml"
        registry.write_text(registry.read_text().replace("max: 3", "max: 4"))
    with pytest.raises(JournalError) as info:
        resume_search("r", journals=journals)
    err = info.value
    assert (err.file, err.field) == (str(folder / "run.json"), field)
    assert err.message.startswith(f"cannot resume r: {words}")
    assert "changed since the run started" in err.message
    code, out, stderr = run_forge(capsys, "search", "--resume", "r", "--journals", journals)
    assert code == 2 and out == "" and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1 and "cannot resume r" in stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing written


def test_resume_of_an_unknown_run_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_forge(capsys, "search", "--resume", "nope", "--journals", tmp_path)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "run.json" in err


# -- bounds --------------------------------------------------------------------------------


def test_k_beyond_the_bound_is_refused_before_the_run_folder_exists(
        bench: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journals = tmp_path / "journals"
    code, out, err = run_forge(capsys, "search", bench, "-k", 10**9, "--journals", journals)
    assert_user_error(code, out, err, "-k: 1,000,000,000 attempts per task; at most 1,000")
    code, out, err = run_forge(capsys, "eval", bench, "-k", 10**9)
    assert_user_error(code, out, err, "-k")
    assert not journals.exists()
    with pytest.raises(OptionError, match="1,001 attempts per task; at most 1,000"):
        launch_search(bench, journals=journals, k=1001, run_id="r")
    assert not journals.exists()


@pytest.mark.parametrize("change, field", [
    (lambda o: {**o, "k": 10**9}, "options.k"),
    (lambda o: {**o, "concurrency": 10**9}, "options.concurrency"),
    (lambda o: {**o, "futility_level": "-Infinity"}, None),
    (lambda o: {**o, "test_k": 0}, "options.test_k"),
    (lambda o: {**o, "test_k": "many"}, "options.test_k"),
])
def test_a_resume_refuses_a_run_json_beyond_the_bounds(
        bench: Path, tmp_path: Path, change: Any, field: str | None,
        capsys: pytest.CaptureFixture[str]) -> None:
    journals = tmp_path / "journals"
    with pytest.raises(_Killed):
        launch_search(bench, journals=journals, run_id="r", on_record=_kill_at_start)
    run_json = journals / "r" / "run.json"
    info = json.loads(run_json.read_text(encoding="utf-8"))
    info["options"] = change(info["options"])
    run_json.write_text(json.dumps(info).replace('"-Infinity"', "-Infinity"),
                        encoding="utf-8")
    before = (journals / "r" / "journal.jsonl").read_bytes()
    code, out, err = run_forge(capsys, "search", "--resume", "r", "--journals", journals)
    line = assert_user_error(code, out, err, str(run_json))
    if field is not None:
        assert f": {field}: " in line
    assert (journals / "r" / "journal.jsonl").read_bytes() == before
