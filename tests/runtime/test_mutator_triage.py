"""The triage bench under the runtime mutator: observe changes no outcome, and says what
act would do; act changes the run and still ends every attempt on its original config.

``forge eval`` runs as a real process (the mode comes from the environment, as a
person would set it); the attempt-level checks call the harness in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forge.harness.base import AttemptContext, RunOutput
from forge.harness.python import import_target
from forge.runtime import read_runtime_journal, summarize_runtime_journal

BENCH = Path(__file__).resolve().parents[2] / "benches" / "triage"


def _wall_clock(metric: str) -> bool:
    """forge's own timings (``latency``, ``latency_p50``, ...) differ run to run; the
    harness's simulated ``latency_ms`` is data and must not."""
    return metric == "latency" or metric.startswith("latency_p")


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    return {**summary, "metrics": {k: v for k, v in summary["metrics"].items()
                                   if not _wall_clock(k)}}


@pytest.fixture(scope="module")
def evals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``forge eval benches/triage --json -k 1`` with FORGE_RUNTIME_MODE unset, off,
    observe and act, run in parallel; each in its own working directory."""
    root = tmp_path_factory.mktemp("triage-runtime")
    base = {k: v for k, v in os.environ.items() if not k.startswith("FORGE_RUNTIME_")}
    procs = {}
    for mode in ("unset", "off", "observe", "act"):
        cwd = root / mode
        cwd.mkdir()
        env = dict(base)
        if mode != "unset":
            env["FORGE_RUNTIME_MODE"] = mode
        if mode in ("observe", "act"):
            env["FORGE_RUNTIME_JOURNAL"] = str(cwd / "runtime.jsonl")
        procs[mode] = (cwd, subprocess.Popen(
            [sys.executable, "-m", "forge", "eval", str(BENCH), "--json", "-k", "1"],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out: dict[str, Any] = {}
    for mode, (cwd, proc) in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        out[mode] = {"summary": json.loads(stdout), "cwd": cwd}
    return out


def test_observe_gives_the_same_summary_as_off(evals: dict[str, Any]) -> None:
    off = comparable(evals["off"]["summary"])
    assert comparable(evals["unset"]["summary"]) == off
    assert comparable(evals["observe"]["summary"]) == off
    assert off["n_attempts"] == 110


def test_off_writes_no_journal(evals: dict[str, Any]) -> None:
    for mode in ("unset", "off"):
        assert list(evals[mode]["cwd"].iterdir()) == []  # not even the default journal


def test_the_observe_journal_holds_proposals(evals: dict[str, Any]) -> None:
    path = evals["observe"]["cwd"] / "runtime.jsonl"
    report = summarize_runtime_journal(path)
    assert report.runs == evals["observe"]["summary"]["n_attempts"]  # one end per attempt
    assert report.restore_failures == 0 and set(report.modes) == {"observe"}
    rows = {(r.signal, r.target): r for r in report.rows}
    cap = rows[("iteration_cap_hit", "max_iterations")]
    assert cap.observed > 0 and cap.applied == 0
    assert cap.moves.most_common(1)[0][0] == ("max_iterations", 1, 2)
    assert rows[("verifier_reject", "query_expansion")].observed > 0
    temperature = rows[("off_top_pick", "temperature")]  # outside allow: refused
    assert temperature.fired == temperature.refused > 0
    assert set(temperature.reasons) == {"not in runtime.allow"}
    assert all(r.outcome != "applied" for _, r in read_runtime_journal(path)
               if r.kind == "signal")


def test_act_changes_the_run_within_its_bounds(evals: dict[str, Any]) -> None:
    path = evals["act"]["cwd"] / "runtime.jsonl"
    report = summarize_runtime_journal(path)
    assert report.runs == 110 and report.restore_failures == 0
    assert sum(r.applied for r in report.rows) > 0
    per_run: dict[str, int] = {}
    for _, record in read_runtime_journal(path):
        if record.kind == "signal" and record.outcome == "applied":
            assert record.move is not None
            assert record.move.target in {"max_iterations", "search_width", "query_expansion"}
            per_run[record.run_id] = per_run.get(record.run_id, 0) + 1
    assert max(per_run.values()) <= 2  # max_moves_per_run
    # moves made inside the attempt change what it does
    assert comparable(evals["act"]["summary"]) != comparable(evals["off"]["summary"])


# -- attempt by attempt -------------------------------------------------------------------


@pytest.fixture
def harness_run() -> Iterator[Any]:
    """The bench's ``run``, imported as forge imports it, removed again afterwards."""
    yield import_target("harness:run", BENCH)[0]
    module = sys.modules.get("harness")
    if module is not None and Path(getattr(module, "__file__", None) or ".").parent == BENCH:
        del sys.modules["harness"]
    while str(BENCH) in sys.path:
        sys.path.remove(str(BENCH))


def _attempts(run: Any, n: int = 40) -> list[tuple[RunOutput, dict[str, Any]]]:
    from forge.bench.loader import load_bench

    bench = load_bench(BENCH)
    out = []
    for i, task in enumerate(bench.tasks("dev")[:n]):
        config = dict(bench.defaults.values)
        ctx = AttemptContext(seed=1000 + i, attempt=0, split="dev", timeout_s=10, deadline=1e12)
        out.append((RunOutput.model_validate(run(config, task, ctx)), config))
    return out


def test_observe_outputs_equal_off_outputs_attempt_by_attempt(
        harness_run: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FORGE_RUNTIME_MODE", "off")
    off = _attempts(harness_run)
    monkeypatch.setenv("FORGE_RUNTIME_MODE", "observe")
    monkeypatch.setenv("FORGE_RUNTIME_JOURNAL", str(tmp_path / "j.jsonl"))
    observed = _attempts(harness_run)
    assert [o for o, _ in observed] == [o for o, _ in off]  # traces, calls, metrics, all
    assert len(read_runtime_journal(tmp_path / "j.jsonl")) > 40


def test_act_notes_its_moves_and_leaves_the_callers_config_alone(
        harness_run: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from forge.bench.loader import load_bench

    monkeypatch.setenv("FORGE_RUNTIME_MODE", "act")
    monkeypatch.setenv("FORGE_RUNTIME_JOURNAL", str(tmp_path / "j.jsonl"))
    attempts = _attempts(harness_run)
    defaults = load_bench(BENCH).defaults.values
    assert all(config == defaults for _, config in attempts)
    notes = [line for out, _ in attempts for line in out.trace if line.startswith("runtime:")]
    assert any("max_iterations: 1 -> 2 on iteration_cap_hit" in n for n in notes)
    # a raised cap lets the loop go on: some attempt iterated past the start config's cap
    assert max(out.metrics["iterations"] for out, _ in attempts) > defaults["max_iterations"]


def test_a_bad_mode_is_refused_when_forge_imports_the_harness(tmp_path: Path) -> None:
    env = {**os.environ, "FORGE_RUNTIME_MODE": "sometimes"}
    proc = subprocess.run([sys.executable, "-m", "forge", "eval", str(BENCH), "-k", "1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "FORGE_RUNTIME_MODE: runtime mode 'sometimes'; expected one of off, observe, act" \
        in proc.stderr
    assert "Traceback" not in proc.stderr
