"""``forge diff A B``: two saved results paired by seed, unmatched tasks listed, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ARITH, assert_user_error
from conftest import run_forge as forge
from conftest import run_forge_json as forge_json

BENCH = str(ARITH)


def _save(capsys: pytest.CaptureFixture[str], path: Path, *args: object) -> Path:
    forge_json(capsys, "eval", BENCH, "--json", "--save", path, *args)
    return path


def test_diff_compares_two_saved_results(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    a = _save(capsys, tmp_path / "a.json", "-k", "2")
    b = _save(capsys, tmp_path / "b.json", "-k", "2", "--set", "temperature=0")
    report = forge_json(capsys, "diff", a, b, "--json")
    assert report["mean_delta"] > 0
    assert [t["pairs"] for t in report["tasks"]] == [2] * 12
    assert report["only_in_a"] == report["only_in_b"] == []
    code, out, err = forge(capsys, "diff", a, b)
    assert code == 0, err
    assert "12 paired tasks" in out


def test_diff_lists_unmatched_tasks(capsys: pytest.CaptureFixture[str],
                                    tmp_path: Path) -> None:
    a = _save(capsys, tmp_path / "a.json", "-k", "1", "--task", "dev-00", "--task", "dev-01")
    b = _save(capsys, tmp_path / "b.json", "-k", "1", "--task", "dev-01")
    report = forge_json(capsys, "diff", a, b, "--json")
    assert report["only_in_a"] == ["dev-00"]
    assert [t["id"] for t in report["tasks"]] == ["dev-01"]


def test_diff_refuses_mismatched_environments(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    a = _save(capsys, tmp_path / "a.json", "-k", "1")
    b = _save(capsys, tmp_path / "b.json", "-k", "2")
    assert_user_error(*forge(capsys, "diff", a, b), "k (1 vs 2)", str(a), str(b))


def test_diff_that_compared_nothing_exits_2(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    a = _save(capsys, tmp_path / "a.json", "-k", "2")
    b = _save(capsys, tmp_path / "b.json", "-k", "2", "--seed", "7")
    assert_user_error(*forge(capsys, "diff", a, b), "nothing was compared", "seed 7")
    assert_user_error(*forge(capsys, "diff", a, b, "--json"), "nothing was compared")


def test_diff_refuses_a_file_that_is_not_a_result(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    a = _save(capsys, tmp_path / "a.json", "-k", "1")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert_user_error(*forge(capsys, "diff", a, bad), str(bad), "malformed JSON")
