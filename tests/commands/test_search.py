"""``forge search`` with a harness that fails: at once when the start config cannot be
scored, loudly when too many attempts fail, counted by reason in ``--json`` and named on
the test line; and the commands that take a run further."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import PARTLY_FAILING, ROOT, forget_bench_harness, stored_rows, write_search_bench
from conftest import run_forge as forge

from forge.journal.records import StopRecord
from forge.journal.review import load_run_records

BROKEN = ROOT / "data" / "broken"
_forget = forget_bench_harness(BROKEN)

#: ``boost`` is a real gain; 30% of attempts (by their seed) raise, whatever the config.
FLAKY = """
def run(config, task, ctx):
    record(config, task, ctx)
    rng = random.Random(ctx.seed)
    if rng.random() < 0.3:
        raise TimeoutError(f"upstream model timed out on {task.id} after 30 s")
    ok = rng.random() < (0.8 if config["boost"] else 0.5)
    return {"output": task.expected if ok else "wrong"}
"""


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


def test_a_harness_failing_every_attempt_stops_the_search_at_once(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    journals = tmp_path / "j"
    code, out, err = forge(capsys, "search", BROKEN, "--journals", journals, "--run-id", "r")
    assert code == 1
    # One line on stderr naming the first failure: its task, how it stopped, its message.
    assert err.splitlines() == [
        "forge: search r stopped: all 8 attempts of the start config failed; the first, "
        "task dev-09 attempt 0: error: ConnectionError: model endpoint "
        "http://127.0.0.1:9/v1 refused the connection (task dev-09, seed "
        f"{err.split('seed ')[1].split(')')[0]})"]
    # The budget (5,000 rollouts) is not spent: the start's first chunk alone ran.
    written = records(journals / "r")
    assert [r["kind"] for r in written] == ["start", "stop", "end"]
    stop = written[1]
    assert stop["reason"] == "start_failed" and stop["rollouts_total"] == 8
    assert stop["failure"]["task_id"] == "dev-09" and stop["failure"]["stop"] == "error"
    assert stop["failure"]["error"].startswith("ConnectionError: model endpoint")
    assert written[2]["stop_reason"] == "start_failed" and written[2]["promotions"] == []
    assert len(stored_rows(journals / "r")) == 8
    # stdout: why, counted, and where to look next (no report of a run that compared
    # nothing, no promotion).
    assert "failures: 8 of 8 attempts unscored (100.0%)" in out
    assert "8 × error: ConnectionError: model endpoint http://#:#/v# refused" in out
    assert "e.g. task dev-09 attempt 0, start config: ConnectionError:" in out
    assert f"forge journal show r --journals {journals}" in out
    assert "forge report" not in out and "forge promote" not in out
    assert "Traceback" not in out + err


def test_a_failed_start_is_read_back_and_resumed_to_the_same_stop(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    journals = tmp_path / "j"
    assert forge(capsys, "search", BROKEN, "--journals", journals, "--run-id", "r",
                 "--json")[0] == 1
    before = (journals / "r" / "journal.jsonl").read_text(encoding="utf-8")
    stop = load_run_records(journals / "r").stop
    assert isinstance(stop, StopRecord) and stop.failure is not None
    assert stop.failure.unscored == 8
    code, out, err = forge(capsys, "search", "--resume", "r", "--journals", journals,
                           "--json")
    assert code == 1 and json.loads(out)["stop_reason"] == "start_failed"
    assert err.splitlines()[-1].startswith("forge: search r stopped: all 8 attempts")
    assert (journals / "r" / "journal.jsonl").read_text(encoding="utf-8") == before
    code, out, _ = forge(capsys, "journal", "show", "r", "--journals", journals)
    assert code == 0
    assert "start_failed after 0 steps" in out and "first failure: task dev-09" in out


def test_json_output_of_a_failed_start_is_the_result_object_alone(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = forge(capsys, "search", BROKEN, "--journals", tmp_path / "j",
                           "--run-id", "r", "--json")
    assert code == 1
    result = json.loads(out)  # stdout is the one document, as on success
    assert (result["run_id"], result["stop_reason"], result["steps"]) == ("r", "start_failed", 0)
    assert result["rollouts_used"] == 8 and result["test"] == {}
    # Why, counted: every attempt of the start's first chunk, for one reason.
    assert result["unscored"]["test"] == result["unscored"]["val"] == {}
    start = result["unscored"]["dev"]["start"]
    assert (start["n_attempts"], start["n_unscored"]) == (8, 8)
    assert start["n_tasks_without_score"] == start["n_tasks"] == 2
    [(reason, count)] = start["unscored_by_reason"].items()
    assert count == 8 and reason.startswith("error: ConnectionError: model endpoint")
    assert "forge journal show" not in out + err  # next steps are for people
    assert err.splitlines()[-1].startswith("forge: search r stopped:")


@pytest.fixture
def flaky(tmp_path: Path) -> Path:
    return write_search_bench(tmp_path / "bench", FLAKY,
                              search={"budget": {"rollouts": 3_000}})


def test_a_search_with_many_failures_completes_and_warns(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, flaky: Path) -> None:
    journals = tmp_path / "j"
    code, out, err = forge(capsys, "search", flaky, "--journals", journals, "--run-id", "f",
                           "--seed", "3")
    assert code == 0, err
    lines = out.splitlines()
    head = next(line for line in lines if line.startswith("failures: "))
    unscored, attempts = (int(n.replace(",", "")) for n in head.split()[1:4:2])
    assert 0.25 < unscored / attempts < 0.35  # the harness's 30%
    # One reason (the task's id and the numbers folded), counted, charged to the configs.
    index = lines.index(head)
    assert lines[index + 1].strip() == (
        f"{unscored:,} × error: TimeoutError: upstream model timed out on <task> after # s")
    assert "start config: TimeoutError: upstream model timed out on" in lines[index + 2]
    assert lines[index + 3].strip().startswith("in ")
    assert "start config " in lines[index + 3]
    assert any(line.startswith("warning: ") and "more than the 5%" in line for line in lines)
    # The run's id and what to do with it.
    promoted = "promoted: boost False->True" in out
    assert "run f; next:" in out
    assert f"forge report f --journals {journals}" in out
    assert f"forge journal show f --journals {journals}" in out
    assert (f"forge promote f --journals {journals}" in out) == promoted


def test_the_next_steps_name_no_journals_flag_for_the_default_folder(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, flaky: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = forge(capsys, "search", flaky, "--run-id", "d", "--max-steps", "1")
    assert code == 0, err
    assert "  forge report d  " in out and "  forge journal show d  " in out
    assert "--journals" not in out
    assert (tmp_path / "journals" / "d" / "journal.jsonl").is_file()


def test_a_search_without_failures_reports_none(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bench = write_search_bench(tmp_path / "bench", FLAKY.replace("< 0.3", "< 0.0"))
    code, out, err = forge(capsys, "search", bench, "--journals", tmp_path / "j",
                           "--max-steps", "1")
    assert code == 0, err
    assert "failures:" not in out and "attempts failed" not in out


def test_harness_text_in_the_failure_report_is_escaped(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bench = write_search_bench(tmp_path / "bench", """
def run(config, task, ctx):
    raise RuntimeError("\\x1b[2J\\x1b[31mboom\\x00 \\u202eevil\\x07")
