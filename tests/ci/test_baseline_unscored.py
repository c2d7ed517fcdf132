"""``forge gate``'s unscored gate: on by default against a baseline, combined with
``--max-unscored``, named in JUnit and JSON; a result with nothing scored never passes."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import assert_user_error
from conftest import run_forge as forge

from ci.test_baseline import Outcomes, make_result, saved
from forge.ci.baseline import (
    DEFAULT_MAX_UNSCORED_RISE,
    CheckOptions,
    run_checks,
    unscored_share_check,
)
from forge.errors import IncomparableError, UserError

CLEAN: Outcomes = {f"dev-{i:02d}": [True, True, False, True] for i in range(24)}


def _failing(share: float = 0.3, seed: int = 5) -> Outcomes:
    """CLEAN with about ``share`` of the attempts unscored; what is scored is unchanged."""
    rng = random.Random(seed)
    return {task: [None if rng.random() < share else o for o in outcomes]
            for task, outcomes in CLEAN.items()}


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def test_with_a_baseline_the_unscored_gate_runs_by_default() -> None:
    r = make_result(CLEAN)
    assert [g.name for g in run_checks(r).gates] == ["aggregate"]  # nothing to compare with
    report = run_checks(make_result(_failing()), baseline=r)
    assert [(g.name, g.passed) for g in report.gates] == [
        ("aggregate", True), ("unscored", False), ("regression", True)]
    assert report.options.max_unscored_rise == DEFAULT_MAX_UNSCORED_RISE == 0.02
    unscored = report.gates[1]
    assert "in the baseline, on 96 attempts paired by seed" in unscored.reason
    assert "beyond chance" in unscored.reason
    # The tasks with new failures are named, most first, each with its count.
    values = [f.value for f in unscored.failing]
    assert values == sorted(values, reverse=True) and sum(values) == unscored.details[
        "share"]["new"]
    assert unscored.failing[0].detail.endswith(" attempts newly unscored, scored in the "
                                               f"baseline (error {int(values[0])})")


def test_the_count_and_the_share_combine_and_either_fails() -> None:
    base, cur = make_result(CLEAN), make_result(_failing(0.03, seed=2))
    n = cur.n_attempts - cur.n_scored
    assert n >= 1
    both = unscored_share_check(cur, n, baseline=base)
    assert both.passed and both.reason.endswith(f"; {n} unscored attempts ≤ {n} allowed")
    count_only = unscored_share_check(cur, n - 1, baseline=base)
    assert not count_only.passed
    assert count_only.details["share"]["passed"] and not count_only.details["count"]["passed"]
    share_only = unscored_share_check(make_result(_failing()), 1000, baseline=base)
    assert not share_only.passed and share_only.details["count"]["passed"]
    with pytest.raises(ValueError, match="compare nothing"):
        unscored_share_check(cur)


def test_the_allowance_is_an_option_and_one_disables_the_share() -> None:
    base, cur = make_result(CLEAN), make_result(_failing())
    assert not run_checks(cur, baseline=base).gates[1].passed
    assert run_checks(cur, baseline=base,
                     options=CheckOptions(max_unscored_rise=1.0)).gates[1].passed
    with pytest.raises(UserError, match="--max-unscored-rise"):
        CheckOptions(max_unscored_rise=1.5)


def test_results_of_other_environments_are_refused_by_the_unscored_gate_too() -> None:
    with pytest.raises(IncomparableError, match="different environments"):
        unscored_share_check(make_result(CLEAN), baseline=make_result(CLEAN, env="f" * 64))


def test_a_current_result_with_nothing_scored_fails_every_gate_it_meets(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = saved(tmp_path, "base.json", CLEAN)
    dead = saved(tmp_path, "dead.json", {t: [None] * 4 for t in CLEAN})
    junit = tmp_path / "j.xml"
    code, out, err = forge(capsys, "gate", dead, "--baseline", base, "--junit", junit)
    assert (code, err) == (1, "")  # a failed gate, not bad input
    assert "| aggregate | ❌ fail | nothing scored: all 96 attempts unscored (96 × error: " \
           "boom) |" in out
    assert "| unscored | ❌ fail | unscored 100.0% (96 of 96: 96 × error: boom) vs 0.0% " \
           "(0 of 96) in the baseline" in out
    assert f"| regression | ❌ fail | nothing scored in current {dead}: no task could be " \
           "compared |" in out
    names = {c.get("name") for c in ET.parse(junit).getroot().iter("testcase")
             if c.get("classname") == "forge-gate" and c.find("failure") is not None}
    assert names == {"aggregate", "unscored", "regression"}
    # Without a baseline: the aggregate gate alone, and it does not pass either.
    code, out, _ = forge(capsys, "gate", dead)
    assert code == 1 and "| aggregate | ❌ fail | nothing scored: all 96 attempts" in out


def test_the_command_fails_a_failing_harness_and_names_unscored_in_junit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = saved(tmp_path, "base.json", CLEAN)
    cur = saved(tmp_path, "cur.json", _failing())
    junit = tmp_path / "j.xml"
    code, out, err = forge(capsys, "gate", cur, "--baseline", base, "--junit", junit)
    assert code == 1, err
    assert "| unscored | ❌ fail | unscored " in out and "### ❌ unscored" in out
    assert "| regression | ✅ pass |" in out  # the attempts that finished did as well
    root = ET.parse(junit).getroot()
    failure = root.find(".//testcase[@name='unscored']/failure")
    assert failure is not None and "beyond chance" in (failure.get("message") or "")
    tasks = [c.get("name") for c in root.iter("testcase")
             if c.get("classname") == "forge-gate.unscored"]
    assert tasks and all(t.startswith("dev-") for t in tasks)
    # The same result passes when the allowance says a third may fail.
    code, out, err = forge(capsys, "gate", cur, "--baseline", base, "--max-unscored-rise", "0.5")
    assert code == 0, err
    assert "| unscored | ✅ pass |" in out and "≤ 50.0 allowed" in out


def test_json_is_a_superset_with_the_shares_and_the_reasons(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = saved(tmp_path, "base.json", CLEAN)
    cur = saved(tmp_path, "cur.json", _failing())
    code, out, _ = forge(capsys, "gate", cur, "--baseline", base, "--json")
    assert code == 1
    doc = json.loads(out)
    assert set(doc["options"]) == {"min_pass_rate", "task_floor", "max_drop", "max_unscored",
                                   "alpha", "max_unscored_rise"}
    assert doc["options"]["max_unscored_rise"] == 0.02
    result = doc["result"]
    assert {"bench", "split", "k", "n_tasks", "n_attempts", "n_scored", "n_unscored",
            "pass_rate", "env_fingerprint", "config_fingerprint"} <= set(result)
    assert result["unscored_share"] == result["n_unscored"] / result["n_attempts"]
    assert result["unscored_by_reason"] == {"error: boom": result["n_unscored"]}
    gate = next(g for g in doc["gates"] if g["name"] == "unscored")
    assert set(gate) == {"name", "passed", "reason", "failing", "notes", "details"}
    share = gate["details"]["share"]
    assert share["paired"] is True and share["passed"] is False
    assert share["current"]["unscored"] == result["n_unscored"]
    assert share["baseline"] == {"attempts": 96, "unscored": 0, "share": 0.0, "by_reason": {}}
    assert share["p_value"] < 0.05 and share["max_rise"] == 0.02 and share["alpha"] == 0.05
    # Without a baseline the comparison options are null, as max_drop and alpha were.
    code, out, _ = forge(capsys, "gate", cur, "--json")
    assert code == 0 and json.loads(out)["options"]["max_unscored_rise"] is None


@pytest.mark.parametrize("args, fragment", [
    (["--max-unscored-rise", "0.1"], "--max-unscored-rise: needs --baseline"),
    (["--baseline", "BASE", "--max-unscored-rise", "2"],
     "--max-unscored-rise: expected a fraction between 0 and 1, got 2.0"),
])
def test_bad_allowances_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               args: list[str], fragment: str) -> None:
    base = saved(tmp_path, "base.json", CLEAN)
    cur = saved(tmp_path, "cur.json", CLEAN)
    args = [str(base) if a == "BASE" else a for a in args]
    assert_user_error(*forge(capsys, "gate", cur, *args), fragment)
