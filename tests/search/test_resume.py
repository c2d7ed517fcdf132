"""kill -9 and resume: a search killed anywhere reaches the same decisions when resumed.

The search runs in a subprocess (``python -m forge search``) on a bench whose harness
sleeps a few milliseconds per attempt, so a run lasts long enough to be killed at a
chosen point: while the start config's first attempts run, after the
n-th journal record, or while the test split is evaluated. ``--resume`` then finishes
it, and every record must equal the record of an uninterrupted run with the same seed
(timestamps and the run id aside).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest
from conftest import read_calls, search_tasks, write_search_bench
from optuna.storages.journal import JournalFileBackend, JournalStorage

from forge.cli import main

SEED = 7

#: boost is a real gain; knob != 2 is one on the dev seeds of attempt block 0 (what
#: screening and most of a confirmation read) and on nothing else. With the bench's
#: rollout budget (BUDGET) the journal holds refusals, two promotions and a candidate
#: whose screening the budget cut short.
HARNESS = f"""
from forge.evaluation.rollout import derive_seed


def run(config, task, ctx):
    record(config, task, ctx)
    # Slow enough that each kill point is wide enough to hit: the first dev chunk (a
    # sixth of dev) is all there is before the start record; val and test slower still.
    time.sleep(0.008 if ctx.split == "dev" else 0.012)
    p = 0.8 if config["boost"] else 0.5
    if config["knob"] != 2 and ctx.seed == derive_seed({SEED}, "dev", task.id, ctx.attempt):
        p = 0.95
    ok = random.Random(ctx.seed).random() < p
    return {{"output": task.expected if ok else "wrong"}}
"""

BUDGET = 350
_VOLATILE = {"at", "elapsed_s", "run_id"}


def forge_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "forge", "search", *args]


def lines(path: Path) -> int:
    """Complete lines in ``path`` (a torn last line is not counted)."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def trials(folder: Path) -> list[tuple[Any, ...]]:
    """The dashboard study's trials as a person sees them (the clock aside)."""
    study = optuna.load_study(study_name="forge", storage=JournalStorage(
        JournalFileBackend(str(folder / "optuna.journal"))))
    return [(t.number, t.state, t.value, t.params, json.dumps(t.user_attrs, sort_keys=True))
            for t in study.get_trials()]


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


def stable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in _VOLATILE} for r in rows]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("resume")
    return write_search_bench(root / "bench", HARNESS, tasks=search_tasks(24, 16, 16), k=4,
                              search={"budget": {"rollouts": BUDGET}})


