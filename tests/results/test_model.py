"""Results: what counts as scored, the frozen summary contract, save and load."""

from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from forge.errors import ResultFileError
from forge.evaluation.evaluate import DEFAULT_SEED
from forge.evaluation.rollout import derive_seed
from forge.results.model import (
    FORMAT_VERSION,
    SUMMARY_KEYS,
    TASK_SUMMARY_KEYS,
    AttemptResult,
    EvalResult,
    StopReason,
    TaskAttempts,
    TaskResult,
    load_result,
    paired_attempts,
    save_result,
)
from forge.scorers import Score

RESULT_V1 = ROOT / "data" / "result_v1.json"


def attempt(i: int, passed: bool | None = True, *, stop: StopReason = "completed",
            value: float | None = None, latency: float = 0.1,
            metrics: dict[str, float] | None = None) -> AttemptResult:
    """An attempt; ``passed=None`` on a completed attempt means the scorer failed."""
    score = None
    if stop == "completed" and passed is not None:
        score = Score(value=(1.0 if passed else 0.0) if value is None else value,
                      passed=passed)
    return AttemptResult(task_id="t", attempt=i, seed=1000 + i, stop_reason=stop,
                         error=None if score is not None else "something went wrong",
                         duration_s=latency,
                         score=score, metrics={"latency": latency, **(metrics or {})})


def task(task_id: str, *attempts: AttemptResult) -> TaskResult:
    return TaskResult(task_id=task_id,
                      attempts=[a.model_copy(update={"task_id": task_id}) for a in attempts])


def result(*tasks: TaskResult, k: int = 4) -> EvalResult:
    return EvalResult(bench="b", split="dev", k=k, seed=1, config={"x": 1},
                      config_fingerprint="c" * 64, env_fingerprint="e" * 64,
                      env={"k": k}, started_at=datetime(2026, 1, 1, tzinfo=UTC),
                      duration_s=1.0, tasks=list(tasks))


# -- scored and unscored -------------------------------------------------------------


def test_unscored_attempts_are_not_zeros() -> None:
    t = task("t", attempt(0, True), attempt(1, False), attempt(2, True),
             attempt(3, stop="error"), attempt(4, stop="timeout"),
             attempt(5, stop="cancelled"), attempt(6, None))  # the scorer failed
    assert t.n_scored == 3
    assert t.n_passed == 2
    assert t.n_unscored == 4
    assert t.pass_rate == pytest.approx(2 / 3)
    assert t.mean_score == pytest.approx(2 / 3)


def test_pass_rate_is_none_when_nothing_was_scored() -> None:
    t = task("t", attempt(0, stop="error"), attempt(1, stop="timeout"), attempt(2, None))
    assert t.pass_rate is None
    assert t.mean_score is None
    assert t.learning_zone is False
    r = result(t)
    assert r.pass_rate is None
    assert r.mean_score is None
    assert r.summary()["pass_rate"] is None
    assert r.summary()["n_unscored"] == 3


@pytest.mark.parametrize(("outcomes", "zone"), [
    ([True, False], True),
    ([True, False, None], True),
    ([True, True], False),
    ([False, False], False),
    ([None, None], False),
    ([], False),
])
def test_learning_zone_is_sometimes_passing(outcomes: list[bool | None], zone: bool) -> None:
    t = task("t", *[attempt(i, o) if o is not None else attempt(i, stop="error")
                    for i, o in enumerate(outcomes)])
    assert t.learning_zone is zone


def test_mean_score_uses_values_and_pass_rate_uses_verdicts() -> None:
    t = task("t", attempt(0, True, value=0.8), attempt(1, False, value=0.4))
    assert t.mean_score == pytest.approx(0.6)
    assert t.pass_rate == 0.5


def test_eval_pass_rate_weighs_each_scored_task_the_same() -> None:
    r = result(task("a", attempt(0, True), attempt(1, True), attempt(2, True),
                    attempt(3, False)),
               task("b", attempt(0, False)),
               task("c", attempt(0, stop="error")))
    assert r.pass_rate == pytest.approx((0.75 + 0.0) / 2)
    assert r.n_scored == 5
    assert r.n_attempts == 6
    assert r.stop_reasons() == {"completed": 5, "error": 1}


