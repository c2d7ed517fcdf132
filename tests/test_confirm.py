"""The confirmation's improvement gate pools the val tasks with dev's (forge/confirm.py).

Its power is bounded by the tasks it pairs, not by the attempts a task: between-task
spread dominates. A move whose gain dev's few tasks cannot show at its level must be
shown on dev and val together, and a run journaled before the pooling must resume on
dev alone, reaching the decisions it reached then.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import search_tasks, write_search_bench

from forge.bench import BudgetSettings, load_bench
from forge.proposers import SweepProposer
from forge.search import Search, SearchOptions, SearchOutcome

# Outcomes fixed by the task, not the seed: the incumbent passes the even tasks; boost
# passes these too and 3 of every 8 odd ones. On 8 dev tasks that is +0.375 with p =
# 0.040 (t, 7 df) on every fresh block alike: past the 0.0304 of a first confirmation
# whatever the attempts. On dev and val together (8 + 16 tasks) it is p = 0.0006.
FIXED_GAIN = """
def run(config, task, ctx):
    record(config, task, ctx)
    i = int(task.id.split("-")[1])
    ok = i % 2 == 0 or (config["boost"] and i % 8 in (1, 3, 5))
    return {"output": task.expected if ok else "wrong"}
"""

REGISTRY = """\
name: s
settings:
  boost: {type: bool, default: false}
"""


def search(tmp_path: Path, name: str, **options: Any) -> SearchOutcome:
    path = tmp_path / "bench"
    if not path.exists():
        write_search_bench(path, FIXED_GAIN, registry=REGISTRY, k=2,
                           tasks=search_tasks(8, 16, 2))
    bench = load_bench(path)
    folder = tmp_path / name
    folder.mkdir()
    settings: dict[str, Any] = {"max_steps": 1, "patience": 1, "budget": BudgetSettings(),
                                "k": 2, "seed": 1, "concurrency": 2, "timeout_s": 10.0,
                                "run_test": False, **options}
    return Search(bench, bench.defaults, SweepProposer(), SearchOptions(**settings),
                  run_id=name, folder=folder).run()


def boost_record(outcome: SearchOutcome) -> dict[str, Any]:
    [record] = [r for r in outcome.records
                if r["kind"] == "candidate" and r["move"]["target"] == "boost"]
    return record


def test_a_gain_too_few_dev_tasks_cannot_show_is_shown_on_dev_and_val_together(
        tmp_path: Path) -> None:
    pooled = boost_record(search(tmp_path, "pooled"))
    assert pooled["verdict"] == "promoted"
    confirm = pooled["dev"]["confirm"]
    assert confirm["splits"] == ["dev", "val"]
    assert confirm["n_tasks"] > 8  # val's tasks are in the test
    assert confirm["p_value"] < confirm["level"] == 0.05 * 6 / 3.141592653589793 ** 2
    dev_gate = next(g for g in pooled["gates"] if g["name"] == "dev")
    assert dev_gate["passed"] and dev_gate["reason"].startswith("dev+val +0.")
    # val keeps its own gate, on val alone.
    val_gate = next(g for g in pooled["gates"] if g["name"] == "val")
    assert val_gate["passed"] and pooled["val"]["n_tasks"] <= 16


def test_a_run_from_before_the_pooling_confirms_on_dev_alone(tmp_path: Path) -> None:
    alone = boost_record(search(tmp_path, "alone", pooled_improvement=False))
    # The same candidate, screened the same way, fails where dev's 8 tasks are all the
    # evidence: p = 0.040 on every look's worth of them.
    assert alone["verdict"] == "rejected"
    assert [g["name"] for g in alone["gates"] if not g["passed"]] == ["dev"]
    confirm = alone["dev"]["confirm"]
    assert "splits" not in confirm and confirm["n_tasks"] == 8
    assert confirm["p_value"] > confirm["level"]