""")
    code, out, err = forge(capsys, "search", bench, "--journals", tmp_path / "j",
                           "--run-id", "e")
    assert code == 1
    for text in (out, err):
        for raw in ("\x1b", "\x00", "\u202e", "\x07"):
            assert raw not in text
    assert "RuntimeError: \\x1b[2J\\x1b[31mboom\\x00 \\u202eevil\\x07" in out
    assert err.rstrip().endswith("RuntimeError: \\x1b[2J\\x1b[31mboom\\x00 \\u202eevil\\x07")
    code, out, _ = forge(capsys, "journal", "show", "e", "--journals", tmp_path / "j")
    assert code == 0 and "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[31mboom" in out


def test_no_test_ends_without_the_test_split_and_the_run_cannot_be_promoted(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bench = write_search_bench(tmp_path / "bench", FLAKY.replace("< 0.3", "< 0.0"),
                               search={"budget": {"rollouts": 3_000}})
    journals = tmp_path / "j"
    code, out, err = forge(capsys, "search", bench, "--journals", journals, "--run-id", "n",
                           "--seed", "3", "--no-test", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert "boost" in {m["target"] for m in result["promotions"]}
    written = records(journals / "n")
    assert "test" not in {r["kind"] for r in written}
    # The harness never saw a test task.
    calls = (bench.parent / "calls.log").read_text(encoding="utf-8")
    assert '"test-' not in calls
    assert json.loads((journals / "n" / "run.json").read_text())["options"]["run_test"] is False
    # Promotion needs the test comparison the run skipped: refused in one line, nothing
    # written.
    def files() -> dict[Path, bytes]:
        return {p: p.read_bytes() for p in bench.parent.rglob("*")
                if p.is_file() and p.name != "calls.log"}
    before = files()
    code, out, err = forge(capsys, "promote", "n", "--journals", journals)
    assert code == 2
    assert "no test comparison" in err and len(err.strip().splitlines()) == 1
    assert files() == before
    # Without --json, the next steps offer no promotion it would refuse.
    code, out, err = forge(capsys, "search", bench, "--journals", journals, "--run-id", "m",
                           "--seed", "3", "--no-test")
    assert code == 0, err
    assert "promoted: boost False->True" in out and "forge report m" in out
    assert "forge promote" not in out
    # A resume ends as its run was started.
    code, out, err = forge(capsys, "search", "--resume", "n", "--journals", journals,
                           "--no-test")
    assert code == 2 and "--no-test" in err


# -- unscored attempts in --json and on the test line ---------------------------------------

#: The tasks of PARTLY_FAILING's test split (30) that no config ever scores.
NEVER_SCORED = [f"test-{i:02d}" for i in range(30) if i % 10 in (3, 7)]
UNPARSEABLE = "error: ValueError: unparseable JSON from the model on <task>: <script>x</script>"


def test_search_json_counts_unscored_attempts_by_reason_and_the_test_line_names_the_tasks(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bench = write_search_bench(tmp_path / "bench", PARTLY_FAILING)
    journals = tmp_path / "j"
    code, out, err = forge(capsys, "search", bench, "--journals", journals, "--run-id", "u",
                           "--json")
    assert code == 0, err
    result = json.loads(out)  # still the one document, with the counts added last
    assert list(result)[-2:] == ["unscored", "power"]
    assert set(result["unscored"]) == {"dev", "val", "test"}
    test = result["unscored"]["test"]
    for side in ("start", "final"):
        counts = test[side]
        # Every test task, 20 attempts each; the six that always raise are named.
        assert (counts["n_tasks"], counts["n_attempts"]) == (30, 600)
        assert counts["tasks_without_score"] == NEVER_SCORED
        assert counts["n_tasks_without_score"] == len(NEVER_SCORED)
        assert counts["unscored_by_reason"] == {UNPARSEABLE: 20 * len(NEVER_SCORED)}
        assert counts["n_unscored"] == 20 * len(NEVER_SCORED)
        for split in ("dev", "val"):
            # On the tasks both configs ran, the first k attempts: the same tasks fail.
            block = result["unscored"][split][side]
            assert block["n_attempts"] == 4 * block["n_tasks"] > 0
            assert block["n_unscored"] == 4 * block["n_tasks_without_score"]
            assert all(int(t[-1]) in (3, 7) for t in block["tasks_without_score"])
            assert sum(block["unscored_by_reason"].values()) == block["n_unscored"]
    # The journal's test record holds the same counts (journal show and report read it).
    record = next(r for r in records(journals / "u") if r["kind"] == "test")
    assert (record["unscored_start"], record["unscored_final"]) == (test["start"], test["final"])
    assert record["n_tasks"] == 30 - len(NEVER_SCORED)
    # The test line (on stderr with --json) never drops them silently.
    lines = err.splitlines()
    line = next(i for i, text in enumerate(lines) if text.startswith("test "))
    assert lines[line].endswith(f" · {30 - len(NEVER_SCORED)} of 30 tasks × 20 attempts")
    assert lines[line + 1] == ("  unscored on test: start 120 of 600 (20.0%), "
                               "final 120 of 600 (20.0%)")
    named = "6 (test-03, test-07, test-13, test-17, test-23 and 1 more)"
    assert lines[line + 2] == ("  6 test tasks left out of the comparison, with no scored "
                               f"attempt: start {named}; final {named}")
