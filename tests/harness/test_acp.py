"""The acp harness against real ACP agent processes over stdio.

Every agent here is ``acp_agent.py``, built on agent-client-protocol's agent side with a
scripted brain (the prompt's first word says what it does). A new agent process imports
the SDK, about a second of CPU: tests that are not about starting a process use
``worker: true`` and warm the worker up with a first attempt under a generous timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from acp_sdk import require_sdk
from conftest import assert_user_error, run_forge, stored_text, write_jsonl
from test_command import alive, assert_all_gone

from forge.bench.loader import load_bench
from forge.core.spec import BuildContext
from forge.core.task import Task
from forge.evaluation.evaluate import evaluate
from forge.harness import HARNESSES, AcpHarness, AttemptContext
from forge.harness.acp import AcpError, AcpTimeout
from forge.results.model import AttemptResult, EvalResult

require_sdk()

AGENT = Path(__file__).with_name("acp_agent.py")
#: Long enough for a new agent process to import the SDK on a loaded machine.
START_S = 30.0

REGISTRY = """\
name: acp-test
settings:
  mode: {type: enum, choices: [ask, code], default: ask}
  permission: {type: enum, choices: [reject_once, allow_once], default: reject_once}
"""


# -- processes ------------------------------------------------------------------------------

def recorded_pids(folder: Path) -> list[int]:
    if not folder.exists():
        return []
    return [int(p) for f in folder.iterdir() for p in f.read_text().split()]


@pytest.fixture
def pids(tmp_path: Path) -> Iterator[Path]:
    """Where the agents write their pids; whatever a failing test left is killed."""
    folder = tmp_path / "pids"
    yield folder
    for pid in recorded_pids(folder):
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


# -- building ----------------------------------------------------------------------------------

def bench_folder(root: Path, files: Mapping[str, str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(AGENT, root / "agent.py")
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def build(folder: Path, pids: Path | None = None, **args: Any) -> AcpHarness:
    spec = {"argv": [sys.executable, "agent.py"], "cancel_timeout_s": 0.5, **args}
    if pids is not None:
        spec["env"] = {"ACP_PIDS": str(pids), **spec.get("env", {})}
    ctx = BuildContext(base_dir=folder, file=folder / "bench.yaml", field="harness")
    harness = HARNESSES.build(HARNESSES.parse({"acp": spec}, ctx), ctx)
    assert isinstance(harness, AcpHarness)
    return harness


def attempt_ctx(timeout_s: float) -> AttemptContext:
    return AttemptContext(seed=7, attempt=0, split="dev", timeout_s=timeout_s,
                          deadline=time.monotonic() + timeout_s)


async def ask(harness: AcpHarness, prompt: str, config: Mapping[str, Any] | None = None,
              timeout_s: float = START_S) -> Any:
    return await harness.run(dict(config or {}), Task(id="t", input=prompt),
                             attempt_ctx(timeout_s))


def write_acp_bench(root: Path, pids: Path, tasks: Mapping[str, Sequence[Mapping[str, Any]]],
                    *, harness: Mapping[str, Any] | None = None,
                    rollouts: Mapping[str, Any] | None = None, extra: str = "") -> Path:
    bench_folder(root)
    (root / "registry.yaml").write_text(REGISTRY)
    for split, rows in tasks.items():
        write_jsonl(root / "tasks" / f"{split}.jsonl", rows)
    spec = {"argv": [sys.executable, "agent.py"], "cancel_timeout_s": 0.5, "worker": True,
            "env": {"ACP_PIDS": str(pids), "ACP_NOTE_ALL": "1"}, **(harness or {})}
    settings = {"k": 1, "concurrency": 4, "timeout_s": START_S, **(rollouts or {})}
    bench = root / "bench.yaml"
    bench.write_text(
        "name: acp-test\n"
        f"harness: {json.dumps({'acp': spec})}\n"
        "registry: registry.yaml\n"
        f"splits: {json.dumps({s: f'tasks/{s}.jsonl' for s in tasks})}\n"
        f"rollouts: {json.dumps(settings)}\n"
        "scorer: exact\n" + extra, encoding="utf-8")
    return bench


def echo_tasks(split: str, n: int) -> list[dict[str, Any]]:
    return [{"id": f"echo-{split}-{i}", "input": f"echo answer {split} {i}",
             "expected": f"answer {split} {i}"} for i in range(n)]


def only(result: EvalResult, prefix: str) -> list[AttemptResult]:
    return [a for t in result.tasks if t.task_id.startswith(prefix) for a in t.attempts]


# -- a normal agent --------------------------------------------------------------------------

def test_an_attempt_keeps_the_streamed_text_tool_calls_stop_reason_usage_and_cost(
        tmp_path: Path) -> None:
    harness = build(bench_folder(tmp_path / "b"), worker=True)

    async def main() -> tuple[Any, Any]:
        try:
            return await ask(harness, "echo hello world"), await ask(harness, "tool q")
        finally:
            await harness.aclose()

    echoed, tooled = asyncio.run(main())
    assert echoed.output == "hello world"  # two chunks, joined
    assert echoed.usage.input_tokens == 3 and echoed.usage.output_tokens == 7
    assert echoed.cost == 0.25 and echoed.trace["currency"] == "USD"
    assert echoed.trace["stop_reason"] == "end_turn" and echoed.signals == []
    assert echoed.trace["session"]["agent"] == "scripted 1.0"
    # Executed calls with their arguments and results; a failed one is not ok.
    calls = [c.model_dump() for c in tooled.tool_calls]
    assert calls == [
        {"name": "lookup", "args": {"q": "q"}, "ok": True, "error": None,
         "result": {"hits": 3}},
        {"name": "fetch", "args": {"url": "x"}, "ok": False, "error": "404 not found",
         "result": "404 not found"}]
    assert tooled.signals == ["tool_error"]
    assert tooled.metrics["tool_calls"] == 2 and tooled.metrics["tool_errors"] == 1


def test_tool_calls_can_be_named_by_their_kind(tmp_path: Path) -> None:
    harness = build(bench_folder(tmp_path / "b"), tool_name="kind")

    async def main() -> Any:
        try:
            return await ask(harness, "tool q")
        finally:
            await harness.aclose()

    assert [c.name for c in asyncio.run(main()).tool_calls] == ["search", "fetch"]


def test_the_config_reaches_the_session_its_meta_and_the_rendered_files(
        tmp_path: Path) -> None:
    folder = bench_folder(tmp_path / "b", {"templates/agents.md": "style: $style, $$5\n"})
    harness = build(folder, files={"AGENTS.md": "templates/agents.md"},
                    settings={"options": {"verbose": "chatty"}})
    config = {"mode": "code", "model": "large", "chatty": True, "style": "terse"}

    async def main() -> Any:
        try:
            return await ask(harness, "config", config)
        finally:
            await harness.aclose()

    out = asyncio.run(main())
    seen = json.loads(out.output)
    assert seen["mode"] == "code"  # session/set_mode
    assert seen["options"] == {"model": "large", "verbose": True}  # set_config_option
    assert seen["meta"]["forge"] == {"config": config, "seed": 7, "attempt": 0,
                                     "split": "dev", "task_id": "t"}
    assert seen["instructions"] == "style: terse, $5\n"
    # A fresh folder of its own, the process started in it, removed after the attempt.
    assert seen["process_cwd"] == seen["cwd"] and not Path(seen["cwd"]).exists()
    assert out.trace["session"]["mode"] == "code" and out.trace["session"]["model"] == "large"


def test_a_value_the_agent_does_not_offer_fails_the_attempt_with_the_choices(
        tmp_path: Path) -> None:
    folder = bench_folder(tmp_path / "b", {"t.md": "$missing"})
    harness = build(folder, worker=True)
    templated = build(folder, files={"T.md": "t.md"})

    async def main() -> list[str]:
        errors = []
        for h, config in ((harness, {"mode": "turbo"}), (harness, {"model": "huge"}),
                          (harness, {"permission": "sometimes"}), (templated, {})):
            with pytest.raises((AcpError, ValueError)) as caught:
                await ask(h, "echo x", config)
            errors.append(str(caught.value))
        await harness.aclose()
        await templated.aclose()
        return errors

    mode, model, policy, template = asyncio.run(main())
    assert "mode 'turbo' is not one the agent offers: ask, code" in mode
    assert "'huge' is not a value the agent offers for session config option 'model'" in model
    assert "setting permission: expected a permission policy" in policy
    assert "template 't.md' names $missing, which is not a setting of the config" in template


# -- permission requests ------------------------------------------------------------------------

def test_permission_requests_are_answered_by_the_configs_policy(tmp_path: Path) -> None:
    harness = build(bench_folder(tmp_path / "b"), worker=True)

    async def main() -> list[Any]:
        try:
            return [await ask(harness, "write a.txt hi", config)
                    for config in ({"permission": "allow_once"}, {}, {"permission": "cancel"})]
        finally:
            await harness.aclose()

    allowed, default, cancelled = asyncio.run(main())
    assert allowed.output == "wrote a.txt" and allowed.tool_calls[0].ok
    assert allowed.trace["files"] == [{"op": "write", "path": "a.txt", "ok": True, "bytes": 2}]
    assert allowed.trace["permissions"][0]["answer"] == "allow_once"
    assert allowed.metrics["fs_writes"] == 1 and allowed.metrics["permissions_denied"] == 0
    # Without the setting, the bench's policy: reject_once unless it says otherwise.
    assert default.output == "denied" and not default.tool_calls[0].ok
    assert default.trace["permissions"][0]["answer"] == "reject_once"
    assert "permission_denied" in default.signals and default.metrics["fs_writes"] == 0
    assert cancelled.output == "denied"
    assert cancelled.trace["permissions"][0]["answer"] == "cancelled"


# -- where an agent writes ------------------------------------------------------------------------

def test_a_write_outside_the_working_directory_is_refused_and_the_bench_untouched(
        tmp_path: Path) -> None:
    folder = bench_folder(tmp_path / "b")
    harness = build(folder, worker=True)
    before = sorted(p.name for p in folder.iterdir())

    async def main() -> list[Any]:
        try:
            return [await ask(harness, prompt)
                    for prompt in (f"escape {folder / 'planted.txt'}", "escape ../../planted.txt",
                                   f"escape {tmp_path / 'elsewhere.txt'}", f"link {folder}")]
        finally:
            await harness.aclose()

    for out in asyncio.run(main()):
        assert out.output.startswith("refused: fs/write_text_file refused: ")
        assert "outside the session's working directory" in out.output
        assert out.signals == ["fs_refused"] and out.metrics["fs_refused"] == 1
        assert out.trace["files"][0]["ok"] is False
    assert sorted(p.name for p in folder.iterdir()) == before
    assert not (tmp_path / "elsewhere.txt").exists()


def test_an_agent_that_writes_to_the_bench_itself_fails_that_attempt(tmp_path: Path) -> None:
    folder = bench_folder(tmp_path / "b")
    harness = build(folder, worker=True)

    async def main() -> tuple[Any, str, Any]:
        try:
            first = await ask(harness, "echo fine")
            with pytest.raises(AcpError) as caught:
                await ask(harness, f"direct {folder / 'planted.txt'}")
            return first, str(caught.value), await ask(harness, "echo still fine")
        finally:
            await harness.aclose()

    first, error, after = asyncio.run(main())
    assert first.output == "fine" and after.output == "still fine"  # charged once
    assert f"the agent changed the bench folder {folder.resolve()}: planted.txt created" in error


# -- hung, crashing and broken agents ------------------------------------------------------------

@pytest.mark.parametrize("how", ["deaf", "cooperative", "stubborn"])
def test_a_hung_agent_is_cancelled_then_stopped_and_nothing_is_left(
        tmp_path: Path, pids: Path, how: str) -> None:
    harness = build(bench_folder(tmp_path / "b"), pids, worker=True)

    async def main() -> tuple[str, float, Any]:
        try:
            await ask(harness, "echo warm")  # the worker pays for its start here
            t0 = time.monotonic()
            with pytest.raises(AcpTimeout) as caught:
                await ask(harness, f"hang {how}", timeout_s=2.0)
            took = time.monotonic() - t0
            return str(caught.value), took, await ask(harness, "echo again")
        finally:
            await harness.aclose()

    error, took, after = asyncio.run(main())
    assert took < 2.0  # answered before the engine's own deadline, with the reason
    assert error.startswith("acp agent gave no answer within 2 s; sent session/cancel and ")
    ended = "the agent ended its turn as cancelled" if how == "cooperative" else (
        "the agent did not end its turn")
    assert ended in error and "its process group is stopped" in error
    assert "hanging now" in error  # the stderr tail
    assert after.output == "again"  # a new process took over
    pairs = recorded_pids(pids)
    assert len(pairs) == 2  # the agent and its grandchild
    assert_all_gone(pairs)


def test_failures_are_attempts_with_reasons_and_no_process_is_left(
        tmp_path: Path, pids: Path) -> None:
    kinds = {"crash": "crash", "garbage": "garbage", "notrpc": "notrpc",
             "badupdate": "badupdate", "unknown": "frobnicate", "flood": "flood 40",
             "refuse": "refuse", "cancelled": "cancelled", "hang": "hang stubborn"}
    dev = echo_tasks("dev", 2) + [{"id": f"{k}-dev", "input": f"{v}", "expected": "x"}
                                  for k, v in kinds.items()]
    bench = write_acp_bench(tmp_path / "b", pids,
                            {"dev": dev, "val": echo_tasks("val", 1),
                             "test": echo_tasks("test", 1)},
                            harness={"max_output_bytes": 2**20}, rollouts={"timeout_s": 10.0})
    result = evaluate(load_bench(bench), load_bench(bench).defaults)
    for a in only(result, "echo"):
        assert a.stop_reason == "completed" and a.score is not None and a.score.passed
    reasons = {t.task_id.split("-")[0]: t.attempts[0].error or "" for t in result.tasks}
    stops = {t.task_id.split("-")[0]: t.attempts[0].stop_reason for t in result.tasks}
    assert stops["crash"] == "error" and "exited with code 3 during session/prompt" in (
        reasons["crash"]) and "boom: the agent broke" in reasons["crash"]
    assert stops["garbage"] == "error"
    assert "wrote a line that is not JSON: 'this is not json {'" in reasons["garbage"]
    assert stops["notrpc"] == "error" and "wrote a JSON object that is no request, " \
        "notification or response: {\"hello\": \"world\"}" in reasons["notrpc"]
    assert stops["unknown"] == "error"
    assert "answered session/prompt with error -32602: Invalid params" in reasons["unknown"]
    assert stops["badupdate"] == "error"
    assert "sent a session/update the protocol refuses: update" in reasons["badupdate"]
    assert stops["flood"] == "error" and f"sent more than {2**20} bytes" in reasons["flood"]
    assert stops["cancelled"] == "error"
    assert "ended its turn as cancelled, though forge did not cancel it" in reasons["cancelled"]
    # Normally the harness answers first, with the reason; on a loaded machine the
    # engine's own deadline may win the race: a timeout either way.
    assert stops["hang"] == "timeout"
    assert "sent session/cancel" in reasons["hang"] or "no result within 10 s" in reasons["hang"]
    # A refusal is an answer (empty), not a failure: the scorer judges it.
    assert stops["refuse"] == "completed"
    refusal = only(result, "refuse")[0].output
    assert refusal is not None and refusal.signals == ["refusal", "empty_answer"]
    assert result.summary()["n_scored"] == 3
    assert_all_gone(recorded_pids(pids))


def test_a_search_goes_on_after_every_failure_and_journals_the_tool_calls(
        tmp_path: Path, pids: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def solve(split: str, n: int) -> list[dict[str, Any]]:
        return [{"id": f"solve-{split}-{i}", "input": f"solve {split}{i}",
                 "expected": f"{split}{i}"} for i in range(n)]

    # Each failure costs a new agent process (a second of CPU to start): three kinds here,
    # every kind in the test above.
    dev = solve("dev", 6) + [{"id": f"{kind}-dev", "input": kind, "expected": "x"}
                             for kind in ("crash", "garbage", "badupdate")]
    bench = write_acp_bench(tmp_path / "b", pids,
                            {"dev": dev, "val": solve("val", 6), "test": solve("test", 1)},
                            extra='search: {"max_steps": 1, "patience": 1}\n'
                                  'gates: {alpha: 0.2}\n')
    code, out, err = run_forge(capsys, "search", bench, "--journals", tmp_path / "j",
                               "--run-id", "r", "--proposer", "sweep", "--json")
    assert code == 0, err
    summary = json.loads(out)
    # The setting that matters is promoted, every failure notwithstanding.
    assert {"target": "mode", "before": "ask", "after": "code"}.items() <= (
        summary["promotions"][0].items())
    rows = [json.loads(line) for line in stored_text(tmp_path / "j" / "r").splitlines()]
    attempts = [r["result"] for r in rows if "result" in r]
    failed = {a["task_id"].split("-")[0] for a in attempts if a["stop_reason"] == "error"}
    assert failed and failed <= {"crash", "garbage", "badupdate"}
    assert all(a["error"] for a in attempts if a["stop_reason"] != "completed")
    # The agent's tool calls, as executed, are journaled with every attempt that ran one.
    assert any(a["output"] and a["output"]["tool_calls"] == [
        {"name": "run", "args": {"code": a["task_id"].split("-", 1)[1].replace("-", "")},
         "ok": True, "error": None, "result": a["output"]["output"]}] for a in attempts)
    assert_all_gone(recorded_pids(pids))


# -- workers ---------------------------------------------------------------------------------------

def test_a_worker_serves_attempts_one_session_each_and_closes_them(tmp_path: Path) -> None:
    harness = build(bench_folder(tmp_path / "b"), worker=True)

    async def main() -> list[dict[str, Any]]:
        try:
            seen = [json.loads((await ask(harness, "config")).output) for _ in range(3)]
            with pytest.raises(AcpError):
                await ask(harness, "crash")
            seen.append(json.loads((await ask(harness, "config")).output))
            return seen
        finally:
            await harness.aclose()

    seen = asyncio.run(main())
    assert len({s["pid"] for s in seen[:3]}) == 1  # one process
    assert [s["closed"] for s in seen[:3]] == [0, 1, 2]  # each session closed after
    assert all(s["sessions"] == 1 for s in seen)  # so only this attempt's is open
    assert len({s["cwd"] for s in seen}) == 4  # a new working directory each time
    assert seen[0]["process_cwd"] not in {s["cwd"] for s in seen}  # a folder of its own
    assert seen[3]["pid"] != seen[0]["pid"]  # after the crash, a new process


# -- bench files, secrets and the extra -------------------------------------------------------

def test_secrets_come_from_the_environment_and_are_redacted(
        tmp_path: Path, pids: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "sk-acp-test-0123456789abcdef"
    monkeypatch.setenv("ACP_TEST_TOKEN", token)
    dev = [*echo_tasks("dev", 1),
           {"id": "leak-dev", "input": "leak ACP_TEST_TOKEN", "expected": "x"}]
    bench = write_acp_bench(tmp_path / "b", pids,
                            {"dev": dev, "val": echo_tasks("val", 1),
                             "test": echo_tasks("test", 1)},
                            harness={"secrets": ["ACP_TEST_TOKEN"]})
    assert token not in bench.read_text()
    result = evaluate(load_bench(bench), load_bench(bench).defaults)
    leaked = only(result, "leak")[0]
    assert leaked.stop_reason == "error" and leaked.error is not None
    assert "my key is ***" in leaked.error and token not in leaked.error


def test_bad_harness_arguments_are_one_line_naming_the_field(
        tmp_path: Path, pids: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACP_UNSET_TOKEN", raising=False)
    cases = [({"files": {"../AGENTS.md": "t.md"}}, "harness.acp.files", "inside the working"),
             ({"files": {"AGENTS.md": "nope.md"}}, "harness.acp.files", "is not a file"),
             ({"files": {"AGENTS.md": "bad.md"}}, "harness.acp.files", "names nothing"),
             ({"secrets": ["ACP_UNSET_TOKEN"]}, "harness.acp.secrets", "is not set"),
             ({"permission": "maybe"}, "harness.acp.permission", "allow_once"),
             ({"colour": "red"}, "harness.acp", "unknown argument(s) ['colour']")]
    for i, (args, field, fragment) in enumerate(cases):
        root = tmp_path / f"b{i}"
        bench = write_acp_bench(root, pids, {"dev": echo_tasks("dev", 1)}, harness=args)
        (root / "bad.md").write_text("costs $5")
        code, out, err = run_forge(capsys, "eval", bench)
        line = assert_user_error(code, out, err, fragment)
        assert field in line, line


_HIDE_SDK = """
import sys
sys.modules["acp"] = None  # as if agent-client-protocol were not installed
from forge.cli import main
sys.exit(main(["eval", sys.argv[1]]))
"""

_IMPORTED = """
import sys
from forge.cli import main
{call}
print(sorted(m for m in sys.modules if m == "acp" or m.startswith("acp.")))
"""


def test_a_missing_sdk_is_one_line_naming_the_install(tmp_path: Path, pids: Path) -> None:
    bench = write_acp_bench(tmp_path / "b", pids, {"dev": echo_tasks("dev", 1)})
    proc = subprocess.run([sys.executable, "-c", _HIDE_SDK, str(bench)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "harness.acp" in lines[0] and "pip install 'forge[acp]'" in lines[0]


@pytest.mark.parametrize("call", [
    "import forge", "main(['--help'])",
    "from forge.bench.loader import load_bench; load_bench(sys.argv[1])"],
    ids=["import", "help", "other-bench"])
def test_forge_imports_the_sdk_only_for_a_bench_that_uses_it(call: str) -> None:
    other = Path(__file__).resolve().parents[1] / "benches" / "arith"
    proc = subprocess.run([sys.executable, "-c", _IMPORTED.format(call=call), str(other)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]"


def test_the_identity_follows_the_templates_and_the_options(tmp_path: Path) -> None:
    folder = bench_folder(tmp_path / "b", {"t.md": "v1 $mode"})
    first = build(folder, files={"A.md": "t.md"}).identity
    assert build(folder, files={"A.md": "t.md"}).identity == first
    (folder / "t.md").write_text("v2 $mode")
    assert build(folder, files={"A.md": "t.md"}).identity != first
    assert build(folder, files={"A.md": "t.md"}, permission="allow_once").identity != (
        build(folder, files={"A.md": "t.md"}).identity)
    assert first.startswith("acp:")


def test_the_bench_watch_sees_created_changed_and_removed_files_and_skips_forges_own(
        tmp_path: Path) -> None:
    from forge.harness._acp_files import BenchWatch

    folder = bench_folder(tmp_path / "b", {"tasks/dev.jsonl": "{}\n", "notes.md": "a"})
    watch = BenchWatch(folder)
    assert watch.changes() == []  # the first look
    (folder / "notes.md").write_text("longer")
    (folder / "tasks" / "dev.jsonl").unlink()
    (folder / "tasks" / "new.jsonl").write_text("{}\n")
    assert watch.changes() == ["tasks/new.jsonl created", "tasks/dev.jsonl removed",
                               "notes.md changed"]
    assert watch.changes() == []  # each change is told once
    # What forge and Python write there themselves is not the agent's doing.
    for name in ("__pycache__/agent.pyc", "journals/r/x", ".git/index",
                 "runs/r/run.json", "runs/r/journal.jsonl", "runs/r/attempts.jsonl.gz"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")
    assert watch.changes() == []
