"""A key a harness echoes (in an exception, a metric name, with invisible characters
between its characters) reaches no file, no table and no error line, from the first
attempt on: the bench's credentials are registered when the bench is loaded."""

from __future__ import annotations

import contextlib
import io
import json
import re
import secrets
import string
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MakeBench, readable_bytes, run_forge
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from forge.secrets.masking import MIN_PIECE_CHARS, clear_secrets, redact, register_secret

KEY_ENV = "FORGE_OPENAI_API_KEY"
_ALPHABET = string.ascii_letters + string.digits + "-_"


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    clear_secrets()
    yield
    clear_secrets()


def new_key(size: int = 48) -> str:
    return "sk-" + "".join(secrets.choice(_ALPHABET) for _ in range(size - 3))


def windows(key: str) -> list[str]:
    """Every run of MIN_PIECE_CHARS characters of ``key``: what must not survive."""
    return [key[i:i + MIN_PIECE_CHARS] for i in range(len(key) - MIN_PIECE_CHARS + 1)]


def assert_no_window(text: str, key: str, where: str) -> None:
    found = [w for w in windows(key) if w in text]
    assert not found, f"{where} holds {len(found)} windows of the key, e.g. {found[0]!r}"


def folder_text(folder: Path) -> Iterator[tuple[str, str]]:
    """Every file under ``folder`` as a reader sees it (gzip opened), with its path."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        yield readable_bytes(path).decode("utf-8", "replace"), str(path)


RAISING = """
import os

def run(config, task, ctx):
    raise RuntimeError("refused " + os.environ["FORGE_OPENAI_API_KEY"])
"""


def judged_search(make_bench: MakeBench, harness: str, openai_server: Any, tmp_path: Path,
                  capsys: pytest.CaptureFixture[str], *, run_id: str, k: int
                  ) -> tuple[Path, Path, str, str]:
    """A one-step ``forge search --json`` of ``harness``, judged by a real judge on
    loopback whose key is :data:`KEY_ENV`: its bench, journals folder, stdout and stderr,
    once it has ended without a traceback."""
    judge = json.dumps({"judge": {"rubric": "Is the answer right?",
                                  "base_url": openai_server.url}})
    bench = make_bench(harness, scorer=judge, rollouts={"k": k, "concurrency": k})
    journals = tmp_path / "journals"
    code, out, err = run_forge(capsys, "search", bench, "--journals", journals, "--run-id",
                               run_id, "--max-steps", "1", "--json")
    assert code in (0, 1) and "Traceback" not in err, err
    return bench, journals, out, err


def test_a_judge_key_a_harness_raises_is_masked_from_the_first_attempt(
        make_bench: MakeBench, openai_server: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    key = new_key()
    monkeypatch.setenv(KEY_ENV, key)
    # A real judge on loopback, never asked: every attempt raises before it is judged.
    bench, journals, out, err = judged_search(make_bench, RAISING, openai_server, tmp_path,
                                              capsys, run_id="r1", k=2)
    assert (journals / "r1" / "attempts.jsonl.gz").is_file()
    result = tmp_path / "results" / "result.json"
    result.parent.mkdir()
    code2, out2, err2 = run_forge(capsys, "eval", bench, "--save", result, "--per-task")
    assert code2 == 1, err2  # nothing scored

    stored = list(folder_text(journals)) + list(folder_text(result.parent))
    for text, where in [*stored, (out, "search stdout"), (err, "search stderr"),
                        (out2, "eval stdout"), (err2, "eval stderr")]:
        assert_no_window(text, key, where)
    assert "refused ***" in "".join(text for text, _ in stored)  # the echo was there
    assert "refused ***" in out2 + err2


METRIC_NAMED_AFTER_THE_KEY = """
import os

def run(config, task, ctx):
    key = os.environ["FORGE_HARNESS_TOKEN"]
    return {"output": task.expected, "metrics": {"lat_" + key: 1.0},
            "signals": ["saw_" + key]}
