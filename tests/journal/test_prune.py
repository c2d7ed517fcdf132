"""``forge journal prune``: finished runs' attempt stores cut to what review reads.

The run pruned is the golden search of tests/test_journal_compat.py (tests/data/verdicts,
a promotion, a few seconds). After pruning, ``forge journal show``, ``forge report`` and
``forge promote`` give what they gave before (the unscored attempts of each config
included, though most attempts are gone); a resume is refused in one line; a dry run,
a running run and an unfinished one (without --force) change nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import assert_user_error, forget_bench_harness, run_forge, run_forge_json

from forge.journal import lock_run
from forge.journal.prune import PRUNED_FILE, load_pruned
from forge.journal.review import load_run_records
from forge.journal.store import PLAIN_STORE_FILE, STORE_FILE, attempt_line, read_attempts
from forge.report.html import render_html

DATA = Path(__file__).resolve().parents[1] / "data"
BENCH = DATA / "verdicts"

_forget = forget_bench_harness(BENCH)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run, searched once for the module; tests prune copies of it."""
    from forge.cli import main

    journals = tmp_path_factory.mktemp("made")
    code = main(["search", str(BENCH), "--proposer", "sweep", "--seed", "1", "--candidates",
                 "5", "--run-id", "golden", "--journals", str(journals), "--json"])
    assert code == 0
    return journals / "golden"


