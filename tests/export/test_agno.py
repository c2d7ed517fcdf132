"""forge export agno: Agno's own EnvironmentRunResult.load reads forge's export, and
.diff compares it with a baseline Agno's own run_rollouts made for the same environment."""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agno_needed import need_agno

need_agno()

from agno.environments import EnvironmentRunResult, MismatchError, run_rollouts  # noqa: E402
from agno_scripted import write_agno_bench  # noqa: E402
from conftest import ARITH, assert_user_error, run_forge, run_forge_json  # noqa: E402

from forge.bench.loader import load_bench  # noqa: E402
from forge.evaluation.evaluate import evaluate  # noqa: E402
from forge.results.model import EvalResult, save_result  # noqa: E402

SUPPORT = Path(__file__).resolve().parents[2] / "benches" / "agno-support"
#: Enough dev tasks for every kind of question, few enough to take a second.
TASK_IDS = ["return-A1003", "refund-A1004", "status-A1008", "refund-A1012", "status-A1011",
            "return-A1016", "refund-A1020", "status-A1023"]


@pytest.fixture(autouse=True)
def _no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    # Agno's own runner posts an event per run unless told not to; nothing leaves here.
    monkeypatch.setenv("AGNO_TELEMETRY", "false")


def forge_result(tmp_path: Path, **settings: Any) -> tuple[Path, EvalResult]:
    bench = load_bench(SUPPORT)
    config = bench.registry.with_values(bench.defaults, settings)
    result = evaluate(bench, config, k=2, task_ids=TASK_IDS)
    path = tmp_path / "dev.json"
    save_result(result, path)
    return path, result


def agno_baseline(tmp_path: Path, **settings: Any) -> EnvironmentRunResult:
    """What Agno's own runner gives for the same environment and agent, saved and loaded
    as a user keeps a baseline."""
    support = sys.modules["support"]  # the bench's module, as forge imported it
    config = {**support._defaults(), **settings}
    env = dataclasses.replace(support.ENV, agent=lambda: support.make_agent(config))
    tasks = [t for t in env.tasks if t.id in TASK_IDS]
    path = tmp_path / "baseline.json"
    run_rollouts(env, k=2, tasks=tasks, concurrency=4).save(path)
    return EnvironmentRunResult.load(path)


def test_agno_loads_forge_s_export_and_diffs_it_with_its_own_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, result = forge_result(tmp_path, tool_call_limit=3)
    out = tmp_path / "forge.agno.json"
    summary = run_forge_json(capsys, "export", "agno", source, out, "--bench", SUPPORT, "--json")
    exported = EnvironmentRunResult.load(out)
    baseline = agno_baseline(tmp_path, tool_call_limit=3)

    assert exported.env_fingerprint == baseline.env_fingerprint == summary["env_fingerprint"]
    assert exported.policy_fingerprint == baseline.policy_fingerprint
    diff = exported.diff(baseline)
    assert not diff.policy_changed and not diff.unmatched_current
    assert not diff.unmatched_baseline
    # Agno reads forge's attempts as forge scored them, task by task.
    forge_counts = {t.task_id: f"{t.n_passed}/{t.n_scored}" for t in result.tasks}
    assert {row["id"]: row["current"] for row in diff.rows} == forge_counts
    assert exported.n_attempts == result.n_attempts == 16
    assert exported.n_scored == result.n_scored
    assert exported.k == 2 and exported.env_name == "agno-support"
    # Each attempt keeps its Agno run: the tool executions and the tokens.
    run = exported.task_results[1].attempts[0].run
    assert run is not None and run.metrics is not None and run.metrics.input_tokens > 0
    assert [t.tool_name for t in run.tools or []][:2] == ["lookup_order", "return_policy"]
    assert summary["n_attempts"] == 16 and summary["split"] == "dev"


