"""``forge export sft`` / ``forge export verify``: what is exported, the sidecar, tampering."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import ARITH
from conftest import assert_user_error as assert_one_line_error
from conftest import run_forge as forge

import forge.export.sft as export_mod
from forge._util.files import atomic_write_text
from forge.bench.loader import Bench
from forge.cli import main
from forge.errors import ExportError, UserError
from forge.export.sft import (
    export_sft,
    load_sidecar,
    prompt_text,
    select_attempts,
    sidecar_path,
    task_inputs,
    verify_export,
)
from forge.harness import RunOutput, ToolCall
from forge.results.model import AttemptResult, EvalResult, TaskResult, load_result
from forge.scorers import Score


def attempt(task_id: str, i: int, passed: bool | None, output: Any = "answer") -> AttemptResult:
    """``passed`` None: an unscored (error) attempt."""
    if passed is None:
        return AttemptResult(task_id=task_id, attempt=i, seed=100 + i, stop_reason="error",
                             error="boom", duration_s=0.01)
    return AttemptResult(task_id=task_id, attempt=i, seed=100 + i, stop_reason="completed",
                         duration_s=0.01, output=RunOutput(output=output),
                         score=Score(value=0.9 if passed else 0.1, passed=passed))


def make_result(tasks: dict[str, list[AttemptResult]]) -> EvalResult:
    return EvalResult(
        bench="b", split="dev", k=4, seed=1, config={"x": 1}, config_fingerprint="c" * 64,
        env_fingerprint="e" * 64, env={"tasks": "d" * 64}, duration_s=1.0,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        tasks=[TaskResult(task_id=tid, attempts=attempts) for tid, attempts in tasks.items()])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- selection and the line format -------------------------------------------------------


def test_only_learning_zone_passing_text_outputs_are_exported(tmp_path: Path) -> None:
    result = make_result({
        "zone": [attempt("zone", 0, True, "first"), attempt("zone", 1, False, "wrong"),
                 attempt("zone", 2, True, {"not": "text"}), attempt("zone", 3, True, ""),
                 attempt("zone", 4, None), attempt("zone", 5, True, "second")],
        "always": [attempt("always", 0, True), attempt("always", 1, True)],
        "never": [attempt("never", 0, False), attempt("never", 1, False)],
        "dead": [attempt("dead", 0, None)],
        "zone2": [attempt("zone2", 0, False), attempt("zone2", 1, True, "line\nbreak\u2028")],
    })
    assert [(a.task_id, a.attempt, text) for a, text in select_attempts(result)] == [
        ("zone", 0, "first"), ("zone", 5, "second"), ("zone2", 1, "line\nbreak\u2028")]
    out = tmp_path / "sft.jsonl"
    summary = export_sft(result, out, inputs={"zone": "What is 2+2?",
                                              "zone2": {"ticket": "my order is late"}})
    assert summary.line_count == 3
    assert summary.selection == {"tasks": 5, "learning_zone_tasks": 2, "passing_attempts": 5,
                                 "skipped_not_text": 2, "skipped_duplicate": 0,
                                 "with_tool_calls": 0, "exported": 3}
    raw = out.read_bytes()
    assert raw.count(b"\n") == 3  # a newline inside an output stays escaped in its line
    lines = [json.loads(line) for line in raw.decode("utf-8").split("\n")[:-1]]
    assert lines[0] == {"messages": [{"role": "user", "content": "What is 2+2?"},
                                     {"role": "assistant", "content": "first"}]}
    assert lines[1]["messages"][1]["content"] == "second"
    assert lines[2]["messages"] == [{"role": "user", "content": "my order is late"},
                                    {"role": "assistant", "content": "line\nbreak\u2028"}]
    assert verify_export(out).ok  # U+2028 is not a line break to verify


def test_exact_duplicate_lines_are_dropped_unless_kept(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    result = make_result({"t": [attempt("t", 0, True, "42"), attempt("t", 1, True, "42"),
                                attempt("t", 2, True, "forty-two"), attempt("t", 3, False),
                                attempt("t", 4, True, "42")],
                          "u": [attempt("u", 0, True, "42"), attempt("u", 1, False)]})
    out = tmp_path / "o.jsonl"
    summary = export_sft(result, out, inputs={"t": "6*7?", "u": "40+2?"})
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(set(lines)) == 3  # u's "42" answers another question: kept
    assert summary.selection["skipped_duplicate"] == 2
    meta = load_sidecar(sidecar_path(out))
    assert [(rec.task_id, rec.attempt) for rec in meta.lines] == [("t", 0), ("t", 2),
                                                                   ("u", 0)]
    assert verify_export(out).ok
    kept = export_sft(result, out, inputs={"t": "6*7?", "u": "40+2?"}, keep_duplicates=True)
    assert kept.line_count == 5 and kept.selection["skipped_duplicate"] == 0
    assert load_sidecar(sidecar_path(out)).keep_duplicates is True
    assert verify_export(out).ok  # identical lines share a hash; verify still agrees
    # The command: counts printed and in the sidecar, --keep-duplicates passed through.
    saved = tmp_path / "r.json"
    assert main(["eval", str(ARITH), "-k", "4", "--save", str(saved), "--json"]) == 0
    capsys.readouterr()
    code, stdout, err = forge(capsys, "export", "sft", saved, out, "--bench", ARITH)
    assert code == 0, err
    dropped = load_sidecar(sidecar_path(out)).selection["skipped_duplicate"]
    assert dropped > 0 and f"{dropped} exact duplicates left out" in stdout
    code, stdout, err = forge(capsys, "export", "sft", saved, out, "--bench", ARITH,
                              "--keep-duplicates")
    assert code == 0, err
    assert "0 exact duplicates left out" in stdout
    assert load_sidecar(sidecar_path(out)).line_count == summary_lines(saved)


def summary_lines(saved: Path) -> int:
    """Passing attempts on learning-zone tasks of a saved result (all text for arith)."""
    result = load_result(saved)
    return sum(t.n_passed for t in result.tasks if t.learning_zone)


def test_tool_calls_are_exported_as_openai_tool_messages(tmp_path: Path) -> None:
    calls = [ToolCall(name="lookup_order", args={"order_id": 17}, result={"status": "paid"}),
             ToolCall(name="refund", args={"order_id": 17, "amount": 9.5}, ok=False,
                      error="amount exceeds the charge"),
             ToolCall(name="refund", args={"order_id": 17, "amount": 5}, result="refunded 5")]
    tool_run = AttemptResult(task_id="t", attempt=0, seed=100, stop_reason="completed",
                             duration_s=0.01,
                             output=RunOutput(output="Refunded 5 on order 17.", tool_calls=calls),
                             score=Score(value=1.0, passed=True))
    only_tools = AttemptResult(task_id="t", attempt=1, seed=101, stop_reason="completed",
                               duration_s=0.01, output=RunOutput(output=None, tool_calls=calls),
                               score=Score(value=1.0, passed=True))
    result = make_result({"t": [tool_run, only_tools, attempt("t", 2, False)]})
    out = tmp_path / "o.jsonl"
    summary = export_sft(result, out, inputs={"t": "refund order 17"}, system="Be careful.")
    (line,) = out.read_text(encoding="utf-8").splitlines()
    messages = json.loads(line)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool",
                                             "assistant", "tool", "assistant", "tool",
                                             "assistant"]
    assert messages[2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function",
         "function": {"name": "lookup_order", "arguments": '{"order_id": 17}'}}]}
    assert messages[3] == {"role": "tool", "tool_call_id": "call_0",
                           "content": '{"status": "paid"}'}
    assert json.loads(messages[4]["tool_calls"][0]["function"]["arguments"]) == {
        "order_id": 17, "amount": 9.5}
    assert messages[5]["content"] == "error: amount exceeds the charge"
    assert messages[7] == {"role": "tool", "tool_call_id": "call_2", "content": "refunded 5"}
    assert messages[8] == {"role": "assistant", "content": "Refunded 5 on order 17."}
    # Calls without a final answer cannot end a conversation: left out and counted.
    assert summary.selection["skipped_not_text"] == 1
    assert summary.selection["with_tool_calls"] == 1
    assert load_sidecar(sidecar_path(out)).selection["with_tool_calls"] == 1


def test_prompt_mapping() -> None:
    assert prompt_text("plain") == ("plain", "text")
    assert prompt_text({"ticket": "t", "prompt": "p"}) == ("t", "field:ticket")
    assert prompt_text({"question": 5, "prompt": "p"}) == ("p", "field:prompt")
    assert prompt_text({"question": "q", "input": "i"}) == ("q", "field:question")
    assert prompt_text({"input": "i", "x": 1}) == ("i", "field:input")
    assert prompt_text({"op": "+", "a": 1}) == ('{"a":1,"op":"+"}', "json")
    assert prompt_text([1, "x"]) == ('[1,"x"]', "json")


def test_system_message_comes_first(tmp_path: Path) -> None:
    result = make_result({"t": [attempt("t", 0, True, "yes"), attempt("t", 1, False)]})
    out = tmp_path / "o.jsonl"
    export_sft(result, out, inputs={"t": "q"}, system="You are terse.")
    (line,) = out.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["messages"][0] == {"role": "system", "content": "You are terse."}
    assert load_sidecar(sidecar_path(out)).system == "You are terse."


def test_jsonl_is_written_before_the_sidecar(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[str] = []
    real = atomic_write_text

    def record(path: str | Path, text: str) -> None:
        written.append(Path(path).name)
        real(path, text)

    monkeypatch.setattr(export_mod, "atomic_write_text", record)
    result = make_result({"t": [attempt("t", 0, True), attempt("t", 1, False)]})
    export_sft(result, tmp_path / "o.jsonl", inputs={"t": "q"})
    assert written == ["o.jsonl", "o.jsonl.meta.json"]


def test_a_task_without_an_input_is_refused(tmp_path: Path) -> None:
    result = make_result({"t": [attempt("t", 0, True), attempt("t", 1, False)]})
    with pytest.raises(UserError, match="no input"):
        export_sft(result, tmp_path / "o.jsonl", inputs={})


def test_nothing_to_export_writes_an_empty_verified_file(tmp_path: Path) -> None:
    result = make_result({"t": [attempt("t", 0, True)]})  # always passes: not in the zone
    out = tmp_path / "o.jsonl"
    assert export_sft(result, out, inputs={"t": "q"}).line_count == 0
    assert out.read_bytes() == b""
    assert verify_export(out).ok


# -- the command on a real evaluation -----------------------------------------------------


@pytest.fixture
def exported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """A real arith evaluation (string outputs) exported; returns (result, jsonl)."""
    result = tmp_path / "r.json"
    assert main(["eval", str(ARITH), "-k", "4", "--save", str(result), "--json"]) == 0
    capsys.readouterr()
    out = tmp_path / "sft" / "out.jsonl"
    code, stdout, err = forge(capsys, "export", "sft", result, out, "--bench", ARITH)
    assert code == 0, err
    assert stdout.startswith(f"wrote {out}: ")
    return result, out


def test_export_of_a_real_result_and_its_sidecar(exported: tuple[Path, Path]) -> None:
    result_path, out = exported
    result = load_result(result_path)
    passing = [(t.task_id, a.attempt, a.seed, a.score.value if a.score else None,
                a.output.output if a.output else None)
               for t in result.tasks if t.learning_zone
               for a in t.attempts if a.passed]
    # A right arith answer is the same text on every attempt that finds it: each task
    # gives one line, from its first passing attempt.
    firsts: dict[tuple[str, object], tuple[str, int, int, float | None, object]] = {}
    for row in passing:
        firsts.setdefault((row[0], row[4]), row)
    expected = list(firsts.values())
    assert expected  # the arith defaults leave most tasks in the learning zone
    assert len(expected) < len(passing)
    inputs = {t["id"]: t["input"] for t in map(json.loads, (ARITH / "tasks" / "dev.jsonl")
                                                .read_text(encoding="utf-8").splitlines())}
    raw = out.read_bytes()
    lines = raw.decode("utf-8").splitlines()
    assert len(lines) == len(expected)
    meta = json.loads(sidecar_path(out).read_text(encoding="utf-8"))
    for number, (line, rec, (task_id, att, seed, score, text)) in enumerate(
            zip(lines, meta["lines"], expected, strict=True), start=1):
        user = json.dumps(inputs[task_id], sort_keys=True, separators=(",", ":"))
        assert json.loads(line) == {"messages": [{"role": "user", "content": user},
                                                 {"role": "assistant", "content": text}]}
        assert rec == {"line": number, "task_id": task_id, "attempt": att, "seed": seed,
                       "score": score, "prompt_from": "json",
                       "sha256": sha(line.encode("utf-8"))}
    assert meta["format_version"] == 1 and meta["kind"] == "forge.export.sft.sft"
    assert meta["jsonl"] == "out.jsonl"
    assert meta["jsonl_sha256"] == sha(raw)
    assert meta["line_count"] == len(expected)
    assert meta["source"] == {"path": str(result_path), "sha256": sha(result_path.read_bytes())}
    assert (meta["bench"], meta["split"], meta["k"]) == ("arith", "dev", 4)
    assert meta["env_fingerprint"] == result.env_fingerprint
    assert meta["config_fingerprint"] == result.config_fingerprint
    assert meta["tasks_digest"] == result.env["tasks"]
    assert datetime.fromisoformat(meta["created_at"]).tzinfo is not None
    assert meta["selection"]["exported"] == len(expected)
    assert meta["selection"]["skipped_duplicate"] == len(passing) - len(expected)
    assert meta["keep_duplicates"] is False


def test_verify_passes_an_untouched_file(exported: tuple[Path, Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    _, out = exported
    code, stdout, err = forge(capsys, "export", "verify", out)
    assert (code, err) == (0, "")
    assert stdout.startswith(f"ok {out}: ") and stdout.count("\n") == 1
    code, stdout, _ = forge(capsys, "export", "verify", out, "--json")
    assert code == 0 and json.loads(stdout)["ok"] is True


def _rewrite(out: Path, edit: Any) -> None:
    lines = out.read_bytes().split(b"\n")[:-1]
    out.write_bytes(edit(lines))


def _verify_fails(capsys: pytest.CaptureFixture[str], out: Path, *fragments: str) -> str:
    code, stdout, err = forge(capsys, "export", "verify", out)
    assert code == 1, err
    assert stdout.startswith(f"CHANGED {out}: does not match")
    for fragment in fragments:
        assert fragment in stdout, stdout
    return stdout


def test_verify_detects_an_edited_line(exported: tuple[Path, Path],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    _, out = exported
    task = load_sidecar(sidecar_path(out)).lines[1].task_id

    def edit(lines: list[bytes]) -> bytes:
        lines[1] = lines[1].replace(b'"assistant", "content": "', b'"assistant", "content": "9')
        return b"\n".join(lines) + b"\n"

    _rewrite(out, edit)
    stdout = _verify_fails(capsys, out, f"line 2 edited (was task {task} attempt")
    assert stdout.count("  - ") == 1


def test_verify_detects_a_swapped_pair_of_lines(exported: tuple[Path, Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _, out = exported
    lines = out.read_bytes().split(b"\n")[:-1]
    # The first line and the first later line that differs from it (the same answer
    # passing twice makes identical lines, whose swap changes nothing).
    j = next(i for i, line in enumerate(lines) if line != lines[0])

    def swap(ls: list[bytes]) -> bytes:
        ls[0], ls[j] = ls[j], ls[0]
        return b"\n".join(ls) + b"\n"

    _rewrite(out, swap)
    _verify_fails(capsys, out, f"lines 1 and {j + 1} swapped")


def test_verify_detects_a_truncated_file(exported: tuple[Path, Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    _, out = exported
    data = out.read_bytes()
    n = data.count(b"\n")
    out.write_bytes(data[: len(data) // 2])
    _verify_fails(capsys, out, "missing: the file has", f"of {n} lines (truncated?)",
                  "does not end with a newline")


def test_verify_detects_an_added_line_and_a_swapped_file(
        exported: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    _, out = exported
    original = out.read_bytes()
    out.write_bytes(original + original.split(b"\n")[0] + b"\n")
    _verify_fails(capsys, out, "1 line(s) added after line")
    # Another export's JSONL in this one's place (a different file, same name).
    other = tmp_path / "other.jsonl"
    export_sft(make_result({"t": [attempt("t", 0, True, "x"), attempt("t", 1, False)]}),
               other, inputs={"t": "q"})
    shutil.copyfile(other, out)
    _verify_fails(capsys, out, "line 1 edited")
    # Only the bytes between lines changed: the whole-file hash still notices.
    out.write_bytes(original.replace(b"\n", b"\n\n", 1))
    report = verify_export(out)
    assert not report.ok and report.actual_sha256 != report.expected_sha256


def test_verify_bad_input_exits_2(exported: tuple[Path, Path], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    _, out = exported
    assert_one_line_error(*forge(capsys, "export", "verify", tmp_path / "none.jsonl"),
                          "file not found")
    meta = sidecar_path(out)
    doc = json.loads(meta.read_text(encoding="utf-8"))
    meta.write_text(json.dumps({**doc, "format_version": 9}), encoding="utf-8")
    assert_one_line_error(*forge(capsys, "export", "verify", out), "format_version 9")
    meta.write_text(json.dumps({**doc, "line_count": 1}), encoding="utf-8")
    assert_one_line_error(*forge(capsys, "export", "verify", out), "damaged sidecar")
    meta.write_text("{not json", encoding="utf-8")
    assert_one_line_error(*forge(capsys, "export", "verify", out), "malformed JSON")
    meta.unlink()
    assert_one_line_error(*forge(capsys, "export", "verify", out), "no sidecar")


def test_export_bad_input_exits_2(exported: tuple[Path, Path], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    result, _ = exported
    new = tmp_path / "new.jsonl"
    assert_one_line_error(*forge(capsys, "export", "sft", result, new), "Missing option",
                          "--bench")
    assert_one_line_error(*forge(capsys, "export", "sft", tmp_path / "nope.json", new,
                                 "--bench", ARITH), "file not found")
    assert_one_line_error(*forge(capsys, "export", "sft", result, result, "--bench", ARITH),
                          "would overwrite the result")
    # A copy of the bench whose dev tasks were changed: its inputs are not the result's.
    changed = tmp_path / "arith"
    shutil.copytree(ARITH, changed)
    dev = changed / "tasks" / "dev.jsonl"
    dev.write_text(dev.read_text(encoding="utf-8").replace('"a": 166', '"a": 167'),
                   encoding="utf-8")
    assert_one_line_error(*forge(capsys, "export", "sft", result, new, "--bench", changed),
                          "is not the one the result was evaluated on")
    assert not new.exists() and not sidecar_path(new).exists()


def test_export_refuses_a_bench_of_another_name(tmp_path: Path, make_bench: Any,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    result = tmp_path / "r.json"
    assert main(["eval", str(ARITH), "-k", "2", "--save", str(result), "--json"]) == 0
    capsys.readouterr()
    other = make_bench()
    assert_one_line_error(*forge(capsys, "export", "sft", result, tmp_path / "o.jsonl",
                                 "--bench", other), "bench 'mini' is not the result's bench")


# -- refusals name the file and field ---------------------------------------------------


def test_refusals_are_export_errors_naming_the_file_and_field(
        tmp_path: Path, arith_bench: Bench) -> None:
    result = make_result({"t": [attempt("t", 0, True), attempt("t", 1, False)]})
    with pytest.raises(ExportError) as info:
        task_inputs(arith_bench, result, source=tmp_path / "r.json")
    assert (info.value.file, info.value.field) == (str(arith_bench.path), "name")
    assert str(info.value).endswith("bench 'arith' is not the result's bench 'b'")
    no_digest = make_result({}).model_copy(update={"bench": "arith", "env": {}})
    with pytest.raises(ExportError) as info:
        task_inputs(arith_bench, no_digest, source=tmp_path / "r.json")
    assert (info.value.file, info.value.field) == (str(tmp_path / "r.json"), "env.tasks")
    other_tasks = no_digest.model_copy(update={"env": {"tasks": "d" * 64}})
    with pytest.raises(ExportError) as info:
        task_inputs(arith_bench, other_tasks)
    assert (info.value.file, info.value.field) == (str(arith_bench.path), "splits.dev")
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(ExportError) as info:
        export_sft(result, tmp_path / "dir.jsonl", inputs={"t": "q"})
    assert info.value.file == str(tmp_path / "dir.jsonl") and "is a folder" in str(info.value)


def test_a_jsonl_that_does_not_read_back_as_written_is_an_export_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = atomic_write_text

    def another_writer_too(path: str | Path, text: str) -> None:
        real(path, text + ("{}\n" if str(path).endswith(".jsonl") else ""))

    monkeypatch.setattr(export_mod, "atomic_write_text", another_writer_too)
    result = make_result({"t": [attempt("t", 0, True), attempt("t", 1, False)]})
    out = tmp_path / "o.jsonl"
    with pytest.raises(ExportError, match="wrote 1 lines, read back 2") as info:
        export_sft(result, out, inputs={"t": "q"})
    assert info.value.file == str(out)
    assert not sidecar_path(out).exists()  # no sidecar vouches for what was not written


def test_a_damaged_sidecar_names_the_field(tmp_path: Path) -> None:
    result = make_result({"t": [attempt("t", 0, True), attempt("t", 1, False)]})
    out = tmp_path / "o.jsonl"
    export_sft(result, out, inputs={"t": "q"})
    meta = sidecar_path(out)
    doc = json.loads(meta.read_text(encoding="utf-8"))
    doc["lines"][0]["sha256"] = "not a hash"
    meta.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ExportError) as info:
        verify_export(out)
    assert (info.value.file, info.value.field) == (str(meta), "lines[0].sha256")
    assert info.value.message.startswith("damaged sidecar: String should match pattern")
    assert "(got 'not a hash')" in info.value.message
