"""``forge journal list`` and ``forge journal show RUN``: tables, the --json contract, errors."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import assert_user_error
from conftest import run_forge as forge
from conftest import run_forge_json as forge_json
from test_review import CUT_AFTER, make_runs, write_fake_run

from forge.review import STEP_KEYS, load_run_records, step_records

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
        assert steps == step_records(load_run_records(journals / name))
        assert isinstance(steps, list) and steps
        for step in steps:
            assert set(STEP_KEYS) <= set(step)
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
