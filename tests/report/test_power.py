"""What ``forge search`` says first: the start's score on the tasks it was read on, and
the smallest gain the bench can detect; and its summary laid out for 80 columns."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_forge as forge
from conftest import search_tasks, write_search_bench
from rich.console import Console

from forge.journal.records import EndRecord, SplitDelta, StartRecord
from forge.report.live import LiveView, phrase_lines
from forge.search.outcome import SearchOutcome
from forge.stats.power import estimate_power

#: ``boost`` is a real gain; the rest is each attempt's luck, at a rate per task.
HARNESS = """
def run(config, task, ctx):
    record(config, task, ctx)
    rate = int(task.id[-2:]) % 5 / 5 + (0.15 if config["boost"] else 0.0)
    ok = random.Random(ctx.seed).random() < rate
    return {"output": task.expected if ok else "wrong"}
"""


def _records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "journal.jsonl").read_text(encoding="utf-8").splitlines()]


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


@pytest.fixture
def small_bench(tmp_path: Path) -> Path:
    # 24 dev and 12 val tasks: a bench too small to detect less than a large gain.
    return write_search_bench(tmp_path / "bench", HARNESS,
                              tasks=search_tasks(n_dev=24, n_val=12, n_test=10), k=3,
                              search={"max_steps": 2, "patience": 1})


def test_the_first_lines_say_what_the_start_is_read_on_and_what_the_bench_detects(
        small_bench: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journals = tmp_path / "j"
    code, out, err = forge(capsys, "search", small_bench, "--journals", journals,
                           "--run-id", "r")
    assert code == 0, err
    start = _records(journals / "r")[0]
    assert start["kind"] == "start" and start["dev_split_tasks"] == 24
    chunk = start["dev_tasks"]
    assert 2 <= chunk < 24
    lines = _lines(out)
    # The first chunk's mean, said to be on the first tasks of the dev split: the final
    # table's start is a mean over the tasks both configs ran, and says so.
    assert lines[0] == (f"start dev {start['dev_mean']:.3f} on the first {chunk} of 24 dev "
                        f"tasks · config {start['fingerprint'][:12]}")
    assert "dev, val: the tasks both configs ran; test: every test task" in lines
    # The smallest gain the bench detects, at the bench's alpha and K, over dev and val,
    # from the start's first chunk: the estimate of forge.stats.power on those attempts.
    power = start["power"]
    assert (power["n_tasks"], power["k"], power["alpha"], power["power"],
            power["sd_tasks"]) == (36, 3, 0.05, 0.9, chunk)
    assert lines[1] == (f"power: detects a gain of {power['mde']:.3f} or more on the mean "
                        "score 90% of the time (one-sided α 0.05, 36 dev+val tasks at K 3; "
                        f"spread from the start's first {chunk} dev tasks)")
    assert power["mde"] > 0.10
    assert lines[2].startswith(f"warning: this bench will likely miss gains under "
                               f"{power['mde']:.3f} ({power['mde'] * 100:.0f} points): about "
                               f"{power['tasks_needed']:,} dev+val tasks would bring that to "
                               "0.10, or a larger K")
    assert power["tasks_needed"] > 36


def test_search_json_carries_the_power(small_bench: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    journals = tmp_path / "j"
    code, out, err = forge(capsys, "search", small_bench, "--journals", journals,
                           "--run-id", "r", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert list(result)[-1] == "power"  # after the keys scripts have always read
    assert result["power"] == _records(journals / "r")[0]["power"]
    assert result["power"]["mde"] > 0.10
    # On stderr with the decisions, never in the JSON document.
    assert "power: detects a gain of" in err and "warning: this bench" in err


def _start(**fields: Any) -> StartRecord:
    return StartRecord.model_validate({"config": {}, "fingerprint": "f" * 64, "dev_mean": 0.5,
                                       "val_mean": None, "rollouts_total": 10, **fields})


def _shown(record: StartRecord) -> list[str]:
    console = Console(width=300, file=io.StringIO(), color_system=None, record=True)
    LiveView(console).on_record(record)
    return _lines(console.export_text())


def test_a_bench_that_detects_a_small_gain_is_not_warned() -> None:
    rates = [0.2 + 0.7 * i / 399 for i in range(400)]
    scores = [[float(j < round(r * 5)) for j in range(5)] for r in rates]
    power = estimate_power(scores, n_tasks=400, k=5, alpha=0.05)
    assert power.mde is not None and power.mde < 0.10
    shown = _shown(_start(dev_tasks=400, dev_split_tasks=400,
                          power=power.model_dump(mode="json")))
    assert len(shown) == 2 and shown[1].startswith("power: detects a gain of")


def test_a_spread_that_cannot_be_read_says_so() -> None:
    power = estimate_power([[1.0], [1.0]], n_tasks=30, k=1, alpha=0.05)
    shown = _shown(_start(dev_tasks=2, dev_split_tasks=20, power=power.model_dump(mode="json")))
    assert shown[1] == ("power: not estimated from the start's first 2 dev tasks: they all "
                        "scored the same: no spread to estimate it from")


def test_a_start_record_of_an_earlier_forge_is_shown_as_it_was() -> None:
    assert _shown(_start(dev_tasks=9)) == [f"start dev 0.500 (9 tasks) · config {'f' * 12}"]
    # Version 1: the start's whole dev and val, no chunk.
    assert _shown(_start(val_mean=0.25)) == [f"start dev 0.500 · val 0.250 · config {'f' * 12}"]


def test_a_replay_does_not_compare_what_the_start_record_derives() -> None:
    # A run journaled before these fields resumes: its start record is the same one.
    before = _start(dev_tasks=9)
    now = _start(dev_tasks=9, dev_split_tasks=40, power={"mde": 0.2, "n_tasks": 60})
    assert before.stable_text() == now.stable_text()
    assert _start(dev_tasks=8).stable_text() != before.stable_text()


# -- the summary at 80 columns --------------------------------------------------------------

def test_phrase_lines_break_between_phrases_only() -> None:
    phrases = ["search triage-20261206-081723-614840", "budget_rollouts", "12 steps",
               "19876 rollouts"]
    assert phrase_lines(phrases, 80) == [
        "search triage-20261206-081723-614840 · budget_rollouts · 12 steps",
        "19876 rollouts"]
    assert phrase_lines(phrases, 200) == [" · ".join(phrases)]
    assert phrase_lines(["a" * 30, "b"], 10) == ["a" * 30, "b"]  # too long: a line alone


def test_the_summary_title_does_not_break_mid_phrase_at_80_columns() -> None:
    delta = SplitDelta(start=0.279, final=0.41, delta=0.131, ci_low=0.05, ci_high=0.2)
    end = EndRecord(run_id="triage-20261206-081723-614840", stop_reason="budget_rollouts",
                    steps=12, promotions=[], start_config={}, final_config={},
                    rollouts_used=19876, dev=delta, val=delta, test=delta,
                    final_fingerprint="f", cost_total=0)
    console = Console(width=80, file=io.StringIO(), color_system=None, record=True)
    LiveView(console).summary(SearchOutcome(end))
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines)
    for phrase in ("search triage-20261206-081723-614840", "budget_rollouts", "12 steps",
                   "19876 rollouts"):
        assert any(phrase in line for line in lines), phrase
    assert lines[0].rstrip() == ("search triage-20261206-081723-614840 · budget_rollouts · "
                                 "12 steps")
