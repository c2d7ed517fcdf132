"""Loading a bench: paths, validation of every part, one clear line per refusal, digests."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import MakeBench, default_tasks, line_of, write_jsonl

from forge.bench.loader import load_bench
from forge.errors import BenchError
from forge.evaluation.evaluate import evaluate
from forge.scorers import SCORERS


def refusal(path: Path) -> BenchError:
    """The BenchError ``load_bench(path)`` raises, checked to be one line."""
    with pytest.raises(BenchError) as info:
        load_bench(path)
    err = info.value
    assert "\n" not in str(err)
    return err


def edit(path: Path, change: Callable[[str], str]) -> None:
    before = path.read_text(encoding="utf-8")
    after = change(before)
    assert after != before, "the edit did not change the file"
    path.write_text(after, encoding="utf-8")


# -- loading -------------------------------------------------------------------------


def test_arith_bench_loads_from_its_folder_and_from_its_file(arith_bench_path: Path) -> None:
    from_folder = load_bench(arith_bench_path)
    from_file = load_bench(arith_bench_path / "bench.yaml")
    for bench in (from_folder, from_file):
        assert bench.name == "arith"
        assert bench.path == (arith_bench_path / "bench.yaml").resolve()
        assert {s: len(t) for s, t in bench.splits.items()} == {"dev": 12, "val": 8, "test": 8}
        assert bench.registry.name == "arith"
        assert bench.defaults.values == {"effort": 1, "temperature": 0.7, "width": 2,
                                         "mode": "fast", "verify": False}
        assert bench.spec.rollouts.k == 4
        assert bench.harness_spec.name == "python"
        assert bench.scorer_spec.name == "numeric"
    assert from_folder.digest == from_file.digest


def test_relative_paths_resolve_against_the_bench_folder_not_the_cwd(
        arith_bench_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "somewhere" / "arith"
    shutil.copytree(arith_bench_path, copy, ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    bench = load_bench(Path("..") / "somewhere" / "arith")
    assert bench.path == (copy / "bench.yaml").resolve()
    assert [t.id for t in bench.tasks("dev")][:2] == ["dev-00", "dev-01"]
    result = evaluate(bench, bench.defaults, k=1)
    assert result.n_scored == 12  # the harness was imported from the bench's folder


def test_tasks_keep_their_fields(make_bench: MakeBench) -> None:
    rows = default_tasks()
    rows["dev"][0] = {**rows["dev"][0], "tags": ["critical"], "metadata": {"src": "x"},
                      "expected_tools": [{"name": "search", "args": {"q": "a"}}]}
    bench = load_bench(make_bench(tasks=rows))
    task = bench.tasks("dev")[0]
    assert task.tags == ["critical"]
    assert task.metadata == {"src": "x"}
    assert task.expected_tools is not None and task.expected_tools[0].name == "search"


def test_asking_for_a_split_the_bench_lacks_names_the_splits(make_bench: MakeBench) -> None:
    bench = load_bench(make_bench())
    with pytest.raises(BenchError, match=r"no split 'nope'.*dev, val, test"):
        bench.tasks("nope")


# -- refusals: the bench file --------------------------------------------------------


def test_no_bench_at_the_path(tmp_path: Path) -> None:
    err = refusal(tmp_path / "missing")
    assert "missing" in str(err)
    assert "bench" in str(err)


def test_malformed_bench_yaml_names_the_line(make_bench: MakeBench) -> None:
    path = make_bench()
    edit(path, lambda t: t.replace("registry: registry.yaml\n",
                                   "registry: registry.yaml\n  oops: [1\n"))
    err = refusal(path)
    assert str(err).startswith(f"{path.resolve()}:4: ")
    assert "malformed YAML" in str(err)


def test_unknown_bench_field_names_field_and_line(make_bench: MakeBench) -> None:
    path = make_bench()
    edit(path, lambda t: t + "colour: red\n")
    err = refusal(path)
    assert err.file == str(path.resolve())
    assert err.field == "colour"
    assert err.line == line_of(path, "colour")
    assert "unknown field" in str(err)


def test_rollouts_k_zero_is_refused_with_the_field(make_bench: MakeBench) -> None:
    path = make_bench(rollouts={"k": 0})
    err = refusal(path)
    assert err.field == "rollouts.k"
    assert err.line == line_of(path, "rollouts")
    assert str(path.resolve()) in str(err)
    assert "1" in err.message  # the bound


def test_missing_dev_split(make_bench: MakeBench) -> None:
    rows = default_tasks()
    del rows["dev"]
    path = make_bench(tasks=rows)
    err = refusal(path)
    assert err.field == "splits"
    assert "'dev'" in str(err)
    assert err.line == line_of(path, "splits")


def test_missing_split_file_names_the_split_and_its_line(make_bench: MakeBench) -> None:
    path = make_bench()
    (path.parent / "tasks" / "val.jsonl").unlink()
    err = refusal(path)
    assert err.file == str(path.resolve())
    assert err.field == "splits.val"
    assert "val.jsonl" in err.message
    assert err.line == line_of(path, "splits")


def test_unknown_scorer_lists_the_known_ones(make_bench: MakeBench) -> None:
    path = make_bench(scorer="nope")
    err = refusal(path)
    assert err.field == "scorer"
    assert err.line == line_of(path, "scorer")
    assert "'nope'" in str(err)
    for name in ("exact", "numeric", "regex", "contains", "code", "toolcall", "all", "any",
                 "weighted"):
        assert name in SCORERS.names()
        assert name in err.message


# -- refusals: split files -----------------------------------------------------------


def test_malformed_jsonl_names_the_line(make_bench: MakeBench) -> None:
    path = make_bench()
    dev = path.parent / "tasks" / "dev.jsonl"
    lines = dev.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1][:-1]  # drop the closing brace of line 2
    dev.write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = refusal(path)
    assert str(err).startswith(f"{dev.resolve()}:2: ")
    assert "malformed JSON" in str(err)


def test_a_task_line_that_is_not_an_object(make_bench: MakeBench) -> None:
    path = make_bench()
    dev = path.parent / "tasks" / "dev.jsonl"
    dev.write_text(dev.read_text(encoding="utf-8") + "[1, 2]\n", encoding="utf-8")
    err = refusal(path)
    assert err.file == str(dev.resolve())
    assert err.line == 4


def test_a_task_with_an_unknown_field(make_bench: MakeBench) -> None:
    rows = default_tasks()
    rows["dev"][1] = {**rows["dev"][1], "expcted": "typo"}
    path = make_bench(tasks=rows)
    err = refusal(path)
    assert err.line == 2
    assert err.field == "expcted"
    assert "dev.jsonl" in str(err)


def test_duplicate_task_id_names_the_line(make_bench: MakeBench) -> None:
    rows = default_tasks()
    rows["dev"].append({"id": "dev-0", "input": "another input", "expected": "x"})
    path = make_bench(tasks=rows)
    err = refusal(path)
    dev = (path.parent / "tasks" / "dev.jsonl").resolve()
    assert str(err).startswith(f"{dev}:4: id: ")
    assert "duplicate task id 'dev-0'" in str(err)


def test_a_task_id_in_two_splits(make_bench: MakeBench) -> None:
    rows = default_tasks()
    rows["val"] = [{"id": "dev-1", "input": "only in val", "expected": "x"}]
    path = make_bench(tasks=rows)
    err = refusal(path)
    assert str(err).startswith(f"{(path.parent / 'tasks' / 'val.jsonl').resolve()}:1: id: ")
    assert "'dev-1'" in str(err)
    assert "'dev'" in str(err)


def test_a_task_input_in_two_splits(make_bench: MakeBench) -> None:
    rows = default_tasks()
    rows["test"] = [{"id": "test-0", "input": {"q": "dev question 2"}, "expected": "x"}]
    path = make_bench(tasks=rows)
    err = refusal(path)
    assert str(err).startswith(f"{(path.parent / 'tasks' / 'test.jsonl').resolve()}:1: ")
    assert err.field == "input"
    assert "'dev-2'" in str(err)


def test_an_empty_split_is_refused(make_bench: MakeBench) -> None:
    rows = default_tasks()
    rows["val"] = []
    err = refusal(make_bench(tasks=rows))
    assert "val" in str(err)
    assert "no tasks" in str(err)


def test_a_floor_on_a_tag_no_dev_or_val_task_carries_is_refused(make_bench: MakeBench) -> None:
    # It would pass every confirmation having checked nothing.
    path = make_bench()
    edit(path, lambda t: t + "gates: {task_floors: {critical: 0.5}}\n")
    err = refusal(path)
    assert err.field == "gates.task_floors.critical"
    assert err.line == line_of(path, "gates")
    assert "no dev or val task is tagged 'critical': its floor would check nothing" in str(err)
    # Tagged on one val task, it loads.
    rows = default_tasks()
    rows["val"] = [{**rows["val"][0], "tags": ["critical"]}, *rows["val"][1:]]
    tagged = make_bench(tasks=rows, folder="tagged")
    edit(tagged, lambda t: t + "gates: {task_floors: {critical: 0.5}}\n")
    assert load_bench(tagged).spec.gates.task_floors == {"critical": 0.5}


# -- digests -------------------------------------------------------------------------


def test_digest_is_stable_and_changes_with_tasks_and_harness_source(
        make_bench: MakeBench) -> None:
    path = make_bench()
    first = load_bench(path).digest
    assert load_bench(path).digest == first

    rows = default_tasks()
    rows["dev"][0] = {**rows["dev"][0], "expected": "a different answer"}
    write_jsonl(path.parent / "tasks" / "dev.jsonl", rows["dev"])
    after_task = load_bench(path).digest
    assert after_task != first

    edit(path.parent / "harness.py", lambda t: t + "\n# a comment changes the source\n")
    assert load_bench(path).digest != after_task


def test_bench_yaml_is_json_compatible(make_bench: MakeBench) -> None:
    # A bench written as JSON (valid YAML) loads the same way.
    path = make_bench()
    as_json = path.parent / "bench.json.yaml"
    as_json.write_text(json.dumps({
        "name": "mini", "harness": {"python": "harness:run"}, "registry": "registry.yaml",
        "splits": {"dev": "tasks/dev.jsonl", "val": "tasks/val.jsonl",
                   "test": "tasks/test.jsonl"},
        "rollouts": {"k": 2, "concurrency": 4, "timeout_s": 5.0}, "scorer": "exact",
    }), encoding="utf-8")
    assert load_bench(as_json).splits == load_bench(path).splits


# -- bounds and hostile files ---------------------------------------------------------------


@pytest.mark.parametrize("rollouts, field, words", [
    ({"k": 10**9}, "rollouts.k", "less than or equal to 1000"),
    ({"concurrency": 10**6}, "rollouts.concurrency", "less than or equal to 1024"),
    ({"timeout_s": 1e300}, "rollouts.timeout_s", "less than or equal to 604800"),
])
def test_rollout_settings_have_upper_bounds(make_bench: MakeBench, rollouts: dict[str, float],
                                            field: str, words: str) -> None:
    bench = make_bench(rollouts=rollouts)
    err = refusal(bench)
    assert err.field == field and words in err.message
    assert err.line == line_of(bench, "rollouts:")


def test_k_times_the_tasks_of_a_split_is_bounded(make_bench: MakeBench) -> None:
    tasks = default_tasks()
    tasks["dev"] = [{"id": f"dev-{i}", "input": i, "expected": i} for i in range(1001)]
    bench = make_bench(tasks=tasks, rollouts={"k": 1000})
    err = refusal(bench)
    assert err.field == "rollouts.k" and err.line == line_of(bench, "rollouts:")
    assert err.message == ("k 1,000 times the 1,001 tasks of split 'dev' is 1,001,000 attempts "
                           "per evaluation; at most 1,000,000")


def test_a_split_with_more_tasks_than_the_bound_is_refused_at_the_first_one_too_many(
        make_bench: MakeBench, monkeypatch: pytest.MonkeyPatch) -> None:
    import forge.bench.loader as bench_module

    monkeypatch.setattr(bench_module, "MAX_TASKS", 2)
    err = refusal(make_bench())
    assert err.message == "split 'dev' has more than 2 tasks" and err.line == 3


@pytest.mark.parametrize("where, text", [
    ("rollouts: ", '{"k": 2, "timeout_s": .inf}'),
    ("rollouts: ", '{"k": 2, "timeout_s": .nan}'),
    ("scorer: ", "{numeric: {abs_tol: .inf}}"),
])
def test_infinity_where_a_finite_number_is_expected_is_refused(
        make_bench: MakeBench, where: str, text: str) -> None:
    bench = make_bench()
    edit(bench, lambda s: "\n".join(where + text if line.startswith(where) else line
                                    for line in s.splitlines()) + "\n")
    err = refusal(bench)
    assert "finite" in err.message and err.line == line_of(bench, where.strip())


@pytest.mark.parametrize("line, field, words", [
    (b'{"id": "a", "input": "\\ud800"}', "input", "lone surrogate (\\ud800)"),
    (b'{"id": "a", "input": {"q\\udfff": 1}}', "input.q\\udfff", "lone surrogate (\\udfff)"),
    (b'{"id": "a", "input": 1, "tags": ["\\udbff"]}', "tags[0]", "lone surrogate"),
    (b'{"id": "a", "input": -Infinity}', None, "-Infinity is not JSON"),
    (b'{"id": "a", "input": 1e999}', None, "out of range"),
    (b'{"id": ' + b"9" * 5000 + b', "input": 1}', None, "an integer of 5000 digits"),
    (b'{"id": "a", "input": ' + b"[" * 3000 + b"]" * 3000 + b"}", None, "nested deeper"),
    (b'{"id": "a", "input": ' + b"[" * 101 + b"]" * 101 + b"}", "input" + "[0]" * 99,
     "nested deeper than 100 levels"),
    (b'{"id": "a\xff", "input": 1}', None, "not UTF-8: byte 0xff at column 10"),
])
def test_a_hostile_task_line_is_one_line_naming_file_line_and_field(
        make_bench: MakeBench, line: bytes, field: str | None, words: str) -> None:
    bench = make_bench()
    dev = bench.parent / "tasks" / "dev.jsonl"
    dev.write_bytes(dev.read_bytes() + line + b"\n")
    err = refusal(bench)
    assert err.file == str(dev) and err.line == 4 and err.field == field
    assert words in err.message
