"""``forge init DIR``: a bench that runs at once and whose first search proves something,
valid against forge's schemas; refusals that touch nothing; a write that is whole or
absent."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import assert_user_error
from conftest import run_forge as forge

from forge._util.files import load_yaml
from forge.bench.loader import load_bench
from forge.bench.schemas import bench_schema, config_schema, registry_schema
from forge.config.registry import load_registry
from forge.errors import BenchError, OptionError
from forge.evaluation.evaluate import evaluate
from forge.scaffold import SCAFFOLD_FILES, init_bench

EXPECTED_FILES = {"bench.yaml", "registry.yaml", "defaults.yaml", "harness.py", "scorer.py",
                  "tasks/dev.jsonl", "tasks/val.jsonl", "tasks/test.jsonl", "README.md",
                  "ci/forge.yml", "requirements.txt"}


@pytest.fixture(autouse=True)
def _forget_bench_modules(tmp_path: Path) -> Iterator[None]:
    """A scaffolded bench's ``harness`` and ``scorer`` are imported under those plain
    names with its folder first on sys.path: none of it may outlive the test."""
    path = list(sys.path)
    yield
    for name in ("harness", "scorer"):
        module = sys.modules.get(name)
        if module is not None and str(tmp_path) in str(getattr(module, "__file__", "")):
            del sys.modules[name]
    sys.path[:] = path


def _tree(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and mtime (what "untouched" means)."""
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _validate(schema: dict[str, Any], path: Path) -> list[str]:
    data = load_yaml(path, BenchError).data  # read as forge reads it
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


