"""``forge journal list`` and ``forge journal show RUN``: tables, the --json contract, errors,
and each config's unscored attempts."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import PARTLY_FAILING, assert_user_error, stored_rows, write_search_bench
from conftest import run_forge as forge
from conftest import run_forge_json as forge_json
from journal.test_review import CUT_AFTER, make_runs, write_fake_run

from forge.journal.review import STEP_KEYS, load_run_records, step_records
from forge.search.launch import launch_search

UNPARSEABLE = "error: ValueError: unparseable JSON from the model on <task>: <script>x</script>"

GATE_NAME = re.compile(r"^(dev|val|legal|unscored|aux:.+|floor:.+)$")


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_runs(tmp_path_factory.mktemp("journal_cli"))


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    # Wide enough that no cell the tests look for is wrapped across lines.
    monkeypatch.setenv("COLUMNS", "300")


# -- list ---------------------------------------------------------------------------------


def test_list_shows_one_row_per_run(capsys: pytest.CaptureFixture[str],
                                    journals: Path) -> None:
    code, out, err = forge(capsys, "journal", "list", "--journals", journals)
    assert code == 0, err
    ids = {"boost", "arith", "cut"}
    rows = {line.split()[0]: line for line in out.splitlines()
            if line.split() and line.split()[0] in ids}
    assert set(rows) == ids
    assert "local_optimum" in rows["boost"] or "patience" in rows["boost"]
    assert re.search(r"\s\d+ \(1\)\s", rows["boost"])  # steps (one promotion)
    assert re.search(r"\+0\.\d{3}", rows["boost"])  # the test delta
    assert "arith" in rows["arith"]
    assert "running/" in rows["cut"]  # "interrupted" on the row's next line
    assert out.index("boost") < out.index("arith")  # oldest first


@pytest.mark.parametrize("id_length", [29, 34, 70])
def test_list_at_80_columns_never_wraps_a_run_id(capsys: pytest.CaptureFixture[str],
                                                 journals: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 id_length: int) -> None:
    # 29 is forge's own id for a six-letter bench (triage-20261201-120000-123456); a
    # --run-id can be anything. The table is used when it fits, a block per run if not.
    monkeypatch.setenv("COLUMNS", "80")
    ids = []
    for source in ("boost", "cut", "arith"):
        run_id = f"{source}-20261201-120000-123456".ljust(id_length, "x")
        shutil.copytree(journals / source, tmp_path / run_id)
        ids.append(run_id)
    code, out, err = forge(capsys, "journal", "list", "--journals", tmp_path)
    assert code == 0, err
    lines = out.splitlines()
    for run_id in ids:
        assert sum(run_id in line for line in lines) == 1, out  # whole, on one line
    assert max(map(len, lines)) <= 80, out
    if id_length in (29, 70):  # the table while it fits, a block per run after
        assert ("(prom.)" in out) == (id_length == 29), out
    assert "interrupted" in out and "max_steps" in out  # no column cut away


def test_list_json_is_a_list_of_run_objects(capsys: pytest.CaptureFixture[str],
                                            journals: Path) -> None:
    runs = forge_json(capsys, "journal", "list", "--journals", journals, "--json")
    assert [r["run_id"] for r in runs] == ["boost", "cut", "arith"]
    by_id = {r["run_id"]: r for r in runs}
    assert by_id["boost"]["status"] == "finished" and by_id["boost"]["promotions"] == 1
    assert by_id["boost"]["test"]["delta"] > 0.15
    assert by_id["cut"]["status"] == "running/interrupted"
    assert by_id["cut"]["stop_reason"] is None
    assert by_id["cut"]["candidates"] == CUT_AFTER - 1
    for run in runs:
        assert {"run_id", "bench", "created_at", "steps", "promotions", "stop_reason",
                "test", "status", "problem"} <= set(run)


def test_list_shows_a_damaged_run_with_its_problem(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    root = tmp_path / "journals"
    write_fake_run(root / "fine", [{"kind": "start"}])
    (root / "broken").mkdir()
    (root / "broken" / "run.json").write_text('{"format_version": 1', encoding="utf-8")
    code, out, err = forge(capsys, "journal", "list", "--journals", root)
    assert code == 0, err
    assert "fine" in out and "damaged" in out
    [problem] = [line for line in out.splitlines() if line.startswith("broken: ")]
    assert "run.json" in problem and "malformed JSON" in problem
    runs = forge_json(capsys, "journal", "list", "--journals", root, "--json")
    assert [(r["run_id"], r["status"]) for r in runs] == [
        ("fine", "running/interrupted"), ("broken", "damaged")]


def test_list_of_no_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = forge(capsys, "journal", "list", "--journals", tmp_path)
    assert code == 0 and out.startswith("no runs in") and err == ""
    assert forge_json(capsys, "journal", "list", "--journals", tmp_path / "absent",
                      "--json") == []
    (tmp_path / "file").write_text("x", encoding="utf-8")
    assert_user_error(*forge(capsys, "journal", "list", "--journals", tmp_path / "file"),
                      "--journals", "not a folder")


# -- show ---------------------------------------------------------------------------------


def test_show_prints_header_steps_and_footer(capsys: pytest.CaptureFixture[str],
                                             journals: Path) -> None:
    code, out, err = forge(capsys, "journal", "show", "boost", "--journals", journals)
    assert code == 0, err
    run = load_run_records(journals / "boost")
    # header: bench, seed, start config, options, stop reason, test with its CI
    assert "run boost · s" in out
    assert f"seed         │ {run.info.seed}" in out
    assert "boost=False knob=2" in out and "max_steps=10" in out
    assert f"{run.stop_reason} after {run.steps} steps" in out
    assert "95% CI" in out and "two-sided p=" in out
    # steps: one row per candidate, with move, proposer, deltas, verdict
    assert f"{len(run.candidates)} candidates over {run.steps} steps" in out
    assert "boost False → True" in out and "sweep: " in out
    promoted_line = next(line for line in out.splitlines() if "boost False → True" in line)
    assert "promoted" in promoted_line and "cost +5.0%" in promoted_line
    assert re.search(r"lb \+0\.\d{3}", out)
    assert "screen" in out  # refused moves show their screening effect, marked
    assert "dev: " in out  # and the gate that refused them, with its reason
    # footer
    assert "promoted: boost False → True (step 1)" in out
    assert f"rollouts: {run.rollouts_used} used (test split included); " \
           f"{run.saved_by_racing} saved by racing" in out


def test_show_gives_the_failing_gate_and_why(capsys: pytest.CaptureFixture[str],
                                             journals: Path) -> None:
    code, out, err = forge(capsys, "journal", "show", "arith", "--journals", journals)
    assert code == 0, err
    assert "aux:cost: cost +" in out  # the aux pre-screen refusal, its gate and reason
    assert "not worth a confirmation" in out  # and the search's why
    # The footer names what was promoted (a jump the tolerances allow, on this bench).
    [promotion] = load_run_records(journals / "arith").promotions
    assert (f"promoted: {promotion.target} {promotion.before!r} → {promotion.after!r} "
            f"(step {promotion.step})") in out


def test_show_of_a_run_that_promoted_nothing_says_the_start_stands(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = write_fake_run(tmp_path / "journals" / "none", [{"kind": "start"}])
    code, out, err = forge(capsys, "journal", "show", "none", "--journals", folder.parent)
    assert code == 0, err
    assert "promoted: nothing (the start config stands)" in out


def test_show_takes_a_path_to_a_run_folder(capsys: pytest.CaptureFixture[str],
                                           journals: Path, tmp_path: Path) -> None:
    code, out, err = forge(capsys, "journal", "show", journals / "boost",
                           "--journals", tmp_path)
    assert code == 0, err
    assert "run boost · s" in out


def test_show_an_interrupted_run(capsys: pytest.CaptureFixture[str], journals: Path) -> None:
    code, out, err = forge(capsys, "journal", "show", "cut", "--journals", journals)
    assert code == 0, err
    assert "running/interrupted: no stop record yet" in out
    assert f"{CUT_AFTER - 1} candidates over 1 steps" in out
    assert "not yet: the test split is evaluated once" in out
    assert "used so far" in out
    assert f"--resume cut --journals {journals}" in out


def test_show_json_prints_only_the_step_records(capsys: pytest.CaptureFixture[str],
                                                journals: Path) -> None:
    for name in ("boost", "arith", "cut"):
        steps = forge_json(capsys, "journal", "show", name, "--journals", journals, "--json")
        # The journal's records, each with its unscored attempts (none in these runs).
        assert [{k: v for k, v in s.items() if k != "unscored_attempts"} for s in steps] == \
            step_records(load_run_records(journals / name))
        assert isinstance(steps, list) and steps
        for step in steps:
            assert set(STEP_KEYS) <= set(step)
            found = step["unscored_attempts"]
            assert found is not None or "candidate" not in step or not step["rollouts"]
            assert "candidate" in step or found is None  # an illegal move ran nothing
            assert found is None or (found["candidate"]["n_unscored"] ==
                                     found["incumbent"]["n_unscored"] == 0)
            assert set(step["move"]) == set(step["inverse"]) == {"target", "before", "after"}
            assert step["verdict"] in {"promoted", "rejected", "skipped"}
            assert isinstance(step["rollouts"], int)
            assert all(set(g) == {"name", "passed", "reason"} and GATE_NAME.match(g["name"])
                       for g in step["gates"])
    boost = forge_json(capsys, "journal", "show", "boost", "--journals", journals, "--json")
    assert [s["verdict"] for s in boost].count("promoted") == 1


def test_show_prints_journal_text_literally(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    # A reason with [brackets] must not be read as rich markup (or crash on it).
    move = {"target": "x", "before": 1, "after": 2}
    write_fake_run(tmp_path / "fake", [
        {"kind": "start", "dev_mean": 0.5, "val_mean": None, "rollouts_total": 4},
        {"kind": "candidate", "step": 1, "move": move, "inverse": move, "proposer": "p",
         "reason": "[bold]not bold[/bold] [/]", "verdict": "rejected",
         "gates": [{"name": "legal", "passed": False, "reason": "[red]odd[/red]"}]}])
    code, out, err = forge(capsys, "journal", "show", "fake", "--journals", tmp_path)
    assert code == 0, err
    assert "p: [bold]not bold[/bold] [/]" in out
    assert "legal: [red]odd[/red]" in out


def test_show_an_unknown_run_is_one_line_exit_2(capsys: pytest.CaptureFixture[str],
                                                journals: Path) -> None:
    assert_user_error(*forge(capsys, "journal", "show", "nope", "--journals", journals),
                      f"{journals / 'nope' / 'run.json'}: no such run")
    assert_user_error(*forge(capsys, "journal", "show", "nope", "--journals", journals,
                             "--json"), "no such run")


def test_show_a_damaged_run_json_is_one_line_exit_2(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.json").write_text('{"format_version": 1, "run_id": 3}',
                                               encoding="utf-8")
    assert_user_error(*forge(capsys, "journal", "show", "bad", "--journals", tmp_path),
                      "run.json", "damaged run.json")
    (tmp_path / "bad" / "run.json").write_text("{", encoding="utf-8")
    assert_user_error(*forge(capsys, "journal", "show", "bad", "--journals", tmp_path),
                      "run.json", "malformed JSON")


def test_journal_without_a_subcommand_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = forge(capsys, "journal")
    assert code == 2 and "list" in out + err and "show" in out + err


# -- unscored attempts per config ------------------------------------------------------------


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of PARTLY_FAILING: some tasks never score, knob 1 raises often."""
    root = tmp_path_factory.mktemp("failing")
    bench = write_search_bench(root / "bench", PARTLY_FAILING)
    launch_search(bench, run_id="f", journals=root / "journals", seed=5)
    return root / "journals"