# -- the summary contract ------------------------------------------------------------


def test_summary_keys_are_the_frozen_contract() -> None:
    # DESIGN.md, "Results": changing these breaks every script and CI job reading them.
    assert SUMMARY_KEYS == ("bench", "split", "k", "n_tasks", "n_attempts", "n_scored",
                            "n_unscored", "pass_rate", "mean_score", "metrics",
                            "env_fingerprint", "config_fingerprint", "tasks",
                            "unscored_by_reason")
    assert TASK_SUMMARY_KEYS == ("id", "pass_rate", "mean_score", "n_unscored",
                                 "learning_zone")


def test_summary_has_exactly_the_contract_keys(arith_result: EvalResult) -> None:
    summary = arith_result.summary()
    assert tuple(summary) == SUMMARY_KEYS
    assert summary["n_tasks"] == len(summary["tasks"]) == 12
    for entry in summary["tasks"]:
        assert tuple(entry) == TASK_SUMMARY_KEYS
    assert summary["bench"] == "arith"
    assert summary["split"] == "dev"
    assert summary["k"] == 2
    assert summary["n_attempts"] == 24
    assert summary["n_scored"] + summary["n_unscored"] == 24
    json.dumps(summary, allow_nan=False)  # what ``forge eval --json`` prints


def test_summary_values_agree_with_the_attempts() -> None:
    r = result(task("a", attempt(0, True), attempt(1, False)),
               task("b", attempt(0, True), attempt(1, stop="timeout")))
    s = r.summary()
    assert s["n_tasks"] == 2
    assert s["n_attempts"] == 4
    assert s["n_scored"] == 3
    assert s["n_unscored"] == 1
    assert s["pass_rate"] == pytest.approx(0.75)
    assert s["tasks"] == [
        {"id": "a", "pass_rate": 0.5, "mean_score": 0.5, "n_unscored": 0,
         "learning_zone": True},
        {"id": "b", "pass_rate": 1.0, "mean_score": 1.0, "n_unscored": 1,
         "learning_zone": False},
    ]


def test_metrics_are_means_over_completed_attempts_with_latency_percentiles() -> None:
    r = result(task("a", attempt(0, True, latency=1.0, metrics={"cost": 1.0}),
                    attempt(1, False, latency=2.0, metrics={"cost": 3.0})),
               task("b", attempt(0, True, latency=3.0),
                    attempt(1, None, latency=4.0),  # completed; the scorer failed
                    attempt(2, stop="timeout", latency=100.0)))
    m = r.metrics
    assert m["cost"] == pytest.approx(2.0)
    assert m["latency"] == pytest.approx(2.5)  # the timeout is not averaged in
    assert m["latency_p50"] == pytest.approx(2.5)
    assert m["latency_p95"] == pytest.approx(3.85)
    assert r.summary()["metrics"] == m
    assert r.tasks[0].metrics == {"cost": 2.0, "latency": 1.5}


def test_no_completed_attempt_means_no_metrics() -> None:
    r = result(task("a", attempt(0, stop="error"), attempt(1, stop="timeout")))
    assert r.metrics == {}


# -- attempts grouped by task (what the search gates) ---------------------------------


def test_grouped_attempts_give_the_numbers_of_the_result_they_come_from() -> None:
    r = result(task("a", attempt(0, True, value=0.9, metrics={"cost": 1.0}),
                    attempt(1, False, value=0.3, metrics={"cost": 2.0}),
                    attempt(2, stop="error", metrics={"cost": 40.0})),
               task("b", attempt(0, None, metrics={"cost": 5.0}), attempt(1, True)),
               task("c", attempt(0, stop="timeout")))
    grouped = r.by_task
    assert list(grouped) == ["a", "b", "c"]
    assert grouped.mean_score == r.mean_score == pytest.approx((0.6 + 1.0) / 2)
    # c scored nothing: it has no pass rate, rather than a zero one
    assert grouped.pass_rates() == {"a": 0.5, "b": 1.0}
    assert grouped.pass_rates() == {t.task_id: t.pass_rate for t in r.tasks
                                    if t.pass_rate is not None}
    # over completed attempts (a scorer failure is completed), not the error's 40
    assert grouped.metric_means("cost") == {"a": 1.5, "b": 5.0}
    assert grouped.metric_means("tokens") == {}
    assert TaskAttempts().mean_score is None
    assert TaskAttempts({"t": [attempt(0, stop="error")]}).mean_score is None