def test_init_writes_every_file_and_names_them(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    target = tmp_path / "x"
    code, out, err = forge(capsys, "init", target)
    assert (code, err) == (0, "")
    assert set(_tree(target)) == EXPECTED_FILES
    assert out.startswith(f"created bench x in {target}\n")
    for entry in SCAFFOLD_FILES:
        assert f"  {entry}" in out
    assert f"next: forge search {target}" in out
    # No placeholder left unfilled, in any file.
    assert not [f for f in EXPECTED_FILES
                if re.search(r"__[A-Z][A-Z_]*__", (target / f).read_text())]


def test_the_init_guide_shows_what_forge_init_prints(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = forge(capsys, "init", "my-bench")
    assert code == 0
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "init.md").read_text()
    shown = re.search(r"## What forge init writes\n\n```\n(.*?)```", guide, re.S)
    assert shown is not None and shown.group(1) == out


def test_the_readme_names_every_file_forge_init_writes(tmp_path: Path) -> None:
    """README.md's first step lists what ``forge init my-bench`` writes: no file missing
    from the list, none listed that is not written."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    paragraph = re.search(r"This writes `my-bench/` with (.*?)\n\n", readme, re.S)
    assert paragraph is not None
    named = {name for name in re.findall(r"`([^`]+)`", paragraph.group(1))
             if re.fullmatch(r"[\w./-]+\.\w+", name)}  # file names, not `{"id", ...}`
    written = set(_tree(init_bench(tmp_path / "my-bench").folder))
    assert named == written == EXPECTED_FILES


def test_scaffolded_yaml_validates_against_forge_schema(tmp_path: Path) -> None:
    made = init_bench(tmp_path / "x")
    assert _validate(bench_schema(), made.folder / "bench.yaml") == []
    assert _validate(registry_schema(), made.folder / "registry.yaml") == []
    registry = load_registry(made.folder / "registry.yaml")
    assert _validate(config_schema(registry), made.folder / "defaults.yaml") == []
    bench = load_bench(made.folder)  # and forge's loader agrees: splits disjoint, imports
    assert bench.name == registry.name == "x"
    sizes = {split: len(bench.tasks(split)) for split in ("dev", "val", "test")}
    assert sizes == {"dev": 24, "val": 12, "test": 12}
    assert bench.spec.scorer == {"code": {"target": "scorer:score"}}  # visible, editable


def test_the_toy_agent_depends_on_each_of_its_settings(tmp_path: Path) -> None:
    """Not a hard-coded promotion: every setting moves the pass rate or the cost."""
    bench = load_bench(init_bench(tmp_path / "x").folder)

    def run(**changes: Any) -> tuple[float, float]:
        config = bench.registry.with_values(bench.defaults, changes)
        result = evaluate(bench, config, k=4)
        assert result.pass_rate is not None
        return result.pass_rate, result.metrics["cost"]

    start_rate, start_cost = run()
    cold_rate, cold_cost = run(temperature=0.0)
    assert cold_rate > start_rate + 0.2 and cold_cost == start_cost
    careful_rate, careful_cost = run(temperature=0.0, prompt="stepwise")
    assert careful_rate > cold_rate + 0.1 and careful_cost > cold_cost
    voted_rate, voted_cost = run(votes=3)
    assert voted_rate > start_rate and voted_cost > 2.5 * start_cost


@pytest.mark.slow
def test_first_search_promotes_and_proves_it_on_test(tmp_path: Path) -> None:
    """The README's first hour: ``forge init`` then ``forge search`` as two processes."""
    env = {**os.environ, "COLUMNS": "120"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "forge", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=240, check=False)

    made = cli("init", "tmp/x")
    assert made.returncode == 0, made.stderr
    done = cli("search", "tmp/x", "--json", "--max-steps", "6")
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    assert len(outcome["promotions"]) >= 1
    assert outcome["final_config"] != outcome["start_config"]
    # Proved on the test split, which the search never saw: its whole interval above 0.
    assert outcome["test"]["ci_low"] > 0
    assert (tmp_path / "journals" / outcome["run_id"] / "journal.jsonl").is_file()


def test_refuses_a_folder_that_holds_anything_and_touches_nothing(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "x"
    (target / "tasks").mkdir(parents=True)
    (target / "tasks" / "dev.jsonl").write_text('{"id": "mine"}\n')
    (target / "notes.txt").write_text("my notes\n")
    before = _tree(target)
    line = assert_user_error(*forge(capsys, "init", target), str(target), "not empty")
    assert "wrote nothing" in line
    assert _tree(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]  # no staging left beside it
    # A hidden file is something too.
    hidden = tmp_path / "h"
    hidden.mkdir()
    (hidden / ".git").write_text("gitdir: elsewhere\n")
    assert_user_error(*forge(capsys, "init", hidden), "not empty")


def test_refuses_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "x"
    target.write_text("keep me\n")
    assert_user_error(*forge(capsys, "init", target), "not a folder")
    assert target.read_text() == "keep me\n"


def test_an_empty_folder_is_filled_in_place(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``mkdir b && cd b && forge init .``: the folder is written into, not replaced
    (a shell sitting in it keeps its folder), and the name is the folder's."""
    target = tmp_path / "my-bench"
    target.mkdir()
    inode = target.stat().st_ino
    monkeypatch.chdir(target)
    made = init_bench(".")
    assert made.name == "my-bench"
    assert target.stat().st_ino == inode
    assert set(_tree(target)) == EXPECTED_FILES
    assert load_bench(target).name == "my-bench"
    # Run from inside the bench, the workflow names the repository's root as the bench.
    workflow = yaml.safe_load((target / "ci" / "forge.yml").read_text())
    assert workflow["jobs"]["gate"]["env"]["BENCH"] == "."


def test_name_option_and_its_validation(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    made = init_bench(tmp_path / "x", name="1.0")  # a YAML float, unless quoted
    assert load_bench(made.folder).name == "1.0"
    for bad in ("my bench", "-x", "a/b", "", "x" * 65):
        line = assert_user_error(*forge(capsys, "init", tmp_path / "y", "--name", bad),
                                 "--name: ", "cannot name a bench")
        assert "e.g. --name " in line
    spaced = tmp_path / "My Agent"
    line = assert_user_error(*forge(capsys, "init", spaced), "DIR: the folder's name")
    assert "--name My-Agent" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]  # nothing written


def test_the_workflow_names_the_bench_from_the_working_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    init_bench("benches/with space", name="spaced")
    workflow_text = (tmp_path / "benches/with space/ci/forge.yml").read_text()
    assert yaml.safe_load(workflow_text)["jobs"]["gate"]["env"]["BENCH"] == \
        "benches/with space"
    assert "forge eval 'benches/with space' --save 'benches/with space/baseline.json'" \
        in workflow_text
    elsewhere = init_bench(tmp_path.parent / f"{tmp_path.name}-out", name="out")
    try:  # outside the working folder: its own name, for the user to adjust
        workflow = yaml.safe_load((elsewhere.folder / "ci" / "forge.yml").read_text())
        assert workflow["jobs"]["gate"]["env"]["BENCH"] == f"{tmp_path.name}-out"
    finally:
        shutil.rmtree(elsewhere.folder)


@pytest.mark.parametrize("existing", [False, True], ids=["new folder", "empty folder"])
def test_a_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str],
                                              existing: bool) -> None:
    target = tmp_path / "a" / "b" / "x"
    if existing:
        target.mkdir(parents=True)
    real_open = Path.open
    opened: list[Path] = []

    def failing_open(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "x" in mode:
            opened.append(self)
            if len(opened) == 5:  # a full disk, midway through the files
                raise OSError(28, "No space left on device", str(self))
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", failing_open)
    line = assert_user_error(*forge(capsys, "init", target), "No space left on device",
                             "nothing was written")
    assert len(opened) == 5
    if existing:
        assert list(target.iterdir()) == []
    else:  # not even the parents it had to create
        assert list(tmp_path.iterdir()) == []
    assert "DIR: cannot write" in line


def test_a_failed_move_into_an_empty_folder_takes_back_what_it_moved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "x"
    target.mkdir()
    real_rename = Path.rename
    renamed: list[Path] = []

    def failing_rename(self: Path, destination: Any) -> Any:
        renamed.append(Path(destination))
        if len(renamed) == 4:
            raise OSError(5, "Input/output error", str(destination))
        return real_rename(self, destination)

    monkeypatch.setattr(Path, "rename", failing_rename)
    with pytest.raises(OptionError, match="Input/output error"):
        init_bench(target)
    assert len(renamed) == 4 and list(target.iterdir()) == []