def expected_pairs(folder: Path) -> dict[tuple[str, str], tuple[tuple[int, int], tuple[int, int]]]:
    """Per (candidate, incumbent) of the journal: each one's (attempts, unscored) on the
    keys both ran, counted from the store's lines as they are written."""
    by_config: dict[str, dict[tuple[str, str, int], bool]] = {}
    for row in stored_rows(folder):
        r = row["result"]
        scored = r["stop_reason"] == "completed" and r["score"] is not None
        by_config.setdefault(row["config"], {})[(row["stream"], r["task_id"], r["attempt"])] = \
            scored
    out = {}
    for record in load_run_records(folder).candidates:
        if record.candidate is None:
            continue
        cand, inc = by_config.get(record.candidate, {}), by_config[record.incumbent]
        shared = [key for key in cand if key in inc]
        if shared:
            out[(record.candidate, record.incumbent)] = (
                (len(shared), sum(not cand[k] for k in shared)),
                (len(shared), sum(not inc[k] for k in shared)))
    return out


def test_show_json_counts_each_candidates_unscored_attempts_beside_the_incumbents(
        capsys: pytest.CaptureFixture[str], failing: Path) -> None:
    steps = forge_json(capsys, "journal", "show", "f", "--journals", failing, "--json")
    expected = expected_pairs(failing / "f")
    seen_worse = False
    for step in steps:
        assert tuple(step)[:len(STEP_KEYS)] == STEP_KEYS  # the contract's keys first
        found = step["unscored_attempts"]
        if "candidate" not in step:
            assert found is None
            continue
        (n_cand, u_cand), (n_inc, u_inc) = expected[(step["candidate"], step["incumbent"])]
        cand, inc = found["candidate"], found["incumbent"]
        assert (cand["n_attempts"], cand["n_unscored"]) == (n_cand, u_cand)
        assert (inc["n_attempts"], inc["n_unscored"]) == (n_inc, u_inc)
        assert sum(cand["unscored_by_reason"].values()) == u_cand
        assert UNPARSEABLE in cand["unscored_by_reason"]  # every config fails those tasks
        if step["move"] == {"target": "knob", "before": 2, "after": 1}:
            # knob 1 raises on a third of its attempts: more than the incumbent, why named.
            assert u_cand > u_inc
            assert cand["unscored_by_reason"]["error: RuntimeError: tool call limit hit on "
                                              "<task>"] == u_cand - u_inc
            seen_worse = True
    assert seen_worse


