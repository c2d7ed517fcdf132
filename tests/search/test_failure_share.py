"""Failures cannot buy a promotion: whole searches over harnesses whose one setting
value fails exactly where it would be wrong (raising, or running past its timeout on
the hard tasks), and a final config that fails on test, which `forge promote` refuses.

Task i of every split is *hard* when i % 4 == 3. ``style: short`` (the start) answers
only the tasks i % 4 == 0; ``detailed`` answers every task it can (i % 4 != 3) and on a
hard task, where it would be wrong, fails instead of answering. Left out of the means,
its failures make it perfect (1.0 against 0.25); counted as losses where the start
answered (it never does on a hard task) it is still +0.5 ahead: only its failure share
refuses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import run_forge, search_tasks, write_search_bench

from forge.search.launch import launch_search

REGISTRY = """\
name: bot
settings:
  style: {type: enum, choices: [short, detailed], default: short}
  other: {type: bool, default: false}
"""

RAISES = """
def run(config, task, ctx):
    record(config, task, ctx)
    i = int(task.id.split("-")[1])
    if config["style"] == "detailed":
        if i % 4 == 3:
            raise ValueError("unparseable JSON: the answer was cut at max_tokens")
        return {"output": task.expected}
    return {"output": task.expected if i % 4 == 0 else "wrong"}
"""

HANGS = """
def run(config, task, ctx):
    record(config, task, ctx)
    i = int(task.id.split("-")[1])
    if config["style"] == "detailed":
        if i % 4 == 3:
            time.sleep(5)  # the slow hard tasks: killed by the attempt's timeout
        return {"output": task.expected}
    return {"output": task.expected if i % 4 == 0 else "wrong"}
"""

#: ``detailed`` answers everything it can on dev and val, and raises on every test task.
TEST_ONLY = """
def run(config, task, ctx):
    record(config, task, ctx)
    i = int(task.id.split("-")[1])
    if config["style"] == "detailed":
        if task.id.startswith("test") and i % 2 == 0:
            raise RuntimeError("tool-call limit reached")
        return {"output": task.expected}
    return {"output": task.expected if i % 4 == 0 else "wrong"}
"""


def search(tmp_path: Path, harness: str, *, timeout_s: float | None = None) -> Any:
    bench = write_search_bench(tmp_path / "bench", harness, registry=REGISTRY, k=2,
                               tasks=search_tasks(32, 16, 16))
    if timeout_s is not None:
        text = bench.read_text(encoding="utf-8")
        bench.write_text(text.replace('"timeout_s": 10.0', f'"timeout_s": {timeout_s}'),
                         encoding="utf-8")
    return launch_search(bench, journals=tmp_path / "journals", run_id="r", seed=7,
                         proposer="sweep")


def refusals(outcome: Any) -> list[dict[str, Any]]:
    return [r for r in outcome.records if r["kind"] == "candidate"
            and r["move"] == {"target": "style", "before": "short", "after": "detailed"}]


def test_a_value_that_raises_where_it_would_be_wrong_is_refused_for_its_failures(
        tmp_path: Path) -> None:
    outcome = search(tmp_path, RAISES)
    assert outcome.final_config["style"] == "short"
    tried = refusals(outcome)
    assert tried and all(r["verdict"] == "rejected" for r in tried)
    failed = [g for r in tried for g in r["gates"] if not g["passed"]]
    assert failed and {g["name"] for g in failed} == {"unscored"}
    assert all("unscored 0/" in g["reason"] for g in failed)


def test_a_value_that_times_out_on_the_hard_tasks_is_refused_for_its_failures(
        tmp_path: Path) -> None:
    outcome = search(tmp_path, HANGS, timeout_s=0.3)
    assert outcome.final_config["style"] == "short"
    failed = [g for r in refusals(outcome) for g in r["gates"] if not g["passed"]]
    assert failed and {g["name"] for g in failed} == {"unscored"}
    # The timeouts are counted, with their reason, charged to the detailed config.
    assert {r.stop for r in outcome.failures.reasons(None)} == {"timeout"}


def test_promote_refuses_a_final_config_that_fails_more_on_test(
        tmp_path: Path, capsys: Any) -> None:
    outcome = search(tmp_path, TEST_ONLY)
    assert outcome.final_config["style"] == "detailed"  # dev and val never saw it fail
    [test] = [r for r in outcome.records if r["kind"] == "test"]
    [unscored] = [c for c in test["aux"] if c["name"] == "unscored"]
    assert unscored["details"]["status"] == "beyond" and not unscored["passed"]
    target = tmp_path / "defaults.yaml"
    code, out, err = run_forge(capsys, "promote", "r", "--journals", tmp_path / "journals",
                               "--to", target)
    assert code == 2 and out == "" and "Traceback" not in err
    [line] = err.strip().splitlines()
    assert "unscored" in line and "BEYOND the allowance" in line
    assert "--accept-beyond-tolerance" in line
    assert not target.exists()
    code, out, err = run_forge(capsys, "promote", "r", "--journals", tmp_path / "journals",
                               "--to", target, "--accept-beyond-tolerance")
    assert code == 0, err
    assert "unscored on test: unscored 0/" in out
