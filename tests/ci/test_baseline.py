"""``forge gate``: each CI gate passing and failing, exit codes, Markdown, JUnit, step summary."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import ARITH
from conftest import assert_user_error as assert_one_line_error
from conftest import run_forge as forge

from forge.ci.baseline import (
    CheckOptions,
    aggregate_check,
    regression_check,
    run_checks,
    task_floor_check,
    unscored_share_check,
)
from forge.cli import main
from forge.errors import IncomparableError, UserError
from forge.harness import RunOutput
from forge.report.ci import append_step_summary, markdown_summary
from forge.results.model import AttemptResult, EvalResult, TaskResult, save_result
from forge.scorers import Score

ENV = "e" * 64

#: One outcome per attempt: True passed, False failed (scored), None unscored (error).
Outcomes = dict[str, list[bool | None]]


def attempt(task_id: str, i: int, outcome: bool | None, run_seed: int = 1) -> AttemptResult:
    # Seeds depend on (run seed, task, attempt) only, as forge derives them, so two
    # results built from the same task ids and run seed pair attempt by attempt.
    seed = 1000 * (sum(map(ord, task_id)) % 97) + i + 10**6 * (run_seed - 1)
    if outcome is None:
        return AttemptResult(task_id=task_id, attempt=i, seed=seed, stop_reason="error",
                             error="boom", duration_s=0.01)
    return AttemptResult(task_id=task_id, attempt=i, seed=seed, stop_reason="completed",
                         duration_s=0.01, output=RunOutput(output="answer"),
                         score=Score(value=float(outcome), passed=outcome))


def make_result(outcomes: Outcomes, *, env: str | None = ENV, k: int = 4,
                seed: int = 1) -> EvalResult:
    return EvalResult(
        bench="b", split="dev", k=k, seed=seed, config={"x": 1}, config_fingerprint="c" * 64,
        env_fingerprint=env, env={"k": k}, started_at=datetime(2026, 1, 1, tzinfo=UTC),
        duration_s=1.0,
        tasks=[TaskResult(task_id=tid,
                          attempts=[attempt(tid, i, o, seed) for i, o in enumerate(os)])
               for tid, os in outcomes.items()])


def saved(tmp_path: Path, name: str, outcomes: Outcomes, seed: int = 1) -> Path:
    path = tmp_path / name
    save_result(make_result(outcomes, seed=seed), path)
    return path


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    # A test run inside GitHub Actions must not write into the real step summary.
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


GOOD: Outcomes = {"t1": [True, True, True, False], "t2": [True, True, False, False]}


# -- the gates as functions ------------------------------------------------------------


def test_aggregate_gate_ignores_unscored_attempts() -> None:
    # 2 of 2 scored pass; two errors are not zeros, so the pass rate is 100%.
    r = make_result({"t": [True, None, True, None]})
    g = aggregate_check(r, 1.0)
    assert g.passed
    assert "100.0%" in g.reason and "2 unscored attempts not counted" in g.reason


def test_aggregate_gate_fails_below_threshold_and_on_nothing_scored() -> None:
    r = make_result(GOOD)  # task rates 0.75 and 0.5: mean 0.625
    assert aggregate_check(r, 0.625).passed  # the threshold itself passes
    low = aggregate_check(r, 0.7)
    assert not low.passed and "62.5% < 70.0%" in low.reason
    none = aggregate_check(make_result({"t": [None, None]}), 0.0)
    assert not none.passed and none.reason.startswith("nothing scored")


def test_reason_never_shows_two_equal_numbers_for_different_values() -> None:
    g = aggregate_check(make_result({"t": [True, True, False]}), 0.6667)  # 2/3 < 0.6667
    assert not g.passed
    assert "66.667% < 66.670%" in g.reason


def test_unscored_gate_names_the_tasks_with_unscored_attempts() -> None:
    r = make_result({"t1": [True, None, None], "t2": [True, True], "t3": [None, False]})
    assert unscored_share_check(r, 3).passed
    g = unscored_share_check(r, 2)
    assert not g.passed
    assert "3 unscored attempts > 2 allowed" in g.reason and "error 3" in g.reason
    assert [f.task_id for f in g.failing] == ["t1", "t3"]  # most unscored first
    assert g.failing[0].detail.startswith("2 of 3 attempts unscored")


def test_task_floor_gate_fails_low_tasks_and_tasks_with_nothing_scored() -> None:
    r = make_result({"ok": [True, True], "low": [True, False, False, False],
                     "dead": [None, None], "edge": [True, False]})
    assert task_floor_check(make_result(GOOD), 0.5).passed
    g = task_floor_check(r, 0.5)
    assert not g.passed
    assert [f.task_id for f in g.failing] == ["dead", "low"]  # unmeasured first, then worst
    assert g.failing[0].detail.startswith("nothing scored")
    assert "25.0% < floor 50.0%" in g.failing[1].detail
    assert g.reason == "2 of 4 tasks below 50.0% (1 with nothing scored)"


def test_regression_gate_pairs_by_seed_and_lists_unshared_tasks() -> None:
    base = make_result({"t1": [True, True, True, True], "t2": [True, False, True, False],
                        "gone": [True, True]})
    cur = make_result({"t1": [True, True, False, True], "t2": [True, False, True, False],
                       "new": [False, False]})
    assert regression_check(cur, base, 0.25).passed  # a drop of exactly max-drop passes
    g = regression_check(cur, base, 0.0)
    assert not g.passed
    assert [f.task_id for f in g.failing] == ["t1"]
    assert g.failing[0].value == pytest.approx(0.25)
    assert "100.0% → 75.0%" in g.failing[0].detail
    assert any("only in baseline" in n and "gone" in n for n in g.notes)
    assert any("only in current" in n and "new" in n for n in g.notes)


def test_regression_gate_compares_only_seeds_scored_in_both() -> None:
    # The current run's errors on t's last two seeds are not a drop: those seeds are
    # left out, and on the two seeds scored in both nothing changed.
    base = make_result({"t": [True, False, True, True], "u": [True]})
    cur = make_result({"t": [True, False, None, None], "u": [None]})
    g = regression_check(cur, base, 0.0)
    assert g.passed
    assert any("nothing scored on one side" in n and "u" in n for n in g.notes)


def test_regression_gate_compares_another_seed_unpaired() -> None:
    # A baseline saved with another --seed pairs no attempt: today's green "0 tasks
    # compared" becomes an unpaired comparison of each task's pass counts.
    base = make_result({"t1": [True] * 8, "t2": [True] * 8, "t3": [True, False] * 4})
    same = make_result({"t1": [True] * 8, "t2": [True] * 7 + [False],
                        "t3": [False, True] * 4}, seed=2)
    g = regression_check(same, base, 0.0)
    assert g.passed  # a drop of 1 in 8 is noise at K = 8, not evidence
    assert "0 tasks compared by seed, 3 unpaired at α=0.05" in g.reason
    assert any("compared unpaired" in n and "seed 1" in n and "seed 2" in n for n in g.notes)
    worse = make_result({"t1": [False] * 8, "t2": [True] * 8, "t3": [True, False] * 4},
                        seed=2)
    g = regression_check(worse, base, 0.0)
    assert not g.passed
    assert [f.task_id for f in g.failing] == ["t1"]
    assert "8/8 → 0/8, unpaired: drop at least" in g.failing[0].detail
    assert g.failing[0].value == pytest.approx(1.0)
    # A drop that a margin allows passes; the margin is part of the test, not a shift.
    assert regression_check(worse, base, 1.0).passed


def test_unpaired_mean_drop_fails_where_no_single_task_can() -> None:
    # Every task loses 3 of 4 passes: too few attempts to convict any one task after
    # the Bonferroni split, but the mean over 20 tasks is a clear regression.
    base = make_result({f"t{i:02d}": [True] * 4 for i in range(20)})
    cur = make_result({f"t{i:02d}": [True, False, False, False] for i in range(20)}, seed=2)
    g = regression_check(cur, base, 0.0)
    assert not g.passed
    assert g.failing == ()
    assert "mean drop over 20 unpaired tasks 75.0%" in g.reason


def test_unpaired_gate_fails_an_unchanged_config_at_most_alpha() -> None:
    # The same config, two seeds: a false failure is one the gate must keep under alpha.
    rng = random.Random(16)
    rates = [rng.choice([0.1, 0.3, 0.5, 0.7, 0.9, 1.0]) for _ in range(20)]

    def sample(seed: int) -> EvalResult:
        return make_result({f"t{i:02d}": [rng.random() < p for _ in range(5)]
                            for i, p in enumerate(rates)}, seed=seed)

    runs = 300  # 2.8% of 1,500 runs fail; without the Bonferroni split, half of them
    failures = sum(not regression_check(sample(2), sample(1), 0.0).passed for _ in range(runs))
    assert failures / runs <= 0.05


def test_nothing_compared_is_refused_not_passed() -> None:
    base = make_result({"t1": [None, None], "t2": [None]})
    cur = make_result({"t1": [True, True], "t2": [True]}, seed=2)
    with pytest.raises(IncomparableError, match="no task scored in both"):
        regression_check(cur, base, 0.0, names=("baseline b.json", "current c.json"))


def test_regression_gate_refuses_other_environments() -> None:
    with pytest.raises(IncomparableError):
        regression_check(make_result(GOOD), make_result(GOOD, env="f" * 64), 0.1)
    with pytest.raises(IncomparableError, match="no env fingerprint"):
        regression_check(make_result(GOOD, env=None), make_result(GOOD, env=None), 0.1)


@pytest.mark.parametrize("options", [{"min_pass_rate": 1.5}, {"task_floor": -0.1},
                                     {"max_drop": float("nan")}, {"max_unscored": -1}])
def test_options_out_of_range_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(UserError):
        CheckOptions(**options)  # type: ignore[arg-type]


def test_only_requested_gates_run_in_a_fixed_order() -> None:
    r = make_result(GOOD)
    assert [g.name for g in run_checks(r).gates] == ["aggregate"]
    report = run_checks(r, options=CheckOptions(task_floor=0.1, max_unscored=0), baseline=r)
    assert [g.name for g in report.gates] == ["aggregate", "unscored", "task_floor",
                                              "regression"]
    assert report.passed and report.exit_code == 0


# -- the command -------------------------------------------------------------------


def test_gate_passes_with_exit_0_and_prints_markdown(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cur = saved(tmp_path, "cur.json", GOOD)
    code, out, err = forge(capsys, "gate", cur, "--baseline", cur, "--min-pass-rate", "0.6",
                           "--task-floor", "0.5", "--max-unscored", "0")
    assert code == 0, err
    assert out.startswith("## forge gate: ✅ passed")
    assert "| gate | result | reason |" in out
    for name in ("aggregate", "unscored", "task_floor", "regression"):
        assert f"| {name} | ✅ pass |" in out


def test_each_failing_gate_gives_exit_1_and_its_tasks(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    base = saved(tmp_path, "base.json", {"t1": [True] * 4, "t2": [True] * 4})
    cur = saved(tmp_path, "cur.json", {"t1": [True, False, None, True], "t2": [True] * 4})
    cases: dict[str, list[object]] = {
        "aggregate": ["--min-pass-rate", "0.9"],
        "unscored": ["--max-unscored", "0"],
        "task_floor": ["--task-floor", "0.8"],
        "regression": ["--baseline", base],
    }
    for name, args in cases.items():
        code, out, err = forge(capsys, "gate", cur, *args)
        assert code == 1, (name, err)
        assert err == ""
        assert f"| {name} | ❌ fail |" in out
        if name != "aggregate":
            assert f"### ❌ {name}" in out and "- `t1`:" in out


def test_failing_tasks_in_markdown_are_capped(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    cur = saved(tmp_path, "cur.json", {f"t{i:02d}": [False, True, False] for i in range(25)})
    code, out, _ = forge(capsys, "gate", cur, "--task-floor", "0.5")
    assert code == 1
    assert out.count("- `t") == 10
    assert "… and 15 more failing tasks" in out


def test_incomparable_results_exit_2_with_one_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # Real results: the same bench at k=4 and k=2 have different env fingerprints.
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["eval", str(ARITH), "-k", "4", "--save", str(a), "--json"]) == 0
    assert main(["eval", str(ARITH), "-k", "2", "--save", str(b), "--json"]) == 0
    capsys.readouterr()
    code, out, err = forge(capsys, "gate", a, "--baseline", b, "--junit", tmp_path / "j.xml")
    assert_one_line_error(code, out, err, "different environments", "k (2 vs 4)",
                          f"baseline {b}", f"current {a}")
    assert not (tmp_path / "j.xml").exists()


def test_baseline_with_another_seed_is_compared_unpaired(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Real results: the same bench, one run with --seed 7 and a config that slips more.
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    assert main(["eval", str(ARITH), "-k", "8", "--set", "temperature=0", "--save", str(a),
                 "--json"]) == 0
    assert main(["eval", str(ARITH), "-k", "8", "--set", "temperature=0", "--seed", "7",
                 "--save", str(b), "--json"]) == 0
    assert main(["eval", str(ARITH), "-k", "8", "--set", "temperature=1", "--seed", "7",
                 "--save", str(c), "--json"]) == 0
    capsys.readouterr()
    code, out, err = forge(capsys, "gate", b, "--baseline", a, "--junit", tmp_path / "j.xml")
    assert code == 0, err
    assert "0 tasks compared by seed, 12 unpaired" in out
    code, out, err = forge(capsys, "gate", c, "--baseline", a, "--junit", tmp_path / "j.xml")
    assert code == 1, err
    assert "| regression | ❌ fail |" in out and "unpaired: drop at least" in out
    junit = ET.parse(tmp_path / "j.xml").getroot()
    assert junit.get("failures") != "0"


def test_baseline_with_nothing_in_common_exits_2(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    base = saved(tmp_path, "base.json", {"t1": [None, None], "t2": [None]})
    cur = saved(tmp_path, "cur.json", GOOD, seed=2)
    assert_one_line_error(*forge(capsys, "gate", cur, "--baseline", base, "--junit",
                                 tmp_path / "j.xml"),
                          "no task scored in both", "compare nothing")
    assert not (tmp_path / "j.xml").exists()  # no green JUnit file left for CI to read


def test_same_env_other_config_is_compared(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    a, c = tmp_path / "a.json", tmp_path / "c.json"
    assert main(["eval", str(ARITH), "-k", "2", "--save", str(a), "--json"]) == 0
    assert main(["eval", str(ARITH), "-k", "2", "--set", "effort=3", "--save", str(c),
                 "--json"]) == 0
    capsys.readouterr()
    code, out, err = forge(capsys, "gate", c, "--baseline", a, "--max-drop", "1.0")
    assert code == 0, err
    assert "| regression | ✅ pass | no task dropped more than 100.0% (12 tasks compared) |" \
        in out


@pytest.mark.parametrize("args, fragment", [
    (["--min-pass-rate", "1.5"], "--min-pass-rate: expected a fraction between 0 and 1, got 1.5"),
    (["--task-floor", "-0.5"], "--task-floor: expected a fraction between 0 and 1, got -0.5"),
    (["--max-drop", "0.1"], "--max-drop: needs --baseline"),
    (["--max-unscored", "-1"], "--max-unscored: expected a whole number >= 0, got -1"),
    (["--alpha", "0.1"], "--alpha: needs --baseline"),
    (["--min-pass-rate", "abc"], "--min-pass-rate"),
])
def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            args: list[str], fragment: str) -> None:
    cur = saved(tmp_path, "cur.json", GOOD)
    assert_one_line_error(*forge(capsys, "gate", cur, *args), fragment)


def test_bad_result_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(*forge(capsys, "gate", tmp_path / "missing.json"), "file not found")
    cur = saved(tmp_path, "cur.json", GOOD)
    other = tmp_path / "v2.json"
    data = json.loads(cur.read_text(encoding="utf-8"))
    other.write_text(json.dumps({**data, "format_version": 2}), encoding="utf-8")
    assert_one_line_error(*forge(capsys, "gate", other), "format_version 2")
    assert_one_line_error(*forge(capsys, "gate", cur, "--baseline", other), "format_version 2")
    assert_one_line_error(*forge(capsys, "gate", cur, "--junit", tmp_path), "is a folder")


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cur = saved(tmp_path, "cur.json", GOOD)
    code, out, _ = forge(capsys, "gate", cur, "--task-floor", "0.6", "--json")
    assert code == 1
    doc = json.loads(out)  # the whole of stdout is one JSON document
    assert doc["passed"] is False
    assert [(g["name"], g["passed"]) for g in doc["gates"]] == [("aggregate", True),
                                                                ("task_floor", False)]
    assert doc["gates"][1]["failing"][0]["task_id"] == "t2"
    assert doc["result"]["pass_rate"] == 0.625


def test_junit_xml_parses_and_has_a_testcase_per_gate_and_failing_task(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = saved(tmp_path, "base.json", {"t1": [True] * 4, "t2": [True] * 4, "t<&>": [True]})
    cur = saved(tmp_path, "cur.json", {"t1": [True, False, True, True], "t2": [True] * 4,
                                       "t<&>": [False]})
    junit = tmp_path / "out" / "gate.xml"
    code, _, err = forge(capsys, "gate", cur, "--baseline", base, "--task-floor", "0.5",
                         "--junit", junit)
    assert code == 1, err
    root = ET.parse(junit).getroot()
    (suite,) = root.iter("testsuite")
    assert suite.get("name") == "forge-gate"
    cases = [(c.get("classname"), c.get("name"), c.find("failure") is not None)
             for c in suite.iter("testcase")]
    assert cases == [
        ("forge-gate", "aggregate", False),
        ("forge-gate", "unscored", False),  # on by default with a baseline; nothing failed
        ("forge-gate", "task_floor", True),
        ("forge-gate.task_floor", "t<&>", True),
        ("forge-gate", "regression", True),
        ("forge-gate.regression", "t<&>", True),
        ("forge-gate.regression", "t1", True),
    ]
    assert suite.get("tests") == "7" and suite.get("failures") == "5"
    failure = suite.find("testcase[@name='regression']/failure")
    assert failure is not None
    assert "2 of 3 tasks dropped" in (failure.get("message") or "")
    assert "t1: pass rate 100.0% → 75.0%" in (failure.text or "")
    assert not list(tmp_path.joinpath("out").glob(".*.tmp"))  # written atomically


def test_junit_on_a_pass_has_no_failures(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    cur = saved(tmp_path, "cur.json", GOOD)
    junit = tmp_path / "gate.xml"
    assert forge(capsys, "gate", cur, "--junit", junit)[0] == 0
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    assert [c.get("name") for c in suite.iter("testcase")] == ["aggregate"]


def test_markdown_is_appended_to_github_step_summary(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step output\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    cur = saved(tmp_path, "cur.json", GOOD)
    code, out, _ = forge(capsys, "gate", cur, "--task-floor", "0.6")
    assert code == 1
    assert summary.read_text(encoding="utf-8") == "earlier step output\n" + out
    # With --json, stdout is JSON only but the step summary still gets the Markdown.
    code, out, _ = forge(capsys, "gate", cur, "--json")
    assert code == 0
    text = summary.read_text(encoding="utf-8")
    assert text.count("## forge gate:") == 2 and text.rstrip().endswith("|")
    assert json.loads(out)["passed"] is True


def test_unwritable_step_summary_warns_and_keeps_the_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))  # a folder: cannot append
    cur = saved(tmp_path, "cur.json", GOOD)
    code, out, err = forge(capsys, "gate", cur)
    assert code == 0
    assert out.startswith("## forge gate: ✅ passed")
    assert err.startswith("forge: warning: cannot append to $GITHUB_STEP_SUMMARY")


def test_append_step_summary_is_a_no_op_without_the_variable() -> None:
    assert append_step_summary("# x\n", environ={}) is None


def test_markdown_escapes_table_cells() -> None:
    r = make_result({"a|b": [False, True]})
    md = markdown_summary(run_checks(r, options=CheckOptions(task_floor=0.9)))
    assert "- `a|b`:" in md  # a list item, not a table cell: kept as is
    table = [line for line in md.splitlines() if line.startswith("| task_floor")]
    assert table == ["| task_floor | ❌ fail | 1 of 1 tasks below 90.0% |"]