def test_merged_attempts_extend_a_task_and_append_a_new_one() -> None:
    first = TaskAttempts({"a": [attempt(0)], "b": [attempt(0)]})
    merged = first.merged(TaskAttempts({"c": [attempt(0)], "a": [attempt(1), attempt(2)]}))
    assert list(merged) == ["a", "b", "c"]
    assert [x.attempt for x in merged["a"]] == [0, 1, 2]
    assert [x.attempt for x in first["a"]] == [0]  # the original is left as it was


def test_attempts_pair_on_task_and_seed_when_scored_on_both_sides() -> None:
    def at(i: int, seed: int, passed: bool | None = True,
           stop: StopReason = "completed") -> AttemptResult:
        return attempt(i, passed, stop=stop).model_copy(update={"seed": seed})

    a = TaskAttempts({"t": [at(0, 7), at(1, 8), at(2, 9), at(3, 10)],
                      "u": [at(0, 7, stop="error")], "only_a": [at(0, 7)]})
    b = TaskAttempts({"only_b": [at(0, 7)], "u": [at(0, 7)],
                      # seed 9 at index 0: the seed pairs, not the index
                      "t": [at(0, 9), at(1, 8, None), at(2, 7), at(5, 10)]})
    pairs = paired_attempts(a, b)
    assert list(pairs) == ["t", "u"]  # tasks in both, in a's order
    assert [(x.seed, y.attempt) for x, y in pairs["t"]] == [(7, 2), (9, 0), (10, 5)]
    assert pairs["u"] == []  # in both, but nothing scored on a's side


# -- save and load -------------------------------------------------------------------


def test_save_and_load_round_trip(arith_result: EvalResult, tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "result.json"
    save_result(arith_result, path)
    loaded = load_result(path)
    assert loaded.summary() == arith_result.summary()
    assert loaded == arith_result
    assert json.loads(path.read_text(encoding="utf-8"))["format_version"] == FORMAT_VERSION


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, True, "1", None])
def test_another_format_version_is_refused(arith_result: EvalResult, tmp_path: Path,
                                           version: object) -> None:
    data = json.loads(arith_result.model_dump_json())
    data["format_version"] = version
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ResultFileError) as info:
        load_result(path)
    assert info.value.field == "format_version"
    assert str(path) in str(info.value)
    assert "format_version" in str(info.value)
    assert repr(version) in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("text", "message"), [
    ('{"bench": "x"}', "not a forge result"),
    ("[1, 2, 3]", "not a forge result"),
    ('"just a string"', "not a forge result"),
    ('{"format_version": 1, "bench": "x"}', "damaged"),
    ('{"format_version": 1,\n "bench": ', "malformed JSON"),
    ("", "malformed JSON"),
])
def test_a_file_that_is_not_a_result_is_refused(tmp_path: Path, text: str,
                                                message: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ResultFileError, match=message) as info:
        load_result(path)
    assert str(info.value).startswith(str(path))
    assert "\n" not in str(info.value)


def test_malformed_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"format_version": 1,\n "bench": \n', encoding="utf-8")
    with pytest.raises(ResultFileError) as info:
        load_result(path)
    assert info.value.line == 3


