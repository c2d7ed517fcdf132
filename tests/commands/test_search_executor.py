"""Where a resumed search runs: the flags given over the journaled executor, said and
kept in run.json; the kind changes only by ``--executor``, never by a Ray flag alone.

(The Ray cluster cases, a new address and a cluster gone, are in
tests/executors/test_ray_connect.py, against real clusters.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_forge, search_tasks, write_search_bench

HARNESS = """
def run(config, task, ctx):
    ok = random.Random(ctx.seed).random() < (0.8 if config["boost"] else 0.5)
    return {"output": task.expected if ok else "wrong"}
"""


@pytest.fixture
def finished(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A search run to its end on the local executor: its run folder."""
    bench = write_search_bench(tmp_path / "b", HARNESS, tasks=search_tasks(4, 4, 4), k=2,
                               search={"max_steps": 1, "patience": 1})
    code, _, err = run_forge(capsys, "search", bench, "--journals", tmp_path / "j",
                             "--run-id", "r", "--proposer", "sweep", "--candidates", "1",
                             "--json")
    assert code == 0, err
    return tmp_path / "j" / "r"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize(("flags", "option"), [
    (["--ray-address", "127.0.0.1:6379"], "--ray-address"),
    (["--ray-connect-timeout", "5"], "--ray-connect-timeout"),
    (["--executor", "process", "--ray-address", "127.0.0.1:6379"], "--ray-address"),
])
def test_a_ray_flag_on_a_run_not_on_ray_is_refused_and_changes_nothing(
        finished: Path, capsys: pytest.CaptureFixture[str], flags: list[str],
        option: str) -> None:
    before = snapshot(finished)
    code, _, err = run_forge(capsys, "search", "--resume", "r", "--journals", finished.parent,
                             *flags)
    assert code == 2
    how = "--executor" if "--executor" in flags else "the run's journaled executor"
    name = "process" if "--executor" in flags else "local"
    assert err.strip() == (f"forge: error: {option}: the executor is {name} ({how}); a Ray "
                           "cluster needs --executor ray")
    assert snapshot(finished) == before


def test_a_new_run_refuses_a_ray_flag_for_another_executor(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = write_search_bench(tmp_path / "b", HARNESS, tasks=search_tasks(4, 4, 4), k=2)
    code, _, err = run_forge(capsys, "search", bench, "--journals", tmp_path / "j",
                             "--ray-address", "127.0.0.1:6379")
    assert code == 2
    assert err.strip() == ("forge: error: --ray-address: the executor is local (the bench's "
                           "executor); a Ray cluster needs --executor ray")
    assert not (tmp_path / "j").exists()


def test_a_resume_on_another_executor_says_so_and_run_json_keeps_it(
        finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_forge(capsys, "search", "--resume", "r", "--journals", finished.parent,
                             "--executor", "process", "--workers", "1", "--json")
    assert code == 0, err
    assert ("resuming r on the process executor, 1 workers (journaled: the local executor)"
            in err)
    executor = json.loads((finished / "run.json").read_text())["options"]["executor"]
    assert executor == {"name": "process", "workers": 1, "ray_address": None}
    # The next resume goes there too, and says nothing: nothing changed.
    code, _, err = run_forge(capsys, "search", "--resume", "r", "--journals", finished.parent,
                             "--workers", "1", "--json")
    assert code == 0, err
    assert "resuming" not in err