"""


def eval_echo(make_bench: MakeBench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str], harness: str
              ) -> tuple[str, Path, Path, str, str]:
    """``forge eval --save`` of a bench whose harness echoes FORGE_HARNESS_TOKEN, a
    registered key: (key, bench, result file, stdout, stderr)."""
    key = new_key()
    monkeypatch.setenv("FORGE_HARNESS_TOKEN", key)
    register_secret(key, name="FORGE_HARNESS_TOKEN")
    bench = make_bench(harness)
    result = tmp_path / "result.json"
    code, out, err = run_forge(capsys, "eval", bench, "--save", result)
    assert code == 0, err
    return key, bench, result, out, err


def test_a_metric_named_after_a_key_is_masked_on_the_terminal(
        make_bench: MakeBench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    key, bench, result, out, err = eval_echo(make_bench, tmp_path, monkeypatch, capsys,
                                             METRIC_NAMED_AFTER_THE_KEY)
    assert "lat_***" in out  # the table's row, named as the saved result names it
    assert_no_window(out + err, key, "eval's table")
    saved = result.read_text(encoding="utf-8")
    assert '"lat_***"' in saved
    assert_no_window(saved, key, "result")
    code, out, err = run_forge(capsys, "eval", bench, "--json")
    assert code == 0, err
    assert "lat_***" in json.loads(out)["metrics"]
    assert_no_window(out + err, key, "eval --json")


#: Invisible characters a harness may put between a key's characters: zero-width space,
#: non-joiner, joiner, word joiner, soft hyphen, BOM, left-to-right mark, a tag character.
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\ufeff", "\u200e",
             "\U000e0041"]


@pytest.mark.parametrize("mark", INVISIBLE, ids=lambda m: f"U+{ord(m):04X}")
def test_a_key_with_invisible_characters_between_its_own_is_masked(mark: str) -> None:
    key = new_key()
    register_secret(key)
    echoed = mark.join(key)
    for form, where in ((echoed, "text"), (json.dumps(echoed), "JSON"),
                        (json.dumps(echoed, ensure_ascii=False), "JSON, unescaped"),
                        (repr(echoed), "repr"), (f"x {echoed} y", "within a line")):
        masked = redact(form)
        assert_no_window(masked.replace(mark, ""), key, where)
        assert "***" in masked


ZERO_WIDTH = """
import os

def run(config, task, ctx):
    key = os.environ["FORGE_HARNESS_TOKEN"]
    return {"output": "\\u200b".join(key)}
"""


def test_a_zero_width_echo_reaches_no_result(make_bench: MakeBench, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    key, _, result, out, err = eval_echo(make_bench, tmp_path, monkeypatch, capsys, ZERO_WIDTH)
    saved = json.loads(result.read_text(encoding="utf-8"))
    outputs = [a["output"]["output"] for t in saved["tasks"] for a in t["attempts"]]
    assert outputs and all("***" in o for o in outputs)
    for text in (result.read_text(encoding="utf-8"), *outputs, out, err):
        assert_no_window(text.replace("\u200b", "").replace("\\u200b", ""), key, "result")


def test_every_format_character_is_skipped() -> None:
    """The ranges pieces.py skips hold every character Python's Unicode tables put in
    category Cf (format: zero-width, soft hyphen, direction marks, tags...)."""
    import sys
    import unicodedata

    from forge.secrets.pieces import INVISIBLE_RANGES

    skipped = {c for a, b in INVISIBLE_RANGES for c in range(a, b + 1)}
    missing = [f"U+{c:04X}" for c in range(sys.maxunicode + 1)
               if unicodedata.category(chr(c)) == "Cf" and c not in skipped]
    assert not missing


# -- the property: any key, echoed in any sink, in any in-scope form ------------------------

#: What API keys are made of: base64url, and the '.', '+', '/', '=' of JWTs and base64.
KEY_ALPHABET = string.ascii_letters + string.digits + "-_.+/="

ECHOING = """
import os

def run(config, task, ctx):
    echo = os.environ["FORGE_TEST_ECHO"]
    sink = os.environ["FORGE_TEST_SINK"]
    if sink == "exception":
        raise RuntimeError("refused " + echo)
    out = {"output": task.expected}
    if sink == "output":
        out["output"] = "the key is " + echo
    elif sink == "metric name":
        out["metrics"] = {"lat_" + echo: 1.0}
    elif sink == "signal name":
        out["signals"] = ["saw_" + echo]
    elif sink == "tool argument":
        out["tool_calls"] = [{"name": "lookup", "args": {"q": echo, "n": 1}}]
    elif sink == "tool name":
        out["tool_calls"] = [{"name": "call_" + echo, "args": {}}]
    return out
"""
SINKS = ["output", "exception", "metric name", "signal name", "tool argument", "tool name"]


@pytest.fixture(scope="module")
def echoing_bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    """A one-task bench whose harness echoes FORGE_TEST_ECHO where FORGE_TEST_SINK says,
    judged by a real judge on loopback whose key is the bench's secret."""
    from conftest import write_bench
    from openai_server import ScriptedOpenAI, reply

    with ScriptedOpenAI() as server:
        server.answer_with(lambda body: reply('{"verdict": "pass", "reason": "fine"}'))
        judge = json.dumps({"judge": {"rubric": "Is it right?", "base_url": server.url,
                                      "retries": 0}})
        tasks = {split: [{"id": f"{split}-0", "input": {"q": f"question {split}"},
                          "expected": "answer"}]
                 for split in ("dev", "val", "test")}
        bench = write_bench(tmp_path_factory.mktemp("echo") / "bench", ECHOING, tasks=tasks,
                            scorer=judge, rollouts={"k": 1, "concurrency": 1})
        yield bench, server


