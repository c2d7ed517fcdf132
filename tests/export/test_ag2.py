"""forge export ag2: a saved result as an AG2 run that ``ag2.eval.load_run`` reads and
``RunDiff`` compares with a run of AG2's own runner (``ag2.eval.run_agent``)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from ag2_support import require_ag2, tasks, write_ag2_bench
from conftest import REPO, assert_user_error, run_forge

from forge.bench.loader import Bench, load_bench
from forge.config.registry import Config
from forge.evaluation.evaluate import evaluate
from forge.export.ag2 import export_ag2
from forge.results.model import save_result

ORDERS = REPO / "benches" / "ag2-orders"


@pytest.fixture(autouse=True)
def _ag2() -> None:
    require_ag2()


def export(bench: Bench, config: Config, tmp_path: Path, name: str, **kw: Any) -> Path:
    result = evaluate(bench, config, split="dev", **kw)
    saved = tmp_path / f"{name}.result.json"
    save_result(result, saved)
    out = tmp_path / f"{name}.ag2.json"
    export_ag2(result, bench, out, source=saved)
    return out


def ag2_baseline(bench: Bench, config: Config, tmp_path: Path, repeats: int) -> Path:
    """The start config's run by AG2's own runner on the bench's own suite file."""
    from ag2.eval import Suite, run_agent

    factory = sys.modules["orders_agent"].make_agent  # imported by the bench's load
    scorer = sys.modules["orders_scorers"].ANSWER
    suite = Suite.from_jsonl(bench.folder / "suites" / "dev.jsonl")
    asyncio.run(run_agent(suite, agent=factory(dict(config.values)), scorers=[scorer],
                          repeats=repeats, store_dir=tmp_path, run_id="baseline"))
    return tmp_path / "baseline.json"


def test_ag2_loads_forge_s_export_and_diffs_it_against_its_own_runner_s_baseline(
        tmp_path: Path) -> None:
    from ag2.eval import load_run

    bench = load_bench(ORDERS)
    start = bench.defaults
    final = bench.registry.with_values(start, {"instructions": "grounded",
                                               "history_events": 24, "temperature": 0.0})
    baseline = load_run(ag2_baseline(bench, start, tmp_path, repeats=2))
    exported = load_run(export(bench, final, tmp_path, "final", k=2))
    same = load_run(export(bench, start, tmp_path, "start", k=2))

    n = 2 * len(bench.tasks("dev"))
    assert len(exported.tasks) == n == len(baseline.tasks)
    diff = exported.diff(baseline)  # strict: the same tasks, contents and checks
    assert len(diff.comparable_tasks) == n
    assert diff.only_in_current == diff.only_in_baseline == diff.content_changed == ()
    before, after = diff.pass_rate_deltas["final_answer_matches"]
    assert before == baseline.pass_rate("final_answer_matches") < 0.6
    assert after == exported.pass_rate("final_answer_matches") == 1.0
    assert diff.flipped_to_pass and not diff.regressions
    # The start config, run by forge, is the baseline's config: no content changed, and
    # its pass rate is the baseline's up to sampling (other seeds).
    assert abs(same.diff(baseline).pass_rate_deltas["final_answer_matches"][1] - before) < 0.3
    assert exported.tasks[0].task.task_id == "dev-status-00#1"


def test_the_file_carries_forge_s_tool_calls_tokens_and_attempts(tmp_path: Path) -> None:
    bench = load_bench(ORDERS)
    out = export(bench, bench.defaults, tmp_path, "start", k=1, task_ids=["dev-items-00"])
    document = json.loads(out.read_text())
    assert document["schema_version"] == "0.2"
    [task] = document["tasks"]
    assert task["task_id"] == "dev-items-00"  # K = 1: the task's own id
    [items] = [t for t in bench.tasks("dev") if t.id == "dev-items-00"]
    assert task["inputs"] == items.input and "How many items" in task["inputs"]["input"]
    types = [e["type"] for e in task["events"]]
    assert types.count("ToolCallEvent") == types.count("ToolResultEvent") >= 2
    assert task["tokens"]["input"] > 0
    assert document["aggregates"]["tokens"]["input"] == task["tokens"]["input"]
    assert task["trace_ref"]["metadata"]["forge_attempt"] == 0
    assert isinstance(task["trace_ref"]["metadata"]["forge_seed"], int)


def test_unscored_attempts_are_errors_and_forge_s_own_verdict_a_check(tmp_path: Path) -> None:
    from ag2.eval import load_run

    bench = load_bench(write_ag2_bench(
        tmp_path / "bench", {"dev": tasks("weather in Lima?", "model fails", "just guess",
                                          expected={"weather in Lima?": "sunny",
                                                    "just guess": "rain"})}))
    run = load_run(export(bench, bench.defaults, tmp_path, "mixed"))
    assert run.aggregates.errors == 1
    by_id = {t.task.task_id: t for t in run.tasks}
    failed = by_id["dev-1"]
    assert failed.feedback == () and "model endpoint down" in str(failed.trace.exception)
    # An exact-scored bench: forge's verdict is the run's one check.
    assert [(f.key, f.score) for f in by_id["dev-0"].feedback] == [("forge", True)]
    assert [(f.key, f.score) for f in by_id["dev-2"].feedback] == [("forge", False)]
    assert run.pass_rate("forge") == 0.5
    assert by_id["dev-0"].task.inputs == {"input": "weather in Lima?"}
    assert by_id["dev-0"].task.reference_outputs == {"answer": "sunny"}


def test_the_command_writes_and_reports_the_run(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "dev.json"
    code, _, err = run_forge(capsys, "eval", ORDERS, "-k", "1", "--save", saved, "--json")
    assert code == 0, err
    out = tmp_path / "run.json"
    code, stdout, err = run_forge(capsys, "export", "ag2", saved, out, "--bench", ORDERS,
                                  "--label", "nightly", "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["task_results"] == 18 and summary["keys"] == ["final_answer_matches"]
    assert summary["split"] == "dev" and summary["errors"] == 0
    assert json.loads(out.read_text())["label"] == "nightly"
    code, stdout, _ = run_forge(capsys, "export", "ag2", saved, out, "--bench", ORDERS)
    assert code == 0 and stdout.startswith(f"wrote {out}: AG2 run forge-ag2-orders-dev-")


def test_a_result_of_another_bench_or_an_output_over_it_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "dev.json"
    assert run_forge(capsys, "eval", ORDERS, "-k", "1", "--save", saved, "--json")[0] == 0
    before = saved.read_bytes()
    other = write_ag2_bench(tmp_path / "other", {"dev": tasks("just guess")})
    assert_user_error(*run_forge(capsys, "export", "ag2", saved, tmp_path / "x.json",
                                 "--bench", other), "is not the result's bench")
    assert_user_error(*run_forge(capsys, "export", "ag2", saved, saved, "--bench", ORDERS),
                      "would overwrite the result")
    assert saved.read_bytes() == before and not (tmp_path / "x.json").exists()