@pytest.fixture(scope="module")
def baseline(bench: Path) -> tuple[Path, dict[str, Any]]:
    """An uninterrupted run: its folder and its ``--json`` result."""
    journals = bench.parent.parent / "journals"
    done = subprocess.run(forge_cmd(str(bench), "--journals", str(journals), "--run-id", "base",
                                    "--seed", str(SEED), "--json"),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return journals / "base", json.loads(done.stdout)


def kill_when(bench: Path, folder: Path, ready: Callable[[Path], bool]) -> None:
    """Start a search in a subprocess and SIGKILL it as soon as ``ready(folder)``."""
    proc = subprocess.Popen(forge_cmd(str(bench), "--journals", str(folder.parent), "--run-id",
                                      folder.name, "--seed", str(SEED)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not ready(folder):
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                pytest.fail(f"the search ended (exit {proc.returncode}) before the kill "
                            f"point: {err}")
            if time.monotonic() > deadline:
                pytest.fail("the kill point was never reached")
            time.sleep(0.003)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def resume(capsys: pytest.CaptureFixture[str], journals: Path, run_id: str
           ) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(["search", "--resume", run_id, "--journals", str(journals), "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def after_records(n: int) -> Callable[[Path], bool]:
    return lambda folder: lines(folder / "journal.jsonl") >= n


def after_kind(kind: str) -> Callable[[Path], bool]:
    def ready(folder: Path) -> bool:
        try:
            done = (folder / "journal.jsonl").read_bytes().split(b"\n")[:-1]
        except FileNotFoundError:
            return False
        return any(json.loads(line)["kind"] == kind for line in done)

    return ready


def mid_attempts(bench: Path) -> Callable[[Path], bool]:
    """The start config's first attempts running: the harness called (its calls log
    beside the bench has grown), not even the start record yet. Not "attempts on file":
    a chunk's attempts are stored together, and the start record follows them within a
    few milliseconds, a window a poll missed one time in four."""
    log = bench.parent / "calls.log"
    before = lines(log)
    return lambda folder: lines(log) > before and lines(folder / "journal.jsonl") == 0


def anywhere(ready: Callable[[Path], bool]) -> Callable[[Path], Callable[[Path], bool]]:
    return lambda bench: ready


@pytest.mark.parametrize(("point", "ready"), [
    ("mid-attempts", mid_attempts),
    ("1 record", anywhere(after_records(1))),
    ("3 records", anywhere(after_records(3))),
    ("6 records", anywhere(after_records(6))),
    ("in the test split", anywhere(after_kind("stop"))),
], ids=lambda x: x if isinstance(x, str) else "")
def test_kill_9_then_resume_reaches_the_same_decisions(
        bench: Path, baseline: tuple[Path, dict[str, Any]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], point: str,
        ready: Callable[[Path], Callable[[Path], bool]]) -> None:
    base_folder, base_result = baseline
    folder = tmp_path / "journals" / "r"
    kill_when(bench, folder, ready(bench))
    written = records(folder) if (folder / "journal.jsonl").exists() else []
    assert not any(r["kind"] == "end" for r in written), f"not killed in the search ({point})"

    code, result, err = resume(capsys, folder.parent, "r")
    assert code == 0, err
    assert {**result, "run_id": "base"} == base_result
    assert result["run_id"] == "r"
    resumed = records(folder)
    assert resumed[:len(written)] == written  # nothing already written was rewritten
    assert stable(resumed) == stable(records(base_folder))
    ends = [r for r in resumed if r["kind"] == "end"]
    assert len(ends) == 1
    base_end = records(base_folder)[-1]
    for field in ("promotions", "final_config", "stop_reason", "rollouts_used"):
        assert ends[0][field] == base_end[field]
    assert base_end["promotions"], "the baseline should promote something"
    # The study optuna-dashboard opens: each trial once, as the uninterrupted run's.
    assert trials(folder) == trials(base_folder)


def test_the_baseline_journal_has_every_kind_of_decision(
        baseline: tuple[Path, dict[str, Any]]) -> None:
    # So the kill points above fall between refusals, promotions and a budget cut.
    rows = records(baseline[0])
    verdicts = {r["verdict"] for r in rows if r["kind"] == "candidate"}
    assert verdicts == {"promoted", "rejected", "skipped"}
    assert len(rows) >= 8  # the kill points above go up to 6 records, then stop, test, end
    assert rows[-1]["stop_reason"] == "budget_rollouts"


def test_resuming_a_finished_run_runs_nothing_and_gives_the_same_result(
        bench: Path, baseline: tuple[Path, dict[str, Any]],
        capsys: pytest.CaptureFixture[str]) -> None:
    base_folder, base_result = baseline
    before = len(read_calls(bench))
    journal = (base_folder / "journal.jsonl").read_bytes()
    study = (base_folder / "optuna.journal").read_bytes()
    code, result, err = resume(capsys, base_folder.parent, "base")
    assert code == 0, err
    assert result == base_result
    assert len(read_calls(bench)) == before  # everything was served from the attempt store
    assert (base_folder / "journal.jsonl").read_bytes() == journal
    assert (base_folder / "optuna.journal").read_bytes() == study  # no trial written twice


def test_a_torn_last_line_is_tolerated_on_resume(
        bench: Path, baseline: tuple[Path, dict[str, Any]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "journals" / "torn"
    kill_when(bench, folder, after_records(4))
    with (folder / "journal.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"kind": "candidate", "step": 2, "move": {"tar')
    # A batch of attempts whose gzip member was cut short by the kill.
    member = gzip.compress(b'{"config": "abc", "stream": "dev", "result": {}}\n' * 50)
    with (folder / "attempts.jsonl.gz").open("ab") as fh:
        fh.write(member[:len(member) // 2])
    code, result, err = resume(capsys, folder.parent, "torn")
    assert code == 0, err
    assert {**result, "run_id": "base"} == baseline[1]
    assert stable(records(folder)) == stable(records(baseline[0]))
    journal = (folder / "journal.jsonl").read_text(encoding="utf-8")
    # The torn member was cut, not kept in the middle: the file is one gzip stream.
    stored = gzip.decompress((folder / "attempts.jsonl.gz").read_bytes()).decode("utf-8")
    for text in (journal, stored):
        assert text.endswith("\n")
        for line in text.splitlines():
            json.loads(line)
    assert '"config": "abc"' not in stored


def _copy_run(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True)
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())


def _cut_line_5(data: bytes) -> tuple[bytes, str]:
    rows = gzip.decompress(data).decode("utf-8").splitlines()
    rows[4] = rows[4][: len(rows[4]) // 2]  # a line cut in half, then more lines
    return (gzip.compress(("\n".join(rows) + "\n").encode("utf-8")),
            "attempts.jsonl.gz:5: damaged record")


def _flip_in_member_2(data: bytes) -> tuple[bytes, str]:
    second = data.index(b"\x1f\x8b\x08", 1)  # every batch is a member of its own
    flipped = bytearray(data)
    flipped[second + 40] ^= 0xFF
    return bytes(flipped), ("attempts.jsonl.gz: damaged record in the run's attempt store: "
                            f"the gzip member at byte {second:,} cannot be read")


@pytest.mark.parametrize("damage", [_cut_line_5, _flip_in_member_2], ids=["line", "member"])
def test_a_damaged_attempt_store_is_one_line_and_exit_2(
        baseline: tuple[Path, dict[str, Any]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        damage: Callable[[bytes], tuple[bytes, str]]) -> None:
    run = tmp_path / "journals" / "damaged"
    _copy_run(baseline[0], run)
    store = run / "attempts.jsonl.gz"
    damaged, message = damage(store.read_bytes())
    store.write_bytes(damaged)
    code, _, err = resume(capsys, run.parent, "damaged")
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert message in err
