"""``forge runtime report`` and ``forge search --from-runtime``: the journal read back, and
the mutator's most frequent proposals first in the search's queue, still gated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_user_error, dumps_key_twice, read_calls, write_search_bench
from conftest import run_forge as forge
from conftest import run_forge_json as forge_json

from forge.bench.loader import load_bench
from forge.commands import common as _common
from forge.config.moves import Move
from forge.config.registry import Registry, load_registry
from forge.runtime import RuntimeMutator, runtime_first_moves

#: A search registry with a runtime section: ``boost`` is what the harness rewards.
REGISTRY = """\
name: s
settings:
  boost: {type: bool, default: false}
  knob:  {type: int, min: 1, max: 3, step: 1, default: 2}
runtime:
  allow: [boost, knob]
  max_moves_per_run: 1
  rules:
    - {on: wrong_answer, target: boost, direction: toggle}
    - {on: slow, target: knob, direction: up}
"""

BOOST = """
def run(config, task, ctx):
    record(config, task, ctx)
    p = 0.8 if config["boost"] else 0.5
    ok = random.Random(ctx.seed).random() < p
    return {"output": task.expected if ok else "wrong", "cost": 1.0}
"""


def observe(registry: Registry, journal: Path, runs: list[list[str]],
            mode: str = "observe", **start: Any) -> None:
    """Play each list of signals as one run of a mutator journaling to ``journal``."""
    with RuntimeMutator(registry, mode, journal=journal) as mutator:
        for i, signals in enumerate(runs):
            with mutator.run({**registry.defaults().values, **start}, run_id=f"r{i}") as run:
                for name in signals:
                    run.signal(name)


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    return write_search_bench(tmp_path / "bench", BOOST, registry=REGISTRY,
                              search={"max_steps": 1, "patience": 1})


@pytest.fixture
def journal(bench: Path, tmp_path: Path) -> Path:
    """Boost proposed in 4 runs, knob in 6 (the cap of 1 refuses the second move of a run)."""
    path = tmp_path / "runtime.jsonl"
    registry = load_registry(bench.parent / "registry.yaml")
    observe(registry, path, [["slow"]] * 4 + [["slow", "wrong_answer"]] * 2
            + [["wrong_answer", "slow"]] * 4 + [["timeout"]])
    return path


# -- forge runtime report -----------------------------------------------------------------


def test_report_json_counts_per_signal_and_rule(capsys: pytest.CaptureFixture[str],
                                                journal: Path) -> None:
    report = forge_json(capsys, "runtime", "report", journal, "--json")
    assert (report["records"], report["runs"], report["modes"]) == (28, 11, {"observe": 11})
    assert report["runs_with_moves"] == 10 and report["restore_failures"] == 0
    rows = {(r["signal"], r["target"]): r for r in report["rules"]}
    slow = rows[("slow", "knob")]
    assert (slow["fired"], slow["observed"], slow["refused"]) == (10, 6, 4)
    assert slow["reasons"] == {"cap reached": 4}
    assert slow["moves"] == [{"target": "knob", "before": 2, "after": 3, "count": 6}]
    assert slow["refused_moves"] == [{"target": "knob", "before": 2, "after": 3, "count": 4}]
    boost = rows[("wrong_answer", "boost")]
    assert (boost["fired"], boost["observed"], boost["refused"]) == (6, 4, 2)
    assert rows[("timeout", None)]["no_rule"] == 1
    assert [r["signal"] for r in report["rules"]] == ["slow", "wrong_answer", "timeout"]


def test_report_table(capsys: pytest.CaptureFixture[str], journal: Path,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common.out, "width", 200)  # one line per row, whatever the terminal
    code, out, err = forge(capsys, "runtime", "report", journal)
    assert code == 0, err
    assert "slow → knob up" in out and "cap reached ×4" in out
    assert "knob 2→3 ×6" in out and "timeout → no rule" in out
    assert "11 runs (observe 11)" in out


def test_report_reads_past_a_torn_last_line(capsys: pytest.CaptureFixture[str],
                                            journal: Path) -> None:
    with journal.open("ab") as fh:
        fh.write(b'{"format_version": 1, "at": "2026-')
    assert forge_json(capsys, "runtime", "report", journal, "--json")["records"] == 28


@pytest.mark.parametrize(("content", "fragments"), [
    (None, ("file not found",)),
    ('{"format_version": 1\n{}\n', (":1: malformed JSON",)),
    ('"a string"\n', (":1: expected a JSON object",)),
    ('{"run_id": "x"}\n', (":1: format_version",)),
])
def test_report_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path, content: str | None,
                                             fragments: tuple[str, ...]) -> None:
    path = tmp_path / "j.jsonl"
    if content is not None:
        path.write_text(content)
    assert_user_error(*forge(capsys, "runtime", "report", path), str(path), *fragments)


def test_a_damaged_line_in_the_middle_is_refused(capsys: pytest.CaptureFixture[str],
                                                 journal: Path) -> None:
    lines = journal.read_text().splitlines(keepends=True)
    lines[3] = lines[3][:30] + "\n"
    journal.write_text("".join(lines))
    assert_user_error(*forge(capsys, "runtime", "report", journal), f"{journal}:4: malformed")


# -- forge search --from-runtime ----------------------------------------------------------


def test_first_moves_are_ranked_and_rebased_on_the_start(bench: Path, journal: Path) -> None:
    registry = load_registry(bench.parent / "registry.yaml")
    defaults = registry.defaults()
    assert runtime_first_moves(journal, registry, defaults) == [
        Move(target="knob", before=2, after=3), Move(target="boost", before=False, after=True)]
    # Re-based: from knob 1 the same direction is 1 -> 2; from knob 3 there is no step up.
    one = registry.with_values(defaults, {"knob": 1})
    assert runtime_first_moves(journal, registry, one)[0] == Move(target="knob", before=1,
                                                                  after=2)
    three = registry.with_values(defaults, {"knob": 3, "boost": True})
    assert runtime_first_moves(journal, registry, three) == [
        Move(target="boost", before=True, after=False)]


def test_search_tries_the_runtime_moves_first_and_gates_them(
        capsys: pytest.CaptureFixture[str], bench: Path, journal: Path,
        tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    code, out, err = forge(capsys, "search", bench, "--from-runtime", journal, "--json",
                           "--journals", journals, "--run-id", "rt", "--max-steps", "1")
    assert code == 0, err
    assert "2 move(s) first in the queue: knob: 2 -> 3, boost: False -> True" in err
    result = json.loads(out)
    records = [json.loads(line) for line in
               (journals / "rt" / "journal.jsonl").read_text().splitlines()]
    candidates = [r for r in records if r["kind"] == "candidate" and r["step"] == 1]
    by_target = {c["move"]["target"]: c for c in candidates if c["proposer"] == "runtime"}
    assert set(by_target) == {"knob", "boost"}
    # First in the queue: after the start config, the harness ran knob 3, then boost.
    configs = list(dict.fromkeys(json.dumps(c["config"], sort_keys=True)
                                 for c in read_calls(bench)))
    assert [json.loads(c) for c in configs[:3]] == [
        {"boost": False, "knob": 2}, {"boost": False, "knob": 3}, {"boost": True, "knob": 2}]
    # Both went through the gates: knob does nothing and fails dev; boost passes them all.
    assert by_target["knob"]["verdict"] == "rejected"
    assert [g["name"] for g in by_target["knob"]["gates"]] == ["dev"]
    assert by_target["boost"]["verdict"] == "promoted"
    assert {"dev", "val"} <= {g["name"] for g in by_target["boost"]["gates"]}
    assert all(g["passed"] for g in by_target["boost"]["gates"])
    assert result["promotions"] == [{"step": 1, "target": "boost", "before": False,
                                     "after": True}]
    run = json.loads((journals / "rt" / "run.json").read_text())
    assert run["options"]["first_moves"] == [{"target": "knob", "before": 2, "after": 3},
                                             {"target": "boost", "before": False,
                                              "after": True}]


def test_a_journal_of_another_registry_is_refused(capsys: pytest.CaptureFixture[str],
                                                  bench: Path, tmp_path: Path) -> None:
    other = Registry.model_validate({
        "name": "other", "settings": {"boost": {"type": "bool", "default": False}},
        "runtime": {"allow": ["boost"], "rules": [
            {"on": "wrong_answer", "target": "boost", "direction": "toggle"}]}})
    path = tmp_path / "other.jsonl"
    observe(other, path, [["wrong_answer"]])
    line = assert_user_error(*forge(capsys, "search", bench, "--from-runtime", path,
                                    "--journals", tmp_path / "journals"),
                             f"{path}:1: registry_digest: written for registry 'other'")
    assert "not for this bench's registry 's'" in line
    assert not (tmp_path / "journals").exists()  # refused before anything was written


def test_from_runtime_is_refused_with_resume(capsys: pytest.CaptureFixture[str],
                                             journal: Path) -> None:
    assert_user_error(*forge(capsys, "search", "--resume", "x", "--from-runtime", journal),
                      "--from-runtime", "--resume")


def test_from_runtime_with_a_missing_journal(capsys: pytest.CaptureFixture[str], bench: Path,
                                             tmp_path: Path) -> None:
    assert_user_error(*forge(capsys, "search", bench, "--from-runtime", tmp_path / "nope",
                             "--journals", tmp_path / "journals"), "nope: file not found")


def test_applied_moves_count_as_proposals_and_refusals_do_not(bench: Path,
                                                              tmp_path: Path) -> None:
    registry = load_bench(bench).registry
    path = tmp_path / "act.jsonl"
    observe(registry, path, [["wrong_answer", "slow"]] * 3, mode="act")
    # each run: boost applied, knob refused (cap 1): only boost is proposed
    assert runtime_first_moves(path, registry, registry.defaults()) == [
        Move(target="boost", before=False, after=True)]


@pytest.mark.parametrize("which", [3, -1])  # a middle line, and the last (whole) one
def test_a_line_with_a_key_twice_is_refused_by_report_and_search(
        capsys: pytest.CaptureFixture[str], bench: Path, journal: Path, tmp_path: Path,
        which: int) -> None:
    # A hand-merged journal whose record names its rule's target twice: read by its last
    # word, the other setting would have been counted, and searched first.
    lines = journal.read_text().splitlines()
    record = json.loads(lines[which])
    at = ("rule",) if record.get("rule") else ()
    key = "target" if at else "run_id"
    lines[which] = dumps_key_twice(record, at, key, "knob")
    journal.write_text("\n".join(lines) + "\n")
    number = which + 1 if which >= 0 else len(lines)
    where = f"{journal}:{number}: {'.'.join((*at, key))}: "
    assert_user_error(*forge(capsys, "runtime", "report", journal), where,
                      f"key {key!r} is written twice")
    assert_user_error(*forge(capsys, "search", bench, "--from-runtime", journal,
                             "--journals", tmp_path / "journals"), where)
    assert not (tmp_path / "journals").exists()