def test_show_prints_each_configs_unscored_share_and_reasons(
        capsys: pytest.CaptureFixture[str], failing: Path) -> None:
    code, out, err = forge(capsys, "journal", "show", "f", "--journals", failing)
    assert code == 0, err
    run = load_run_records(failing / "f")
    start = run.start
    assert start is not None
    rows = stored_rows(failing / "f")
    mine = [r["result"] for r in rows if r["config"] == start.fingerprint]
    unscored = sum(r["stop_reason"] != "completed" for r in mine)
    total = sum(r["stop_reason"] != "completed" for r in (row["result"] for row in rows))
    assert f"unscored attempts by config: {total:,} of {len(rows):,}" in out
    table = out[out.index("unscored attempts by config"):]
    start_row = next(line for line in table.splitlines() if "start config" in line)
    assert f"{unscored:,} of {len(mine):,} ({unscored / len(mine):.1%})" in start_row
    assert "tool call limit hit on <task>" in table  # knob 1's own reason, on its row
    assert "knob 2 → 1" in table and "final config" in table
    assert "unparseable JSON from the model on <task>: <script>x</script>" in table
    # The header's test row names the test tasks the comparison left out.
    assert "unscored on test: start 120 of 600 (20.0%), final 120 of 600 (20.0%)" in out
    assert ("6 test tasks left out of the comparison, with no scored attempt: start 6 "
            "(test-03, test-07, test-13, test-17, test-23 and 1 more)") in out