@pytest.fixture
def journals(finished: Path, tmp_path: Path) -> Path:
    root = tmp_path / "journals"
    shutil.copytree(finished, root / "golden")
    return root


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` with its bytes and modification time."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def test_a_dry_run_says_what_it_would_free_and_changes_nothing(
        journals: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(journals)
    code, out, err = run_forge(capsys, "journal", "prune", "--journals", journals)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("golden: would prune the attempt store, ")
    assert ("attempts (the incumbents' dev and val attempts and the test split's, which the "
            "report reads)") in lines[0]
    assert lines[-1].startswith("would free ") and "nothing was changed: add --yes" in lines[-1]
    assert snapshot(journals) == before  # not a byte, not a time, no lock file left
    dry = run_forge_json(capsys, "journal", "prune", "golden", "--journals", journals, "--json")
    assert dry[0]["action"] == "would prune" and dry[0]["bytes_freed"] > 0
    assert snapshot(journals) == before


def test_prune_frees_bytes_and_show_report_and_promote_still_work(
        journals: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = journals / "golden"
    shown = run_forge_json(capsys, "journal", "show", "golden", "--journals", journals, "--json")
    page = render_html(folder)
    assert "no per-step scores" not in page and "nothing to show" not in page
    keep = {p.name for p in folder.iterdir()} - {STORE_FILE}
    assert keep >= {"journal.jsonl", "run.json"}
    kept_bytes = {name: (folder / name).read_bytes() for name in keep}
    rows = list(read_attempts(folder / STORE_FILE))
    before = size(folder)
    dry = run_forge_json(capsys, "journal", "prune", "--journals", journals, "--json")

    done = run_forge_json(capsys, "journal", "prune", "--journals", journals, "--yes", "--json")
    assert done[0]["action"] == "pruned"
    assert done[0]["bytes_freed"] == dry[0]["bytes_freed"] > 0  # the dry run's figure
    assert before - size(folder) == done[0]["bytes_freed"] - (folder / PRUNED_FILE).stat().st_size
    assert size(folder) < before
    record = load_pruned(folder)
    assert record is not None and record.attempts_before == len(rows) == done[0][
        "attempts_before"]
    kept = list(read_attempts(folder / STORE_FILE))
    assert 0 < len(kept) == record.attempts_kept < len(rows)
    # What review reads, and only that: the incumbents' first k dev and val attempts,
    # and the test split's (only the start and the final config run it).
    run = load_run_records(folder)
    k, incumbents = run.info.options.k, {fp for _, fp, _ in run.incumbents}
    assert run.test is not None and run.start is not None
    expected = [r for r in rows if (r.stream in ("dev", "val") and r.result.attempt < k
                                    and r.config in incumbents)
                or (r.stream == "test" and r.config in {run.start.fingerprint,
                                                         run.final_fingerprint})]
    assert {r.stream for r in expected} == {"dev", "val", "test"}
    assert [attempt_line(r.config, r.stream, r.result) for r in kept] == [
        attempt_line(r.config, r.stream, r.result) for r in expected]
    # The unscored attempts are counted before the rest go: review shows what it did.
    assert record.failures is not None
    assert set(record.failures.configs) == {r.config for r in rows}
    assert {attempt_line(r.config, r.stream, r.result) for r in kept} <= {
        attempt_line(r.config, r.stream, r.result) for r in rows}
    assert {name: (folder / name).read_bytes() for name in keep} == kept_bytes

    assert run_forge_json(capsys, "journal", "show", "golden", "--journals", journals,
                          "--json") == shown
    assert render_html(folder) == page  # the same per-step scores and learning zone
    code, out, err = run_forge(capsys, "report", "golden", "--journals", journals)
    assert (code, out) == (0, f"report: {folder / 'report.html'}\n"), err
    target = tmp_path / "defaults.yaml"
    shutil.copy(BENCH / "defaults.yaml", target)
    promoted = run_forge_json(capsys, "promote", "golden", "--journals", journals,
                              "--to", target, "--json")
    assert promoted["moves"] == [{"step": 1, "target": "boost", "before": False,
                                  "after": True}]

    # The promoted config and its provenance are left alone by a second prune.
    promoted_files = {p: p.read_bytes() for p in tmp_path.glob("defaults.yaml*")}
    again = run_forge(capsys, "journal", "prune", "--journals", journals, "--yes")
    assert again[0] == 0 and "golden: skipped: already pruned" in again[1]
    assert {p: p.read_bytes() for p in tmp_path.glob("defaults.yaml*")} == promoted_files

    line = assert_user_error(*run_forge(capsys, "search", "--resume", "golden",
                                        "--journals", journals),
                             f"{folder / PRUNED_FILE}: cannot resume golden: it was pruned on ")
    assert "start a new search instead" in line


@pytest.mark.parametrize("named", [True, False])
def test_a_running_run_is_refused_or_skipped_and_left_whole(
        journals: Path, capsys: pytest.CaptureFixture[str], named: bool) -> None:
    folder = journals / "golden"
    run = ["golden"] if named else []
    with lock_run(folder):  # a search writing it holds this lock
        before = {k: v for k, v in snapshot(journals).items() if not k.endswith(".lock")}
        code, out, err = run_forge(capsys, "journal", "prune", *run, "--journals", journals,
                                   "--yes")
        if named:
            assert_user_error(code, out, err, f"{folder}: cannot prune run golden: still "
                              "running (pid ")
        else:
            assert code == 0, err
            assert out.startswith("golden: skipped: still running (pid ")
            assert "freed 0 bytes in 0 run(s)" in out
        assert {k: v for k, v in snapshot(journals).items()
                if not k.endswith(".lock")} == before


def test_an_unfinished_run_is_pruned_only_with_force_and_then_not_resumed(
        journals: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = journals / "golden"
    lines = (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    (folder / "journal.jsonl").write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    before = snapshot(journals)
    assert_user_error(*run_forge(capsys, "journal", "prune", "golden", "--journals",
                                 journals, "--yes"),
                      "cannot prune run golden: not finished (no end record)", "--force")
    code, out, _ = run_forge(capsys, "journal", "prune", "--journals", journals, "--yes")
    assert code == 0 and out.startswith("golden: skipped: not finished")
    assert snapshot(journals) == before
    done = run_forge_json(capsys, "journal", "prune", "golden", "--journals", journals,
                          "--yes", "--force", "--json")
    assert done[0]["action"] == "pruned"
    assert_user_error(*run_forge(capsys, "search", "--resume", "golden", "--journals",
                                 journals), "it was pruned on")


def test_keep_leaves_the_newest_runs_whole(journals: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    for name, day in (("older", 1), ("newer", 3), ("newest", 4)):
        copy = Path(shutil.copytree(journals / "golden", journals / name))
        info = json.loads((copy / "run.json").read_text(encoding="utf-8"))
        info["created_at"] = f"2026-01-0{day}T00:00:00Z"
        (copy / "run.json").write_text(json.dumps(info), encoding="utf-8")
    shutil.rmtree(journals / "golden")
    done = run_forge_json(capsys, "journal", "prune", "--journals", journals, "--keep", "2",
                          "--yes", "--json")
    assert {o["run_id"]: o["action"] for o in done} == {
        "older": "pruned", "newer": "skipped", "newest": "skipped"}
    assert {o["reason"] for o in done if o["action"] == "skipped"} == {
        "one of the 2 newest runs (--keep 2)"}
    assert [load_pruned(journals / n) is not None for n in ("older", "newer", "newest")] == [
        True, False, False]


def test_a_plain_store_of_an_earlier_forge_is_pruned_into_the_compressed_one(
        journals: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = journals / "golden"
    page = render_html(folder)
    rows = list(read_attempts(folder / STORE_FILE))
    (folder / PLAIN_STORE_FILE).write_text(
        "".join(attempt_line(r.config, r.stream, r.result) + "\n" for r in rows),
        encoding="utf-8")
    (folder / STORE_FILE).unlink()
    assert render_html(folder) == page
    done = run_forge_json(capsys, "journal", "prune", "golden", "--journals", journals,
                          "--yes", "--json")
    assert done[0]["attempts_before"] == len(rows)
    assert not (folder / PLAIN_STORE_FILE).exists()
    assert render_html(folder) == page
    record = load_pruned(folder)
    assert record is not None and record.files == [PLAIN_STORE_FILE]