def test_a_missing_result_file(tmp_path: Path) -> None:
    with pytest.raises(ResultFileError, match="not found"):
        load_result(tmp_path / "nope.json")


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_save_is_atomic_when_the_rename_fails(arith_result: EvalResult, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "result.json"
    save_result(arith_result, path)
    before = path.read_bytes()

    def refuse(*_: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)  # as forge._util.files sees it
    other = arith_result.model_copy(update={"seed": 7})
    with pytest.raises(OSError, match="disk full"):
        save_result(other, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _files(tmp_path) == ["result.json"]  # no temp file left behind
    assert load_result(path).seed == arith_result.seed


def test_save_is_atomic_when_the_write_fails(arith_result: EvalResult, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "result.json"
    save_result(arith_result, path)
    before = path.read_bytes()

    def fail(_: int) -> None:
        raise OSError("I/O error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="I/O error"):
        save_result(arith_result.model_copy(update={"seed": 7}), path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _files(tmp_path) == ["result.json"]


def test_save_keeps_the_old_file_when_serialisation_fails(arith_result: EvalResult,
                                                          tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    save_result(arith_result, path)
    before = path.read_bytes()
    broken = arith_result.model_copy(update={"duration_s": math.nan, "config": object()})
    with pytest.raises(Exception):  # noqa: B017 - whatever pydantic raises
        save_result(broken, path)
    assert path.read_bytes() == before
    assert _files(tmp_path) == ["result.json"]


def test_save_keeps_the_permissions_of_the_file_it_replaces(arith_result: EvalResult,
                                                            tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    save_result(arith_result, path)
    os.chmod(path, 0o640)
    save_result(arith_result, path)
    assert path.stat().st_mode & 0o777 == 0o640


# -- format compatibility ------------------------------------------------------------


def test_a_saved_v1_result_still_loads() -> None:
    """tests/data/result_v1.json was written by forge 0.1 (arith, dev, k=2, 3 tasks).
    If this fails, the format changed: bump FORMAT_VERSION, do not edit the file."""
    r = load_result(RESULT_V1)
    assert r.format_version == 1
    assert (r.bench, r.split, r.k, r.seed) == ("arith", "dev", 2, DEFAULT_SEED)
    assert [t.task_id for t in r.tasks] == ["dev-00", "dev-01", "dev-02"]
    summary = r.summary()
    assert tuple(summary) == SUMMARY_KEYS
    assert summary["n_attempts"] == 6
    assert summary["n_scored"] == 6
    stored = json.loads(RESULT_V1.read_text(encoding="utf-8"))
    assert summary["env_fingerprint"] == stored["env_fingerprint"]
    # Attempts pair across versions by seed: the seeds must derive the same way.
    for a in r.attempts:
        assert a.seed == derive_seed(r.seed, r.split, a.task_id, a.attempt)
        assert a.stdout is None  # kept since; absent from the files written before


def test_an_attempt_that_printed_nothing_is_saved_as_before_and_one_that_did_with_it(
        arith_result: EvalResult, tmp_path: Path) -> None:
    old = json.loads(RESULT_V1.read_text(encoding="utf-8"))["tasks"][0]["attempts"][0]
    path = tmp_path / "result.json"
    save_result(arith_result, path)
    saved = json.loads(path.read_text(encoding="utf-8"))["tasks"][0]["attempts"][0]
    assert set(saved) == set(old)
    first = arith_result.tasks[0]
    printed = arith_result.model_copy(update={"tasks": [
        first.model_copy(update={"attempts": [
            first.attempts[0].model_copy(update={"stdout": "debug: 1\n"}),
            *first.attempts[1:]]}),
        *arith_result.tasks[1:]]})
    save_result(printed, path)
    assert json.loads(path.read_text(encoding="utf-8"))["tasks"][0]["attempts"][0][
        "stdout"] == "debug: 1\n"
    assert load_result(path) == printed



def test_a_copy_with_new_attempts_reports_on_its_own_attempts() -> None:
    t = task("t", attempt(0, True), attempt(1, True))
    r = result(t)
    assert (t.n_scored, r.metrics["latency"], r.pass_rate) == (2, 0.1, 1.0)  # now cached
    emptied = t.model_copy(update={"attempts": [attempt(0, False)]})
    assert (emptied.n_scored, emptied.pass_rate) == (1, 0.0)
    slower = r.model_copy(update={"tasks": [task("u", attempt(0, False, latency=2.0))]})
    assert slower.metrics["latency"] == 2.0
    assert slower.pass_rate == 0.0
    assert r.model_copy().metrics == r.metrics