def test_a_policy_change_diffs_and_an_environment_change_is_refused_by_agno(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Agno's fingerprints carry meaning: a temperature is the policy (the diff says it
    changed), instructions are the environment (Agno refuses to compare)."""
    baseline = agno_baseline(tmp_path)
    for settings, changed in (({"temperature": 0.2}, "policy"), ({"instructions": "verify"},
                                                                  "environment")):
        source, _ = forge_result(tmp_path, **settings)
        out = tmp_path / "export.json"
        code, _, err = run_forge(capsys, "export", "agno", source, out, "--bench", SUPPORT)
        assert code == 0, err
        exported = EnvironmentRunResult.load(out)
        if changed == "policy":
            assert exported.diff(baseline).policy_changed
        else:
            with pytest.raises(MismatchError):
                exported.diff(baseline)


FAILING = '''
from agno.agent import Agent
from agno.environments import Environment, Task
from agno.scorer import CodeScorer
from agno_scripted import ScriptedModel, answer, fail


def make_agent(config, ctx=None):
    model = ScriptedModel(script=[answer("yes")], by_input={"broken": [fail("model down")]})
    return Agent(model=model, tool_call_limit=config["effort"])


def exact(run, expected):
    return run.content == expected


ENV = Environment(name="failing", timeout_seconds=5, scorer=CodeScorer(exact),
                  agent=lambda: make_agent({"effort": 1, "mode": "fast"}), tasks=(
    Task(input="fine", expected="yes", metadata={"split": "dev"}),
    Task(input="broken", expected="yes", metadata={"split": "dev"}),
    Task(input="other", expected="no", metadata={"split": "val"})))
'''


def test_failed_attempts_keep_their_reason_for_agno(tmp_path: Path) -> None:
    from forge.export.agno import export_agno

    bench_file = write_agno_bench(tmp_path / "b", FAILING, tasks={},
                                  scorer='{agno: "harness:ENV"}', rollouts={"timeout_s": 5})
    spec = '{agno: {env: "harness:ENV", split_key: split}}'
    text = bench_file.read_text().replace("splits: {}", f"splits: {{dev: {spec}, val: {spec}}}")
    bench_file.write_text(text)
    bench = load_bench(bench_file)
    result = evaluate(bench, bench.defaults, k=2)
    export_agno(result, bench, tmp_path / "out.json")
    loaded = EnvironmentRunResult.load(tmp_path / "out.json")
    assert loaded.errors() == {"t2": ["AgnoRunError: RuntimeError: model down"] * 2}
    broken = loaded.task_results[1].attempts[0]
    assert (broken.run, broken.score, broken.stop_reason.value) == (None, None, "error")
    assert broken.error_type == "RuntimeError"
    assert loaded.n_unscored == 2 and loaded.pass_rate == 1.0


def test_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    bench = load_bench(SUPPORT)
    shorter = evaluate(bench, bench.defaults, k=1, task_ids=TASK_IDS[:2], timeout_s=10)
    save_result(shorter, tmp_path / "short.json")
    assert_user_error(*run_forge(capsys, "export", "agno", tmp_path / "short.json", out,
                                 "--bench", SUPPORT),
                      "env.timeout_s", "timeout of 10 s", "timeout_seconds=30")
    arith = load_bench(ARITH)
    save_result(evaluate(arith, arith.defaults, k=1), tmp_path / "arith.json")
    assert_user_error(*run_forge(capsys, "export", "agno", tmp_path / "arith.json", out,
                                 "--bench", ARITH),
                      "harness", "an Agno export needs the agno harness")
    assert_user_error(*run_forge(capsys, "export", "agno", tmp_path / "arith.json", out,
                                 "--bench", SUPPORT),
                      "bench 'agno-support' is not the result's bench")
    assert not out.exists()


def test_a_split_that_is_not_an_environment_is_refused(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "jsonl"
    bench_file = write_agno_bench(folder, textwrap.dedent(FAILING))
    bench = load_bench(bench_file)
    save_result(evaluate(bench, bench.defaults, k=1), tmp_path / "r.json")
    line = assert_user_error(*run_forge(capsys, "export", "agno", tmp_path / "r.json",
                                        tmp_path / "o.json", "--bench", bench_file),
                             "splits.dev", "is not an Agno environment")
    assert json.dumps(str(bench_file))[1:-1] in line