def _forge(*args: object) -> tuple[int, str, str]:
    """``forge ARGS`` in-process, its stdout and stderr captured (no capsys: module
    fixtures use it too)."""
    from forge.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def everything_written(bench: Path, folder: Path) -> list[tuple[str, str]]:
    """``forge eval --save`` and a one-step ``forge search`` of ``bench`` into
    ``folder``: every file they wrote and what they printed, as (text, where)."""
    code, out, err = _forge("eval", bench, "--save", folder / "result.json", "--per-task")
    assert code in (0, 1) and "Traceback" not in err, err
    printed = [(out, "eval stdout"), (err, "eval stderr")]
    journals = folder / "journals"
    code, out, err = _forge("search", bench, "--journals", journals, "--run-id", "echo",
                            "--max-steps", "1", "--json")
    assert code in (0, 1) and "Traceback" not in err, err
    assert (journals / "echo" / "attempts.jsonl.gz").is_file()
    return [*folder_text(folder), *printed, (out, "search stdout"), (err, "search stderr")]


@pytest.fixture(scope="module")
def forge_words(echoing_bench: tuple[Path, Any], tmp_path_factory: pytest.TempPathFactory
                ) -> str:
    """What forge writes and prints for the echoing bench with nothing secret echoed:
    its own words (field names, verdicts, stop reasons). A key sharing a window with
    them cannot be told apart from them in any file, so the property leaves such keys
    out (hypothesis draws them: it mines the code's own strings)."""
    bench, _ = echoing_bench
    clear_secrets()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FORGE_TEST_ECHO", "nothing secret")
        mp.setenv("FORGE_TEST_SINK", "output")
        mp.delenv(KEY_ENV, raising=False)
        written = everything_written(bench, tmp_path_factory.mktemp("words"))
    return "\n".join(text for text, _ in written)


def visible(text: str) -> str:
    """``text`` without the invisible characters the property puts in keys, raw or as
    JSON and Python escapes: what a reader copying the key out of it would get."""
    for mark in INVISIBLE:
        for form in (mark, json.dumps(mark)[1:-1], repr(mark)[1:-1]):
            text = text.replace(form, "")
    return text


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("form", ["plain", "invisible"])
@settings(max_examples=4, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_window_of_an_echoed_key_reaches_a_file_or_the_terminal(
        echoing_bench: tuple[Path, Any], forge_words: str, sink: str, form: str,
        data: st.DataObject, monkeypatch: pytest.MonkeyPatch) -> None:
    key = data.draw(st.text(KEY_ALPHABET, min_size=12, max_size=200).filter(
        lambda k: not re.fullmatch(r"[0-9+\-.eE]+", k)), label="key")
    assume(not any(key[i:i + MIN_PIECE_CHARS] in forge_words
                   for i in range(len(key) - MIN_PIECE_CHARS + 1)))
    echo = key
    if form == "invisible":
        marks = data.draw(st.lists(st.sampled_from(INVISIBLE), min_size=1, max_size=4),
                          label="marks")
        echo = "".join(c + marks[i % len(marks)] for i, c in enumerate(key[:-1])) + key[-1]
    bench, _ = echoing_bench
    clear_secrets()
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.setenv("FORGE_TEST_ECHO", echo)
    monkeypatch.setenv("FORGE_TEST_SINK", sink)
    with tempfile.TemporaryDirectory() as folder:
        for text, where in everything_written(bench, Path(folder)):
            assert_no_window(visible(text), key, f"{where} ({sink}, {form})")
        result = Path(folder) / "result.json"
        assert "***" in result.read_text(encoding="utf-8")  # the echo was there, masked


ECHOING_KEY = """
import os

def run(config, task, ctx):
    key = os.environ["FORGE_OPENAI_API_KEY"]
    return {"output": "the key is " + key, "metrics": {"lat_" + key: 1.0}}
"""


def test_a_key_that_shares_forge_s_own_words_leaves_every_record_loadable(
        make_bench: MakeBench, openai_server: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A secret holding a field name forge writes ("format_version") once turned that
    # name into "***on" in the journal, and the search failed reading back its record.
    key = "format_version_and_more"
    monkeypatch.setenv(KEY_ENV, key)
    _, journals, _, err = judged_search(make_bench, ECHOING_KEY, openai_server, tmp_path,
                                        capsys, run_id="r", k=1)
    code, _, err = run_forge(capsys, "journal", "show", "r", "--journals", journals, "--json")
    assert code == 0, err
    assert '"format_version"' in (journals / "r" / "journal.jsonl").read_text()
    for text, where in folder_text(journals):
        assert key not in text, where
