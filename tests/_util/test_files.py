"""Atomic writes, YAML with line numbers, JSONL with line numbers, versioned JSON files."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from conftest import ARITH, assert_user_error, run_forge
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError

import forge
from forge._util import files as _files
from forge._util.files import (
    YamlDocument,
    atomic_write_text,
    field_path,
    load_versioned_json,
    load_yaml,
    parse_yaml,
    raise_validation_error,
    read_jsonl,
    validation_problem,
)
from forge.errors import BenchError, ConfigError, RegistryError, ResultFileError

# --------------------------------------------------------------------------- atomic_write_text


def test_atomic_write_creates_parents_and_writes_everything(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out.json"
    atomic_write_text(target, '{"ok": true}\n')
    assert target.read_text(encoding="utf-8") == '{"ok": true}\n'
    assert os.listdir(target.parent) == ["out.json"]


def test_atomic_write_replaces_existing_content(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")
    atomic_write_text(target, "new — ünïcode")
    assert target.read_text(encoding="utf-8") == "new — ünïcode"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_failed_rename_keeps_old_content_and_leaves_no_temp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")

    def refuse(src: object, dst: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(_files.os, "replace", refuse)
    with pytest.raises(OSError, match="disk on fire"):
        atomic_write_text(target, "new")
    assert target.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_write_of_a_non_str_keeps_old_content_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(TypeError):
        atomic_write_text(target, 123)  # type: ignore[arg-type]
    assert target.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_interrupt_mid_write_keeps_old_content_and_leaves_no_temp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")

    def interrupt(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_files.os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(target, "new")
    assert target.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_failed_first_write_creates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(src: object, dst: object) -> None:
        raise OSError("no")

    monkeypatch.setattr(_files.os, "replace", refuse)
    with pytest.raises(OSError):
        atomic_write_text(tmp_path / "out.txt", "new")
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_atomic_write_keeps_the_permissions_of_the_file_it_replaces(tmp_path: Path) -> None:
    target = tmp_path / "defaults.yaml"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o640)
    atomic_write_text(target, "new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_atomic_write_gives_a_new_file_the_umask_permissions(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "new.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


# --------------------------------------------------------------------------- YAML

DOC = """\
# a comment on line 1
name: triage
settings:
  max_iterations:
    type: int
    min: 1
    max: 8
  temperature: {type: float,
                max: 1.5}
runtime:
  rules:
    - on: cap_hit
      target: max_iterations
    - {on: slow, target: temperature}
