"""benches/acp-coder: a real ACP agent process, its settings matter, and its search
promotes one and journals the agent's tool calls and usage."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from acp_sdk import require_sdk
from conftest import run_forge

from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate

require_sdk()

BENCH = Path(__file__).resolve().parents[2] / "benches" / "acp-coder"


def pass_rate(**settings: object) -> float:
    bench = load_bench(BENCH)
    config = bench.registry.with_values(bench.defaults, settings)
    result = evaluate(bench, config, split="dev", k=1, concurrency=1)  # one process
    assert result.n_scored == result.n_attempts, result.stop_reasons()
    rate = result.summary()["pass_rate"]
    assert isinstance(rate, float)
    return rate


def test_each_way_the_config_reaches_the_agent_changes_what_it_does() -> None:
    ask = pass_rate()
    code = pass_rate(mode="code")
    assert 0.25 <= ask < 0.4 and code > 0.5  # the session mode (ask: the easy quarter)
    assert pass_rate(mode="code", permission="reject_once") == ask  # the permission policy
    assert pass_rate(mode="code", temperature=1.0) < code  # _meta
    assert pass_rate(mode="code", temperature=1.0, review=True) == 1.0  # AGENTS.md


def test_the_search_promotes_the_mode_and_journals_tool_calls_and_usage(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_forge(capsys, "search", BENCH, "--journals", tmp_path,
                               "--run-id", "r", "--max-steps", "1", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["promotions"] == [{"step": 1, "target": "mode", "before": "ask",
                                      "after": "code"}]
    assert summary["dev"]["final"] > summary["dev"]["start"]
    assert summary["test"]["final"] > summary["test"]["start"]
    with gzip.open(tmp_path / "r" / "attempts.jsonl.gz", "rt") as stored:
        rows = [json.loads(line) for line in stored]
    outputs = [r["result"]["output"] for r in rows if "result" in r]
    assert outputs and all(o["usage"]["input_tokens"] > 0 and o["cost"] > 0 for o in outputs)
    names = {tuple(c["name"] for c in o["tool_calls"]) for o in outputs}
    assert ("write_file", "run_python") in names and () in names  # code mode, ask mode