def test_show_gives_the_same_counts_after_a_prune(
        capsys: pytest.CaptureFixture[str], failing: Path, tmp_path: Path) -> None:
    journals = tmp_path / "j"
    shutil.copytree(failing / "f", journals / "f")
    before = forge_json(capsys, "journal", "show", "f", "--journals", journals, "--json")
    text = forge(capsys, "journal", "show", "f", "--journals", journals)[1]
    assert forge(capsys, "journal", "prune", "--journals", journals, "--yes")[0] == 0
    assert len(stored_rows(journals / "f")) < len(stored_rows(failing / "f"))
    assert forge_json(capsys, "journal", "show", "f", "--journals", journals,
                      "--json") == before
    assert forge(capsys, "journal", "show", "f", "--journals", journals)[1] == text


def test_show_says_when_the_counts_cannot_be_known(
        capsys: pytest.CaptureFixture[str], failing: Path, tmp_path: Path) -> None:
    journals = tmp_path / "j"
    shutil.copytree(failing / "f", journals / "f")
    (journals / "f" / "attempts.jsonl.gz").unlink()
    code, out, err = forge(capsys, "journal", "show", "f", "--journals", journals)
    assert code == 0, err
    assert ("unscored attempts by config: not known: the run folder has no attempt store; "
            "the test split's are in the test row above") in " ".join(out.split())
    steps = forge_json(capsys, "journal", "show", "f", "--journals", journals, "--json")
    assert all(s["unscored_attempts"] is None for s in steps)
