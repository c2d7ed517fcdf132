"""A key written twice in a JSON object of a file a person gives forge is refused.

``json.loads`` keeps the second of two equal keys silently: a task line
``{"id": "a", ..., "id": "b"}`` was task ``b``, a results file whose attempt says
``"passed"`` twice was read by its last. Every JSON and JSONL reader of forge now says
which file, which line (JSONL) and which key path, in one line with exit 2, before
anything is written: task splits (``forge eval``, ``forge search``), saved results
(``forge diff``, ``forge gate``), run folders (``run.json``, ``journal.jsonl``) and runtime
journals (``--from-runtime``, tests/commands/test_runtime.py). Configs and benches are
YAML, refused the same way since they were (tests/_util/test_files.py).

The splits' test follows tests/_util/test_files_fuzz.py: the shipped triage bench, a key
doubled in a line and an object drawn at random (any depth), the command that reads it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ARITH, assert_user_error, dumps_key_twice, objects_in, run_forge
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forge._util.parse import DuplicateJsonKey, loads_json
from forge.bench.loader import load_bench
from forge.errors import JournalError
from forge.evaluation.evaluate import evaluate
from forge.journal.jsonl import read_jsonl_tolerant
from forge.results.model import save_result
from forge.search.launch import launch_search

REPO = Path(__file__).resolve().parents[2]
NO_TASK = "__no_such_task__"

# -- the parser --------------------------------------------------------------------------

_SCALARS = (st.none() | st.booleans() | st.integers(-10**9, 10**9)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=4),
                       max_leaves=25)


@given(value=_VALUES, data=st.data())
@settings(max_examples=300)
def test_a_key_written_twice_at_any_depth_is_refused_with_its_key_path(
        value: Any, data: st.DataObject) -> None:
    objects = objects_in(value)
    if not objects:
        assert loads_json(json.dumps(value)) == value  # nothing doubled: read as it is
        return
    at, obj = data.draw(st.sampled_from(objects), label="object")
    key = data.draw(st.sampled_from(sorted(obj)), label="key")
    text = dumps_key_twice(value, at, key, data.draw(_SCALARS, label="again"))
    for bounded in (True, False):
        with pytest.raises(DuplicateJsonKey) as info:
            loads_json(text, bounded=bounded)
        assert (info.value.key, info.value.loc) == (key, (*at, key))
    # The same document with each key once reads back whole.
    assert loads_json(dumps_key_twice(value, ("not", "there"), "", None)) == value


@pytest.mark.parametrize(("text", "key", "loc"), [
    ('{"a": 1, "\\u0061": 2}', "a", ("a",)),  # two spellings of one key
    ('[{"x": {"y": [1, {"z": 1, "z": 1}]}}]', "z", (0, "x", "y", 1, "z")),
    ('{"a": {"k": 1, "k": 2}, "b": ' + "9" * 5000 + "}", "k", ("a", "k")),  # damage after
])
def test_the_duplicate_is_named_whatever_surrounds_it(text: str, key: str,
                                                      loc: tuple[str | int, ...]) -> None:
    with pytest.raises(DuplicateJsonKey) as info:
        loads_json(text)
    assert (info.value.key, info.value.loc) == (key, loc)


def test_a_whole_line_with_a_key_twice_is_damage_even_last_and_a_cut_one_is_torn(
        tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"a": {"b": 1, "b": 2}}\n', encoding="utf-8")
    with pytest.raises(JournalError) as info:
        read_jsonl_tolerant(path, JournalError, what="x")
    assert (info.value.line, info.value.field) == (2, "a.b")
    assert "key 'b' is written twice" in info.value.message
    # A kill mid-write leaves a prefix: its inner object may already hold the key twice
    # (no forge wrote that, but a prefix is dropped as torn whatever it holds).
    path.write_text('{"a": 1}\n{"a": {"b": 1, "b": 2}, "c', encoding="utf-8")
    assert read_jsonl_tolerant(path, JournalError, what="x") == [(1, {"a": 1})]


# -- task splits: forge eval and forge search ----------------------------------------------


@pytest.fixture(scope="module")
def triage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dup")
    shutil.copytree(REPO / "registry", root / "registry")
    folder = root / "benches" / "triage"
    shutil.copytree(REPO / "benches" / "triage", folder,
                    ignore=shutil.ignore_patterns("__pycache__", "*.md", "generate_*.py"))
    return folder


@given(data=st.data())
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_task_line_with_a_key_twice_is_one_line_naming_file_line_and_key(
        triage: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        data: st.DataObject) -> None:
    split = triage / "tasks" / data.draw(st.sampled_from(["dev", "val", "test"])) \
        .__add__(".jsonl")
    original = split.read_text(encoding="utf-8")
    lines = original.splitlines()
    number = data.draw(st.integers(1, len(lines)), label="line")
    task = json.loads(lines[number - 1])
    at, obj = data.draw(st.sampled_from(objects_in(task)), label="object")
    key = data.draw(st.sampled_from(sorted(obj)), label="key")
    lines[number - 1] = dumps_key_twice(task, at, key, obj[key])  # even the same value
    saved = tmp_path / "saved.json"
    split.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        code, out, err = run_forge(capsys, "eval", triage, "--split", split.stem,
                                   "--task", NO_TASK, "--save", saved)
    finally:
        split.write_text(original, encoding="utf-8")
    field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in (*at, key))
    assert_user_error(code, out, err, f"{split}:{number}: {field.lstrip('.')}: ",
                      f"key {key!r} is written twice")
    assert not saved.exists()


def test_a_search_on_a_split_with_a_key_twice_writes_no_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = tmp_path / "arith"
    shutil.copytree(ARITH, bench)
    val = bench / "tasks" / "val.jsonl"
    lines = val.read_text(encoding="utf-8").splitlines()
    lines[1] = dumps_key_twice(json.loads(lines[1]), (), "expected", "0")
    val.write_text("\n".join(lines) + "\n", encoding="utf-8")
    journals = tmp_path / "journals"
    assert_user_error(*run_forge(capsys, "search", bench, "--journals", journals,
                                 "--max-steps", 1, "-k", 1),
                      f"{val}:2: expected: key 'expected' is written twice")
    assert not journals.exists()


# -- saved results: forge diff and forge gate ---------------------------------------------


def test_a_result_file_with_a_key_twice_is_refused_by_diff_and_gate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_bench(ARITH)
    good, doubled = tmp_path / "a.json", tmp_path / "b.json"
    save_result(evaluate(bench, bench.defaults, k=1), good)
    result = json.loads(good.read_text(encoding="utf-8"))
    # The second attempt says it passed, then what it really did: read by its last word.
    doubled.write_text(dumps_key_twice(result, ("tasks", 0, "attempts", 0, "score"),
                                       "passed", True) + "\n", encoding="utf-8")
    where = f"{doubled}: tasks[0].attempts[0].score.passed: key 'passed' is written twice"
    assert_user_error(*run_forge(capsys, "diff", good, doubled), where)
    assert_user_error(*run_forge(capsys, "gate", doubled, "--baseline", good), where)


# -- run folders: run.json and journal.jsonl ---------------------------------------------


def test_a_run_folder_with_a_key_twice_is_refused_by_show_and_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journals = tmp_path / "journals"
    launch_search(ARITH, journals=journals, run_id="r", max_steps=1, k=1)
    journal = journals / "r" / "journal.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines()
    lines[0] = dumps_key_twice(json.loads(lines[0]), (), "kind", "stop")
    journal.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for command in (("journal", "show", "r"), ("search", "--resume", "r")):
        assert_user_error(*run_forge(capsys, *command, "--journals", journals),
                          f"{journal}:1: kind: ", "key 'kind' is written twice")
    run_json = journals / "r" / "run.json"
    info = json.loads(run_json.read_text(encoding="utf-8"))
    run_json.write_text(dumps_key_twice(info, ("options",), "k", 9), encoding="utf-8")
    assert_user_error(*run_forge(capsys, "journal", "show", "r", "--journals", journals),
                      f"{run_json}: options.k: key 'k' is written twice")