"""


@pytest.fixture
def doc(tmp_path: Path) -> YamlDocument:
    path = tmp_path / "doc.yaml"
    path.write_text(DOC, encoding="utf-8")
    return load_yaml(path, RegistryError)


@pytest.mark.parametrize(("loc", "line"), [
    (["name"], 2),
    (["settings"], 3),
    (["settings", "max_iterations"], 4),
    (["settings", "max_iterations", "type"], 5),
    (["settings", "max_iterations", "max"], 7),
    (["settings", "temperature", "type"], 8),
    (["settings", "temperature", "max"], 9),
    (["runtime", "rules", 0], 12),
    (["runtime", "rules", 0, "target"], 13),
    (["runtime", "rules", 1, "target"], 14),
])
def test_line_of_finds_nested_keys(doc: YamlDocument, loc: list[str | int], line: int) -> None:
    assert doc.line_of(loc) == line


@pytest.mark.parametrize(("loc", "line"), [
    ([], 2),
    (["nope"], 2),
    (["settings", "max_iterations", "step"], 4),
    (["runtime", "rules", 5, "target"], 11),
    (["name", "deeper"], 2),
])
def test_line_of_a_missing_key_is_the_deepest_existing_one(
        doc: YamlDocument, loc: list[str | int], line: int) -> None:
    assert doc.line_of(loc) == line


def test_line_of_in_an_empty_document_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing here\n", encoding="utf-8")
    doc = load_yaml(path, RegistryError)
    assert doc.data is None
    assert doc.line_of(["anything"]) is None


def test_load_yaml_reads_yaml_1_2_scalars(doc: YamlDocument) -> None:
    # YAML 1.1 would read the key ``on`` as True; forge files mean the word.
    assert doc.data["runtime"]["rules"][0] == {"on": "cap_hit", "target": "max_iterations"}
    assert parse_yaml("[1e-3, 2E+2, .5, 1_000, yes, no, on, off, true, False, ~]") == [
        0.001, 200.0, 0.5, 1000, "yes", "no", "on", "off", True, False, None]


def test_malformed_yaml_names_file_and_line_in_the_callers_error(tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text("name: x\nsplits: {dev: a.jsonl\nrollouts: 3\n", encoding="utf-8")
    with pytest.raises(BenchError) as info:
        load_yaml(path, BenchError)
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: malformed YAML")
    assert "\n" not in str(info.value)


def test_missing_yaml_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_yaml(tmp_path / "absent.yaml", ConfigError)
    assert str(info.value) == f"{tmp_path / 'absent.yaml'}: file not found"


def test_non_utf8_yaml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_yaml(path, ConfigError)


# --------------------------------------------------------------------------- validation errors


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max: int


class _Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    settings: dict[str, _Inner]


def _refuse(doc: YamlDocument) -> ConfigError:
    with pytest.raises(ValidationError) as validation:
        _Outer.model_validate(doc.data)
    with pytest.raises(ConfigError) as info:
        raise_validation_error(validation.value, error=ConfigError, file=doc.path, doc=doc)
    return info.value


def test_validation_error_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("name: x\nsettings:\n  a:\n    max: lots\n", encoding="utf-8")
    err = _refuse(load_yaml(path, ConfigError))
    assert (err.line, err.field) == (4, "settings.a.max")
    assert "'lots'" in str(err)


def test_validation_error_for_unknown_and_missing_fields(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("name: x\nsettings:\n  a: {max: 1, colour: red}\n", encoding="utf-8")
    err = _refuse(load_yaml(path, ConfigError))
    assert (err.line, err.field, err.message) == (3, "settings.a.colour", "unknown field")
    path.write_text("settings: {}\n", encoding="utf-8")
    err = _refuse(load_yaml(path, ConfigError))
    assert (err.field, err.message) == ("name", "required field is missing")


@pytest.mark.parametrize(("loc", "text"), [
    (("settings", "t", "max"), "settings.t.max"),
    (("runtime", "rules", 0, "on"), "runtime.rules[0].on"),
    ((3,), "[3]"),
    ((), ""),
])
def test_field_path(loc: tuple[str | int, ...], text: str) -> None:
    assert field_path(loc) == text


# --------------------------------------------------------------------------- JSONL


def _jsonl(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


def test_read_jsonl_skips_blank_lines_and_keeps_file_line_numbers(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, '{"id": "a"}\n\n   \n{"id": "b"}\n\t\n[1, 2]\n"last"')
    assert list(read_jsonl(path, BenchError)) == [
        (1, {"id": "a"}), (4, {"id": "b"}), (6, [1, 2]), (7, "last")]


def test_read_jsonl_names_the_line_of_malformed_json(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, '{"id": "a"}\n\n{"id": "b"}\n{"id": "c",}\n{"id": "d"}\n')
    rows = read_jsonl(path, BenchError)
    assert next(rows) == (1, {"id": "a"})
    assert next(rows) == (3, {"id": "b"})
    with pytest.raises(BenchError) as info:
        next(rows)
    assert info.value.line == 4
    assert str(info.value).startswith(f"{path}:4: malformed JSON")
    assert "\n" not in str(info.value)


def test_read_jsonl_of_an_empty_file_yields_nothing(tmp_path: Path) -> None:
    assert list(read_jsonl(_jsonl(tmp_path, "\n\n"), BenchError)) == []


def test_read_jsonl_missing_file_is_refused(tmp_path: Path) -> None:
    rows: Iterator[tuple[int, object]] = read_jsonl(tmp_path / "absent.jsonl", BenchError)
    with pytest.raises(BenchError) as info:
        list(rows)
    assert str(info.value) == f"{tmp_path / 'absent.jsonl'}: file not found"


# --------------------------------------------------------------------------- load_versioned_json


class _Saved(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    format_version: int
    name: str
    sizes: list[int]


def _load(path: Path) -> _Saved:
    return load_versioned_json(path, _Saved, error=ResultFileError, version=3,
                               what="saved thing", missing="no such thing")


def test_a_versioned_file_loads_into_its_model(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"format_version": 3, "name": "a", "sizes": [1, 2]}', encoding="utf-8")
    assert _load(path) == _Saved(format_version=3, name="a", sizes=[1, 2])


@pytest.mark.parametrize(("content", "message", "field", "line"), [
    (None, "no such thing", None, None),
    (b"\xff\xfe{}", "cannot read: not UTF-8", None, None),
    (b'{"format_version": 3,\n "name": ', "malformed JSON: Expecting value", None, 2),
    (b"[3]", "not a saved thing (no format_version)", None, None),
    (b'{"name": "a"}', "not a saved thing (no format_version)", None, None),
    (b'{"format_version": true}', "format_version True is not readable by this forge, "
                                  "which reads 3", "format_version", None),
    (b'{"format_version": "3"}', "format_version '3' is not readable", "format_version", None),
    (b'{"format_version": 2}', "format_version 2 is not readable", "format_version", None),
    (b'{"format_version": 3, "name": "a", "sizes": [1, "x"]}',
     "damaged saved thing: expected an integer", "sizes[1]", None),
    (b'{"format_version": 3, "name": "a"}', "damaged saved thing: required field is missing",
     "sizes", None),
])
def test_anything_else_is_refused_in_one_line_naming_file_and_field(
        tmp_path: Path, content: bytes | None, message: str, field: str | None,
        line: int | None) -> None:
    path = tmp_path / "s.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ResultFileError) as info:
        _load(path)
    assert info.value.file == str(path) and info.value.field == field
    assert info.value.line == line
    assert info.value.message.startswith(message), info.value.message
    assert "\n" not in str(info.value)


def test_a_folder_is_not_a_versioned_file(tmp_path: Path) -> None:
    with pytest.raises(ResultFileError, match="is a folder; expected a saved thing file"):
        _load(tmp_path)


# --------------------------------------------------------------------------- hostile files

_LAUGHS = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))


@pytest.mark.parametrize(("text", "line", "field", "words"), [
    (b"name: ok\nbad: \"a\x1bb\"\n", 2, None,
     "character U+001B is not allowed (control characters must be escaped"),
    (b"name: ok\nbad: a\x00b\n", 2, None, "character U+0000 is not allowed"),
    (b"name: ok\nbad: caf\xe9\n", 2, None, "not UTF-8 (byte 0xe9 at offset 17)"),
    (b"x: " + b"[" * 3000 + b"]" * 3000 + b"\n", 1, None, "nested deeper than 100 levels"),
    (b"x:\n" + b"".join(b"  " * i + b"- \n" for i in range(1, 103)), 101, None,
     "nested deeper than 100 levels"),
    (_LAUGHS.encode(), 7, None, "expands to more than 1,000,000 nodes"),  # 9^7 at a6
    (b"name: ok\nmax: " + b"9" * 5000 + b"\n", 2, None, "an integer of 5000 digits"),
    (b"name: ok\nday: 2024-13-45\n", 2, None, "not a date: month must be in 1..12"),
    (b"name: ok\nsub:\n  text: \"\\ud800\"\n", 3, "sub.text", "lone surrogate (\\ud800)"),
    (b"name: ok\nlist: [a, \"\\udc00\"]\n", 2, "list[1]", "lone surrogate (\\udc00)"),
    (b"a: &a [*a]\n", 1, "a[0]", "refers back to a, which contains it"),
    (b"x: 1\nd: &d {b: [2, {c: *d}]}\n", 2, "d.b[1].c", "refers back to d, which"),
    (b"&top [1, *top]\n", 1, "[1]", "refers back to the whole document"),
])
def test_a_hostile_yaml_file_is_one_line_naming_file_line_and_field(
        tmp_path: Path, text: bytes, line: int, field: str | None, words: str) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_bytes(text)
    with pytest.raises(BenchError) as info:
        load_yaml(path, BenchError)
    err = info.value
    assert err.file == str(path) and err.line == line and err.field == field, str(err)
    assert words in err.message, err.message
    assert str(err).isprintable()


def test_what_yaml_allows_within_the_bounds_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    nested = "x: " + "[" * 99 + "]" * 99 + "\n"  # 100 levels with the document's
    path.write_text(nested + "big: " + "9" * 1000 + "\nesc: \"\\e[0m\"\n"
                    + "pair: \"\\U0001f600\"\nshared: &s [1, 2]\nagain: *s\n",
                    encoding="utf-8")
    data = load_yaml(path, BenchError).data
    assert data["big"] == int("9" * 1000) and data["esc"] == "\x1b[0m"
    assert data["pair"] == "\U0001f600" and data["again"] == [1, 2]


@pytest.mark.parametrize(("content", "message", "field"), [
    (b'{"format_version": 3, "name": "\\ud800", "sizes": []}', "a lone surrogate", "name"),
    (b'{"format_version": 3, "name": "a", "sizes": [NaN]}', "NaN is not JSON", None),
    (b'{"format_version": 3, "name": "a", "sizes": [1e400]}', "the number 1e400 is out of",
     None),
    (b'{"format_version": 3, "name": "a", "sizes": [' + b"1" * 4400 + b"]}",
     "an integer of 4400 digits", None),
    (b'{"format_version": 3, "name": "a", "sizes": ' + b"[" * 2000 + b"]" * 2000 + b"}",
     "nested deeper than 100 levels", None),
])
def test_a_hostile_versioned_file_is_one_line(tmp_path: Path, content: bytes, message: str,
                                              field: str | None) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(content)
    with pytest.raises(ResultFileError) as info:
        _load(path)
    assert info.value.field == field and message in info.value.message, str(info.value)


def _laughs(levels: int) -> list[object]:
    """9^levels strings if written out: a YAML billion laughs, as PyYAML builds it."""
    value: list[object] = ["lol"] * 9
    for _ in range(levels):
        value = [value] * 9
    return value


@pytest.mark.timeout(60)
def test_a_validation_error_about_a_billion_laughs_or_a_cycle_is_one_short_line() -> None:
    class Named(BaseModel):
        name: str

    cycle: list[object] = []
    cycle.append(cycle)
    for value in (_laughs(30), cycle):
        with pytest.raises(ValidationError) as info:
            Named.model_validate({"name": value})
        problem = validation_problem(info.value)
        assert problem.field == "name" and len(problem.message) < 120, problem.message



def test_a_recursive_alias_is_refused_in_one_short_line_naming_the_cycle(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It was refused as nested too deep, at a path of a hundred [1]s: 392 characters.
    bench = tmp_path / "bench"
    shutil.copytree(ARITH, bench)
    (bench / "bench.yaml").write_text(
        "r: &r [1, *r]\n" + (bench / "bench.yaml").read_text(), encoding="utf-8")
    code, out, err = run_forge(capsys, "eval", bench, "--json")
    line = assert_user_error(code, out, err)
    assert line == (f"forge: error: {bench / 'bench.yaml'}:1: r[1]: refers back to r, which "
                    "contains it (a recursive alias); expected a value that does not "
                    "contain itself")

# --------------------------------------------------------------------- duplicate keys (16.2)



@pytest.mark.parametrize(("file", "edit", "line", "field"), [
    ("bench.yaml", lambda t: t + "metrics:\n  latency: {direction: lower, max_increase: 1}\n",
     15, "metrics"),
    ("registry.yaml", lambda t: t.replace(
        "hints:", "  effort: {type: int, min: 1, max: 3, default: 1}\nhints:"),
     11, "settings.effort"),
    ("defaults.yaml", lambda t: t + "width: 4\n", 6, "width"),
])
def test_a_key_written_twice_in_any_yaml_file_is_one_line_with_file_line_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str,
        edit: Callable[[str], str], line: int, field: str) -> None:
    bench = tmp_path / "arith"
    shutil.copytree(ARITH, bench)
    path = bench / file
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    code, out, err = run_forge(capsys, "eval", bench, "--task", "no-such-task")
    assert_user_error(code, out, err, f"{path}:{line}: {field}: ", "written twice",
                      "first on line")


def test_duplicate_keys_are_found_at_any_depth_and_a_merge_may_repeat_keys(
        tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("a:\n  - {x: 1}\n  - b: {y: 1, z: 2, y: 3}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_yaml(path, ConfigError)
    assert (info.value.line, info.value.field) == (3, "a[1].b.y"), str(info.value)
    # "1" and 1 are two keys once built, so they may both be written.
    assert parse_yaml('base: &b {p: 1, q: 2}\nm:\n  <<: *b\n  p: 3\n"1": a\n1: b\n') == {
        "base": {"p": 1, "q": 2}, "m": {"p": 3, "q": 2}, "1": "a", 1: "b"}


# ------------------------------------------------------------- pydantic's wording (16.2)

_PYDANTIC_WORDS = ("Input should", "Unable to extract", "discriminator", "Input tag",
                   "instance of", "Value error", "Extra inputs")


@pytest.mark.parametrize(("data", "field", "message"), [
    ({"s": {"default": False}}, "s", "no 'type' field saying which kind this is"),
    ({"s": {"type": "str", "default": 1}}, "s",
     "type 'str' is not one of 'int', 'float', 'bool', 'enum'"),
    ({"s": "fast"}, "s", "expected a mapping (got 'fast')"),
    ({"s": {"type": "int", "min": "one", "max": 5, "default": 1}}, "s.min",
     "expected an integer (got 'one')"),
    ({"s": {"type": "float", "min": 0, "max": "x", "default": 0}}, "s.max",
     "expected a number (got 'x')"),
    ({"s": {"type": "bool", "default": "maybe"}}, "s.default", "expected true or false"),
    ({"s": {"type": "enum", "choices": "ab", "default": "a"}}, "s.choices",
     "expected a list (got 'ab')"),
    ({"s": {"type": "enum", "choices": ["a", "b"], "default": "a", "description": ["d"]}},
     "s.description", "expected a text"),
    ({"s": {"type": "bool", "default": True, "colour": 1}}, "s.colour", "unknown field"),
    ({"s": {"type": "enum", "choices": [], "default": "a"}}, "s.choices",
     "at least 1 item(s), got 0"),
    ({"s": {"type": "enum", "choices": list(range(10_001)), "default": 0}}, "s.choices",
     "at most 10,000 item(s), got 10,001"),
    ({"s": {"type": "int", "min": 1, "max": 5, "default": 1}, "direction": "down"}, "direction",
     "expected 'lower' or 'higher' (got 'down')"),
    ({"s": {"type": "int", "min": 1, "max": 5, "default": 1}, "k": 0}, "k",
     "must be greater than or equal to 1 (got 0)"),
])
def test_pydantic_wording_never_reaches_the_user(data: dict[str, Any], field: str,
                                                  message: str) -> None:
    from forge.config.registry import Setting

    class File(BaseModel):
        model_config = ConfigDict(extra="forbid")
        s: Setting
        direction: Literal["lower", "higher"] = "lower"
        k: int = Field(default=1, ge=1)

    with pytest.raises(ValidationError) as info:
        File.model_validate(data)
    problem = validation_problem(info.value, data=data)
    assert (problem.field, problem.message[:len(message)]) == (field, message), problem
    assert not any(word in problem.message for word in _PYDANTIC_WORDS), problem.message


# ------------------------------------------------------- aliases repeating long text (issue 43)


#: ``python -c`` this, PEAK_FILE, ARGS...: forge's CLI on ARGS, then its peak resident
#: memory (KiB) written to PEAK_FILE.
_PEAK_REPORTING_FORGE = """
import atexit, sys
from pathlib import Path
def _peak(path=Path(sys.argv[1])):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            path.write_text(line.split()[1])
atexit.register(_peak)
from forge.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _alias_bomb(path: Path, settings: int = 5000, text_bytes: int = 2**20) -> Path:
    """The registry of the report: one ``text_bytes`` description, reused by alias in
    every other setting (1.4 MB on disk, 5 GB of text once expanded)."""
    text = "x" * text_bytes
    rows = [f'  s0: {{type: int, min: 0, max: 1, default: 0, description: &b "{text}"}}']
    rows += [f"  s{i}: {{type: int, min: 0, max: 1, default: 0, description: *b}}"
             for i in range(1, settings)]
    path.write_text("name: bomb\nsettings:\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.timeout(60)
def test_an_alias_repeating_a_long_text_is_refused_at_the_alias_in_one_line(
        tmp_path: Path) -> None:
    path = _alias_bomb(tmp_path / "registry.yaml")
    started = time.monotonic()
    peak = tmp_path / "peak"
    with (tmp_path / "out").open("wb") as out, (tmp_path / "err").open("wb") as err:
        # A process of its own, which reports its own peak memory as it exits (VmHWM is
        # the new program's: a child's rusage would also count the pytest process it was
        # forked from, as large as the suite has made it).
        child = subprocess.run(
            [sys.executable, "-c", _PEAK_REPORTING_FORGE, str(peak),
             "registry", "show", "--json", str(path)],
            stdout=out, stderr=err, check=False,
            env={**os.environ, "PYTHONPATH": str(Path(forge.__file__).parents[1])})
    line = assert_user_error(child.returncode, (tmp_path / "out").read_text(),
                             (tmp_path / "err").read_text(), str(path), "16,777,216 bytes",
                             "the bound")
    # The 17th 1 MiB copy (s15, line 18, its alias at column 61) crosses 16 MiB: refused
    # there, before anything is built from the document.
    assert f"{path}:18:" in line and "column 61" in line, line
    assert time.monotonic() - started < 30
    # Expanded it is 5 GB of text; its digest, as JSON, took 7.2 GB before it failed.
    assert int(peak.read_text()) < 400 * 1024, peak.read_text()  # KiB


@pytest.mark.timeout(60)
def test_an_evaluation_of_a_bench_whose_registry_is_an_alias_bomb_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(ARITH, bench)
    _alias_bomb(bench / "registry.yaml")
    (bench / "defaults.yaml").write_text("".join(f"s{i}: 0\n" for i in range(5000)),
                                         encoding="utf-8")
    code, out, err = run_forge(capsys, "eval", bench, "--json")
    assert_user_error(code, out, err, "registry.yaml:18:", "16,777,216 bytes")


def test_a_yaml_file_larger_than_the_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as file:
        file.truncate(64 * 2**20 + 1)  # sparse: nothing of it is in memory or on disk
    with pytest.raises(BenchError) as info:
        load_yaml(path, BenchError)
    assert "larger than 16,777,216 bytes" in info.value.message, str(info.value)


def test_a_document_just_within_the_byte_bound_loads(tmp_path: Path) -> None:
    from forge._util.bounds import MAX_YAML_BYTES

    text_bytes = 2**20
    copies = MAX_YAML_BYTES // text_bytes - 1  # and the keys: within the bound
    path = tmp_path / "ok.yaml"
    path.write_text(f'a: &t "{"y" * text_bytes}"\nb: [{", ".join(["*t"] * (copies - 1))}]\n',
                    encoding="utf-8")
    data = load_yaml(path, BenchError).data
    assert len(data["b"]) == copies - 1 and data["b"][0] is data["a"]


def test_a_registry_sharing_small_texts_by_alias_and_merge_still_loads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = ['  s0: &int {type: int, min: 0, max: 9, default: 1, description: &d "a shared '
            'description, as a person would write one"}']
    rows += [f"  s{i}: {{<<: *int, default: {i % 10}, description: *d}}" for i in range(1, 200)]
    path = tmp_path / "registry.yaml"
    path.write_text("name: shared\nsettings:\n" + "\n".join(rows) + "\n", encoding="utf-8")
    code, out, err = run_forge(capsys, "registry", "show", "--json", path)
    assert code == 0, err
    settings = json.loads(out)["settings"]
    assert len(settings) == 200 and settings["s7"]["default"] == 7
    assert {s["description"] for s in settings.values()} == {
        "a shared description, as a person would write one"}


# A YAML document of anchored values, each made of scalars and aliases of the values
# anchored before it (and merges of those that are mappings), in flow style; strings
# are written as JSON, which is a double-quoted YAML scalar.
_SCALAR = st.one_of(st.text(st.characters(codec="utf-8"), max_size=40).map(json.dumps),
                    st.integers(-10**6, 10**6).map(str), st.sampled_from(["true", "1.5", "~"]))


@st.composite
def _aliased_documents(draw: st.DrawFn) -> str:
    rows: list[str] = []
    mappings: list[int] = []

    def value(depth: int, defined: int) -> str:
        # An anchored value is never an alias itself: YAML has no anchor on an alias.
        kinds = ["scalar", "list", "map"] if depth == 0 else ["scalar", "alias", "list", "map"]
        kind = draw(st.sampled_from(kinds if depth < 3 else ["scalar", "alias"]))
        if kind == "alias" and defined:
            return f"*a{draw(st.integers(0, defined - 1))}"
        if kind == "list":
            return "[" + ", ".join(value(depth + 1, defined)
                                   for _ in range(draw(st.integers(0, 4)))) + "]"
        if kind == "map":
            keys = draw(st.lists(st.text(st.characters(codec="utf-8"), max_size=12),
                                 max_size=4, unique=True))
            items = [f"{json.dumps(k)}: {value(depth + 1, defined)}" for k in keys]
            if mappings and draw(st.booleans()):
                items.insert(0, f"<<: *a{draw(st.sampled_from(mappings))}")
            return "{" + ", ".join(items) + "}"
        return draw(_SCALAR)

    for i in range(draw(st.integers(1, 7))):
        text = value(0, i)
        if text.startswith("{"):
            mappings.append(i)
        rows.append(f"d{i}: &a{i} {text}")
    return "\n".join(rows) + "\n"


def _text_bytes(value: object) -> int:
    """UTF-8 bytes of every string (key or value) in ``value``, each counted as often as
    it occurs, as a digest or a JSON dump of it would write them."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item.encode("utf-8", "surrogatepass"))
        elif isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item
    return total


@settings(max_examples=300, deadline=None)
@given(_aliased_documents())
def test_the_expanded_bytes_the_loader_counts_bound_the_text_it_returns(text: str) -> None:
    from forge._util.parse import compose_yaml

    composed = compose_yaml(text)
    assert _text_bytes(composed.data) <= composed.expanded_bytes
